#include "wan/replication/mirror_gate.h"
#include "wan/replication/drift_allowance.h"

#include "common/time_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
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

// Gates on a ManualTime (the tests about waiting and leases): a read is
// probed with a deadline of now, so a held one is DeadlineExceeded at once,
// and a wait on its own thread ends when the test moves time or the gate.
Status Probe(MirrorGate& g, const ManualTime& time, std::vector<ChunkKey> keys, Clock clock, bool finished) {
  double waited = 0;
  return g.WaitReadable(keys, clock, finished, Deadline(time.Now()), &waited);
}

// A wait on its own thread, with a deadline an hour away on `time`. Join
// waits (bounded in real time) for it to end; if it does not, time moves
// past the deadline so the thread ends and the test fails instead of hanging.
class Waiter {
 public:
  Waiter(ManualTime* time, std::function<Status(Deadline)> wait)
      : time_(time), thread_([this, wait = std::move(wait)] {
          status_ = wait(Deadline(time_->Now() + std::chrono::hours(1)));
          done_ = true;
        }) {}
  ~Waiter() {
    if (thread_.joinable()) (void)Join();
  }
  bool done() const { return done_.load(); }
  Status Join() {
    const auto until = SteadyClock::now() + std::chrono::seconds(10);
    while (!done_.load() && SteadyClock::now() < until) std::this_thread::yield();
    if (!done_.load()) time_->Advance(std::chrono::hours(2));
    thread_.join();
    return status_;
  }

