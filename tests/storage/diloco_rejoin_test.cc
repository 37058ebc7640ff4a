// diloco, three sites, one of which loses its store while its peers hold
// different prefixes of its contributions: site 2 never got site 0's (its
// link holds them back), site 1 got them all and applied the steps they
// completed. The new site 0 merges both peers' states (site 1's steps,
// its own contributions from site 1) and resumes its worker after the
// last of them; site 2 takes site 0's merged state in, the steps it could
// not complete among it. In the end every clock of every site counts once
// at every site, and every step is bit-identical at all three.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/storage/wan_restart_fixture.h"

namespace geops::storage {
namespace {

using testing::TestModel;
using testing::UpdateValue;
using wan::testing::FakeWanNetwork;
using wan::testing::LinkFaults;

constexpr int kThree = 3;
constexpr Clock kEnd = 24;
constexpr Clock kLossAt = 12;

class DilocoRejoinTest : public ::testing::Test {
 protected:
  DilocoRejoinTest() : spec_(TestModel(InitKind::kZeros)), net_(11) {
    for (TableId t = 0; t < static_cast<TableId>(spec_.num_tables()); ++t) {
      for (const ChunkKey& k : spec_.ChunksOfTable(t)) keys_.push_back(k);
    }
    for (const ChunkKey& k : keys_) elements_ += spec_.ChunkElements(k);
    LinkFaults f;
    f.max_delay_us = 2000;
    net_.SetAllFaults({0, 1, 2}, f);
    options_.mode = wan::WanMode::kDiloco;
    options_.averaging_period = 4;
    options_.outer_lr = kThree;  // the sum of the contributions: the counter
    options_.outer_momentum = 0;
    options_.outer_average_last = false;
    options_.codec = wan::ValueCodec::kFp32;
    options_.peer_lease_ms = 300;
  }

  ~DilocoRejoinTest() override {
    for (SiteId s = 0; s < kThree; ++s) Destroy(s);
  }

  // Site s with a new, empty replica (no store: a restart is a disk loss),
  // its worker registered once the replicator has asked its peers.
  void Build(SiteId s) {
    ShardOptions so;
    so.num_workers = 1;
    so.max_read_wait_ms = 20000;
    Result<std::unique_ptr<datacenter::Shard>> shard = datacenter::Shard::Create(spec_, so);
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    shards_[s] = std::move(shard).value();
    wan::ReplicatorConfig rc;
    rc.site = s;
    for (SiteId p = 0; p < kThree; ++p) {
      if (p != s) rc.peers.push_back(p);
    }
    rc.options = options_;
    Result<std::unique_ptr<wan::Replicator>> r = wan::Replicator::Create(&spec_, rc, shards_[s].get(),
                                                                         net_.Transport(s));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    repls_[s] = std::move(r).value();
    net_.Attach(s, repls_[s]->receiver());
    shards_[s]->AttachReplication(repls_[s].get(), repls_[s]->gate());
    repls_[s]->Start();
  }

  Clock Register(SiteId s) {
    Status joined = repls_[s]->WaitRejoined(Deadline::InMs(30000));
    EXPECT_TRUE(joined.ok()) << joined.ToString();
    Result<RegisterReply> reg = shards_[s]->RegisterWorker(0, 0, "");
    EXPECT_TRUE(reg.ok()) << reg.status().ToString();
    return reg.ok() ? reg->worker_clock : -1;
  }

  void Destroy(SiteId s) {
    if (repls_[s] == nullptr) return;
    net_.Attach(s, nullptr);
    net_.Transport(s)->SetDeliveryCallback(nullptr);
    shards_[s]->AttachReplication(nullptr, nullptr);
    repls_[s].reset();
    shards_[s].reset();
  }

  void Step(SiteId s, Clock c) {
    std::vector<float> values(static_cast<size_t>(elements_));
    for (int64_t i = 0; i < elements_; ++i) values[static_cast<size_t>(i)] = UpdateValue(s, c, i);
    Result<UpdateReply> u = shards_[s]->Update(0, c, keys_, values);
    ASSERT_TRUE(u.ok()) << "site " << s << " clock " << c << ": " << u.status().ToString();
    Result<Clock> a = shards_[s]->AdvanceClock(0, c + 1, c + 1 == kEnd);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
  }

