// Leases, read deadlines and finished workers: a dead or absent worker stops
// holding the site's clock after its lease, a waiting reader is never dropped,
// an unsatisfiable read fails at its deadline, and a finished worker counts
// at its final clock without a lease.
//
// Timing asserts are one-sided where possible (a wait can only be longer than
// its cause) and generous on the other side: the machine is shared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

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

constexpr int64_t kLeaseMs = 150;
constexpr int64_t kGenerousMs = 2500;  // far below the 10 s deadlines used, far above the lease

ShardOptions LeaseOptions(int num_workers) {
  ShardOptions o = TestOptions(num_workers);
  o.worker_lease_ms = kLeaseMs;
  return o;
}

const std::vector<ChunkKey> kKeys = {{0, 0}};

Result<ReadReply> ReadOne(Shard& shard, WorkerId w, Clock clock, int64_t staleness, int64_t deadline_ms) {
  std::vector<float> out(64);
  return shard.Read(w, clock, staleness, kKeys, out.data(), Deadline::InMs(deadline_ms));
}

// Polls GetStatus until worker w's liveness is `live`; false after 3 s.
bool WaitForLiveness(const Shard& shard, WorkerId w, bool live) {
  for (int i = 0; i < 300; ++i) {
    if (shard.GetStatus().workers[w].live == live) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
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
  const Steady::time_point before_create = Steady::now();
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 0);  // worker 1 counts at 0 for now

  Result<ReadReply> r = ReadOne(*shard, 0, 1, 0, 10000);
  const int64_t ms = MsSince(before_create);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shard_clock, 1);
  EXPECT_GE(ms, kLeaseMs);
  EXPECT_LT(ms, kGenerousMs);
}

TEST(ShardLeaseTest, DroppedWorkerRejoinsAtHeldClock) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  const std::vector<float> delta(64, 1.0f);
  ASSERT_TRUE(shard->Update(1, 0, kKeys, delta)->applied);
  ASSERT_TRUE(shard->AdvanceClock(1, 1, false).ok());
  ASSERT_TRUE(shard->AdvanceClock(1, 2, false).ok());
  ASSERT_TRUE(WaitForLiveness(*shard, 1, false));  // worker 1 went silent
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
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 2, false).ok());
  ASSERT_TRUE(WaitForLiveness(*shard, 1, false));
  // Worker 0 is silent too by now; no worker counts, so the largest held clock.
  ASSERT_TRUE(WaitForLiveness(*shard, 0, false));
  EXPECT_EQ(shard->GetStatus().shard_clock, 2);
  ASSERT_TRUE(shard->Heartbeat(1).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 0);
  EXPECT_TRUE(shard->GetStatus().workers[1].live);
}

TEST(ShardLeaseTest, WaitingReaderIsNotDropped) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());

  std::atomic<bool> started{false};
  std::atomic<bool> done{false};
  Result<ReadReply> reply = InternalError("not run");
  std::thread reader([&] {
    if (!shard->AdvanceClock(1, 1, false).ok()) return;
    started = true;
    reply = ReadOne(*shard, 1, 1, 0, 10000);  // waits for worker 0
    done = true;
  });
  while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Keep worker 0 alive at clock 0 for three leases; the reader says nothing.
  const Steady::time_point start = Steady::now();
  bool reader_stayed_live = true;
  while (MsSince(start) < 3 * kLeaseMs) {
    ASSERT_TRUE(shard->Heartbeat(0).ok());
    const ShardStatus st = shard->GetStatus();
    if (MsSince(start) > kLeaseMs + 20 && !st.workers[1].live) reader_stayed_live = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  EXPECT_FALSE(done.load());
  EXPECT_TRUE(reader_stayed_live);
  EXPECT_EQ(shard->GetStatus().workers[1].ms_since_heard, 0);
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  reader.join();
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
  ShardOptions o = TestOptions(2);
  o.max_read_wait_ms = 150;
  auto shard = MakeShard(spec, o);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  const Steady::time_point start = Steady::now();
  Result<ReadReply> r = ReadOne(*shard, 0, 1, 0, 30000);
  const int64_t ms = MsSince(start);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_GE(ms, 150);
  EXPECT_LT(ms, kGenerousMs);
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
  auto shard = MakeShard(spec, LeaseOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard->RegisterWorker(1, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, true).ok());  // worker 0 is done at clock 1
  for (Clock c = 1; c <= 3; ++c) ASSERT_TRUE(shard->AdvanceClock(1, c, false).ok());
  EXPECT_EQ(shard->GetStatus().shard_clock, 1);

  ASSERT_TRUE(WaitForLiveness(*shard, 0, false));  // both silent past the lease
  ASSERT_TRUE(WaitForLiveness(*shard, 1, false));
  ASSERT_TRUE(shard->Heartbeat(1).ok());
  const ShardStatus st = shard->GetStatus();
  EXPECT_TRUE(st.workers[0].finished);
  EXPECT_EQ(st.workers[0].clock, 1);
  // Had worker 0 expired, only worker 1 would count, at 3.
  EXPECT_EQ(st.shard_clock, 1);
}

TEST(ShardFinishTest, AllFinishedGivesFinalClock) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, LeaseOptions(2));
  for (WorkerId w : {0, 1}) {
    ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
    for (Clock c = 1; c <= 3; ++c) ASSERT_TRUE(shard->AdvanceClock(w, c, c == 3).ok());
  }
  ASSERT_TRUE(WaitForLiveness(*shard, 0, false));
  EXPECT_EQ(shard->GetStatus().shard_clock, 3);
  EXPECT_TRUE(ReadOne(*shard, 0, 3, 0, 1000).ok());  // finished workers may still read
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
