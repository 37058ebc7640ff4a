// The Replicator end to end in one process: real shards per "site", shard i
// of every site linked by a fault-injecting in-memory network, real workers.
#include "wan/replication/replicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "common/time_source.h"
#include "tests/wan/wan_sites.h"

namespace geops::wan {
namespace {

using testing::CounterModel;
using testing::LinkFaults;
using testing::WanSites;

LinkFaults Faulty() {
  LinkFaults f;
  f.min_delay_us = 0;
  f.max_delay_us = 3000;  // random delays reorder batches and clock reports
  f.duplicate = 0.2;
  return f;
}

WanOptions Mode(WanMode mode) {
  WanOptions o;
  o.mode = mode;
  o.staleness_ds = 1;
  o.averaging_period = 4;
  o.codec = ValueCodec::kFp16;
  if (mode == WanMode::kDiloco) {
    // Three sites: an outer lr of 3 without momentum adds up the sites'
    // contributions, so every update counts exactly once (the counter).
    o.outer_lr = 3;
    o.outer_momentum = 0;
    o.outer_average_last = false;
  }
  return o;
}

// asp with no drift bound and a constant threshold t.
WanOptions AspAt(double t, ValueCodec codec) {
  WanOptions o = Mode(WanMode::kAsp);
  o.staleness_ds = -1;
  o.threshold.initial = t;
  o.threshold.floor = t;
  o.codec = codec;
  return o;
}

// Waits (at most 0.4 s) until site 0's replicator has ticked clock c.
void WaitTicked(WanSites& sites, Clock c) {
  for (int i = 0; i < 2000 && sites.replicator(0, 0)->stats().ticked_clock < c; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class CounterAcrossSitesTest : public ::testing::TestWithParam<WanMode> {};

TEST_P(CounterAcrossSitesTest, EverySiteEndsExactAfterTheDrain) {
  WanSites sites(CounterModel(), {2, 1, 2}, /*shards=*/2, Mode(GetParam()), Faulty(), 11);
  std::vector<std::optional<double>> err = sites.RunCounter(/*clocks=*/25, /*staleness=*/1);
  for (int s = 0; s < sites.sites(); ++s) {
    ASSERT_TRUE(err[s].has_value()) << "site " << s;
    EXPECT_EQ(*err[s], 0.0) << "site " << s;
  }
  for (int s = 0; s < sites.sites(); ++s) {
    for (int i = 0; i < 2; ++i) {
      ReplicatorStats st = sites.replicator(s, i)->stats();
      EXPECT_TRUE(st.drained);
      EXPECT_EQ(st.inbox.batches_refused, 0);
      if (GetParam() == WanMode::kBsp) {
        // DS = 0 holds reads; cached reads (staleness 1) let the shard clock
        // run at most staleness + 1 further.
        EXPECT_LE(st.gate.max_drift_clocks, 2);
      }
    }
  }
  EXPECT_EQ(sites.net(0)->errors(), 0);
  EXPECT_EQ(sites.net(1)->errors(), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, CounterAcrossSitesTest,
                         ::testing::Values(WanMode::kBsp, WanMode::kAllAsync, WanMode::kAsp, WanMode::kDiloco),
                         [](const auto& info) {
                           std::string n(WanModeName(info.param));
                           n.erase(std::remove(n.begin(), n.end(), '-'), n.end());
                           return n;
                         });

// A tick larger than one slice leaves as several batches, and the counter
// still ends exact at every site (the slices of one tick never select a
// chunk twice, and the drain takes everything).
class SlicedTicksTest : public ::testing::TestWithParam<WanMode> {};

TEST_P(SlicedTicksTest, ATickLargerThanOneSliceShipsInSeveralBatches) {
  WanOptions o = Mode(GetParam());
  o.slice_elements = 1024;
  // A window that takes a whole tick (a full one leaves the rest in the
  // accumulator for the next tick: SlowLinkBacklogStaysBoundedAndEndsExact).
  o.max_inflight_batches = 64;
  // 6,400 values in chunks of 256: every tick is more than six slices.
  const ModelSpec spec = *ModelSpec::Create({{"w", 64, 100}, {"b", 1, 100}}, 1024);
  WanSites sites(spec, {1, 1}, /*shards=*/1, o, Faulty(), 5);
  ASSERT_GT(sites.spec().total_elements(), 3 * o.slice_elements);
  std::vector<std::optional<double>> err = sites.RunCounter(/*clocks=*/8, /*staleness=*/1);
  for (int s = 0; s < sites.sites(); ++s) {
    ASSERT_TRUE(err[s].has_value()) << "site " << s;
    EXPECT_EQ(*err[s], 0.0) << "site " << s;
    const ReplicatorStats st = sites.replicator(s, 0)->stats();
    EXPECT_TRUE(st.drained);
    // Ticks that find nothing new (after the drain, or after a tick that
    // took two clocks' updates) encode nothing, so count per value: no batch
    // carries more than a slice plus the chunk that crosses its end.
    ASSERT_GT(st.elements_selected, 3 * o.slice_elements) << "site " << s;
    EXPECT_LE(st.elements_selected, st.batches_encoded * (o.slice_elements + 256)) << "site " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SlicedTicksTest, ::testing::Values(WanMode::kBsp, WanMode::kAsp),
                         [](const auto& info) { return std::string(WanModeName(info.param)); });

// Every chunk value of every shard of site `s`, in order.
std::vector<float> ReplicaOf(WanSites& sites, SiteId s, int shards) {
  std::vector<float> out;
  for (int i = 0; i < shards; ++i) {
    for (const ChunkKey key : sites.spec().ChunksOfShard(i, shards)) {
      std::vector<float> v(static_cast<size_t>(sites.spec().ChunkElements(key)));
      EXPECT_TRUE(sites.shard(s, i)->ReadChunkValue(key, v.data()).ok());
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  return out;
}

// Three sites of two shards after an avg or diloco run: every site applied
// the same outer steps (at least `min_steps` per shard) with the same
// digests, refused no batch, and holds the same replica.
void ExpectIdenticalOuterSteps(WanSites& sites, size_t min_steps) {
  for (int i = 0; i < 2; ++i) {
    const std::vector<uint64_t> first = sites.replicator(0, i)->OuterDigests();
    EXPECT_GE(first.size(), min_steps) << "shard " << i;
    for (int s = 1; s < 3; ++s) {
      EXPECT_EQ(sites.replicator(s, i)->OuterDigests(), first) << "site " << s << " shard " << i;
      EXPECT_EQ(sites.replicator(s, i)->stats().inbox.batches_refused, 0);
    }
  }
  const std::vector<float> replica = ReplicaOf(sites, 0, 2);
  EXPECT_EQ(ReplicaOf(sites, 1, 2), replica);
  EXPECT_EQ(ReplicaOf(sites, 2, 2), replica);
}

// avg and DiLoCo proper (outer lr 0.7, Nesterov momentum 0.9, int8 with
// error feedback): after every outer step the synchronised model is
// bit-identical at every site (the digests of each step agree), and once
// every site drained, so is every replica.
class OuterStepAcrossSitesTest : public ::testing::TestWithParam<WanMode> {};

TEST_P(OuterStepAcrossSitesTest, EveryOuterStepLeavesBitIdenticalModels) {
  WanOptions o = Mode(GetParam());
  o.outer_lr = 0.7;
  o.outer_momentum = 0.9;
  o.codec = ValueCodec::kInt8;
  WanSites sites(CounterModel(), {2, 1, 2}, /*shards=*/2, o, Faulty(), 17);
  std::vector<std::optional<double>> err = sites.RunCounter(/*clocks=*/22, /*staleness=*/1);
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(err[s].has_value()) << "site " << s;
  ExpectIdenticalOuterSteps(sites, /*min_steps=*/22 / 4);
  // Not the sum of the updates (that is the counter's target): an average
  // moved by the outer optimiser.
  EXPECT_GT(*err[0], 1.0);
}

INSTANTIATE_TEST_SUITE_P(Modes, OuterStepAcrossSitesTest, ::testing::Values(WanMode::kAvg, WanMode::kDiloco),
                         [](const auto& info) { return std::string(WanModeName(info.param)); });

// Streaming DiLoCo (outer_fragments 2, H 4: a fragment's step every 2
// clocks): with lr = N and no momentum the counter ends exact at every
// site, and with DiLoCo's optimiser every step leaves bit-identical
// models. Twice the steps of the same run without fragments.
class StreamingDilocoTest : public ::testing::TestWithParam<bool> {};

TEST_P(StreamingDilocoTest, FragmentsTakeTurnsAndEveryStepIsBitIdentical) {
  const bool counter = GetParam();
  WanOptions o = Mode(WanMode::kDiloco);
  o.outer_fragments = 2;
  if (!counter) {
    o.outer_lr = 0.7;
    o.outer_momentum = 0.9;
    o.codec = ValueCodec::kInt8;
  }
  WanSites sites(CounterModel(), {2, 1, 2}, /*shards=*/2, o, Faulty(), 23);
  for (int i = 0; i < 2; ++i) ASSERT_GE(sites.spec().ChunksOfShard(i, 2).size(), 2u) << "one fragment would be empty";
  std::vector<std::optional<double>> err = sites.RunCounter(/*clocks=*/22, /*staleness=*/1);
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(err[s].has_value()) << "site " << s;
    if (counter) {
      EXPECT_EQ(*err[s], 0.0) << "site " << s;
    }
  }
  // A step every H / 2 clocks, each a fragment: 11 when the tick loop sees
  // every clock. A tick that finds two clocks at once (a busy machine) cuts
  // one contribution for both, so count what the gate guarantees: a read at
  // clock c waits for step c / (H / 2) - 2 (two fragments in flight), so
  // the last read (clock 21) needs 8, and the drain adds the final one. Still
  // more than the 6 steps of a whole-shard step every H clocks.
  ExpectIdenticalOuterSteps(sites, /*min_steps=*/21 / 2 - 2 + 1);
  // Every counter element changes every clock, so a contribution of the
  // whole shard would carry all of it; a fragment's carries about half
  // (only the final one carries everything).
  for (int i = 0; i < 2; ++i) {
    int64_t shard_elements = 0;
    for (const ChunkKey key : sites.spec().ChunksOfShard(i, 2)) shard_elements += sites.spec().ChunkElements(key);
    const ReplicatorStats st = sites.replicator(0, i)->stats();
    ASSERT_GT(st.batches_encoded, 0);
    EXPECT_LT(static_cast<double>(st.elements_selected) / static_cast<double>(st.batches_encoded),
              0.75 * static_cast<double>(shard_elements))
        << "shard " << i << ": contributions are not one fragment each";
  }
}

INSTANTIATE_TEST_SUITE_P(Optimisers, StreamingDilocoTest, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "Counter" : "Nesterov"); });

// The synchronous step (outer_overlap = false): the counter is exact with
// lr = N and no momentum, and DiLoCo's optimiser leaves bit-identical
// models after every step, as with the overlap.
class SynchronousDilocoTest : public ::testing::TestWithParam<bool> {};

TEST_P(SynchronousDilocoTest, EveryStepIsBitIdenticalAndTheCounterExact) {
  const bool counter = GetParam();
  WanOptions o = Mode(WanMode::kDiloco);
  o.outer_overlap = false;
  if (!counter) {
    o.outer_lr = 0.7;
    o.outer_momentum = 0.9;
    o.codec = ValueCodec::kInt8;
  }
  WanSites sites(CounterModel(), {2, 1, 2}, /*shards=*/2, o, Faulty(), 29);
  std::vector<std::optional<double>> err = sites.RunCounter(/*clocks=*/22, /*staleness=*/1);
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(err[s].has_value()) << "site " << s;
    if (counter) {
      EXPECT_EQ(*err[s], 0.0) << "site " << s;
    }
  }
  ExpectIdenticalOuterSteps(sites, /*min_steps=*/22 / 4);
}

INSTANTIATE_TEST_SUITE_P(Optimisers, SynchronousDilocoTest, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "Counter" : "Nesterov"); });

// The replicator hands the overlap setting to its gate: before any outer
// step, a read at clock H passes with one step in flight and waits for
// step 1 without.
TEST(ReplicatorTest, TheSynchronousStepHoldsTheFirstReadOfTheNextRound) {
  for (const bool overlap : {true, false}) {
    WanOptions o = Mode(WanMode::kDiloco);
    o.outer_overlap = overlap;
    WanSites sites(CounterModel(), {1, 1}, 1, o, Faulty(), 31);
    const std::vector<ChunkKey> keys = sites.spec().ChunksOfShard(0, 1);
    double waited = 0;
    const Status read = sites.replicator(0, 0)->gate()->WaitReadable(keys, o.averaging_period, false,
                                                                     Deadline::InMs(0), &waited);
    if (overlap) {
      EXPECT_TRUE(read.ok()) << read.ToString();
    } else {
      EXPECT_EQ(read.code(), StatusCode::kDeadlineExceeded) << read.ToString();
    }
  }
}

TEST(ReplicatorTest, SlowLinkBacklogStaysBoundedAndEndsExact) {
  WanOptions o = Mode(WanMode::kAsp);
  o.codec = ValueCodec::kInt8;
  o.max_inflight_batches = 1;
  o.min_batch_bytes = 1024;
  o.max_batch_seconds = 0.01;
  LinkFaults slow;
  slow.bytes_per_second = 200e3;
  slow.max_delay_us = 2000;
  WanSites sites(CounterModel(), {2, 2}, 1, o, slow, 5);
  std::vector<std::optional<double>> err = sites.RunCounter(40, 2);
  const int64_t chunks = sites.spec().total_chunks();
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(err[s].has_value());
    EXPECT_LT(*err[s], 1e-3) << "site " << s;  // int8 residuals re-add in float
    ReplicatorStats st = sites.replicator(s, 0)->stats();
    ASSERT_EQ(st.peers.size(), 1u);
    // A full link leaves the tick's mass in the accumulator (it coalesces
    // there without a second copy); what was selected and did not fit goes
    // to the backlog, which never holds more than a row per chunk.
    EXPECT_GT(st.select_holds, 0) << "the link never fell behind";
    EXPECT_LE(st.peers[0].out.max_backlog_chunks, chunks);
  }
}

// Site 0 pushes integer-valued updates; before any drain, what site 1 holds
// plus what site 0 still has pending for it is exactly what was pushed.
class MassTest : public ::testing::TestWithParam<bool> {};

TEST_P(MassTest, ShippedPlusPendingEqualsPushed) {
  const bool slow = GetParam();
  WanOptions o = AspAt(0.3, ValueCodec::kFp16);
  o.threshold.floor = 0.2;
  o.max_inflight_batches = 1;
  o.min_batch_bytes = 1024;
  o.max_batch_seconds = 0.002;
  LinkFaults f = Faulty();
  if (slow) f.bytes_per_second = 100e3;
  WanSites sites(CounterModel(), {1, 1}, 1, o, f, 3);
  datacenter::Shard* a = sites.shard(0, 0);
  ASSERT_TRUE(a->RegisterWorker(0, 0, "").ok());
  const ModelSpec& spec = sites.spec();
  std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  std::map<uint64_t, std::vector<double>> pushed;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> val(-3, 3);
  for (Clock c = 0; c < 30; ++c) {
    std::vector<float> values;
    for (ChunkKey k : keys) {
      auto& p = pushed[k.Packed()];
      p.resize(spec.ChunkElements(k));
      for (int64_t i = 0; i < spec.ChunkElements(k); ++i) {
        const float v = c == 0 ? 100.0f : static_cast<float>(val(rng));
        values.push_back(v);
        p[i] += v;
      }
    }
    ASSERT_TRUE(a->Update(0, c, keys, values).ok());
    ASSERT_TRUE(a->AdvanceClock(0, c + 1, false).ok());
    // One selection per clock, as in a real run (not one over everything).
    WaitTicked(sites, c + 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(sites.net(0)->WaitIdle(20000));
  sites.replicator(0, 0)->Stop();
  sites.replicator(1, 0)->Stop();
  ASSERT_TRUE(sites.net(0)->WaitIdle(20000));
  std::vector<std::pair<ChunkKey, std::vector<float>>> at_b;
  sites.shard(1, 0)->Snapshot(&at_b);
  int64_t nonzero_pending = 0;
  for (const auto& [key, values] : at_b) {
    std::vector<double> pending;
    sites.replicator(0, 0)->PendingFor(1, key, &pending);
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(double{values[i]} + pending[i], pushed[key.Packed()][i]) << "chunk " << key.chunk << " element " << i;
      nonzero_pending += pending[i] != 0;
    }
  }
  EXPECT_GT(nonzero_pending, 0) << "the threshold should have kept something back";
  EXPECT_EQ(sites.net(0)->errors(), 0);
}

INSTANTIATE_TEST_SUITE_P(Links, MassTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "SlowLink" : "FastLink"; });

// value_floor: a model at 0 gets 0.25 everywhere. Against the value it makes
// (0.25) that change is significant (threshold 0.5) and ships at once; with
// a floor of 1 on |w| it is not, and stays in the accumulator.
class ValueFloorTest : public ::testing::TestWithParam<float> {};

TEST_P(ValueFloorTest, ASmallValuesChangeShipsOnlyWhenTheFloorIsBelowIt) {
  const float floor = GetParam();
  WanOptions o = AspAt(0.5, ValueCodec::kFp32);
  o.value_floor = floor;
  WanSites sites(CounterModel(), {1, 1}, 1, o, Faulty(), 3);
  datacenter::Shard* a = sites.shard(0, 0);
  ASSERT_TRUE(a->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = sites.spec().ChunksOfShard(0, 1);
  int64_t n = 0;
  for (ChunkKey k : keys) n += sites.spec().ChunkElements(k);
  ASSERT_TRUE(a->Update(0, 0, keys, std::vector<float>(static_cast<size_t>(n), 0.25f)).ok());
  ASSERT_TRUE(a->AdvanceClock(0, 1, false).ok());
  WaitTicked(sites, 1);
  ASSERT_GE(sites.replicator(0, 0)->stats().ticked_clock, 1);
  // Site 0 holds 0.25 now: shipped when 0.25 / max(0.25, floor) > 0.5.
  const float want = floor < 0.5f ? 0.25f : 0.0f;
  if (want > 0) {
    // The tick is counted once selected, before its batch is on the wire:
    // wait (at most 10 s) until site 1 applied it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sites.replicator(1, 0)->stats().inbox.batches_applied < 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ASSERT_TRUE(sites.net(0)->WaitIdle(20000));
  std::vector<std::pair<ChunkKey, std::vector<float>>> at_b;
  sites.shard(1, 0)->Snapshot(&at_b);
  // The accumulator decides (and a backlog, if the link was not up yet, decides the same).
  EXPECT_EQ(sites.replicator(0, 0)->stats().elements_selected, want > 0 ? n : 0);
  for (const auto& [key, values] : at_b) {
    std::vector<double> pending;
    sites.replicator(0, 0)->PendingFor(1, key, &pending);
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(values[i], want) << "chunk " << key.chunk << " element " << i;
      ASSERT_EQ(pending[i], 0.25 - want) << "chunk " << key.chunk << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Floors, ValueFloorTest, ::testing::Values(1e-6f, 1.0f),
                         [](const auto& info) { return info.param < 0.5f ? "Default" : "One"; });

// Each site's worker reads, pushes and advances as fast as it can, the
// last site slowly. Whenever a read is served at shard clock k, every other
// site's clock is already >= k - DS; without the bound (all-async) the fast
// site runs away.
int64_t MaxDrift(WanMode mode, int64_t ds, bool* violated) {
  WanOptions o = Mode(mode);
  o.staleness_ds = ds;
  LinkFaults f;
  f.max_delay_us = 1500;
  WanSites sites(CounterModel(), {1, 1, 1}, 1, o, f, 17);
  const ModelSpec& spec = sites.spec();
  std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  int64_t elements = 0;
  for (ChunkKey k : keys) elements += spec.ChunkElements(k);
  std::atomic<int64_t> max_drift{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (SiteId s = 0; s < 3; ++s) {
    threads.emplace_back([&, s] {
      datacenter::Shard* shard = sites.shard(s, 0);
      ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
      std::mt19937 rng(s + 1);
      std::vector<float> buf(elements), ones(elements, 1.0f);
      for (Clock c = 0; c < 40; ++c) {
        auto r = shard->Read(0, c, 0, keys, buf.data(), Deadline::InMs(30000));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        for (SiteId o2 = 0; o2 < 3; ++o2) {
          if (o2 == s) continue;
          const Clock other = sites.shard(o2, 0)->GetStatus().shard_clock;
          int64_t d = r->shard_clock - other;
          int64_t prev = max_drift.load();
          while (d > prev && !max_drift.compare_exchange_weak(prev, d)) {
          }
          if (ds >= 0 && other < r->shard_clock - ds) bad = true;
        }
        if (s == 2) std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(1000, 4000)(rng)));
        ASSERT_TRUE(shard->Update(0, c, keys, ones).ok());
        ASSERT_TRUE(shard->AdvanceClock(0, c + 1, c + 1 == 40).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  *violated = bad.load();
  return max_drift.load();
}

TEST(ReplicatorTest, DriftNeverExceedsDs) {
  for (int64_t ds : {0, 2}) {
    bool violated = true;
    const int64_t drift = MaxDrift(WanMode::kAsp, ds, &violated);
    EXPECT_FALSE(violated) << "DS " << ds;
    EXPECT_LE(drift, ds) << "DS " << ds;
  }
}

TEST(ReplicatorTest, WithoutTheBoundTheFastSiteRunsAhead) {
  bool violated = false;
  EXPECT_GT(MaxDrift(WanMode::kAllAsync, -1, &violated), 3);
}

// Records the clock reports a site receives.
class ReportRecorder : public WanReceiver {
 public:
  Status OnBatch(const WanBatch&) override { return Status::Ok(); }
  Status OnClock(const WanClockReport& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    clocks_.push_back(r.clock);
    drained_.push_back(r.drained);
    return Status::Ok();
  }
  Status OnNotice(const WanNotice&) override { return Status::Ok(); }
  Status OnHeartbeat(SiteId, uint64_t) override { return Status::Ok(); }
  std::vector<Clock> clocks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return clocks_;
  }
  bool last_drained() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !drained_.empty() && drained_.back();
  }

 private:
  mutable std::mutex mu_;
  std::vector<Clock> clocks_;
  std::vector<bool> drained_;
};

// Waits up to 5 s for `recorder` to hold more than `n` reports; returns them.
std::vector<Clock> AwaitMore(const ReportRecorder& recorder, size_t n) {
  for (int i = 0; i < 500 && recorder.clocks().size() <= n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return recorder.clocks();
}

// Site 0's replicator over one shard, its only peer a ReportRecorder.
class ReportsTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(nullptr); }
  void Build(const TimeSource* time) {
    ShardOptions so;
    so.num_workers = 1;
    auto shard = datacenter::Shard::Create(spec_, so);
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    shard_ = std::move(shard).value();
    ReplicatorConfig rc;
    rc.site = 0;
    rc.peers = {1};
    rc.options = Mode(WanMode::kAsp);
    rc.time = time;
    auto repl = Replicator::Create(&spec_, rc, shard_.get(), net_.Transport(0));
    ASSERT_TRUE(repl.ok()) << repl.status().ToString();
    repl_ = std::move(repl).value();
    net_.Attach(0, repl_->receiver());
    net_.Attach(1, &peer_);
    repl_->Start();
  }
  void TearDown() override {
    if (repl_ != nullptr) repl_->Stop();
    net_.Attach(0, nullptr);
    net_.Attach(1, nullptr);
  }

  const ModelSpec spec_ = CounterModel();
  std::unique_ptr<datacenter::Shard> shard_;
  testing::FakeWanNetwork net_;
  ReportRecorder peer_;
  std::unique_ptr<Replicator> repl_;
};

TEST_F(ReportsTest, APeerProcessHeardForTheFirstTimeGetsTheLastReportAgain) {

  repl_->OnShardClock(3, false);
  std::vector<Clock> seen;
  for (int i = 0; i < 500 && (seen.empty() || seen.back() != 3); ++i) seen = AwaitMore(peer_, seen.size());
  ASSERT_EQ(seen.back(), 3);
  // The peer's process starts (its first heartbeat names it): the report again.
  repl_->receiver()->OnPeerBoot(1, 77);
  seen = AwaitMore(peer_, seen.size());
  ASSERT_EQ(seen.back(), 3);
  const size_t before = seen.size();
  // The same process again: nothing new.
  repl_->receiver()->OnPeerBoot(1, 77);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(peer_.clocks().size(), before);
  // A restart (another boot id): the report again.
  repl_->receiver()->OnPeerBoot(1, 78);
  seen = AwaitMore(peer_, before);
  ASSERT_EQ(seen.size(), before + 1);
  EXPECT_EQ(seen.back(), 3);
}

TEST_F(ReportsTest, OnceDrainedEveryLaterReportSaysSoAlsoWhenSentAgain) {
  // Every local worker finished at shard clock 4: the drain.
  repl_->OnShardClock(4, true);
  std::vector<Clock> seen;
  for (int i = 0; i < 500 && (seen.empty() || seen.back() != 4 || !peer_.last_drained()); ++i) {
    seen = AwaitMore(peer_, seen.size());
  }
  ASSERT_TRUE(peer_.last_drained());
  // A later tick (the shard clock can still move: the slowest worker's last
  // advance) must not take the drained mark back, nor must a report sent
  // again to a restarted peer_.
  repl_->OnShardClock(5, true);
  for (int i = 0; i < 500 && seen.back() != 5; ++i) seen = AwaitMore(peer_, seen.size());
  ASSERT_EQ(seen.back(), 5);
  EXPECT_TRUE(peer_.last_drained());
  repl_->receiver()->OnPeerBoot(1, 99);
  seen = AwaitMore(peer_, seen.size());
  EXPECT_EQ(seen.back(), 5);
  EXPECT_TRUE(peer_.last_drained());
}

// The same replicator on a ManualTime: its idle rounds come only when the
// test moves time.
class ReportsOnManualTimeTest : public ReportsTest {
 protected:
  void SetUp() override { Build(&time_); }
  ManualTime time_;
};

// Waits (bounded in real time) until the replicator has made `n` ticks and
// gone back to waiting on `time` (so its next idle round is counted from
// the time now).
bool AwaitTicks(const Replicator& repl, int64_t n, const ManualTime& time) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (repl.stats().ticks < n || time.waiters() == 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return repl.stats().ticks == n;
}

// A drain that cannot complete (the peer was never heard from, so its
// backlog waits) is retried once per idle round (100 ms) or on news, not in
// a busy loop that would send a clock report per round.
TEST_F(ReportsOnManualTimeTest, ADrainThatCannotCompleteIsRetriedCalmly) {
  const ChunkKey key = spec_.ChunksOfTable(0).front();
  std::vector<float> delta(static_cast<size_t>(spec_.ChunkElements(key)), 1.0f);
  repl_->OnLocalUpdate(0, 0, 0, std::span<const ChunkKey>(&key, 1), delta);
  repl_->OnShardClock(1, true);
  ASSERT_TRUE(AwaitTicks(*repl_, 1, time_));  // the first drain round
  // With time standing still, a busy loop would run round after round.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(repl_->stats().ticks, 1) << "the drain spins";
  for (int64_t round = 2; round <= 6; ++round) {
    time_.Advance(std::chrono::milliseconds(99));
    EXPECT_EQ(repl_->stats().ticks, round - 1);
    time_.Advance(std::chrono::milliseconds(1));
    ASSERT_TRUE(AwaitTicks(*repl_, round, time_)) << "one retry per idle round; ticks " << repl_->stats().ticks;
  }
  const ReplicatorStats st = repl_->stats();
  EXPECT_FALSE(st.drained);
  EXPECT_LE(st.ticks, 7);
  EXPECT_LE(peer_.clocks().size(), 7u);
}

// Both sites put 3e38 into the same element and ship it: each receiver's sum
// would be infinite, so each quarantines the other's batch, and its
// acknowledgement tells the sender, which counts it per peer.
TEST(ReplicatorTest, ASenderLearnsThatItsPeerQuarantinedItsBatch) {
  WanOptions o = Mode(WanMode::kAllAsync);
  o.codec = ValueCodec::kFp32;
  WanSites sites(CounterModel(), {1, 1}, 1, o, LinkFaults{}, 3);
  const ModelSpec& spec = sites.spec();
  const std::vector<ChunkKey> keys = {spec.ChunksOfShard(0, 1).front()};
  std::vector<float> values(static_cast<size_t>(spec.ChunkElements(keys[0])), 0.0f);
  values[0] = 3e38f;
  // Both updates land before either clock moves: a site ships at its tick,
  // and a batch that arrived first would make the other site's own update
  // overflow (refused), which is not what this test is about.
  for (SiteId s = 0; s < 2; ++s) {
    datacenter::Shard* shard = sites.shard(s, 0);
    ASSERT_TRUE(shard->RegisterWorker(0, spec.Fingerprint(), "").ok());
    const auto updated = shard->Update(0, 0, keys, values);
    ASSERT_TRUE(updated.ok()) << "site " << s << ": " << updated.status().ToString();
  }
  for (SiteId s = 0; s < 2; ++s) ASSERT_TRUE(sites.shard(s, 0)->AdvanceClock(0, 1, false).ok());
  auto told = [&](SiteId s) {
    const ReplicatorStats st = sites.replicator(s, 0)->stats();
    return st.peers.size() == 1 && st.peers[0].quarantined_by_peer == 1 && st.inbox.batches_quarantined == 1;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(told(0) && told(1)) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (SiteId s = 0; s < 2; ++s) {
    const ReplicatorStats st = sites.replicator(s, 0)->stats();
    ASSERT_EQ(st.peers.size(), 1u);
    EXPECT_EQ(st.peers[0].quarantined_by_peer, 1) << "site " << s;
    EXPECT_EQ(st.inbox.batches_quarantined, 1) << "site " << s;
    std::vector<float> v(values.size());
    ASSERT_TRUE(sites.shard(s, 0)->ReadChunkValue(keys[0], v.data()).ok());
    EXPECT_EQ(v[0], 3e38f) << "site " << s << " kept its own value only";
  }
}

}  // namespace
}  // namespace geops::wan
