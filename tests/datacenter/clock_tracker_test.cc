// ClockTracker on its own: the shard-clock rule, exactly-once admission and
// reader wake-ups.
#include "datacenter/clock_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/options.h"
#include "common/time_source.h"

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

// Blocks (bounded in real time) until worker w has a read in flight: it then
// counts as heard just now.
bool AwaitReaderIn(const ClockTracker& t, WorkerId w, ManualTime* time) {
  time->Advance(milliseconds(1));  // a worker not reading was heard >= 1 ms ago
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (t.States()[w].ms_since_heard == 0) return true;
    std::this_thread::yield();
  }
  return false;
}

// Two processes as one worker would each apply half the updates: a second
// live session is refused, naming the one that holds the id.
TEST(ClockTrackerTest, ASecondLiveSessionOfAWorkerIsRefusedNamingTheHolder) {
  ManualTime time;
  ClockTracker t(3, 2, milliseconds(1000), &time);
  const WorkerSession first{11, "pid 100 on host a", false}, second{22, "pid 200 on host b", false};
  ASSERT_TRUE(t.Register(0, first).ok());
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  time.Advance(milliseconds(400));
  Result<ClockTracker::Registration> refused = t.Register(0, second);
  ASSERT_EQ(refused.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(), HasSubstr("worker 0 is already live at shard 3, held by pid 100 on host a"));
  EXPECT_THAT(refused.status().message(), HasSubstr("heard 0.4 s ago"));
  EXPECT_THAT(refused.status().message(), HasSubstr("pid 200 on host b may not register"));
  // The holder's own re-registration (after a shard asked it to) is fine, and
  // another worker id is free.
  EXPECT_TRUE(t.Register(0, first).ok());
  EXPECT_TRUE(t.Register(1, second).ok());
  // Anonymous callers (in-process, old clients) are never checked.
  EXPECT_TRUE(t.Register(0, WorkerSession{}).ok());
}

TEST(ClockTrackerTest, AWorkerIdIsFreeOnceItsHolderIsSilentForTheLeaseOrOnTakeover) {
  ManualTime time;
  ClockTracker t(0, 1, milliseconds(1000), &time);
  ASSERT_TRUE(t.Register(0, WorkerSession{1, "old", false}).ok());
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  // A supervisor that saw the holder exit takes the id at once.
  Result<ClockTracker::Registration> taken = t.Register(0, WorkerSession{2, "restarted", true});
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->worker_clock, 1) << "the restarted process resumes at the clock held for the worker";
  // The replaced process learns it at its next heartbeat, and is not renewed.
  Status replaced = t.Touch(0, 1);
  ASSERT_EQ(replaced.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(replaced.message(), HasSubstr("held by restarted now: this process was replaced"));
  EXPECT_TRUE(t.Touch(0, 2).ok());
  EXPECT_TRUE(t.Touch(0).ok()) << "unchecked";
  // The old holder is now the stranger; once silent for the lease, anyone may take the id.
  EXPECT_EQ(t.Register(0, WorkerSession{1, "old", false}).status().code(), StatusCode::kAlreadyExists);
  time.Advance(milliseconds(1000));
  Result<ClockTracker::Registration> late = t.Register(0, WorkerSession{3, "by hand", false});
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->worker_clock, 1);
}

TEST(ClockTrackerTest, NoCountingWorkerGivesLargestHeldClock) {
  ManualTime time;
  ClockTracker t(0, 2, milliseconds(30), &time);
  t.Register(0);
  t.Register(1);
  ASSERT_TRUE(t.Advance(1, 1, false).ok());
  time.Advance(milliseconds(29));
  EXPECT_EQ(t.ShardClock(), 0) << "worker 0 still counts within its lease";
  EXPECT_TRUE(t.States()[0].live);
  time.Advance(milliseconds(31));
  EXPECT_EQ(t.ShardClock(), 1);
  const std::vector<WorkerState> states = t.States();
  EXPECT_FALSE(states[0].live);
  EXPECT_EQ(states[0].ms_since_heard, 60);
}

// A reader waiting on a silent worker is released exactly when that
// worker's lease runs out, and reports the time it waited.
TEST(ClockTrackerTest, ASilentWorkerReleasesAWaitingReaderWhenItsLeaseEnds) {
  ManualTime time;
  ClockTracker t(0, 2, milliseconds(1000), &time);
  t.Register(0);
  t.Register(1);  // heard now, then silent
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  const auto lease_end = time.Now() + milliseconds(1000);
  double waited = 0;
  std::atomic<bool> done{false};
  Result<Clock> c = InternalError("not run");
  std::thread reader([&] {
    c = t.WaitForClock(0, 1, 0, time.Now() + std::chrono::hours(1), &waited);
    done = true;
  });
  ASSERT_TRUE(AwaitReaderIn(t, 0, &time));
  time.Advance(lease_end - time.Now() - milliseconds(1));
  EXPECT_FALSE(done.load()) << "worker 1 is within its lease";
  EXPECT_EQ(t.ShardClock(), 0);
  time.Advance(milliseconds(1));
  reader.join();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, 1);
  EXPECT_NEAR(waited, 1.0, 0.0015);
  EXPECT_FALSE(t.States()[1].live);
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
  ManualTime time;
  ClockTracker t(0, 2, milliseconds(10000), &time);
  t.Register(0);
  t.Register(1);
  ASSERT_TRUE(t.Advance(0, 1, false).ok());
  double waited = 0;
  bool reader_in = false;
  std::thread advancer([&] {
    reader_in = AwaitReaderIn(t, 0, &time);
    time.Advance(milliseconds(50));
    t.Advance(1, 1, false).status().IgnoreError();
  });
  Result<Clock> c = t.WaitForClock(0, 1, 0, time.Now() + std::chrono::seconds(10), &waited);
  advancer.join();
  ASSERT_TRUE(reader_in);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, 1);
  EXPECT_NEAR(waited, 0.050, 0.0015);
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
