// ClockTracker on its own: the shard-clock rule, exactly-once admission and
// reader wake-ups.
#include "datacenter/clock_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/options.h"

namespace geops::datacenter {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

TEST(ClockTrackerTest, ShardClockIsMinimumOfCountingWorkers) {
  ClockTracker t(0, 3, milliseconds(10000));
  for (WorkerId w = 0; w < 3; ++w) t.Register(w);
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  ASSERT_TRUE(t.Advance(0, 2, false).ok());
  ASSERT_TRUE(t.Advance(1, 1, false).ok());
  EXPECT_EQ(t.ShardClock(), 0);
  Result<Clock> c = t.Advance(2, 1, false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 1);
}

TEST(ClockTrackerTest, NoCountingWorkerGivesLargestHeldClock) {
  ClockTracker t(0, 2, milliseconds(30));
  t.Register(0);
  t.Register(1);
  ASSERT_TRUE(t.Advance(1, 1, false).ok());
  std::this_thread::sleep_for(milliseconds(60));
  EXPECT_EQ(t.ShardClock(), 1);
  const std::vector<WorkerState> states = t.States();
  EXPECT_FALSE(states[0].live);
  EXPECT_GE(states[0].ms_since_heard, 30);
}

TEST(ClockTrackerTest, AdmitsEachBatchOnce) {
  ClockTracker t(0, 1, milliseconds(10000));
  EXPECT_EQ(t.AdmitUpdate(0, 0).status().code(), StatusCode::kAborted);
  t.Register(0);
  EXPECT_TRUE(t.AdmitUpdate(0, 0)->apply);
  EXPECT_FALSE(t.AdmitUpdate(0, 0)->apply);
  EXPECT_THAT(t.AdmitUpdate(0, 1).status().message(), HasSubstr("clock jumps from 0 to 1"));
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  EXPECT_TRUE(t.AdmitUpdate(0, 1)->apply);
  EXPECT_FALSE(t.AdmitUpdate(0, 0)->apply);
}

TEST(ClockTrackerTest, AdmitsEachPartOfAClockOnce) {
  ClockTracker t(0, 1, milliseconds(10000));
  t.Register(0);
  EXPECT_TRUE(t.AdmitUpdate(0, 0, 0)->apply);
  EXPECT_TRUE(t.AdmitUpdate(0, 0, 1)->apply);
  EXPECT_FALSE(t.AdmitUpdate(0, 0, 1)->apply);  // a retry of the last part
  EXPECT_FALSE(t.AdmitUpdate(0, 0, 0)->apply);  // an earlier part, long applied
  const Result<ClockTracker::Admission> third = t.AdmitUpdate(0, 0, 2);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->apply);
  t.RevokeAdmission(0, 0, *third);              // refused after admission: may come again
  EXPECT_TRUE(t.AdmitUpdate(0, 0, 2)->apply);
  EXPECT_EQ(t.Record(0).last_update_part, 2);
  EXPECT_THAT(t.AdmitUpdate(0, 0, -1).status().message(), HasSubstr("part -1 is negative"));
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  EXPECT_TRUE(t.AdmitUpdate(0, 1, 0)->apply);   // the next clock starts at part 0 again
}

TEST(ClockTrackerTest, AdvanceWakesWaitingReader) {
  ClockTracker t(0, 2, milliseconds(10000));
  t.Register(0);
  t.Register(1);
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  double waited = 0;
  std::thread advancer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    t.Advance(1, 1, false).status().IgnoreError();
  });
  const auto start = std::chrono::steady_clock::now();
  Result<Clock> c = t.WaitForClock(0, 1, 0, start + std::chrono::seconds(10), &waited);
  advancer.join();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, 1);
  EXPECT_GT(waited, 0.02);
  EXPECT_LT(waited, 5.0);
}

TEST(ClockTrackerTest, StalenessAllowsReadingAhead) {
  ClockTracker t(0, 2, milliseconds(10000));
  t.Register(0);
  t.Register(1);
  double waited = 0;
  const auto past = std::chrono::steady_clock::now();
  EXPECT_TRUE(t.WaitForClock(0, 2, 2, past, &waited).ok());
  EXPECT_TRUE(t.WaitForClock(0, 50, kAsync, past, &waited).ok());
  EXPECT_EQ(t.WaitForClock(0, 3, 2, past, &waited).status().code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace geops::datacenter
