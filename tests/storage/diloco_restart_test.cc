// diloco with a store: a site that crashes mid-run restarts from its store
// with the outer step where it left it (theta, momentum, the contributions
// to steps not applied yet, which step each site gave), so the outer steps
// go on identically at both sites: the counter ends exact and every step's
// synchronised model is bit-identical at both sites, also across the
// restart. A store written by another mode is refused, naming why.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/storage/wan_restart_fixture.h"

namespace geops::storage {
namespace {

using testing::kClocks;
using testing::kCrashAt;
using testing::kSites;
using testing::WanRestartTest;

class DilocoRestartTest : public WanRestartTest {
 protected:
  // `exact`: lr 2 (two sites) without momentum adds up the sites'
  // contributions, so the counter is exact; otherwise DiLoCo's own outer
  // optimiser (lr 0.7, Nesterov momentum 0.9) on int8 with error feedback.
  void UseDiloco(bool exact) {
    options_.mode = wan::WanMode::kDiloco;
    options_.averaging_period = 4;
    if (exact) {
      options_.outer_lr = 2;
      options_.outer_momentum = 0;
      options_.outer_average_last = false;
    } else {
      options_.codec = wan::ValueCodec::kInt8;
    }
  }

  // Clocks [from, to) at both sites. Each site's tick thread is let see
  // every multiple of H on its own (ticks that coalesce over several
  // multiples give one contribution for them all), so that the number of
  // outer steps does not depend on how busy the machine is.
  void StepBoth(Clock from, Clock to) {
    for (Clock c = from; c < to; ++c) {
      Step(0, c, c + 1 == kClocks);
      Step(1, c, c + 1 == kClocks);
      // A contribution every H clocks, or every H / F with streaming.
      if ((c + 1) % (options_.averaging_period / options_.outer_fragments) != 0) continue;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (SiteId s = 0; s < kSites; ++s) {
        while (sites_[s].repl->stats().ticked_clock < c + 1 && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    }
  }

  // Both sites train to kCrashAt; site 0 crashes once it has applied a few
  // outer steps and restarts from its store; both train to the end and
  // drain. Returns the step digests site 0 restored from its store.
  std::vector<uint64_t> RunWithACrash() {
    expected_.assign(static_cast<size_t>(elements_), 0.0);
    Build(0);
    Build(1);
    StepBoth(0, kCrashAt);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sites_[0].repl->stats().outer_steps_applied < 2 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GE(sites_[0].repl->stats().outer_steps_applied, 2) << "no outer step before the crash";
    Crash();
    Restart();
    const wan::ReplicatorStats restored = sites_[0].repl->stats();
    EXPECT_TRUE(restored.recovery.recovered) << "site 0 restored no outer state";
    // The steps committed before the crash (those applied after the last
    // commit come again from the redelivered contributions).
    const std::vector<uint64_t> from_store = sites_[0].repl->OuterDigests();
    EXPECT_GE(from_store.size(), 1u) << "no outer step was durable before the crash";
    const Clock resume = sites_[0].shard->GetStatus().workers[0].clock;
    EXPECT_EQ(resume, kCrashAt) << "the worker's acknowledged clocks are durable";
    StepBoth(kCrashAt, kClocks);
    for (SiteId s = 0; s < kSites; ++s) {
      EXPECT_TRUE(sites_[s].repl->WaitFinal(Deadline::InMs(30000))) << "site " << s << " never got its peer's drain";
    }
    EXPECT_TRUE(sites_[0].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
    EXPECT_TRUE(sites_[1].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
    return from_store;
  }

  // Every element of every site's replica is the sum of the acknowledged
  // updates.
  void ExpectCounterExactAtBothSites() {
  for (SiteId s = 0; s < kSites; ++s) {
    const std::vector<float> v = Replica(s);
    int64_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) wrong += double{v[i]} != expected_[i];
    EXPECT_EQ(wrong, 0) << "site " << s << ": " << wrong << " elements differ from the acknowledged sum";
  }
  }

  void StopAll() {
    for (SiteId s = 0; s < kSites; ++s) sites_[s].repl->Stop();
    net_.Attach(0, nullptr);
    net_.Attach(1, nullptr);
    for (SiteId s = 0; s < kSites; ++s) sites_[s].shard->AttachReplication(nullptr, nullptr);
  }
};

TEST_F(DilocoRestartTest, ACrashedSiteGoesOnWithTheSameOuterStepsAndTheCounterEndsExact) {
  UseDiloco(/*exact=*/true);
  const std::vector<uint64_t> from_store = RunWithACrash();
  const std::vector<uint64_t> d0 = sites_[0].repl->OuterDigests();
  const std::vector<uint64_t> d1 = sites_[1].repl->OuterDigests();
  EXPECT_EQ(d0, d1) << "the sites' synchronised models differ after some step";
  ASSERT_GE(d1.size(), from_store.size());
  EXPECT_TRUE(std::equal(from_store.begin(), from_store.end(), d1.begin()))
      << "the steps site 0 restored differ from its peer's";
  EXPECT_GE(d0.size(), static_cast<size_t>(kClocks / options_.averaging_period) - 1);
  ExpectCounterExactAtBothSites();
  EXPECT_EQ(sites_[0].repl->stats().inbox.batches_refused, 0);
  EXPECT_EQ(sites_[1].repl->stats().inbox.batches_refused, 0);
  StopAll();
}

// Streaming (two fragments, a step every 2 clocks): the restored site
// takes the same fragment's turn as its peer, so every step stays
// bit-identical and the counter exact.
TEST_F(DilocoRestartTest, StreamingFragmentsGoOnIdenticallyAcrossACrash) {
  UseDiloco(/*exact=*/true);
  options_.outer_fragments = 2;
  const std::vector<uint64_t> from_store = RunWithACrash();
  const std::vector<uint64_t> d0 = sites_[0].repl->OuterDigests();
  EXPECT_EQ(d0, sites_[1].repl->OuterDigests()) << "the sites' synchronised models differ after some step";
  ASSERT_GE(d0.size(), from_store.size());
  EXPECT_TRUE(std::equal(from_store.begin(), from_store.end(), d0.begin()));
  EXPECT_GE(d0.size(), static_cast<size_t>(2 * kClocks / options_.averaging_period) - 1);
  ExpectCounterExactAtBothSites();
  StopAll();
}

TEST_F(DilocoRestartTest, DilocoProperStaysBitIdenticalAtBothSitesAcrossACrash) {
  UseDiloco(/*exact=*/false);
  const std::vector<uint64_t> from_store = RunWithACrash();
  const std::vector<uint64_t> d0 = sites_[0].repl->OuterDigests();
  EXPECT_EQ(d0, sites_[1].repl->OuterDigests()) << "the sites' synchronised models differ after some step";
  ASSERT_GE(d0.size(), from_store.size());
  EXPECT_TRUE(std::equal(from_store.begin(), from_store.end(), d0.begin()));
  const std::vector<float> replica = Replica(0);
  EXPECT_EQ(Replica(1), replica) << "the final models differ";
  // Not the counter's sum: an average moved by the outer optimiser.
  int64_t differ = 0;
  for (size_t i = 0; i < replica.size(); ++i) differ += double{replica[i]} != expected_[i];
  EXPECT_GT(differ, 0);
  StopAll();
}

// A site that loses its store: it comes back with a new, empty one, asks
// its peer what that holds of it, takes the synchronised state and its own
// contributions from there, and resumes its worker after the last
// contribution its peer holds. What it did after that died with the store
// and is done again, exactly once: every clock's update of both sites
// counts once in the end, and the sites' steps stay bit-identical.
TEST_F(DilocoRestartTest, ASiteThatLostItsStoreRejoinsAndTheCounterEndsExact) {
  UseDiloco(/*exact=*/true);
  expected_.assign(static_cast<size_t>(elements_), 0.0);
  Build(0);
  Build(1);
  StepBoth(0, kCrashAt);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sites_[1].repl->stats().outer_steps_applied < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(sites_[1].repl->stats().outer_steps_applied, 2);
  const uint64_t old_incarnation = sites_[0].repl->incarnation();
  Crash();
  store_ = NewStore();  // the disk is gone
  Restart(/*register_worker=*/false);
  ASSERT_NE(sites_[0].repl->incarnation(), old_incarnation);
  ASSERT_TRUE(sites_[0].repl->WaitRejoined(Deadline::InMs(30000)).ok());
  EXPECT_TRUE(sites_[0].repl->stats().recovery.rejoined);
  Result<RegisterReply> reg = sites_[0].shard->RegisterWorker(0, 0, "");
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  const Clock resume = reg->worker_clock;
  EXPECT_GT(resume, 0) << "the peer held none of the lost site's work";
  EXPECT_LE(resume, kCrashAt);
  // The lost site's worker does its clocks again from there; its peer
  // waits at kCrashAt.
  for (Clock c = resume; c < kCrashAt; ++c) Step(0, c, false);
  StepBoth(kCrashAt, kClocks);
  for (SiteId s = 0; s < kSites; ++s) {
    EXPECT_TRUE(sites_[s].repl->WaitFinal(Deadline::InMs(30000))) << "site " << s << " never got its peer's drain";
  }
  EXPECT_TRUE(sites_[0].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
  EXPECT_TRUE(sites_[1].repl->WaitDrainAcknowledged(Deadline::InMs(30000)));
  EXPECT_EQ(sites_[0].repl->OuterDigests(), sites_[1].repl->OuterDigests())
      << "the sites' synchronised models differ after some step";
  // Every clock of both sites once (the counter's sum), whichever
  // incarnation's update it was.
  const std::vector<double> once = testing::EveryClockOnce(kSites, kClocks, elements_);
  for (SiteId s = 0; s < kSites; ++s) {
    const std::vector<float> v = Replica(s);
    int64_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) wrong += double{v[i]} != once[i];
    EXPECT_EQ(wrong, 0) << "site " << s << ": " << wrong << " elements differ from every clock counted once";
  }
  EXPECT_EQ(sites_[0].repl->stats().inbox.batches_refused, 0);
  EXPECT_EQ(sites_[1].repl->stats().inbox.batches_refused, 0);
  StopAll();
}

// Streaming contributions leave no single clock to resume a worker at: a
// streaming site that lost its store says so and takes no worker, rather
// than training on a model its peers cannot take back.
TEST_F(DilocoRestartTest, AStreamingSiteThatLostItsStoreRefusesItsWorkersNamingWhy) {
  UseDiloco(/*exact=*/true);
  options_.outer_fragments = 2;
  expected_.assign(static_cast<size_t>(elements_), 0.0);
  Build(0);
  Build(1);
  StepBoth(0, kCrashAt);
  Crash();
  store_ = NewStore();
  Restart(/*register_worker=*/false);
  const Status rejoined = sites_[0].repl->WaitRejoined(Deadline::InMs(30000));
  EXPECT_EQ(rejoined.code(), StatusCode::kFailedPrecondition) << rejoined.ToString();
  EXPECT_NE(rejoined.message().find("streaming diloco"), std::string::npos) << rejoined.ToString();
  Result<RegisterReply> reg = sites_[0].shard->RegisterWorker(0, 0, "");
  EXPECT_EQ(reg.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reg.status().message().find("streaming diloco"), std::string::npos) << reg.status().ToString();
  StopAll();
}

TEST_F(DilocoRestartTest, AStoreWrittenByAnotherModeIsRefusedNamingWhy) {
  expected_.assign(static_cast<size_t>(elements_), 0.0);
  Build(0);
  Build(1);
  for (Clock c = 0; c < 6; ++c) {
    Step(0, c, false);
    Step(1, c, false);
  }
  Crash();
  UseDiloco(/*exact=*/true);
  Result<std::unique_ptr<datacenter::Shard>> shard = datacenter::Shard::Create(spec_, ShardOpts(), store_.get());
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  wan::ReplicatorConfig rc;
  rc.site = 0;
  rc.peers = {1};
  rc.options = options_;
  Result<std::unique_ptr<wan::Replicator>> r =
      wan::Replicator::Create(&spec_, rc, shard->get(), net_.Transport(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("holds WAN state of another mode"), std::string::npos)
      << r.status().ToString();
  sites_[1].repl->Stop();
  net_.Attach(1, nullptr);
  sites_[1].shard->AttachReplication(nullptr, nullptr);
}

}  // namespace
}  // namespace geops::storage