 private:
  ManualTime* const time_;
  Status status_ = InternalError("not run");
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Waits (bounded in real time) until the gate counts `n` held reads.
bool AwaitReadsHeld(const MirrorGate& g, int64_t n) {
  const auto until = SteadyClock::now() + std::chrono::seconds(10);
  while (g.stats().reads_held < n) {
    if (SteadyClock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

// Moves time on in 1 ms steps until a held wait has counted some of it:
// the waiter is inside the gate. Bounded in real time.
bool AwaitDriftWait(const MirrorGate& g, ManualTime* time) {
  const auto until = SteadyClock::now() + std::chrono::seconds(10);
  while (!(g.stats().drift_wait_seconds > 0)) {
    if (SteadyClock::now() >= until) return false;
    time->Advance(milliseconds(1));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

TEST(MirrorGateTest, HoldsReadsWhileAheadOfTheSlowestMirrorByMoreThanDs) {
  ManualTime time;
  MirrorGate g({1, 2}, /*ds=*/2, milliseconds(60000), &time);
  EXPECT_TRUE(Probe(g, time, {kA}, 2, false).ok());
  Status held = Probe(g, time, {kA}, 3, false);
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded) << held.ToString();
  EXPECT_NE(held.message().find("DS=2"), std::string::npos) << held.message();
  g.OnPeerClock(1, 5, false);
  EXPECT_EQ(Probe(g, time, {kA}, 3, false).code(), StatusCode::kDeadlineExceeded);  // site 2 still at 0
  const int64_t held_before = g.stats().reads_held;
  Waiter reader(&time, [&](Deadline d) {
    double waited = 0;
    return g.WaitReadable(std::vector<ChunkKey>{kA}, 3, false, d, &waited);
  });
  ASSERT_TRUE(AwaitReadsHeld(g, held_before + 1));
  time.Advance(milliseconds(30));
  EXPECT_FALSE(reader.done()) << "site 2 is still at clock 0";
  g.OnPeerClock(2, 1, false);
  EXPECT_TRUE(reader.Join().ok());
  EXPECT_NEAR(g.stats().drift_wait_seconds, 0.030, 1e-9) << "the time the reader was held, exactly";
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
}

TEST(MirrorGateTest, AHeldClockAdvanceGoesOnWhenTheSlowestMirrorMoves) {
  ManualTime time;
  MirrorGate g({1, 2}, /*ds=*/2, milliseconds(60000), &time);
  g.OnPeerClock(1, 9, false);
  Waiter worker(&time, [&](Deadline d) {
    double w = 0;
    return g.WaitAdvance(4, d, &w);
  });
  ASSERT_TRUE(AwaitDriftWait(g, &time));
  EXPECT_FALSE(worker.done()) << "site 2 is still at clock 0";
  g.OnPeerClock(2, 1, false);
  EXPECT_TRUE(worker.Join().ok());
  double waited = 0;
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

// The outer hold: with a step every H clocks and one in flight, a read at
// clock c needs step c / H - 1; streaming with F fragments (a step every
// H / F clocks, F in flight) needs step c / (H / F) - F: each fragment's
// last step, not the one just given.
TEST(MirrorGateTest, OuterStepsHoldReadsOneRoundBehind) {
  ManualTime time;
  MirrorGate whole({1}, /*ds=*/-1, milliseconds(60000), &time);
  whole.SetOuterPeriod(10);
  EXPECT_TRUE(Probe(whole, time, {kA}, 19, false).ok());
  EXPECT_EQ(Probe(whole, time, {kA}, 20, false).code(), StatusCode::kDeadlineExceeded) << "needs step 1";
  whole.OnOuterStep(1, true);
  EXPECT_TRUE(Probe(whole, time, {kA}, 29, false).ok());

  MirrorGate streaming({1}, /*ds=*/-1, milliseconds(60000), &time);
  streaming.SetOuterPeriod(/*period=*/2, /*in_flight=*/5);  // H 10, 5 fragments
  EXPECT_TRUE(Probe(streaming, time, {kA}, 11, false).ok()) << "steps 1-5 may all be in flight";
  Status held = Probe(streaming, time, {kA}, 12, false);
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(held.message().find("needs outer step 1"), std::string::npos) << held.message();
  streaming.OnOuterStep(1, true);
  EXPECT_TRUE(Probe(streaming, time, {kA}, 13, false).ok());
  EXPECT_EQ(Probe(streaming, time, {kA}, 14, false).code(), StatusCode::kDeadlineExceeded) << "needs step 2";
}

// No overlap (the synchronous step): a read at clock c needs step c / H
// itself, so every round starts from the synchronised model.
TEST(MirrorGateTest, WithoutOverlapAReadWaitsForTheStepJustGiven) {
  ManualTime time;
  MirrorGate g({1}, /*ds=*/-1, milliseconds(60000), &time);
  g.SetOuterPeriod(10, /*in_flight=*/0);
  EXPECT_TRUE(Probe(g, time, {kA}, 9, false).ok());
  Status held = Probe(g, time, {kA}, 10, false);
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded) << "needs step 1 at clock 10";
  EXPECT_NE(held.message().find("needs outer step 1"), std::string::npos) << held.message();
  g.OnOuterStep(1, true);
  EXPECT_TRUE(Probe(g, time, {kA}, 19, false).ok());
  EXPECT_EQ(Probe(g, time, {kA}, 20, false).code(), StatusCode::kDeadlineExceeded) << "needs step 2";
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
  ManualTime time;
  MirrorGate g({1}, -1, milliseconds(60000), &time);
  g.AddNotice(1, 1, std::vector<ChunkKey>{kA}, 40);
  time.Advance(milliseconds(39));
  EXPECT_EQ(Probe(g, time, {kA}, 0, false).code(), StatusCode::kDeadlineExceeded);
  Waiter reader(&time, [&](Deadline d) {
    double waited = 0;
    return g.WaitReadable(std::vector<ChunkKey>{kA}, 0, false, d, &waited);
  });
  ASSERT_TRUE(AwaitReadsHeld(g, 2));
  time.Advance(milliseconds(1));
  EXPECT_TRUE(reader.Join().ok());
  EXPECT_EQ(g.stats().notices_expired, 1);
  EXPECT_NEAR(g.stats().notice_wait_seconds, 0.001, 1e-9);
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
  ManualTime time;
  MirrorGate g({1, 2}, 1, milliseconds(80), &time);
  g.OnPeerClock(1, 3, true);  // drained at 3: never holds anyone back
  g.OnPeerClock(2, 5, false);
  EXPECT_TRUE(Probe(g, time, {kA}, 6, false).ok());
  EXPECT_EQ(Probe(g, time, {kA}, 7, false).code(), StatusCode::kDeadlineExceeded);
  // Site 2 goes silent: once its lease has passed it no longer counts.
  time.Advance(milliseconds(80));
  EXPECT_EQ(Probe(g, time, {kA}, 7, false).code(), StatusCode::kDeadlineExceeded) << "the lease has just run";
  time.Advance(milliseconds(1));
  EXPECT_TRUE(Probe(g, time, {kA}, 7, false).ok());
  ASSERT_EQ(g.stats().down_events.size(), 1u);
  EXPECT_EQ(g.stats().down_events[0].peer, 2);
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

// Peers 1 and 2 at clock 20 with this site (DS 2, lease 100 ms), then 120
// ms in which only peer 2 is heard (peer 1's link is out), reaching
// `peer2_clock`; this site at 30, peer 1 down.
void PeerOneGoesSilent(MirrorGate& g, ManualTime& time, Clock peer2_clock) {
  g.SetOwnClock(20, false);
  g.OnPeerClock(1, 20, false);
  g.OnPeerClock(2, 20, false);
  time.Advance(milliseconds(60));
  g.OnPeerClock(2, 25, false);
  time.Advance(milliseconds(60));
  g.OnPeerClock(2, peer2_clock, false);
  g.SetOwnClock(30, false);
  EXPECT_TRUE(Probe(g, time, {kA}, 30, false).ok()) << "peer 1 is down";
}

// A peer back from a silence (a link outage, or a restart) counts again
// from its next clock report, not from the first message heard: until
// then its old clock would hold everyone back for nothing.
TEST(MirrorGateTest, APeerBackFromSilenceCountsFromItsNextReport) {
  ManualTime time;
  MirrorGate g({1, 2}, 2, milliseconds(100), &time);
  PeerOneGoesSilent(g, time, 29);
  ASSERT_EQ(g.stats().down_events.size(), 1u);
  EXPECT_EQ(g.stats().down_events[0].peer, 1);
  g.OnPeerHeard(1);  // a heartbeat: the link is back
  EXPECT_EQ(g.MinMirrorClock(), 29) << "its clock of before the outage does not count";
  EXPECT_TRUE(Probe(g, time, {kA}, 30, false).ok());
  EXPECT_GT(g.stats().down_events[0].back_unix, 0.0);
  g.OnPeerClock(1, 26, false);  // its held report
  EXPECT_EQ(g.MinMirrorClock(), 26) << "counted again from its report, as it is";
  EXPECT_EQ(Probe(g, time, {kA}, 30, false).code(), StatusCode::kDeadlineExceeded);
}

// A peer back from a silence that reports nothing (it makes no progress)
// counts again at its old clock once a lease has passed: it must not fall
// out of the bound for good.
TEST(MirrorGateTest, APeerBackWithoutAReportCountsAgainAfterALease) {
  ManualTime time;
  MirrorGate g({1, 2}, 2, milliseconds(100), &time);
  PeerOneGoesSilent(g, time, 30);
  g.OnPeerHeard(1);  // back, but stuck at clock 20: heartbeats only
  EXPECT_EQ(g.MinMirrorClock(), 30);
  for (int i = 0; i < 3; ++i) {  // 120 ms, heard all along
    time.Advance(milliseconds(40));
    g.OnPeerHeard(1);
    g.OnPeerClock(2, 30, false);
  }
  EXPECT_EQ(g.MinMirrorClock(), 20) << "a lease after it came back it holds the others again";
  EXPECT_EQ(Probe(g, time, {kA}, 30, false).code(), StatusCode::kDeadlineExceeded);
}

// With a drift bound: a peer that restarted from its store (back after a
// down event) rejoins at its lower clock and the others wait for it; a peer
// that lost its store (reset, starting over at 0) stays out of the mirror
// clock until it is within DS again, so its replay does not stall anyone.
TEST(MirrorGateTest, ARestartedPeerIsWaitedForAResetOneOnlyOnceWithinDs) {
  ManualTime time;
  MirrorGate g({1, 2}, 2, milliseconds(100), &time);
  g.SetOwnClock(20, false);
  g.OnPeerClock(1, 20, false);
  g.OnPeerClock(2, 20, false);
  EXPECT_EQ(g.MinMirrorClock(), 20);

  // Peer 1 falls silent past the lease, then comes back at clock 12.
  time.Advance(milliseconds(150));
  g.OnPeerClock(2, 20, false);
  EXPECT_EQ(g.MinMirrorClock(), 20) << "a silent peer leaves the mirror clock";
  g.OnPeerClock(1, 12, false);
  EXPECT_EQ(g.MinMirrorClock(), 12) << "a restarted peer rejoins at its lower clock";
  EXPECT_EQ(Probe(g, time, {kA}, 20, false).code(), StatusCode::kDeadlineExceeded);
  g.OnPeerClock(1, 18, false);
  EXPECT_TRUE(Probe(g, time, {kA}, 20, false).ok());

  // Peer 2 lost its store: it starts over and does not hold anyone back
  // until it reports a clock within DS (2) of ours.
  g.ResetPeer(2);
  EXPECT_EQ(g.MinMirrorClock(), 18);
  g.OnPeerClock(2, 5, false);
  EXPECT_EQ(g.MinMirrorClock(), 18);
  EXPECT_TRUE(Probe(g, time, {kA}, 20, false).ok());
  g.OnPeerClock(2, 17, false);
  EXPECT_EQ(g.MinMirrorClock(), 18) << "17 is still more than DS behind 20";
  g.OnPeerClock(2, 18, false);
  EXPECT_EQ(g.MinMirrorClock(), 18) << "in step again: counted";
  g.OnPeerClock(1, 20, false);
  EXPECT_EQ(g.MinMirrorClock(), 18);
  g.SetOwnClock(21, false);
  EXPECT_EQ(Probe(g, time, {kA}, 21, false).code(), StatusCode::kDeadlineExceeded)
      << "once in step, peer 2 holds this site back like any other";
}

}  // namespace
}  // namespace geops::wan
