#include "wan/replication/mirror_gate.h"
#include "wan/replication/drift_allowance.h"

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

TEST(MirrorGateTest, HoldsClockAdvancesBeyondDsOfTheSlowestMirror) {
  MirrorGate g({1, 2}, /*ds=*/2, milliseconds(60000));
  double waited = 0;
  // Ending iteration 2 (advance to 3) is 2 ahead of mirror clock 0: allowed.
  EXPECT_TRUE(g.WaitAdvance(3, Deadline::InMs(10), &waited).ok());
  Status held = g.WaitAdvance(4, Deadline::InMs(30), &waited);
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded) << held.ToString();
  EXPECT_NE(held.message().find("clock advance to 4"), std::string::npos) << held.message();
  EXPECT_GT(waited, 0.0);
  g.OnPeerClock(1, 9, false);
  std::atomic<bool> done{false};
  std::thread worker([&] {
    double w = 0;
    EXPECT_TRUE(g.WaitAdvance(4, Deadline::InMs(5000), &w).ok());
    done = true;
  });
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_FALSE(done.load()) << "site 2 is still at clock 0";
  g.OnPeerClock(2, 1, false);
  worker.join();
  EXPECT_TRUE(done.load());
  // Drained peers hold nothing; nor does DS < 0.
  g.OnPeerClock(1, 9, true);
  g.OnPeerClock(2, 1, true);
  EXPECT_TRUE(g.WaitAdvance(100, Deadline::InMs(10), &waited).ok());
  MirrorGate unbounded({1}, -1, milliseconds(60000));
  EXPECT_TRUE(unbounded.WaitAdvance(1000, Deadline::InMs(10), &waited).ok());
}

TEST(MirrorGateTest, AnAllowanceWidensTheBoundAndTheAdmittedDriftStaysWithinIt) {
  MirrorGate g({1}, /*ds=*/2, milliseconds(60000));
  EXPECT_EQ(g.DriftBound(), 2);
  EXPECT_EQ(Wait(g, {kA}, 4, false, 20).code(), StatusCode::kDeadlineExceeded);
  g.SetDriftAllowance(3);  // three clocks in delivery: DS 2 + 3
  EXPECT_EQ(g.DriftBound(), 5);
  EXPECT_TRUE(Wait(g, {kA}, 4, false, 10).ok());
  EXPECT_TRUE(Wait(g, {kA}, 5, false, 10).ok());
  Status held = Wait(g, {kA}, 6, false, 20);
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(held.message().find("DS=2 + 3"), std::string::npos) << held.message();
  double waited = 0;
  EXPECT_TRUE(g.WaitAdvance(6, Deadline::InMs(10), &waited).ok());  // ends iteration 5
  EXPECT_EQ(g.WaitAdvance(7, Deadline::InMs(20), &waited).code(), StatusCode::kDeadlineExceeded);
  // The stats record the drift of what passed, never above the bound.
  GateStats st = g.stats();
  EXPECT_EQ(st.max_drift_clocks, 5);
  EXPECT_EQ(st.max_bound_clocks, 5);
  // The allowance shrinks again: the bound is back to DS.
  g.SetDriftAllowance(0);
  EXPECT_EQ(Wait(g, {kA}, 3, false, 20).code(), StatusCode::kDeadlineExceeded);  // own clock is 6 now
  g.OnPeerClock(1, 4, false);
  EXPECT_TRUE(Wait(g, {kA}, 6, false, 10).ok());
  EXPECT_EQ(g.stats().max_bound_clocks, 5);
}