  // Clocks [from, to) at `sites`, each multiple of H seen by every tick
  // thread on its own (one contribution per H clocks).
  void StepSites(const std::vector<SiteId>& sites, Clock from, Clock to) {
    for (Clock c = from; c < to; ++c) {
      for (SiteId s : sites) Step(s, c);
      if ((c + 1) % options_.averaging_period != 0) continue;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (SiteId s : sites) {
        while (repls_[s]->stats().ticked_clock < c + 1 && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    }
  }

  std::vector<float> Replica(SiteId s) { return testing::ReplicaOf(shards_[s].get(), spec_, keys_); }

  // Once every site drained: every step bit-identical at the three sites,
  // every clock of every site counted once in every replica, no batch
  // refused. Stops the replicators.
  void ExpectEveryClockOnceAndTheSameSteps() {
    for (SiteId s = 0; s < kThree; ++s) {
      EXPECT_TRUE(repls_[s]->WaitFinal(Deadline::InMs(30000))) << "site " << s;
      EXPECT_TRUE(repls_[s]->WaitDrainAcknowledged(Deadline::InMs(30000))) << "site " << s;
    }
    const std::vector<uint64_t> digests = repls_[2]->OuterDigests();
    EXPECT_GE(digests.size(), static_cast<size_t>(kEnd / options_.averaging_period));
    const std::vector<double> once = testing::EveryClockOnce(kThree, kEnd, elements_);
    for (SiteId s = 0; s < kThree; ++s) {
      EXPECT_EQ(repls_[s]->OuterDigests(), digests) << "site " << s << "'s synchronised models differ";
      const std::vector<float> v = Replica(s);
      int64_t wrong = 0;
      for (size_t i = 0; i < v.size(); ++i) wrong += double{v[i]} != once[i];
      EXPECT_EQ(wrong, 0) << "site " << s << ": " << wrong << " elements differ from every clock counted once";
      EXPECT_EQ(repls_[s]->stats().inbox.batches_refused, 0) << "site " << s;
    }
    for (SiteId s = 0; s < kThree; ++s) repls_[s]->Stop();
  }

  ModelSpec spec_;
  std::vector<ChunkKey> keys_;
  int64_t elements_ = 0;
  FakeWanNetwork net_;
  wan::WanOptions options_;
  std::unique_ptr<datacenter::Shard> shards_[kThree];
  std::unique_ptr<wan::Replicator> repls_[kThree];
};

TEST_F(DilocoRejoinTest, APeerThatLaggedTakesTheStepsItMissedAndEveryClockCountsOnce) {
  LinkFaults held;
  held.max_delay_us = 2000;
  held.hold_batches = true;
  net_.SetFaults(0, 2, held);  // site 2 never gets site 0's contributions
  for (SiteId s = 0; s < kThree; ++s) Build(s);
  for (SiteId s = 0; s < kThree; ++s) ASSERT_EQ(Register(s), 0) << "a first start resumes nothing";
  StepSites({0, 1, 2}, 0, kLossAt);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (repls_[1]->stats().outer_steps_applied < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(repls_[1]->stats().outer_steps_applied, 3) << "site 1 holds every contribution of steps 1-3";
  EXPECT_EQ(repls_[2]->stats().outer_steps_applied, 0) << "site 2 lacks site 0's";

  // Site 0 loses its store; what its link held for site 2 dies with it.
  Destroy(0);
  net_.DropHeld(0, 2);
  LinkFaults open;
  open.max_delay_us = 2000;
  net_.SetFaults(0, 2, open);
  Build(0);
  const Clock resume = Register(0);
  EXPECT_TRUE(repls_[0]->stats().recovery.rejoined);
  EXPECT_GT(resume, 0);
  EXPECT_LE(resume, kLossAt);
  StepSites({0}, resume, kLossAt);
  StepSites({0, 1, 2}, kLossAt, kEnd);
  ExpectEveryClockOnceAndTheSameSteps();
}

// Two of the three sites lose their stores at once: each rejoins from the
// one left (the other is rejoining too, and holds nothing of it), and the
// survivor takes both merged states in.
TEST_F(DilocoRejoinTest, TwoSitesThatLostTheirStoresAtOnceBothRejoin) {
  for (SiteId s = 0; s < kThree; ++s) Build(s);
  for (SiteId s = 0; s < kThree; ++s) ASSERT_EQ(Register(s), 0);
  StepSites({0, 1, 2}, 0, kLossAt);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (repls_[2]->stats().outer_steps_applied < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(repls_[2]->stats().outer_steps_applied, 3);
  Destroy(0);
  Destroy(1);
  Build(0);
  Build(1);
  const Clock resume0 = Register(0);
  const Clock resume1 = Register(1);
  EXPECT_TRUE(repls_[0]->stats().recovery.rejoined);
  EXPECT_TRUE(repls_[1]->stats().recovery.rejoined);
  for (Clock resume : {resume0, resume1}) {
    EXPECT_GT(resume, 0);
    EXPECT_LE(resume, kLossAt);
  }
  StepSites({0}, resume0, kLossAt);
  StepSites({1}, resume1, kLossAt);
  StepSites({0, 1, 2}, kLossAt, kEnd);
  ExpectEveryClockOnceAndTheSameSteps();
}

}  // namespace
}  // namespace geops::storage
