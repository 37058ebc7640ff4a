// Leases, read deadlines and finished workers: a dead or absent worker stops
// holding the site's clock after its lease, a waiting reader is never dropped,
// an unsatisfiable read fails at its deadline, and a finished worker counts
// at its final clock without a lease.
//
// Most tests run the shard on a ManualTime (ShardOptions::time): leases run
// out exactly when the test moves time past them, so nothing sleeps and every
// time figure is exact. Two keep the real clock, to show the same rules hold
// there; their timing asserts are one-sided where possible (a wait can only
// be longer than its cause) and generous on the other side.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/time_source.h"
#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using ::testing::HasSubstr;
using testing::MakeShard;
using testing::MsSince;
using testing::TestModel;
using testing::TestOptions;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kLeaseMs = 150;
constexpr int64_t kGenerousMs = 2500;  // far below the 10 s deadlines used, far above the lease

ShardOptions LeaseOptions(int num_workers, const TimeSource* time = nullptr) {
  ShardOptions o = TestOptions(num_workers);
  o.worker_lease_ms = kLeaseMs;
  o.time = time;
  return o;
}

const std::vector<ChunkKey> kKeys = {{0, 0}};

Result<ReadReply> ReadOne(Shard& shard, WorkerId w, Clock clock, int64_t staleness, Deadline deadline) {
  std::vector<float> out(64);
  return shard.Read(w, clock, staleness, kKeys, out.data(), deadline);
}
Result<ReadReply> ReadOne(Shard& shard, WorkerId w, Clock clock, int64_t staleness, int64_t deadline_ms) {
  return ReadOne(shard, w, clock, staleness, Deadline::InMs(deadline_ms));
}

// A read by worker w on its own thread, against a shard on manual time.
class Reader {
 public:
  Reader(Shard& shard, ManualTime& time, WorkerId w, Clock clock, int64_t deadline_ms)
      : time_(&time), thread_([this, &shard, &time, w, clock, deadline_ms] {
          reply_ = ReadOne(shard, w, clock, 0, Deadline(time.Now() + milliseconds(deadline_ms)));
          done_ = true;
        }) {}
  // A test that failed before Join: its deadline passes, so the read ends.
  ~Reader() {
    if (!thread_.joinable()) return;
    time_->Advance(std::chrono::hours(24));
    thread_.join();
  }
  bool done() const { return done_.load(); }
  const Result<ReadReply>& Join() {
    thread_.join();
    return reply_;
  }

 private:
  ManualTime* const time_;
  Result<ReadReply> reply_ = InternalError("not run");
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Moves time 1 ms on, then waits (bounded in real time) until worker w has a
// read in flight: a waiting reader counts as heard just now, any other
// worker as heard at least 1 ms ago.
bool AwaitReaderIn(const Shard& shard, WorkerId w, ManualTime* time) {
  time->Advance(milliseconds(1));
  const auto until = Steady::now() + std::chrono::seconds(10);
  while (Steady::now() < until) {
    if (shard.GetStatus().workers[w].ms_since_heard == 0) return true;
    std::this_thread::yield();
  }
  return false;
}

TEST(ShardLeaseTest, SilentWorkerIsDroppedAndReleasesReader) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const Steady::time_point before_register = Steady::now();
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());  // then silent
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());

  Result<ReadReply> r = ReadOne(*shard, 0, 1, 0, 10000);
  const int64_t ms = MsSince(before_register);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shard_clock, 1);
  EXPECT_GE(ms, kLeaseMs);  // worker 1 held the clock for its whole lease
  EXPECT_LT(ms, kGenerousMs) << "the reader must wake at the lease expiry, not its deadline";
  const ShardStatus st = shard->GetStatus();
  EXPECT_FALSE(st.workers[1].live);
  EXPECT_TRUE(st.workers[0].live);
  EXPECT_EQ(st.shard_clock, 1);
  EXPECT_GT(st.read_wait_seconds, 0.05);
}