TEST(DriftAllowanceTest, CountsTheClocksADeliveryLastsAtTheTypicalClockPeriod) {
  DriftAllowance a(/*max_clocks=*/24);
  EXPECT_EQ(a.ClocksFor(0.2), 0);  // period unknown
  double t = 100;
  for (Clock c = 1; c <= 12; ++c) a.OnClock(c, t += 0.05);
  EXPECT_NEAR(a.period_s(), 0.05, 1e-9);
  EXPECT_EQ(a.ClocksFor(0.2), 4);
  EXPECT_EQ(a.ClocksFor(0.201), 5);
  EXPECT_EQ(a.ClocksFor(0), 0);
  EXPECT_EQ(a.ClocksFor(3600), 24);  // an outage: capped
  // A few clocks held at the bound (much longer) barely move the period.
  for (Clock c = 13; c <= 16; ++c) a.OnClock(c, t += 2.0);
  EXPECT_NEAR(a.period_s(), 0.05, 1e-9);
  // A jump of several clocks at once counts per clock; a repeat is ignored.
  a.OnClock(20, t += 0.2);
  a.OnClock(20, t += 5);
  EXPECT_NEAR(a.period_s(), 0.05, 1e-9);
  EXPECT_EQ(DriftAllowance(0).ClocksFor(1.0), 0);
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


TEST(MirrorGateTest, AResetPeerStartsOverAtClockZero) {
  MirrorGate g({1, 2}, -1, milliseconds(60000));
  g.SetOwnClock(10, false);
  g.OnPeerClock(1, 9, false);
  g.OnPeerClock(2, 7, false);
  g.OnPeerApplied(1, 5);
  g.AddNotice(1, 8, std::vector<ChunkKey>{kA}, 10000);
  g.AddNotice(2, 3, std::vector<ChunkKey>{kB}, 10000);
  EXPECT_EQ(g.NoticedChunks(), (std::vector<ChunkKey>{kA, kB}));
  g.OnPeerClock(1, 9, true);
  g.OnPeerClock(2, 7, true);
  ASSERT_TRUE(g.AllPeersDrained());
  EXPECT_EQ(g.MinMirrorClock(), 10);  // every peer drained: own clock

  g.ResetPeer(1);
  // Undrained again, back at clock 0 at once, its notices gone.
  EXPECT_FALSE(g.AllPeersDrained());
  EXPECT_FALSE(g.WaitAllPeersDrained(Deadline::InMs(20)));
  EXPECT_EQ(g.MinMirrorClock(), 0);
  EXPECT_FALSE(g.CaughtUp());  // it has not reported since
  EXPECT_EQ(g.NoticedChunks(), (std::vector<ChunkKey>{kB}));
  EXPECT_TRUE(Wait(g, {kA}, 10, false, 10).ok());
  // Its applied seq is forgotten: a notice for seq 2 (applied before the
  // reset, not yet by the new incarnation) holds again.
  g.AddNotice(1, 2, std::vector<ChunkKey>{kC}, 10000);
  EXPECT_EQ(g.NoticedChunks(), (std::vector<ChunkKey>{kB, kC}));
  EXPECT_EQ(Wait(g, {kC}, 10, false, 20).code(), StatusCode::kDeadlineExceeded);

  // Its next report is taken as it is, below the 9 it had before; later
  // ones only raise it again.
  g.OnPeerClock(1, 3, false);
  EXPECT_EQ(g.MinMirrorClock(), 3);
  EXPECT_TRUE(g.CaughtUp());
  g.OnPeerClock(1, 2, false);
  EXPECT_EQ(g.MinMirrorClock(), 3);
  g.OnPeerApplied(1, 2);
  EXPECT_EQ(g.NoticedChunks(), (std::vector<ChunkKey>{kB}));
  g.OnPeerClock(1, 4, true);
  EXPECT_TRUE(g.AllPeersDrained());
  EXPECT_EQ(g.MinMirrorClock(), 10);
}

// With a drift bound: a peer that restarted from its store (back after a
// down event) rejoins at its lower clock and the others wait for it; a peer
// that lost its store (reset, starting over at 0) stays out of the mirror
// clock until it is within DS again, so its replay does not stall anyone.
TEST(MirrorGateTest, ARestartedPeerIsWaitedForAResetOneOnlyOnceWithinDs) {
  MirrorGate g({1, 2}, 2, milliseconds(100));
  g.SetOwnClock(20, false);
  g.OnPeerClock(1, 20, false);
  g.OnPeerClock(2, 20, false);
  EXPECT_EQ(g.MinMirrorClock(), 20);

  // Peer 1 falls silent past the lease, then comes back at clock 12.
  std::this_thread::sleep_for(milliseconds(150));
  g.OnPeerClock(2, 20, false);
  EXPECT_EQ(g.MinMirrorClock(), 20) << "a silent peer leaves the mirror clock";
  g.OnPeerClock(1, 12, false);
  EXPECT_EQ(g.MinMirrorClock(), 12) << "a restarted peer rejoins at its lower clock";
  EXPECT_EQ(Wait(g, {kA}, 20, false, 20).code(), StatusCode::kDeadlineExceeded);
  g.OnPeerClock(1, 18, false);
  EXPECT_TRUE(Wait(g, {kA}, 20, false, 20).ok());

  // Peer 2 lost its store: it starts over and does not hold anyone back
  // until it reports a clock within DS (2) of ours.
  g.ResetPeer(2);
  EXPECT_EQ(g.MinMirrorClock(), 18);
  g.OnPeerClock(2, 5, false);
  EXPECT_EQ(g.MinMirrorClock(), 18);
  EXPECT_TRUE(Wait(g, {kA}, 20, false, 20).ok());
  g.OnPeerClock(2, 17, false);
  EXPECT_EQ(g.MinMirrorClock(), 18) << "17 is still more than DS behind 20";
  g.OnPeerClock(2, 18, false);
  EXPECT_EQ(g.MinMirrorClock(), 18) << "in step again: counted";
  g.OnPeerClock(1, 20, false);
  EXPECT_EQ(g.MinMirrorClock(), 18);
  g.SetOwnClock(21, false);
  EXPECT_EQ(Wait(g, {kA}, 21, false, 20).code(), StatusCode::kDeadlineExceeded)
      << "once in step, peer 2 holds this site back like any other";
}

}  // namespace
}  // namespace geops::wan
