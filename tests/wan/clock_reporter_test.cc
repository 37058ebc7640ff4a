// ClockReporter: which peers hear which clock, round by round, with the
// time given, not slept.
#include "wan/replication/clock_reporter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <utility>
#include <vector>

namespace geops::wan {
namespace {

// Records the reports; everything else is dropped.
class RecordingTransport : public WanTransport {
 public:
  void SetDeliveryCallback(DeliveryCallback) override {}
  void SendBatch(SiteId, WanBatch) override {}
  void SendClock(SiteId peer, WanClockReport report) override { sent.emplace_back(peer, report); }
  void SendNotice(SiteId, WanNotice) override {}
  double EstimateDeliverySeconds(SiteId, int64_t) override { return 0; }
  double BandwidthBytesPerSecond(SiteId) override { return 0; }

  std::vector<std::pair<SiteId, WanClockReport>> sent;
};

const SteadyClock::time_point kT0{};

ClockReporter::Round TickAt(Clock k, SteadyClock::time_point now = kT0) {
  ClockReporter::Round r;
  r.k = k;
  r.tick = true;
  r.incarnation = 42;
  r.now = now;
  return r;
}

// A round at clock k without a tick (nor drain nor tie): only a held
// report due for its flush makes it do anything.
ClockReporter::Round IdleAt(Clock k, SteadyClock::time_point now) {
  ClockReporter::Round r = TickAt(k, now);
  r.tick = false;
  return r;
}

std::vector<ClockReporter::PeerView> Peers(Clock sent_through, uint64_t last_seq = 5) {
  return {ClockReporter::PeerView{1, sent_through, last_seq, true, 7},
          ClockReporter::PeerView{2, sent_through, last_seq, true, 8}};
}

TEST(ClockReporterTest, ATickReportsItsClockToEveryPeerUntiedInAsp) {
  WanOptions o;
  o.mode = WanMode::kAsp;
  RecordingTransport t;
  ClockReporter r(o, /*site=*/0, &t, 2);
  const ClockReporter::Outcome out = r.Report(TickAt(3), Peers(3));
  EXPECT_EQ(out.sent, 2);
  ASSERT_EQ(t.sent.size(), 2u);
  EXPECT_EQ(t.sent[0].first, 1);
  EXPECT_EQ(t.sent[1].first, 2);
  const WanClockReport& rep = t.sent[1].second;
  EXPECT_EQ(rep.origin, 0);
  EXPECT_EQ(rep.clock, 3);
  EXPECT_EQ(rep.last_seq, 0u);  // asp without tie_reports: progress at once
  EXPECT_FALSE(rep.drained);
  EXPECT_EQ(rep.incarnation, 42u);
  EXPECT_EQ(rep.dest_incarnation, 8u);
  // No tick, no drain, nothing held: nothing to say.
  const ClockReporter::Round idle = IdleAt(3, kT0);
  EXPECT_FALSE(r.Due(idle));
  EXPECT_EQ(r.Report(idle, Peers(3)).sent, 0);
  EXPECT_EQ(t.sent.size(), 2u);
}

TEST(ClockReporterTest, BspAndTiedReportsCarryTheLastBatchSent) {
  for (const bool tie : {false, true}) {
    WanOptions o;
    o.mode = tie ? WanMode::kAsp : WanMode::kBsp;
    o.tie_reports = tie;
    RecordingTransport t;
    ClockReporter r(o, 0, &t, 2);
    r.Report(TickAt(1), Peers(1, /*last_seq=*/9));
    ASSERT_EQ(t.sent.size(), 2u);
    EXPECT_EQ(t.sent[0].second.last_seq, 9u) << (tie ? "asp, tie_reports" : "bsp");
  }
}

TEST(ClockReporterTest, AReportThatRidesWithABatchIsNotSentOnItsOwnButIsKeptAsTheLast) {
  WanOptions o;
  o.mode = WanMode::kAsp;
  o.tie_reports = true;
  RecordingTransport t;
  ClockReporter r(o, 0, &t, 2);
  std::vector<std::pair<SiteId, WanClockReport>> rode;
  const ClockReporter::Ride ride = [&](SiteId peer, const WanClockReport& report) {
    if (peer != 2) return false;  // only peer 2 has a batch leaving this round
    rode.emplace_back(peer, report);
    return true;
  };
  const ClockReporter::Outcome out = r.Report(TickAt(4), Peers(4, /*last_seq=*/9), ride);
  EXPECT_EQ(out.sent, 2);
  EXPECT_EQ(out.riding, 1);
  ASSERT_EQ(t.sent.size(), 1u);
  EXPECT_EQ(t.sent[0].first, 1);
  ASSERT_EQ(rode.size(), 1u);
  EXPECT_EQ(rode[0].second.clock, 4);
  EXPECT_EQ(rode[0].second.last_seq, 9u);
  EXPECT_EQ(rode[0].second.dest_incarnation, 8u);
  // The report that rode is the last one peer 2 heard: a restart repeats it.
  ASSERT_TRUE(r.SendAgain(1, 2).has_value());
  EXPECT_EQ(t.sent.back().second.clock, 4);
}

TEST(ClockReporterTest, ReportEveryClocksHoldsSmallStepsUntilTheFlush) {
  WanOptions o;
  o.mode = WanMode::kAsp;
  o.report_every_clocks = 4;
  RecordingTransport t;
  ClockReporter r(o, 0, &t, 2);
  EXPECT_EQ(r.Report(TickAt(1), Peers(1)).sent, 2);  // the first report always goes
  // Clocks 2 and 3 move the peers' view fewer than 4 clocks: held.
  ClockReporter::Outcome out = r.Report(TickAt(2, kT0 + std::chrono::milliseconds(10)), Peers(2));
  EXPECT_EQ(out.sent, 0);
  EXPECT_EQ(out.held, 2);
  EXPECT_FALSE(r.Due(IdleAt(3, kT0 + std::chrono::milliseconds(60))));
  out = r.Report(TickAt(3, kT0 + std::chrono::milliseconds(60)), Peers(3));
  EXPECT_EQ(out.sent, 0);
  EXPECT_EQ(t.sent.size(), 2u);
  // kFlushMs after the first hold the held clock goes out without a tick.
  const auto due = kT0 + std::chrono::milliseconds(10 + ClockReporter::kFlushMs);
  EXPECT_TRUE(r.Due(IdleAt(3, due)));
  out = r.Report(IdleAt(3, due), Peers(3));
  EXPECT_EQ(out.sent, 2);
  ASSERT_EQ(t.sent.size(), 4u);
  EXPECT_EQ(t.sent[3].second.clock, 3);
  EXPECT_FALSE(r.Due(IdleAt(3, due)));
  // Four clocks on, a tick reports at once.
  EXPECT_EQ(r.Report(TickAt(7, due), Peers(7)).sent, 2);
}

TEST(ClockReporterTest, TieBacklogReportsOnlyWhatHasLeftAndNeverGoesBack) {
  WanOptions o;
  o.mode = WanMode::kAsp;
  o.tie_backlog = true;
  o.tie_backlog_clocks = 10;
  RecordingTransport t;
  ClockReporter r(o, 0, &t, 2);
  ClockReporter::Round round = TickAt(20);
  round.backlog_tied = true;
  // Peer 1's updates have left through clock 15 only, peer 2's through 20.
  std::vector<ClockReporter::PeerView> peers = Peers(20);
  peers[0].sent_through = 15;
  r.Report(round, peers);
  ASSERT_EQ(t.sent.size(), 2u);
  EXPECT_EQ(t.sent[0].second.clock, 15);
  EXPECT_EQ(t.sent[1].second.clock, 20);
  // A hold since clock 18 caps the clock at 17; never more than 10 behind k.
  round.k = 30;
  round.held_since = 18;
  peers = Peers(30);
  peers[0].sent_through = 12;
  r.Report(round, peers);
  ASSERT_EQ(t.sent.size(), 4u);
  EXPECT_EQ(t.sent[2].second.clock, 20);  // max(12, 30 - 10)
  EXPECT_EQ(t.sent[3].second.clock, 20);  // min(30, 18 - 1) = 17, but never below the last (20)
  // Without a tick, a peer hears only a clock that moved.
  round.tick = false;
  round.held_since.reset();
  peers[0].sent_through = 20;
  peers[1].sent_through = 25;
  r.Report(round, peers);
  ASSERT_EQ(t.sent.size(), 5u);
  EXPECT_EQ(t.sent[4].first, 2);
  EXPECT_EQ(t.sent[4].second.clock, 25);
}

TEST(ClockReporterTest, TheDrainSaysDrainedOnlyWhereNothingWaitsAndIsSentAgainAsIs) {
  WanOptions o;
  o.mode = WanMode::kAsp;
  RecordingTransport t;
  ClockReporter r(o, 0, &t, 2);
  ClockReporter::Round drain = TickAt(50);
  drain.tick = false;
  drain.finishing = true;
  std::vector<ClockReporter::PeerView> peers = Peers(50, 12);
  peers[1].nothing_waits = false;  // a backlog still waits for peer 2
  ClockReporter::Outcome out = r.Report(drain, peers);
  EXPECT_EQ(out.sent, 2);
  EXPECT_FALSE(out.all_drained);
  ASSERT_EQ(t.sent.size(), 2u);
  EXPECT_TRUE(t.sent[0].second.drained);
  EXPECT_EQ(t.sent[0].second.last_seq, 12u);  // the drain always ties
  EXPECT_FALSE(t.sent[1].second.drained);
  peers[1].nothing_waits = true;
  out = r.Report(drain, peers);
  EXPECT_TRUE(out.all_drained);
  // A peer that restarts hears the last report again, "drained" included.
  const std::optional<WanClockReport> again = r.SendAgain(1, 2);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->drained);
  EXPECT_EQ(t.sent.back().first, 2);
  EXPECT_EQ(t.sent.back().second.clock, 50);
  EXPECT_FALSE(ClockReporter(o, 0, &t, 2).SendAgain(0, 1).has_value());  // never reported: nothing
}

}  // namespace
}  // namespace geops::wan
