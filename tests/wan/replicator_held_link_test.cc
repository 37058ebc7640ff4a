// A peer link that holds a site's batches while its notices and clock
// reports pass: what the selective barrier holds, when a peer takes a tied
// clock report, and what waits to leave meanwhile (tie_backlog,
// fresh_first). Whole in-process sites over the in-memory network.
#include "wan/replication/replicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/time_source.h"
#include "tests/wan/wan_sites.h"

namespace geops::wan {
namespace {

using testing::CounterModel;
using testing::LinkFaults;
using testing::WanSites;

// asp with every change significant and every batch announced, no drift
// bound; `selective_barrier` as given.
WanOptions AnnouncingAsp(bool selective_barrier) {
  WanOptions o;
  o.mode = WanMode::kAsp;
  o.codec = ValueCodec::kFp16;
  o.staleness_ds = -1;
  o.notice_min_seconds = 0;
  o.selective_barrier = selective_barrier;
  o.threshold.initial = 0;
  o.threshold.floor = 0;
  return o;
}

// Links that hold every batch until ReleaseHeld (notices and reports pass).
LinkFaults HeldBatches() {
  LinkFaults hold;
  hold.hold_batches = true;
  return hold;
}

// Returns once shard 0 of site `s` has heard from site `peer`: a site sends
// to a peer only then (until then its batches wait in the backlog, and
// leave later, in other rounds).
void WaitUntilHeard(WanSites& sites, SiteId s, SiteId peer) {
  const auto* inbox = dynamic_cast<const RemoteInbox*>(sites.replicator(s, 0)->receiver());
  ASSERT_NE(inbox, nullptr);
  for (int i = 0; i < 5000 && inbox->Incarnation(peer) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_NE(inbox->Incarnation(peer), 0u) << "site " << s << " has not heard from site " << peer;
}

TEST(ReplicatorTest, NoticeHoldsReadsOfExactlyTheAnnouncedChunks) {
  WanSites sites(CounterModel(), {1, 1}, 1, AnnouncingAsp(true), HeldBatches(), 2);
  const ModelSpec& spec = sites.spec();
  std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  ASSERT_GE(keys.size(), 3u);
  const std::vector<ChunkKey> touched = {keys[0], keys[2]};
  const std::vector<ChunkKey> untouched = {keys[1]};
  datacenter::Shard* a = sites.shard(0, 0);
  datacenter::Shard* b = sites.shard(1, 0);
  ASSERT_TRUE(a->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(b->RegisterWorker(0, 0, "").ok());
  WaitUntilHeard(sites, 0, 1);  // the batch and its notice leave at the tick
  if (HasFatalFailure()) return;
  std::vector<float> values;
  for (ChunkKey k : touched) values.insert(values.end(), spec.ChunkElements(k), 2.0f);
  ASSERT_TRUE(a->Update(0, 0, touched, values).ok());
  ASSERT_TRUE(a->AdvanceClock(0, 1, false).ok());
  // The notice overtakes the held batch.
  for (int i = 0; i < 200 && sites.replicator(1, 0)->gate()->NoticedChunks().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(sites.replicator(1, 0)->gate()->NoticedChunks(), touched);
  std::vector<float> out(4096);
  EXPECT_TRUE(b->Read(0, 0, 0, untouched, out.data(), Deadline::InMs(50)).ok());
  auto held = b->Read(0, 0, 0, std::vector<ChunkKey>{touched[1]}, out.data(), Deadline::InMs(80));
  EXPECT_EQ(held.status().code(), StatusCode::kDeadlineExceeded) << held.status().ToString();
  EXPECT_NE(held.status().message().find("notice"), std::string::npos);
  sites.net(0)->ReleaseHeld(0, 1);
  auto landed = b->Read(0, 0, 0, touched, out.data(), Deadline::InMs(5000));
  ASSERT_TRUE(landed.ok()) << landed.status().ToString();
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[spec.ChunkElements(touched[0])], 2.0f);
  EXPECT_GE(sites.replicator(1, 0)->stats().gate.notices, 1);
}

// Registers worker 0 with shard 0 of sites 0 and 1, and sets `ones` to 1
// for every element of that shard's chunks: one clock's update. Returns
// once each site has heard from the other.
void RegisterBoth(WanSites& sites, std::vector<float>* ones) {
  const ModelSpec& spec = sites.spec();
  ASSERT_TRUE(sites.shard(0, 0)->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(sites.shard(1, 0)->RegisterWorker(0, 0, "").ok());
  ones->clear();
  for (ChunkKey k : spec.ChunksOfShard(0, 1)) ones->insert(ones->end(), spec.ChunkElements(k), 1.0f);
  WaitUntilHeard(sites, 0, 1);
  if (::testing::Test::HasFatalFailure()) return;
  WaitUntilHeard(sites, 1, 0);
}

// Site 0's worker pushes `ones` at clock c and moves to c + 1; returns once
// site 0's replicator ticked that clock on its own (no two clocks in one
// tick) and something waits on `time` again.
void PushAndTick(WanSites& sites, const ManualTime& time, const std::vector<float>& ones, Clock c) {
  datacenter::Shard* a = sites.shard(0, 0);
  ASSERT_TRUE(a->Update(0, c, sites.spec().ChunksOfShard(0, 1), ones).ok());
  ASSERT_TRUE(a->AdvanceClock(0, c + 1, false).ok());
  Replicator* r = sites.replicator(0, 0);
  for (int i = 0; i < 2000 && (r->stats().ticked_clock < c + 1 || time.waiters() == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(r->stats().ticked_clock, c + 1);
}

// Registers both sites' workers, then site 0's worker pushes `ones` at
// clocks 0 to 8, one tick each (PushAndTick).
void RegisterAndTickNine(WanSites& sites, const ManualTime& time, std::vector<float>* ones) {
  RegisterBoth(sites, ones);
  if (::testing::Test::HasFatalFailure()) return;
  for (Clock c = 0; c < 9; ++c) {
    PushAndTick(sites, time, *ones, c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Two sites on links that hold site 0's batches: site 0 sends clock 1's
// batch (held on the link) and then ticks clocks 2 and 3, whose updates
// wait behind it. Returns once clock 1's batch has left; a report ties
// only to batches sent before it, and until one is sent there is nothing
// to wait for.
void SendOneHeldThenTwoClocks(WanSites& sites) {
  const std::vector<ChunkKey> keys = sites.spec().ChunksOfShard(0, 1);
  datacenter::Shard* a = sites.shard(0, 0);
  std::vector<float> ones;
  RegisterBoth(sites, &ones);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_TRUE(a->Update(0, 0, keys, ones).ok());
  ASSERT_TRUE(a->AdvanceClock(0, 1, false).ok());
  auto sent = [&] { return sites.replicator(0, 0)->stats().peers.at(0).last_seq; };
  for (int i = 0; i < 1000 && sent() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(sent(), 1u);
  for (Clock c = 1; c < 3; ++c) {
    ASSERT_TRUE(a->Update(0, c, keys, ones).ok());
    ASSERT_TRUE(a->AdvanceClock(0, c + 1, false).ok());
  }
}

// report_every_clocks: a peer is sent a clock report once the shard clock
// moved that many clocks past the last one it was sent; one held back goes
// out once it has waited 100 ms (a site waiting at the drift bound still
// says where it is). On a ManualTime, so that no flush comes before the
// test moves time.
TEST(ReplicatorTest, AReportEveryFewClocksAndAHeldOneGoesOutWhenTicksStop) {
  for (int64_t every : {1, 3}) {
    SCOPED_TRACE("every " + std::to_string(every) + " clocks");
    WanOptions o = AnnouncingAsp(false);
    o.report_every_clocks = every;
    ManualTime time;
    WanSites sites(CounterModel(), {1, 1}, 1, o, LinkFaults{}, 2, &time);
    std::vector<float> ones;
    RegisterAndTickNine(sites, time, &ones);
    if (HasFatalFailure()) return;
    Replicator* r = sites.replicator(0, 0);
    MirrorGate* gate = sites.replicator(1, 0)->gate();
    // Every 3 clocks: the reports of clocks 1, 4 and 7 leave; 2, 3, 5, 6, 8
    // and 9 wait for a later one.
    const Clock reported = every == 1 ? 9 : 7;
    // (The tick thread counts a round's reports after sending them: the
    // peer may hold a report before its sender's stats do.)
    const int64_t sent = every == 1 ? 9 : 3, held = every == 1 ? 0 : 6;
    for (int i = 0; i < 2000 && (gate->MinMirrorClock() < reported || r->stats().reports_sent < sent ||
                                 r->stats().reports_held < held);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(gate->MinMirrorClock(), reported);
    EXPECT_EQ(r->stats().reports_sent, sent);
    EXPECT_EQ(r->stats().reports_held, held);
    // No tick comes: the report of clock 9 leaves once the flush is due.
    time.Advance(std::chrono::milliseconds(250));
    const int64_t flushed = every == 1 ? 9 : 4;
    for (int i = 0; i < 2000 && (gate->MinMirrorClock() < 9 || r->stats().reports_sent < flushed); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(gate->MinMirrorClock(), 9);
    EXPECT_EQ(r->stats().reports_sent, flushed);
  }
}

// A tied report made in the round that sends the batch it names rides with
// that batch (one message, not two); the peer takes it once the batch has
// landed, as it would a report of its own, and the sum stays exact.
TEST(ReplicatorTest, ATiedReportRidesWithTheBatchOfItsRound) {
  WanOptions o = AnnouncingAsp(false);
  o.tie_reports = true;
  o.max_inflight_batches = 16;  // every tick's batch leaves in its own round
  ManualTime time;
  WanSites sites(CounterModel(), {1, 1}, 1, o, LinkFaults{}, 2, &time);
  std::vector<float> ones;
  RegisterAndTickNine(sites, time, &ones);
  if (HasFatalFailure()) return;
  Replicator* r = sites.replicator(0, 0);
  MirrorGate* gate = sites.replicator(1, 0)->gate();
  for (int i = 0; i < 2000 && (gate->MinMirrorClock() < 9 || r->stats().reports_sent < 9); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(gate->MinMirrorClock(), 9);
  EXPECT_EQ(r->stats().reports_sent, 9);
  EXPECT_EQ(r->stats().reports_riding, 9);
  const std::vector<ChunkKey> keys = sites.spec().ChunksOfShard(0, 1);
  std::vector<float> out(ones.size());
  ASSERT_TRUE(sites.shard(1, 0)->Read(0, 0, 0, keys, out.data(), Deadline::InMs(5000)).ok());
  for (float v : out) ASSERT_EQ(v, 9.0f);
}

// target_utilization: every second the link that shipped the most against
// its bandwidth steers the cut-off, up when it ships more than that share,
// down when less; links of unknown bandwidth do not steer. On a ManualTime,
// one clock's batch every 101 ms: a steering second holds nine or ten of
// them, whether the idle round each time step wakes runs before or after
// that step's tick (with one batch a second, an idle round that came first
// saw a second with nothing shipped and steered down).
TEST(ReplicatorTest, TheBusiestLinkSteersTheCutOff) {
  struct Case {
    const char* name;
    double target;
    double bytes_per_second;  // the link's (0: unknown)
    int direction;            // the multiplier's way: +1 up, -1 down, 0 stays 1
  };
  for (const Case& c : {Case{"a link that cannot carry ten batches a second", 0.5, 100, 1},
                        Case{"an idle link", 0.5, 1e9, -1}, Case{"a link of unknown bandwidth", 0.5, 0, 0},
                        Case{"no steering", 0, 100, 0}}) {
    SCOPED_TRACE(c.name);
    WanOptions o = AnnouncingAsp(false);
    o.target_utilization = c.target;
    o.max_inflight_batches = 1000;  // every tick's batch leaves, however slow the link
    o.max_queue_seconds = 1e6;
    LinkFaults link;
    link.bytes_per_second = c.bytes_per_second;
    ManualTime time;
    WanSites sites(CounterModel(), {1, 1}, 1, o, link, 2, &time);
    std::vector<float> ones;
    RegisterBoth(sites, &ones);
    if (HasFatalFailure()) return;
    Replicator* r = sites.replicator(0, 0);
    for (Clock k = 0; k < 31; ++k) {
      PushAndTick(sites, time, ones, k);
      if (HasFatalFailure()) return;
      time.Advance(std::chrono::milliseconds(101));
    }
    const auto moved = [&] {
      const double m = r->stats().threshold_multiplier;
      return c.direction > 0 ? m > 1 : (c.direction < 0 ? m < 1 : m != 1);
    };
    // A multiplier that is to stay is given the rounds' time to move anyway.
    for (int i = 0; i < (c.direction == 0 ? 100 : 2000) && !moved(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (c.direction == 0) {
      EXPECT_EQ(r->stats().threshold_multiplier, 1.0);
    } else {
      const ReplicatorStats st = r->stats();
      EXPECT_TRUE(moved()) << "multiplier " << st.threshold_multiplier << "; batches sent "
                           << st.peers.at(0).out.batches_sent << " (" << st.peers.at(0).out.bytes_sent
                           << " bytes), " << st.peers.at(0).out.backlog_batches << " of them cut from the backlog";
    }
  }
}

// tie_reports: a peer takes an asp site's clock only once the batches sent
// before the report have landed, so the drift bound also bounds how old the
// updates it has applied may get; untied, the report counts at once.
TEST(ReplicatorTest, ATiedReportCountsOnlyOnceItsBatchesLanded) {
  for (bool tie : {false, true}) {
    SCOPED_TRACE(tie ? "tied" : "untied");
    WanOptions o = AnnouncingAsp(false);
    o.tie_reports = tie;
    WanSites sites(CounterModel(), {1, 1}, 1, o, HeldBatches(), 2);
    SendOneHeldThenTwoClocks(sites);
    if (HasFatalFailure()) return;
    MirrorGate* gate = sites.replicator(1, 0)->gate();
    for (int i = 0; i < 60 && gate->MinMirrorClock() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // The batches are held on the link; the reports are not. Tied, only a
    // report sent before the first batch (clock 1 at most) counts.
    if (tie) {
      EXPECT_LE(gate->MinMirrorClock(), 1);
    } else {
      EXPECT_EQ(gate->MinMirrorClock(), 3);
    }
    sites.net(0)->ReleaseHeld(0, 1);
    for (int i = 0; i < 1000 && gate->MinMirrorClock() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(gate->MinMirrorClock(), 3);
  }
}

// tie_backlog: while a site's updates wait to leave for a peer (the link
// holds the batch before them), its report to that peer stays at the clock
// before them; once they have left, a report says so at once, with no
// further tick (the peer may be what keeps the site from ticking); with
// tie_backlog_clocks, at most that many clocks before the shard's; with
// tie_backlog_last_clocks, only over the training's last clocks. For the
// backlog's part of this, see PeerOutboxTest (peer_outbox_test.cc).
TEST(ReplicatorTest, ABacklogTiedReportStaysBeforeWhatWaits) {
  struct Case {
    const char* name;
    bool tie_backlog;
    int64_t tie_backlog_clocks;
    int64_t tie_backlog_last_clocks;
    int64_t training_clocks;
    Clock held_at;  // the peer's mirror clock while clocks 2 and 3 wait
  };
  // Bounded to one clock, the waiting updates keep the report of clock 3
  // back at 2, not at 1. Tied over the last 50 of 100 clocks, clock 3 is
  // reported as untied; over the last 3 of 4 (clocks 2 to 4), as tied.
  for (const Case& c : {Case{"untied", false, 0, 0, 0, 3}, Case{"tied to the backlog", true, 0, 0, 0, 1},
                        Case{"tied for one clock at most", true, 1, 0, 0, 2},
                        Case{"tied later in the training", true, 0, 50, 100, 3},
                        Case{"tied over the training's last clocks", true, 0, 3, 4, 1}}) {
    SCOPED_TRACE(c.name);
    WanOptions o = AnnouncingAsp(false);
    o.tie_backlog = c.tie_backlog;
    o.tie_backlog_clocks = c.tie_backlog_clocks;
    o.tie_backlog_last_clocks = c.tie_backlog_last_clocks;
    o.threshold.last_clock = c.training_clocks;
    o.fresh_first = true;
    WanSites sites(CounterModel(), {1, 1}, 1, o, HeldBatches(), 2);
    // Clocks 2 and 3's updates wait in the accumulator (the only link is full).
    SendOneHeldThenTwoClocks(sites);
    if (HasFatalFailure()) return;
    auto ticked = [&] { return sites.replicator(0, 0)->stats().ticked_clock; };
    for (int i = 0; i < 1000 && ticked() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_GE(ticked(), 3);
    MirrorGate* gate = sites.replicator(1, 0)->gate();
    // The report of clock 3 reaches the peer (however loaded the machine),
    // and the clock it carries goes no further while the updates wait.
    for (int i = 0; i < 1000 && gate->MinMirrorClock() < c.held_at; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (int i = 0; i < 60 && gate->MinMirrorClock() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(gate->MinMirrorClock(), c.held_at);
    sites.net(0)->ReleaseHeld(0, 1);
    for (int i = 0; i < 1000 && gate->MinMirrorClock() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(gate->MinMirrorClock(), 3);
  }
}

// fresh_first: once a peer's backlog holds only the codec's residuals (int4
// leaves some behind at every cut), a tick's updates go to that peer
// directly; without it they wait behind the residuals in the backlog, to be
// cut from there.
TEST(ReplicatorTest, FreshFirstSendsPastABacklogOfResiduals) {
  for (bool fresh_first : {false, true}) {
    SCOPED_TRACE(fresh_first ? "fresh first" : "behind the backlog");
    WanOptions o = AnnouncingAsp(false);
    o.codec = ValueCodec::kInt4;
    o.max_inflight_batches = 1;
    o.fresh_first = fresh_first;
    // Significant: a change of 1% of 100 (every value here counts as 100):
    // each clock's updates (2 and more), not a cut's residuals (0.5 at most).
    o.threshold.initial = 0.01;
    o.threshold.floor = 0.01;
    o.value_floor = 100;
    WanSites sites(CounterModel(), {1, 1, 1}, 1, o, HeldBatches(), 2);
    sites.net(0)->ReleaseHeld(0, 2);  // only the link to site 1 holds its batches
    const ModelSpec& spec = sites.spec();
    const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
    datacenter::Shard* a = sites.shard(0, 0);
    ASSERT_TRUE(a->RegisterWorker(0, 0, "").ok());
    ASSERT_TRUE(sites.shard(1, 0)->RegisterWorker(0, 0, "").ok());
    ASSERT_TRUE(sites.shard(2, 0)->RegisterWorker(0, 0, "").ok());
    WaitUntilHeard(sites, 0, 1);
    WaitUntilHeard(sites, 0, 2);
    if (HasFatalFailure()) return;
    // Two clocks' values that int4 carries, each on its own scale, but not
    // their sum: a cut of both coalesced leaves residuals.
    std::vector<float> values;
    std::vector<float> others;
    for (ChunkKey k : keys) {
      for (uint32_t i = 0; i < spec.ChunkElements(k); ++i) {
        values.push_back(i % 2 == 0 ? 7.0f : 2.0f);   // int4 step 1
        others.push_back(i % 2 == 0 ? 3.5f : 0.5f);   // step 0.5; the sum's is 1.5
      }
    }
    auto to_b = [&] { return sites.replicator(0, 0)->stats().peers.at(0).out; };
    auto to_c = [&] { return sites.replicator(0, 0)->stats().peers.at(1).out; };
    auto wait_for = [](const auto& done) {
      for (int i = 0; i < 1000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return done();
    };
    // Clock 1 goes to both peers directly; site 1's copy is held. Clocks 2
    // and 3 then coalesce in site 1's backlog (its window of one is full).
    ASSERT_TRUE(a->Update(0, 0, keys, values).ok());
    ASSERT_TRUE(a->AdvanceClock(0, 1, false).ok());
    ASSERT_TRUE(wait_for([&] { return to_b().batches_sent == 1; }));
    // Each clock only once site 2 has the batches of the clocks before,
    // all n of them: that link always has room, so the ticks select rather
    // than hold. (Counted: a tick's clock shows before its batches leave.)
    auto c_idle = [&](int64_t n) { return to_c().batches_sent == n && to_c().batches_acked == n; };
    for (Clock c = 1; c < 3; ++c) {
      ASSERT_TRUE(wait_for([&] { return c_idle(c); }));
      ASSERT_TRUE(a->Update(0, c, keys, c == 1 ? values : others).ok());
      ASSERT_TRUE(a->AdvanceClock(0, c + 1, false).ok());
      ASSERT_TRUE(wait_for([&] { return sites.replicator(0, 0)->stats().ticked_clock == c + 1; }));
    }
    EXPECT_EQ(to_b().backlog_batches, 0) << to_b().batches_sent << " " << to_b().batches_acked << " "
                                         << sites.replicator(0, 0)->stats().select_holds;
    // Released, clock 1's batch lands; the backlog is cut whole and leaves
    // residuals behind.
    sites.net(0)->ReleaseHeld(0, 1);
    ASSERT_TRUE(wait_for([&] { return to_b().backlog_batches == 1 && to_b().batches_acked == 2; }))
        << to_b().backlog_batches << " " << to_b().batches_sent << " " << to_b().batches_acked;
    ASSERT_GT(sites.replicator(0, 0)->stats().peers.at(0).out.max_backlog_chunks, 0);
    ASSERT_TRUE(wait_for([&] { return c_idle(3); }));
    ASSERT_TRUE(a->Update(0, 3, keys, values).ok());
    ASSERT_TRUE(a->AdvanceClock(0, 4, false).ok());
    wait_for([&] { return to_b().batches_sent == 3 && to_b().batches_acked == 3; });
    EXPECT_EQ(to_b().batches_sent, 3);
    EXPECT_EQ(to_b().batches_acked, 3);
    EXPECT_EQ(to_b().backlog_batches, fresh_first ? 1 : 2);
  }
}

// Without the selective barrier nothing is announced: a read of a chunk
// whose batch is on its way is served at once from the replica as it is.
TEST(ReplicatorTest, WithoutTheSelectiveBarrierReadsAreNeverHeld) {
  WanSites sites(CounterModel(), {1, 1}, 1, AnnouncingAsp(false), HeldBatches(), 2);
  const ModelSpec& spec = sites.spec();
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  ASSERT_FALSE(keys.empty());
  datacenter::Shard* a = sites.shard(0, 0);
  datacenter::Shard* b = sites.shard(1, 0);
  ASSERT_TRUE(a->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(b->RegisterWorker(0, 0, "").ok());
  WaitUntilHeard(sites, 0, 1);  // the batch leaves at the tick (were a notice sent, with it)
  if (HasFatalFailure()) return;
  const std::vector<ChunkKey> touched = {keys[0]};
  std::vector<float> values(spec.ChunkElements(keys[0]), 2.0f);
  ASSERT_TRUE(a->Update(0, 0, touched, values).ok());
  ASSERT_TRUE(a->AdvanceClock(0, 1, false).ok());
  // The batch is selected and held on the link.
  for (int i = 0; i < 200 && sites.replicator(0, 0)->stats().elements_selected == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(sites.replicator(0, 0)->stats().elements_selected, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for a notice, were one sent
  EXPECT_TRUE(sites.replicator(1, 0)->gate()->NoticedChunks().empty());
  std::vector<float> out(4096);
  auto now = b->Read(0, 0, 0, touched, out.data(), Deadline::InMs(1000));
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(out[0], 0.0f);  // the batch has not landed
  EXPECT_EQ(sites.replicator(1, 0)->stats().gate.notices, 0);
  sites.net(0)->ReleaseHeld(0, 1);
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(b->Read(0, 0, 0, touched, out.data(), Deadline::InMs(1000)).ok());
    if (out[0] == 2.0f) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(out[0], 2.0f);
}

}  // namespace
}  // namespace geops::wan
