#include "wan/mirror_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace geops::wan {
namespace {

using std::chrono::milliseconds;

const ChunkKey kA{0, 0};
const ChunkKey kB{0, 1};
const ChunkKey kC{1, 0};

Status Wait(MirrorGate& g, std::vector<ChunkKey> keys, Clock clock, bool finished, int64_t ms) {
  double waited = 0;
  return g.WaitReadable(keys, clock, finished, Deadline::InMs(ms), &waited);
}

TEST(MirrorGateTest, HoldsReadsWhileAheadOfTheSlowestMirrorByMoreThanDs) {
  MirrorGate g({1, 2}, /*ds=*/2, milliseconds(60000));
  EXPECT_TRUE(Wait(g, {kA}, 2, false, 10).ok());
  Status held = Wait(g, {kA}, 3, false, 30);
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded) << held.ToString();
  EXPECT_NE(held.message().find("DS=2"), std::string::npos) << held.message();
  g.OnPeerClock(1, 5, false);
  EXPECT_EQ(Wait(g, {kA}, 3, false, 30).code(), StatusCode::kDeadlineExceeded);  // site 2 still at 0
  std::atomic<bool> done{false};
  std::thread reader([&] {
    EXPECT_TRUE(Wait(g, {kA}, 3, false, 5000).ok());
    done = true;
  });
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_FALSE(done.load());
  g.OnPeerClock(2, 1, false);
  reader.join();
  EXPECT_TRUE(done.load());
  EXPECT_GT(g.stats().drift_wait_seconds, 0.0);
  EXPECT_EQ(g.MinMirrorClock(), 1);
}

TEST(MirrorGateTest, NegativeDsNeverHoldsForDrift) {
  MirrorGate g({1}, -1, milliseconds(60000));
  EXPECT_TRUE(Wait(g, {kA}, 1000, false, 10).ok());
}

TEST(MirrorGateTest, NoticeHoldsExactlyTheAnnouncedChunksUntilTheBatchLands) {
  MirrorGate g({1}, -1, milliseconds(60000));
  g.AddNotice(1, 4, std::vector<ChunkKey>{kA, kC}, 10000);
  EXPECT_EQ(g.NoticedChunks(), (std::vector<ChunkKey>{kA, kC}));
  EXPECT_TRUE(Wait(g, {kB}, 0, false, 10).ok());
  EXPECT_EQ(Wait(g, {kB, kC}, 0, false, 20).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Wait(g, {kA}, 0, false, 20).code(), StatusCode::kDeadlineExceeded);
  g.OnPeerApplied(1, 3);  // an earlier batch: the notice stays
  EXPECT_EQ(Wait(g, {kA}, 0, false, 20).code(), StatusCode::kDeadlineExceeded);
  g.OnPeerApplied(1, 4);
  EXPECT_TRUE(Wait(g, {kA, kB, kC}, 0, false, 10).ok());
  EXPECT_TRUE(g.NoticedChunks().empty());
  // A notice for a batch already applied holds nothing.
  g.AddNotice(1, 2, std::vector<ChunkKey>{kB}, 10000);
  EXPECT_TRUE(Wait(g, {kB}, 0, false, 10).ok());
}

TEST(MirrorGateTest, NoticeExpiresAfterItsTimeout) {
  MirrorGate g({1}, -1, milliseconds(60000));
  g.AddNotice(1, 1, std::vector<ChunkKey>{kA}, 40);
  const auto start = SteadyClock::now();
  EXPECT_TRUE(Wait(g, {kA}, 0, false, 2000).ok());
  EXPECT_GE(SteadyClock::now() - start, milliseconds(30));
  EXPECT_EQ(g.stats().notices_expired, 1);
}

TEST(MirrorGateTest, FinishedSiteReadsWaitForEveryPeersDrain) {
  MirrorGate g({1, 2}, 0, milliseconds(60000));
  EXPECT_TRUE(Wait(g, {kA}, 0, false, 10).ok());
  EXPECT_EQ(Wait(g, {kA}, 0, true, 20).code(), StatusCode::kDeadlineExceeded);
  g.OnPeerClock(1, 9, true);
  EXPECT_FALSE(g.AllPeersDrained());
  EXPECT_EQ(Wait(g, {kA}, 0, true, 20).code(), StatusCode::kDeadlineExceeded);
  g.OnPeerClock(2, 9, true);
  EXPECT_TRUE(g.AllPeersDrained());
  EXPECT_TRUE(g.WaitAllPeersDrained(Deadline::InMs(10)));
  EXPECT_TRUE(Wait(g, {kA}, 9, true, 10).ok());
  EXPECT_GT(g.stats().final_wait_seconds, 0.0);
}

TEST(MirrorGateTest, DrainedAndSilentPeersLeaveTheMirrorClock) {
  MirrorGate g({1, 2}, 1, milliseconds(80));
  g.OnPeerClock(1, 3, true);  // drained at 3: never holds anyone back
  g.OnPeerClock(2, 5, false);
  EXPECT_TRUE(Wait(g, {kA}, 6, false, 10).ok());
  EXPECT_EQ(Wait(g, {kA}, 7, false, 20).code(), StatusCode::kDeadlineExceeded);
  // Site 2 goes silent: after its lease it no longer counts.
  EXPECT_TRUE(Wait(g, {kA}, 7, false, 2000).ok());
}

}  // namespace
}  // namespace geops::wan
