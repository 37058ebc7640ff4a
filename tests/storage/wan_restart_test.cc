// A site crashes mid-run and restarts from its store: its WAN outbound
// state (unshipped accumulator, backlogs, unacknowledged batches, seqs) comes
// back with it, so after the drain every replica holds exactly every
// acknowledged update: none lost, none applied twice.
//
// Two in-process sites, one shard each, linked by a FakeWanNetwork with
// delay and little bandwidth (so batches queue and backlogs form). Site 0
// persists to a FaultInjectingShardStore under sync; its "crash" freezes the
// store (nothing written after that point survives) and destroys its shard
// and replicator; the restart builds both again from the store.
//
// Disk loss: site 0 restarts with an empty store instead. Site 1 (which
// persists too, so that it keeps a ledger of what it applied from site 0)
// takes back everything the first site 0 sent it, streams its own mass to
// the new one, and site 0's worker trains again from clock 0: each
// update of the surviving incarnations counts exactly once at both sites.
#include "tests/storage/wan_restart_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace geops::storage {
namespace {

using testing::Site;
using testing::WanRestartTest;
using testing::kAloneClocks;
using testing::kClocks;
using testing::kCrashAt;
using testing::kSites;

TEST_F(WanRestartTest, ASiteThatCrashesAndRestartsLosesAndRepeatsNothing) {
  expected_.assign(static_cast<size_t>(elements_), 0.0);
  Build(0);
  Build(1);
  for (Clock c = 0; c < kCrashAt; ++c) {
    Step(0, c, false);
    Step(1, c, false);
  }
  // Site 0 has acknowledged clocks < kCrashAt; much of that is still
  // accumulated, backlogged or on the wire when it dies.
  Crash();
  for (Clock c = kCrashAt; c < kCrashAt + kAloneClocks; ++c) Step(1, c, false);
  // Site 1 is now more than DS clocks ahead of the dead site's last clock.
  // Once the lease runs out it drops site 0 from the mirror clock and reads
  // again without waiting for it.
  std::this_thread::sleep_for(std::chrono::milliseconds(options_.peer_lease_ms + 200));
  {
    std::vector<float> out(static_cast<size_t>(elements_));
    Result<ReadReply> r =
        sites_[1].shard->Read(0, kCrashAt + kAloneClocks, 0, keys_, out.data(), Deadline::InMs(2000));
    EXPECT_TRUE(r.ok()) << "the survivor is held by the dead site: " << r.status().ToString();
  }
  const double restart_unix = UnixSeconds();
  Restart();
  const wan::ReplicatorStats restored = sites_[0].repl->stats();
  EXPECT_TRUE(restored.recovery.recovered) << "site 0 restored no outbound state";
  const Clock resume = sites_[0].shard->GetStatus().workers[0].clock;
  EXPECT_EQ(resume, kCrashAt) << "the worker's acknowledged clocks are durable";
  {
    // The restarted site hears the survivor's clock (its reports queued
    // while site 0 was down) before its worker trains on. Stepping at once
    // would hold site 0's advance at the drift bound (its fresh gate has the
    // peer at clock 0) with nothing to say meanwhile: this fake network has
    // no heartbeats, so with a 300 ms lease the survivor would count a
    // second "down". Bounded: 5 s.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (sites_[0].repl->gate()->MinMirrorClock() < kCrashAt + kAloneClocks &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(sites_[0].repl->gate()->MinMirrorClock(), kCrashAt + kAloneClocks)
        << "the restarted site never heard the survivor's clock";
  }
  for (Clock c = resume; c < kClocks; ++c) Step(0, c, c + 1 == kClocks);
  for (Clock c = kCrashAt + kAloneClocks; c < kClocks; ++c) Step(1, c, c + 1 == kClocks);
  for (SiteId s = 0; s < kSites; ++s) {
    EXPECT_TRUE(sites_[s].repl->WaitFinal(Deadline::InMs(30000))) << "site " << s << " never got its peer's drain";
  }
  ASSERT_TRUE(sites_[0].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
  ASSERT_TRUE(sites_[1].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
  for (SiteId s = 0; s < kSites; ++s) {
    const std::vector<float> v = Replica(s);
    int64_t wrong = 0;
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double err = std::abs(double{v[i]} - expected_[i]);
      wrong += err != 0;
      worst = std::max(worst, err);
    }
    EXPECT_EQ(wrong, 0) << "site " << s << ": " << wrong << " elements differ from the acknowledged sum, worst by "
                        << worst;
  }
  const wan::ReplicatorStats survivor = sites_[1].repl->stats();
  std::string events;
  for (const wan::PeerDownEvent& e : survivor.gate.down_events) {
    events += " [last heard " + std::to_string(e.last_heard_unix) + ", detected " + std::to_string(e.detected_unix) +
              ", back " + std::to_string(e.back_unix) + "]";
  }
  // The crash is seen once, before the restart. This fake network carries
  // no heartbeats, so on a loaded machine the live, restarted site can also
  // be silent past the lease while it waits between steps: such a later
  // "down" must start after the restart and end with the site back.
  ASSERT_GE(survivor.gate.down_events.size(), 1u) << "site 1 never saw site 0 go down";
  EXPECT_LT(survivor.gate.down_events[0].last_heard_unix, restart_unix) << events;
  for (const wan::PeerDownEvent& e : survivor.gate.down_events) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_GT(e.back_unix, e.detected_unix) << "site 0 never came back:" << events;
  }
  for (size_t i = 1; i < survivor.gate.down_events.size(); ++i) {
    EXPECT_GT(survivor.gate.down_events[i].last_heard_unix, restart_unix) << "site 0 died twice:" << events;
  }
  EXPECT_GT(sites_[0].repl->stats().recovery.caught_up_unix, 0) << "site 0 never got back within DS";
  EXPECT_EQ(net_.errors(), 0);
  for (SiteId s = 0; s < kSites; ++s) {
    sites_[s].repl->Stop();
  }
  net_.Attach(0, nullptr);
  net_.Attach(1, nullptr);
  for (SiteId s = 0; s < kSites; ++s) sites_[s].shard->AttachReplication(nullptr, nullptr);
}

TEST_F(WanRestartTest, ASiteRestartedAfterItsWorkersFinishedStillDrains) {
  expected_.assign(static_cast<size_t>(elements_), 0.0);
  Build(0);
  Build(1);
  for (Clock c = 0; c + 1 < kClocks; ++c) {
    Step(0, c, false);
    Step(1, c, false);
  }
  // Site 1 hears nothing more from site 0 until after its restart: site 0's
  // worker finishes, and site 0 dies before its drain reaches site 1.
  net_.SetDown(1, true);
  Step(0, kClocks - 1, true);
  Step(1, kClocks - 1, true);
  Crash();
  // Its worker is done, so nothing will ever advance its clock again: the
  // restarted site must still drain by itself.
  Restart(/*register_worker=*/false);
  net_.SetDown(1, false);
  for (SiteId s = 0; s < kSites; ++s) {
    EXPECT_TRUE(sites_[s].repl->WaitFinal(Deadline::InMs(30000))) << "site " << s << " never got its peer's drain";
  }
  for (SiteId s = 0; s < kSites; ++s) {
    const std::vector<float> v = Replica(s);
    int64_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) wrong += double{v[i]} != expected_[i];
    EXPECT_EQ(wrong, 0) << "site " << s << ": " << wrong << " elements differ from the acknowledged sum";
  }
  for (SiteId s = 0; s < kSites; ++s) sites_[s].repl->Stop();
  net_.Attach(0, nullptr);
  net_.Attach(1, nullptr);
  for (SiteId s = 0; s < kSites; ++s) sites_[s].shard->AttachReplication(nullptr, nullptr);
}

