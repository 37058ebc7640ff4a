#include "common/status.h"

#include <gtest/gtest.h>

namespace geops {
namespace {

TEST(StatusTest, OkIsCheapAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.code(), StatusCode::kOk);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = InvalidArgumentError("unknown table 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: unknown table 'x'");
  EXPECT_EQ(s.WithContext("shard 1").message(), "shard 1: unknown table 'x'");
}

TEST(StatusTest, CopiesAreIndependent) {
  Status a = UnavailableError("down");
  Status b = a;
  a = Status::Ok();
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(b.code(), StatusCode::kUnavailable);
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  GEOPS_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(ResultTest, HoldsValueOrStatus) {
  EXPECT_EQ(*Half(4), 2);
  EXPECT_EQ(Half(3).status().code(), StatusCode::kInvalidArgument);
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  EXPECT_FALSE(UseHalf(7, &v).ok());
  EXPECT_EQ(v, 4);
}

TEST(ResultTest, OkStatusWithoutValueBecomesInternal) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace geops