TEST(ShardLeaseTest, NeverRegisteredWorkerStopsHoldingAfterLease) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  const Steady::time_point created = time.Now();
  auto shard = MakeShard(spec, LeaseOptions(2, &time));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 0);  // worker 1 counts at 0 for now

  Reader reader(*shard, time, 0, 1, 10000);
  ASSERT_TRUE(AwaitReaderIn(*shard, 0, &time));
  time.Advance(created + milliseconds(kLeaseMs - 1) - time.Now());
  EXPECT_FALSE(reader.done()) << "worker 1's lease, counted from the shard's start, still runs";
  time.Advance(milliseconds(1));
  const Result<ReadReply>& r = reader.Join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shard_clock, 1);
  EXPECT_FALSE(shard->GetStatus().workers[1].live);
}

TEST(ShardLeaseTest, DroppedWorkerRejoinsAtHeldClock) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  auto shard = MakeShard(spec, LeaseOptions(2, &time));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  const std::vector<float> delta(64, 1.0f);
  ASSERT_TRUE(shard->Update(1, 0, kKeys, delta)->applied);
  ASSERT_TRUE(shard->AdvanceClock(1, 1, false).ok());
  ASSERT_TRUE(shard->AdvanceClock(1, 2, false).ok());
  time.Advance(milliseconds(kLeaseMs));  // worker 1 went silent
  ASSERT_FALSE(shard->GetStatus().workers[1].live);
  for (Clock c = 1; c <= 5; ++c) ASSERT_TRUE(shard->AdvanceClock(0, c, false).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 5);  // only worker 0 counts

  Result<RegisterReply> back = shard->RegisterWorker(1, 0, "");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->worker_clock, 2);
  EXPECT_EQ(back->shard_clock, 2);
  EXPECT_EQ(back->lease_ms, kLeaseMs);
  EXPECT_FALSE(shard->Update(1, 0, kKeys, delta)->applied);  // its old batch stays applied once
  EXPECT_TRUE(shard->Update(1, 2, kKeys, delta)->applied);
}

TEST(ShardLeaseTest, CallFromDroppedWorkerRejoinsIt) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  auto shard = MakeShard(spec, LeaseOptions(2, &time));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 2, false).ok());
  time.Advance(milliseconds(kLeaseMs - 1));
  EXPECT_EQ(shard->GetStatus().shard_clock, 0) << "worker 1 holds the clock within its lease";
  time.Advance(milliseconds(1));
  // Both are silent past the lease; no worker counts, so the largest held clock.
  ASSERT_FALSE(shard->GetStatus().workers[1].live);
  ASSERT_FALSE(shard->GetStatus().workers[0].live);
  EXPECT_EQ(shard->GetStatus().shard_clock, 2);
  ASSERT_TRUE(shard->Heartbeat(1).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 0);
  EXPECT_TRUE(shard->GetStatus().workers[1].live);
}

TEST(ShardLeaseTest, WaitingReaderIsNotDropped) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  auto shard = MakeShard(spec, LeaseOptions(2, &time));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(1, 1, false).ok());

  Reader reader(*shard, time, 1, 1, 10000);  // waits for worker 0
  ASSERT_TRUE(AwaitReaderIn(*shard, 1, &time));
  // Keep worker 0 alive at clock 0 for three leases; the reader says nothing.
  for (int64_t ms = 0; ms < 3 * kLeaseMs; ms += 15) {
    ASSERT_TRUE(shard->Heartbeat(0).ok());
    time.Advance(milliseconds(15));
    const ShardStatus st = shard->GetStatus();
    ASSERT_TRUE(st.workers[1].live) << "the waiting reader was dropped after " << ms + 15 << " ms";
    ASSERT_EQ(st.workers[1].ms_since_heard, 0);
  }
  EXPECT_FALSE(reader.done());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  const Result<ReadReply>& reply = reader.Join();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->shard_clock, 1);
  // After the read the reader has a fresh lease.
  EXPECT_TRUE(shard->GetStatus().workers[1].live);
}

