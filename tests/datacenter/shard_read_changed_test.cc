// Incremental reads (Shard::ReadChanged, ChunkStore change tracking): a
// worker that keeps a copy, adds its own updates to it and applies each
// reply's runs over it holds the shard's values bit for bit, and the
// replies carry only what others changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "common/float_kernels.h"
#include "common/replication.h"
#include "datacenter/chunk_store.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using testing::MakeShard;
using testing::TestModel;
using testing::TestOptions;

// The worker's side: its copy of the shard's chunks (back to back, in
// `keys` order) and the id to send next.
struct Copy {
  std::vector<float> values;
  uint64_t since = 0;
  int64_t floats_received = 0;
};

void Apply(const ChangedValues& changed, Copy* copy) {
  const float* src = changed.values.data();
  for (size_t i = 0; i < changed.runs.size(); i += 2) {
    std::memcpy(copy->values.data() + changed.runs[i], src, changed.runs[i + 1] * sizeof(float));
    src += changed.runs[i + 1];
  }
  copy->floats_received += static_cast<int64_t>(changed.values.size());
}

class ShardReadChangedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = TestModel();
    shard_ = MakeShard(spec_, TestOptions(1));
    ASSERT_NE(shard_, nullptr);
    ASSERT_TRUE(shard_->RegisterWorker(0, spec_.Fingerprint(), "").ok());
    keys_ = spec_.ChunksOfShard(0, 1);
    elements_ = testing::ElementsOf(spec_, keys_);
    copy_.values.assign(elements_, 0.0f);
  }

  std::vector<float> Full() {
    std::vector<float> out(elements_);
    EXPECT_TRUE(shard_->Read(0, clock_, kAsync, keys_, out.data(), Deadline::InMs(1000)).ok());
    return out;
  }
  ChangedValues ReadChanged(uint64_t since) {
    ChangedValues changed;
    Result<ReadReply> r = shard_->ReadChanged(0, clock_, kAsync, keys_, since, &changed, Deadline::InMs(1000));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return changed;
  }
  // One incremental read applied to the copy.
  void Refresh() {
    ChangedValues changed = ReadChanged(copy_.since);
    Apply(changed, &copy_);
    copy_.since = changed.read_id;
  }
  // The worker's update of this clock: the shard adds it, the copy too.
  void OwnUpdate(std::mt19937& rng) {
    std::normal_distribution<float> dist(0.0f, 0.01f);
    std::vector<float> delta(elements_);
    for (float& v : delta) v = dist(rng);
    ASSERT_TRUE(shard_->Update(0, clock_, keys_, delta).ok());
    ASSERT_TRUE(shard_->AdvanceClock(0, clock_ + 1, false).ok());
    ++clock_;
    AddInto(copy_.values.data(), delta.data(), elements_);  // as PsClient's read-my-writes does
  }
  // A peer's sparse batch: a few elements of a few chunks.
  void RemoteUpdate(std::mt19937& rng) {
    std::vector<std::vector<uint32_t>> idx;
    std::vector<std::vector<float>> val;
    std::vector<RemoteChunkDelta> deltas;
    idx.reserve(keys_.size());
    val.reserve(keys_.size());
    for (const ChunkKey key : keys_) {
      if (rng() % 3 != 0) continue;
      const uint32_t n = static_cast<uint32_t>(spec_.ChunkElements(key));
      std::vector<uint32_t> i;
      for (uint32_t e = 0; e < n; ++e) {
        if (rng() % 8 == 0) i.push_back(e);
      }
      if (i.empty()) continue;
      idx.push_back(i);
      val.emplace_back(i.size(), 0.001f * static_cast<float>(rng() % 100));
      deltas.push_back(RemoteChunkDelta{key, n, idx.back(), val.back()});
    }
    if (deltas.empty()) return;
    Result<RemoteApplyResult> r = shard_->ApplyRemote(1, ++seq_, deltas);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->applied);
  }
  bool CopyMatches() {
    const std::vector<float> full = Full();
    return std::memcmp(full.data(), copy_.values.data(), full.size() * sizeof(float)) == 0;
  }

  ModelSpec spec_;
  std::unique_ptr<Shard> shard_;
  std::vector<ChunkKey> keys_;
  int64_t elements_ = 0;
  Copy copy_;
  Clock clock_ = 0;
  uint64_t seq_ = 0;
};

