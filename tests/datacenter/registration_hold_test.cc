// The hold on a shard's worker registrations: open at first, Unavailable
// (retry) while held, open again after an OK release, closed for good with
// the reason after a failed one.
#include "datacenter/registration_hold.h"

#include <gtest/gtest.h>

namespace geops::datacenter {
namespace {

TEST(RegistrationHoldTest, HoldsUntilReleasedAndAFailedReleaseRefusesNamingWhy) {
  RegistrationHold hold;
  EXPECT_TRUE(hold.Check(3).ok()) << "nothing holds a new shard";
  hold.Hold("asking the peers");
  Status held = hold.Check(3);
  EXPECT_EQ(held.code(), StatusCode::kUnavailable);
  EXPECT_NE(held.message().find("shard 3: asking the peers"), std::string::npos) << held.ToString();
  hold.Release(Status::Ok());
  EXPECT_TRUE(hold.Check(3).ok());
  hold.Hold("");
  EXPECT_EQ(hold.Check(3).code(), StatusCode::kUnavailable) << "an empty reason still holds";
  hold.Release(DataLossError("the peers' states differ"));
  Status refused = hold.Check(3);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("the peers' states differ"), std::string::npos) << refused.ToString();
}

}  // namespace
}  // namespace geops::datacenter