// A site that ticks before it has heard from its peer keeps that tick's
// updates in the peer's backlog. If, by the time the peer is heard, the
// model has moved on so far that none of it is significant any more, a cut
// takes nothing and the backlog stays. The link is not full then (its
// window is open, nothing waits to be cut): later ticks must select and
// ship, not hold their updates in the accumulator until the final drain.
TEST_F(WanRestartTest, AnInsignificantBacklogFromBeforeThePeerWasHeardHoldsNothingBack) {
  Build(0);
  std::vector<float> ones(static_cast<size_t>(elements_), 1.0f);
  std::vector<float> large(static_cast<size_t>(elements_), 100.0f);
  ASSERT_TRUE(sites_[0].shard->Update(0, 0, keys_, ones).ok());
  ASSERT_TRUE(sites_[0].shard->AdvanceClock(0, 1, false).ok());
  const auto ticked = [&](Clock c) {
    const auto until = SteadyClock::now() + std::chrono::seconds(10);
    while (sites_[0].repl->stats().ticked_clock < c && SteadyClock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return sites_[0].repl->stats().ticked_clock >= c;
  };
  ASSERT_TRUE(ticked(1));
  ASSERT_EQ(sites_[0].repl->stats().peers.at(0).out.batches_sent, 0) << "site 1 is not there yet";
  // Clock 1's updates are in the model before site 1 is heard: the ones
  // waiting in its backlog are 1% of each value from then on, far under
  // the cut-off (0.4), and a cut finds nothing to take.
  ASSERT_TRUE(sites_[0].shard->Update(0, 1, keys_, large).ok());
  Build(1);
  for (int i = 0; i < 5000 && Heard(0, 1) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_NE(Heard(0, 1), 0u) << "site 0 never heard from site 1";
  ASSERT_TRUE(sites_[0].shard->AdvanceClock(0, 2, false).ok());
  ASSERT_TRUE(ticked(2));
  ASSERT_TRUE(sites_[0].shard->Update(0, 2, keys_, large).ok());
  ASSERT_TRUE(sites_[0].shard->AdvanceClock(0, 3, false).ok());
  ASSERT_TRUE(ticked(3));
  // In the backlog the new updates coalesce with clock 0's ones: a cut
  // takes each element's whole sum, 201 once clock 2's have left too.
  const auto mismatched = [&] {
    int64_t n = 0;
    for (float x : Replica(1)) n += x != 201.0f;
    return n;
  };
  const auto until = SteadyClock::now() + std::chrono::seconds(10);
  while (mismatched() != 0 && SteadyClock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const wan::ReplicatorStats a = sites_[0].repl->stats();
  EXPECT_EQ(mismatched(), 0) << "site 1 lacks site 0's clocks 0-2 in some values: site 0 ticked " << a.ticks
                             << " times, held " << a.select_holds << " of them, and sent "
                             << a.peers.at(0).out.batches_sent << " batches (" << a.peers.at(0).out.backlog_batches
                             << " from the backlog)";
  for (SiteId s = 0; s < kSites; ++s) sites_[s].repl->Stop();
  net_.Attach(0, nullptr);
  net_.Attach(1, nullptr);
  for (SiteId s = 0; s < kSites; ++s) sites_[s].shard->AttachReplication(nullptr, nullptr);
}

// Random initial values, as a real model has: they belong to no site, so a
// site's snapshot for a rebuilt peer must not carry them (the peer starts
// from them too). Sums are no longer exact in float: compared to 1e-3,
// far below the initial values' size.
class WanDiskLossTest : public WanRestartTest {
 protected:
  WanDiskLossTest() : WanRestartTest(InitKind::kUniform) {}

  std::vector<double> Initial() const {
    std::vector<double> out;
    for (const ChunkKey& k : keys_) {
      std::vector<float> v(static_cast<size_t>(spec_.ChunkElements(k)));
      spec_.InitChunk(k, v.data());
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
};

TEST_F(WanDiskLossTest, ASiteThatLostItsDiskIsRebuiltAndEveryUpdateCountsOnce) {
  peer_store_ = NewStore();
  expected_.assign(static_cast<size_t>(elements_), 0.0);
  Build(0);
  Build(1);
  const uint64_t first_incarnation = sites_[0].repl->incarnation();
  for (Clock c = 0; c < kCrashAt; ++c) {
    Step(0, c, false);
    Step(1, c, false);
  }
  // Both have applied some of each other's batches (so the loss is
  // visible to site 1, and some of site 0's old work reached it).
  const auto give_up = SteadyClock::now() + std::chrono::seconds(10);
  while ((sites_[0].repl->stats().inbox.batches_applied == 0 || sites_[1].repl->stats().inbox.batches_applied == 0) &&
         SteadyClock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    const wan::ReplicatorStats a = sites_[0].repl->stats();
    const wan::ReplicatorStats b = sites_[1].repl->stats();
    ASSERT_GT(b.inbox.batches_applied, 0)
        << "site 0 ticked clock " << a.ticked_clock << ", selected " << a.elements_selected << " values, sent "
        << a.peers.at(0).out.batches_sent << " batches (" << a.peers.at(0).out.batches_acked << " acked, "
        << a.peers.at(0).out.backlog_batches << " from the backlog); site 1 buffered " << b.inbox.batches_buffered
        << ", refused " << b.inbox.batches_refused << ", refused as stale " << b.inbox.stale_refused
        << "; site 0 held " << a.select_holds << " of its " << a.ticks
        << " ticks in the accumulator, and knows site 1 as incarnation " << Heard(0, 1)
        << ", site 1 knows site 0 as " << Heard(1, 0) << "; the network counted " << net_.errors() << " errors";
  }
  // Site 0 dies and its disk with it: it comes back with an empty store.
  Crash();
  store_ = NewStore();
  for (Clock c = kCrashAt; c < kCrashAt + kAloneClocks; ++c) Step(1, c, false);
  Restart();
  EXPECT_GT(sites_[0].repl->incarnation(), first_incarnation);
  EXPECT_TRUE(sites_[0].repl->stats().recovery.fresh_store);
  EXPECT_FALSE(sites_[0].repl->stats().recovery.recovered);
  const Clock resume = sites_[0].shard->GetStatus().workers[0].clock;
  ASSERT_EQ(resume, 0) << "a site without its store starts over";
  // What the first site 0 contributed is taken back everywhere; its
  // worker's updates count again as the new one makes them.
  by_site_[0].assign(by_site_[0].size(), 0.0);
  for (Clock c = 0; c < kClocks; ++c) Step(0, c, c + 1 == kClocks);
  for (Clock c = kCrashAt + kAloneClocks; c < kClocks; ++c) Step(1, c, c + 1 == kClocks);
  for (SiteId s = 0; s < kSites; ++s) {
    EXPECT_TRUE(sites_[s].repl->WaitFinal(Deadline::InMs(30000))) << "site " << s << " never got its peer's drain";
  }
  ASSERT_TRUE(sites_[0].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
  ASSERT_TRUE(sites_[1].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
  const std::vector<double> initial = Initial();
  double spread = 0;
  for (double x : initial) spread = std::max(spread, std::abs(x));
  ASSERT_GT(spread, 0.1) << "the model should start from non-zero values";
  for (SiteId s = 0; s < kSites; ++s) {
    const std::vector<float> v = Replica(s);
    int64_t wrong = 0;
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double err = std::abs(double{v[i]} - (initial[i] + by_site_[0][i] + by_site_[1][i]));
      wrong += err > 1e-3;
      worst = std::max(worst, err);
    }
    EXPECT_EQ(wrong, 0) << "site " << s << ": " << wrong << " elements differ from the surviving updates' sum, "
                        << "worst by " << worst;
  }
  const wan::ReplicatorStats survivor = sites_[1].repl->stats();
  ASSERT_EQ(survivor.stream_resets.size(), 1u) << "site 1 should have reset its streams to site 0 once";
  EXPECT_EQ(survivor.stream_resets[0].peer, 0);
  EXPECT_EQ(survivor.stream_resets[0].incarnation, sites_[0].repl->incarnation());
  EXPECT_GT(survivor.stream_resets[0].snapshot_elements, 0);
  EXPECT_EQ(survivor.inbox.origin_resets, 1);
  // Batches cut for the first site 0 that reached the new one were refused;
  // nothing else was.
  EXPECT_EQ(net_.errors(), sites_[0].repl->stats().inbox.stale_refused + survivor.inbox.stale_refused);
  for (SiteId s = 0; s < kSites; ++s) sites_[s].repl->Stop();
  net_.Attach(0, nullptr);
  net_.Attach(1, nullptr);
  for (SiteId s = 0; s < kSites; ++s) sites_[s].shard->AttachReplication(nullptr, nullptr);
}

// A transport that loses everything (the test looks at the store only).
class DropTransport : public wan::WanTransport {
 public:
  void SetDeliveryCallback(DeliveryCallback) override {}
  void SendBatch(SiteId, wan::WanBatch) override {}
  void SendClock(SiteId, wan::WanClockReport) override {}
  void SendNotice(SiteId, wan::WanNotice) override {}
  double EstimateDeliverySeconds(SiteId, int64_t) override { return 0; }
  double BandwidthBytesPerSecond(SiteId) override { return 0; }
};

// A peer heard first as incarnation 7 and then as 8 within one round of the
// tick thread: the reset to 8 is what the store keeps, so a restart does
// not take the unchanged peer for a new one.
TEST(WanIncarnationRecordTest, AResetIsNotOverwrittenByTheFirstHeardRecordItOvertook) {
  const ModelSpec spec = datacenter::testing::TestModel(InitKind::kZeros);
  const ShardOptions o = datacenter::testing::TestOptions(1);
  testing::MemoryShardStore store(StoreFingerprint::Of(spec, o));
  auto shard = std::move(datacenter::Shard::Create(spec, o, &store)).value();
  DropTransport t;
  wan::ReplicatorConfig rc;
  rc.site = 0;
  rc.peers = {1};
  auto repl = std::move(wan::Replicator::Create(&spec, rc, shard.get(), &t)).value();
  shard->AttachReplication(repl.get(), repl->gate());
  // Both heard before the tick thread's next round: 7 first (to record), then 8 (to reset).
  ASSERT_TRUE(repl->receiver()->OnHeartbeat(1, 7).ok());
  ASSERT_TRUE(repl->receiver()->OnHeartbeat(1, 8).ok());
  repl->Start();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (repl->stats().stream_resets.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a few more rounds
  repl->Stop();
  ASSERT_TRUE(shard->Flush(Deadline::InMs(5000)).ok());
  ASSERT_EQ(repl->stats().stream_resets.size(), 1u);
  const auto image = store.image();
  const std::string key("k\0\0\0\1", 5);
  ASSERT_EQ(image.outbound.count(key), 1u);
  uint64_t stored = 0;
  std::memcpy(&stored, image.outbound.at(key).data(), 8);
  EXPECT_EQ(stored, 8u) << "the store records peer 1 at an older incarnation than the one its streams were reset for";
  repl.reset();
  shard.reset();
  // Restart from the store: peer 1 (still incarnation 8) is taken as new again.
  shard = std::move(datacenter::Shard::Create(spec, o, &store)).value();
  repl = std::move(wan::Replicator::Create(&spec, rc, shard.get(), &t)).value();
  shard->AttachReplication(repl.get(), repl->gate());
  repl->Start();
  ASSERT_TRUE(repl->receiver()->OnHeartbeat(1, 8).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(repl->stats().stream_resets.size(), 0u) << "a spurious reset of a peer that did not restart";
  repl->Stop();
  repl.reset();
  shard.reset();
}
}  // namespace
}  // namespace geops::storage