TEST_F(ShardReadChangedTest, TheFirstReadCarriesEverythingAndOwnUpdatesNothing) {
  Refresh();
  EXPECT_NE(copy_.since, 0u);
  EXPECT_EQ(copy_.floats_received, elements_);
  EXPECT_TRUE(CopyMatches());
  std::mt19937 rng(1);
  for (int i = 0; i < 5; ++i) OwnUpdate(rng);
  const ChangedValues changed = ReadChanged(copy_.since);
  EXPECT_TRUE(changed.runs.empty()) << "the worker's own updates are in its copy already";
  EXPECT_TRUE(changed.values.empty());
  EXPECT_TRUE(CopyMatches()) << "own updates added with the shard's float additions stay bit for bit equal";
}

TEST_F(ShardReadChangedTest, ACopyKeptByRunsMatchesTheShardBitForBitThroughOwnAndPeerUpdates) {
  std::mt19937 rng(7);
  Refresh();
  const int64_t first = copy_.floats_received;
  for (int round = 0; round < 200; ++round) {
    const int what = static_cast<int>(rng() % 4);
    if (what == 0) {
      OwnUpdate(rng);
    } else if (what == 1) {
      RemoteUpdate(rng);
    } else if (what == 2) {
      Refresh();
      ASSERT_TRUE(CopyMatches()) << "round " << round;
    } else {
      OwnUpdate(rng);
      RemoteUpdate(rng);
    }
  }
  Refresh();
  EXPECT_TRUE(CopyMatches());
  // Peers changed about an eighth of a third of the elements per batch:
  // well under a whole read per refresh.
  EXPECT_LT(copy_.floats_received - first, 50 * elements_);
}

TEST_F(ShardReadChangedTest, AReplyTheWorkerMissedMakesTheNextCarryEverything) {
  std::mt19937 rng(3);
  Refresh();
  RemoteUpdate(rng);
  RemoteUpdate(rng);
  const ChangedValues lost = ReadChanged(copy_.since);  // served, never applied
  ASSERT_FALSE(lost.values.empty());
  OwnUpdate(rng);
  const int64_t before = copy_.floats_received;
  Refresh();  // with the id before the lost reply
  EXPECT_EQ(copy_.floats_received - before, elements_);
  EXPECT_TRUE(CopyMatches());
  const ChangedValues none = ReadChanged(copy_.since);
  EXPECT_TRUE(none.values.empty());
}

TEST(ShardReadChangedUntrackedTest, AWorkerOfASiteWithSeveralGetsEveryChunkWhole) {
  const ModelSpec spec = TestModel();
  std::unique_ptr<Shard> shard = MakeShard(spec, TestOptions(2));
  ASSERT_NE(shard, nullptr);
  ASSERT_TRUE(shard->RegisterWorker(1, spec.Fingerprint(), "").ok());
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  ChangedValues changed;
  ASSERT_TRUE(shard->ReadChanged(1, 0, kAsync, keys, 0, &changed, Deadline::InMs(1000)).ok());
  EXPECT_EQ(changed.read_id, 0u);
  ASSERT_EQ(changed.runs.size(), 2 * keys.size());
  std::vector<float> full(testing::ElementsOf(spec, keys));
  ASSERT_TRUE(shard->Read(1, 0, kAsync, keys, full.data(), Deadline::InMs(1000)).ok());
  ASSERT_EQ(changed.values.size(), full.size());
  EXPECT_EQ(std::memcmp(changed.values.data(), full.data(), full.size() * sizeof(float)), 0);
}

