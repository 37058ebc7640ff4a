// RestartBudget: each process's restarts are counted and spaced out.
#include "supervisor/launch/restart_budget.h"

#include <gtest/gtest.h>

namespace geops::supervisor {
namespace {

TEST(RestartBudgetTest, EachProcessHasItsOwnBudgetWithDoublingDelays) {
  RestartBudget b(RestartPolicy{3, 1, 3});
  EXPECT_EQ(b.Take("a-worker-0"), 1.0);
  EXPECT_EQ(b.Take("a-worker-0"), 2.0);
  EXPECT_EQ(b.Take("b-shard-1"), 1.0) << "another process's budget is its own";
  EXPECT_EQ(b.Take("a-worker-0"), 3.0) << "capped";
  EXPECT_EQ(b.Take("a-worker-0"), std::nullopt) << "spent";
  EXPECT_EQ(b.restarts("a-worker-0"), 3);
  EXPECT_EQ(b.restarts("never"), 0);
  EXPECT_EQ(b.total(), 4);
}

TEST(RestartBudgetTest, AZeroBudgetNeverRestarts) {
  RestartBudget b(RestartPolicy{0, 1, 30});
  EXPECT_EQ(b.Take("a-worker-0"), std::nullopt);
  EXPECT_EQ(b.total(), 0);
}

}  // namespace
}  // namespace geops::supervisor