TEST(ShardDeadlineTest, UnsatisfiableReadFailsAtDeadline) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(2));  // 10 s lease: worker 1 stays live
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 2, false).ok());

  const Steady::time_point start = Steady::now();
  Result<ReadReply> r = ReadOne(*shard, 0, 2, 0, 200);
  const int64_t ms = MsSince(start);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_GE(ms, 200);
  EXPECT_LT(ms, kGenerousMs);
  const std::string& msg = r.status().message();
  EXPECT_THAT(msg, HasSubstr("worker 0 read at clock 2 with staleness 0 needs shard clock >= 2"));
  EXPECT_THAT(msg, HasSubstr("is at clock 0"));
  EXPECT_THAT(msg, HasSubstr("held back by worker 1 at clock 0 (heard"));
  const ShardStatus st = shard->GetStatus();
  EXPECT_GE(st.read_wait_seconds, 0.15);
  EXPECT_EQ(st.requests_rejected, 1);
  EXPECT_EQ(st.reads_served, 0);
}

TEST(ShardDeadlineTest, MaxReadWaitCapsRequestDeadline) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  ShardOptions o = TestOptions(2);
  o.max_read_wait_ms = 150;
  o.time = &time;
  auto shard = MakeShard(spec, o);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  Reader reader(*shard, time, 0, 1, 30000);
  ASSERT_TRUE(AwaitReaderIn(*shard, 0, &time));
  // The cap runs from the read's start, 0 or 1 ms ago.
  time.Advance(milliseconds(148));
  EXPECT_FALSE(reader.done()) << "the cap has not run out";
  time.Advance(milliseconds(2));
  const Result<ReadReply>& r = reader.Join();
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("after waiting 15"));
  EXPECT_THAT(r.status().message(), HasSubstr("worker 1 at clock 0 (never registered"));
}

TEST(ShardDeadlineTest, ReaderAheadOfItsOwnClockIsNamed) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(1));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  Result<ReadReply> r = ReadOne(*shard, 0, 1, 0, 50);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("worker 0 at clock 0 (the reader itself)"));
}

TEST(ShardFinishTest, FinishedWorkerDoesNotExpireAndCountsAtFinalClock) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  auto shard = MakeShard(spec, LeaseOptions(2, &time));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, true).ok());  // worker 0 is done at clock 1
  for (Clock c = 1; c <= 3; ++c) ASSERT_TRUE(shard->AdvanceClock(1, c, false).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 1);

  time.Advance(milliseconds(kLeaseMs));  // both silent past the lease
  ASSERT_FALSE(shard->GetStatus().workers[0].live);
  ASSERT_FALSE(shard->GetStatus().workers[1].live);
  ASSERT_TRUE(shard->Heartbeat(1).ok());
  const ShardStatus st = shard->GetStatus();
  EXPECT_TRUE(st.workers[0].finished);
  EXPECT_EQ(st.workers[0].clock, 1);
  // Had worker 0 expired, only worker 1 would count, at 3.
  EXPECT_EQ(st.shard_clock, 1);
}

TEST(ShardFinishTest, AllFinishedGivesFinalClock) {
  const ModelSpec spec = TestModel();
  ManualTime time;
  auto shard = MakeShard(spec, LeaseOptions(2, &time));
  for (WorkerId w : {0, 1}) {
    ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
    for (Clock c = 1; c <= 3; ++c) ASSERT_TRUE(shard->AdvanceClock(w, c, c == 3).ok());
  }
  time.Advance(milliseconds(kLeaseMs));
  ASSERT_FALSE(shard->GetStatus().workers[0].live);
  EXPECT_EQ(shard->GetStatus().shard_clock, 3);
  EXPECT_TRUE(ReadOne(*shard, 0, 3, 0, Deadline(time.Now())).ok());  // finished workers may still read
}

TEST(ShardFinishTest, FinishAtHeldClock) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, true).ok());
  EXPECT_TRUE(shard->GetStatus().workers[0].finished);
  EXPECT_EQ(shard->GetStatus().workers[0].clock, 1);
}

}  // namespace
}  // namespace geops::datacenter
