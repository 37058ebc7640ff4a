// ChunkStore layout and the float kernels it applies updates with.
#include "datacenter/chunk_store.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

TEST(ChunkStoreTest, MapsEveryOwnedChunkAndOnlyThose) {
  const ModelSpec spec = testing::TestModel();
  Result<std::unique_ptr<ChunkStore>> store = ChunkStore::Create(&spec, 1, 3);
  ASSERT_TRUE(store.ok());
  const std::vector<ChunkKey> owned = spec.ChunksOfShard(1, 3);
  ASSERT_EQ((*store)->num_chunks(), static_cast<int64_t>(owned.size()));
  for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
    for (const ChunkKey key : spec.ChunksOfTable(t)) {
      const int64_t local = (*store)->LocalIndex(key);
      if (spec.ShardOf(key, 3) != 1) {
        EXPECT_EQ(local, -1);
        continue;
      }
      ASSERT_GE(local, 0);
      EXPECT_EQ((*store)->key(local), key);
      EXPECT_EQ((*store)->elements(local), spec.ChunkElements(key));
    }
  }
}

TEST(ChunkStoreTest, AddTouchesOnlyItsChunk) {
  const ModelSpec spec = testing::TestModel(InitKind::kZeros);
  auto store = std::move(ChunkStore::Create(&spec, 0, 1)).value();
  const int64_t target = store->LocalIndex({0, 2});  // the short last chunk of "w"
  std::vector<float> delta(store->elements(target), 2.0f);
  store->Add(target, delta.data());
  std::vector<std::pair<ChunkKey, std::vector<float>>> snap;
  store->Snapshot(&snap);
  for (const auto& [key, values] : snap) {
    const float want = key == ChunkKey{0, 2} ? 2.0f : 0.0f;
    for (float v : values) ASSERT_EQ(v, want);
  }
}

// The check of a batch skips the stored values while both magnitudes are at
// most FLT_MAX / 2; past that it checks every sum, so overflow is refused
// however the values got there.
TEST(ChunkStoreTest, ABatchThatWouldOverflowIsRefusedWholeWhicheverWayTheValuesCame) {
  const ModelSpec spec = testing::TestModel(InitKind::kZeros);
  auto store = std::move(ChunkStore::Create(&spec, 0, 1)).value();
  const std::vector<int64_t> locals = {store->LocalIndex({0, 0}), store->LocalIndex({0, 1})};
  const int64_t n0 = store->elements(locals[0]), n1 = store->elements(locals[1]);
  auto apply = [&](float first, float second) {
    std::vector<float> deltas(static_cast<size_t>(n0 + n1), first);
    std::fill(deltas.begin() + n0, deltas.end(), second);
    ChunkStore::BatchGuard guard(store.get(), locals);
    if (guard.CheckSum(deltas.data())) return false;
    guard.Add(deltas.data());
    return true;
  };
  auto value = [&](int64_t local) {
    std::vector<float> v(static_cast<size_t>(store->elements(local)));
    store->Read(local, v.data());
    return v.back();
  };
  // 1e38 at a time: 1e38, 2e38 and 3e38 are finite; 4e38 is not.
  EXPECT_TRUE(apply(0, 1.0e38f));
  EXPECT_TRUE(apply(0, 1.0e38f));
  EXPECT_TRUE(apply(1.0f, 1.0e38f));
  EXPECT_FALSE(apply(1.0f, 1.0e38f)) << "the second chunk would overflow";
  EXPECT_EQ(value(locals[0]), 1.0f) << "nothing of a refused batch is applied";
  EXPECT_EQ(value(locals[1]), 3.0e38f);
  EXPECT_TRUE(apply(0, -1.0e38f));

  // Values loaded from disk, and values a sparse delta raised.
  std::vector<float> big(static_cast<size_t>(n0), 3.0e38f);
  store->Overwrite(locals[0], big.data());
  EXPECT_FALSE(apply(1.0e38f, 0));
  EXPECT_TRUE(apply(-3.0e38f, -2.0e38f));  // both chunks back to 0
  {
    ChunkStore::BatchGuard guard(store.get(), locals);
    const std::vector<uint32_t> at = {0};
    const std::vector<float> raise = {3.0e38f};
    EXPECT_FALSE(guard.CheckSparseSum(1, at, raise));
    guard.AddSparse(1, at, raise);  // the second chunk: 3e38 at element 0, 0 elsewhere
  }
  EXPECT_FALSE(apply(0, 1.0e38f)) << "the value a sparse add raised is bounded too";
  EXPECT_TRUE(apply(0, -1.0e38f));
  EXPECT_FALSE(apply(std::numeric_limits<float>::quiet_NaN(), 0)) << "a NaN delta never passes";
}

}  // namespace
}  // namespace geops::datacenter
