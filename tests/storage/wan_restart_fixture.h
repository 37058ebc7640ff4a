// The fixture of the WAN restart tests: two in-process sites, one shard
// each, linked by a FakeWanNetwork with delay and little bandwidth (so
// batches queue and backlogs form). Site 0 persists to a
// FaultInjectingShardStore under sync; its "crash" freezes the store
// (nothing written after that point survives) and destroys its shard and
// replicator; the restart builds both again from the store.
#ifndef GEOPS_TESTS_STORAGE_WAN_RESTART_FIXTURE_H_
#define GEOPS_TESTS_STORAGE_WAN_RESTART_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/model_spec.h"
#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"
#include "tests/storage/fault_injecting_shard_store.h"
#include "tests/storage/memory_shard_store.h"
#include "tests/wan/fake_wan_network.h"
#include "wan/replication/remote_inbox.h"
#include "wan/replication/replicator.h"

namespace geops::storage::testing {

using wan::Replicator;
using wan::ReplicatorConfig;
using wan::WanMode;
using wan::WanOptions;
using wan::testing::FakeWanNetwork;
using wan::testing::LinkFaults;

inline constexpr int kSites = 2;
inline constexpr Clock kClocks = 40;
inline constexpr Clock kCrashAt = 20;      // site 0 crashes after finishing this many clocks
inline constexpr Clock kAloneClocks = 10;  // site 1 runs on alone for this many

// `init`: the initial values of both tables (kUniform: in [-0.5, 0.5]).
inline ModelSpec TestModel(InitKind init) {
  std::vector<TableSpec> tables(2);
  tables[0].name = "w";
  tables[0].rows = 64;
  tables[0].cols = 32;
  tables[1].name = "b";
  tables[1].rows = 1;
  tables[1].cols = 300;
  for (TableSpec& t : tables) {
    t.init = init;
    t.init_scale = init == InitKind::kZeros ? 0.0f : 0.5f;
  }
  Result<ModelSpec> spec = ModelSpec::Create(std::move(tables), 1024, 1);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::move(spec).value();
}

// Small integers, so every float sum below is exact.
inline float UpdateValue(SiteId site, Clock clock, int64_t element) {
  return static_cast<float>(1 + (clock * 7 + element + site * 3) % 4);
}

// Every value of `shard`, chunk by chunk in the order of `keys`.
inline std::vector<float> ReplicaOf(datacenter::Shard* shard, const ModelSpec& spec,
                                    const std::vector<ChunkKey>& keys) {
  std::vector<float> out;
  for (const ChunkKey& k : keys) {
    std::vector<float> v(static_cast<size_t>(spec.ChunkElements(k)));
    EXPECT_TRUE(shard->ReadChunkValue(k, v.data()).ok());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// What the counter ends at when every clock [0, clocks) of every site
// [0, sites) counts once: per element, the sum of their UpdateValues.
inline std::vector<double> EveryClockOnce(int sites, Clock clocks, int64_t elements) {
  std::vector<double> once(static_cast<size_t>(elements), 0.0);
  for (SiteId s = 0; s < sites; ++s) {
    for (Clock c = 0; c < clocks; ++c) {
      for (int64_t i = 0; i < elements; ++i) once[static_cast<size_t>(i)] += UpdateValue(s, c, i);
    }
  }
  return once;
}

struct Site {
  std::unique_ptr<datacenter::Shard> shard;
  std::unique_ptr<Replicator> repl;
};

class WanRestartTest : public ::testing::Test {
 protected:
  explicit WanRestartTest(InitKind init = InitKind::kZeros) : spec_(TestModel(init)), net_(7) {
    for (TableId t = 0; t < static_cast<TableId>(spec_.num_tables()); ++t) {
      for (const ChunkKey& k : spec_.ChunksOfTable(t)) keys_.push_back(k);
    }
    for (const ChunkKey& k : keys_) elements_ += spec_.ChunkElements(k);
    for (std::vector<double>& v : by_site_) v.assign(static_cast<size_t>(elements_), 0.0);
    LinkFaults f;
    f.min_delay_us = 2000;
    f.max_delay_us = 8000;
    f.bytes_per_second = 400e3;  // batches queue: backlogs and unacknowledged batches build up
    net_.SetAllFaults({0, 1}, f);
    options_.mode = WanMode::kAsp;
    options_.threshold.initial = 0.4;  // much mass stays accumulated between ticks
    options_.threshold.floor = 0.4;
    options_.codec = wan::ValueCodec::kFp32;
    options_.staleness_ds = 3;
    options_.peer_lease_ms = 300;
    store_ = NewStore();
  }

  std::unique_ptr<FaultInjectingShardStore> NewStore() const {
    return std::make_unique<FaultInjectingShardStore>(StoreFingerprint::Of(spec_, ShardOpts()), Durability::kSync);
  }

  ShardOptions ShardOpts() const {
    ShardOptions so;
    so.shard_id = 0;
    so.num_shards = 1;
    so.num_workers = 1;
    so.max_read_wait_ms = 20000;
    return so;
  }

  // `register_worker`: false for a site whose worker had finished before it
  // went down (a supervisor does not start a finished worker again).
  void Build(SiteId s, bool register_worker = true) {
    Result<std::unique_ptr<datacenter::Shard>> shard =
        datacenter::Shard::Create(spec_, ShardOpts(), s == 0 ? store_.get() : peer_store_.get());
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    sites_[s].shard = std::move(shard).value();
    ReplicatorConfig rc;
    rc.site = s;
    rc.peers = {1 - s};
    rc.options = options_;
    Result<std::unique_ptr<Replicator>> r = Replicator::Create(&spec_, rc, sites_[s].shard.get(), net_.Transport(s));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    sites_[s].repl = std::move(r).value();
    net_.Attach(s, sites_[s].repl->receiver());
    sites_[s].shard->AttachReplication(sites_[s].repl.get(), sites_[s].repl->gate());
    if (register_worker) {
      ASSERT_TRUE(sites_[s].shard->RegisterWorker(0, 0, "").ok());
    }
    sites_[s].repl->Start();
  }

  // Site 0 dies: whatever its store has not made durable is gone.
  void Crash() {
    net_.SetDown(0, true);
    net_.Attach(0, nullptr);
    net_.Transport(0)->SetDeliveryCallback(nullptr);
    store_->Freeze();
    sites_[0].shard->AttachReplication(nullptr, nullptr);
    sites_[0].repl.reset();
    sites_[0].shard.reset();
    store_->Thaw();
  }

  void Restart(bool register_worker = true) {
    Build(0, register_worker);
    net_.SetDown(0, false);
  }

  // One clock of worker 0 at site s: one update of every chunk, then the
  // clock advance. Adds what was acknowledged to expected_.
  void Step(SiteId s, Clock c, bool last) {
    std::vector<float> values(static_cast<size_t>(elements_));
    for (int64_t i = 0; i < elements_; ++i) values[static_cast<size_t>(i)] = UpdateValue(s, c, i);
    Result<UpdateReply> u = sites_[s].shard->Update(0, c, keys_, values);
    ASSERT_TRUE(u.ok()) << "site " << s << " clock " << c << ": " << u.status().ToString();
    if (u->applied) {
      for (int64_t i = 0; i < elements_; ++i) {
        expected_[static_cast<size_t>(i)] += values[static_cast<size_t>(i)];
        by_site_[s][static_cast<size_t>(i)] += values[static_cast<size_t>(i)];
      }
    }
    Result<Clock> a = sites_[s].shard->AdvanceClock(0, c + 1, last);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
  }

  std::vector<float> Replica(SiteId s) { return ReplicaOf(sites_[s].shard.get(), spec_, keys_); }

  // The incarnation of `peer` that site `s`'s inbox has heard of (0: none).
  uint64_t Heard(SiteId s, SiteId peer) const {
    const auto* inbox = dynamic_cast<const wan::RemoteInbox*>(sites_[s].repl->receiver());
    return inbox == nullptr ? 0 : inbox->Incarnation(peer);
  }

  ModelSpec spec_;
  std::vector<ChunkKey> keys_;
  int64_t elements_ = 0;
  FakeWanNetwork net_;
  WanOptions options_;
  std::unique_ptr<FaultInjectingShardStore> store_;
  std::unique_ptr<FaultInjectingShardStore> peer_store_;  // site 1's; null: in memory
  Site sites_[kSites];
  std::vector<double> expected_;
  std::vector<double> by_site_[kSites];  // what each site's current incarnation acknowledged
};

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_WAN_RESTART_FIXTURE_H_