TEST(ChunkStoreChangesTest, RunsFollowTheMarkedElementsAndPastAThirdTheChunkGoesWhole) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  auto store = std::move(ChunkStore::Create(&spec, 0, 1)).value();
  store->EnableChangeTracking(2);
  const int64_t local = store->LocalIndex({2, 0});  // 64 floats
  std::vector<uint32_t> runs;
  std::vector<float> values;
  store->ReadChanged(local, 0, 100, &runs, &values);  // never read: whole
  EXPECT_EQ(runs, (std::vector<uint32_t>{100, 64}));
  runs.clear();
  values.clear();
  store->ReadChanged(local, 0, 100, &runs, &values);
  EXPECT_TRUE(runs.empty());
  {
    const std::vector<int64_t> locals = {local};
    ChunkStore::BatchGuard guard(store.get(), locals);
    const std::vector<uint32_t> idx = {3, 4, 5, 40};
    const std::vector<float> val = {1, 2, 3, 4};
    guard.AddSparse(0, idx, val);
  }
  store->ReadChanged(local, 0, 100, &runs, &values);
  EXPECT_EQ(runs, (std::vector<uint32_t>{103, 3, 140, 1}));
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
  // Slot 1 has not looked yet: whole. Then a dense write by slot 1 itself
  // leaves it unmarked for slot 1, marked for slot 0.
  runs.clear();
  values.clear();
  store->ReadChanged(local, 1, 0, &runs, &values);
  EXPECT_EQ(runs, (std::vector<uint32_t>{0, 64}));
  {
    const std::vector<int64_t> locals = {local};
    ChunkStore::BatchGuard guard(store.get(), locals, /*writer=*/1);
    const std::vector<float> delta(64, 0.5f);
    guard.Add(delta.data());
  }
  runs.clear();
  values.clear();
  store->ReadChanged(local, 1, 0, &runs, &values);
  EXPECT_TRUE(runs.empty());
  store->ReadChanged(local, 0, 0, &runs, &values);
  EXPECT_EQ(runs, (std::vector<uint32_t>{0, 64}));
  // 22 of 64 marked (over a third): the chunk goes whole.
  runs.clear();
  values.clear();
  {
    const std::vector<int64_t> locals = {local};
    ChunkStore::BatchGuard guard(store.get(), locals);
    std::vector<uint32_t> idx;
    for (uint32_t e = 0; e < 64; e += 3) idx.push_back(e);
    const std::vector<float> val(idx.size(), 1.0f);
    guard.AddSparse(0, idx, val);
  }
  store->ReadChanged(local, 0, 0, &runs, &values);
  EXPECT_EQ(runs, (std::vector<uint32_t>{0, 64}));
  runs.clear();
  values.clear();
  store->MarkAllChanged(0);
  store->ReadChanged(local, 0, 0, &runs, &values);
  EXPECT_EQ(runs, (std::vector<uint32_t>{0, 64}));
}

// A run across whole words of marks: one run, and every mark cleared.
TEST(ChunkStoreChangesTest, ARunAcrossWholeWordsIsOneRunAndLeavesNoMarks) {
  Result<ModelSpec> spec = ModelSpec::Create({{"t", 16, 64, InitKind::kZeros, 0.0f}}, 4096, 1);  // 1024 floats
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto store = std::move(ChunkStore::Create(&*spec, 0, 1)).value();
  store->EnableChangeTracking(1);
  std::vector<uint32_t> runs;
  std::vector<float> values;
  store->ReadChanged(0, 0, 0, &runs, &values);  // the first look: whole
  runs.clear();
  values.clear();
  {
    const std::vector<int64_t> locals = {0};
    ChunkStore::BatchGuard guard(store.get(), locals);
    std::vector<uint32_t> idx;
    for (uint32_t e = 100; e < 400; ++e) idx.push_back(e);  // words 1-6, 2-5 whole
    const std::vector<float> val(idx.size(), 1.0f);
    guard.AddSparse(0, idx, val);
  }
  store->ReadChanged(0, 0, 0, &runs, &values);
  EXPECT_EQ(runs, (std::vector<uint32_t>{100, 300}));
  EXPECT_EQ(values, std::vector<float>(300, 1.0f));
  runs.clear();
  values.clear();
  store->ReadChanged(0, 0, 0, &runs, &values);
  EXPECT_TRUE(runs.empty());
}

}  // namespace
}  // namespace geops::datacenter
