// ChunkStore layout and the float kernels it applies updates with.
#include "datacenter/chunk_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "datacenter/float_kernels.h"
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

TEST(FloatKernelsTest, AddIntoAddsEveryElementIncludingTail) {
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> dst(n + 1, 1.0f), src(n);
    for (int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(i);
    AddInto(dst.data(), src.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], 1.0f + static_cast<float>(i)) << n << " " << i;
    ASSERT_EQ(dst[n], 1.0f) << "wrote past the end, n=" << n;
  }
}

TEST(FloatKernelsTest, FindsNonFiniteAtAnyPosition) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::signaling_NaN()};
  for (int64_t n : {1, 15, 16, 17, 33, 100}) {
    std::vector<float> v(n, 0.5f);
    v[0] = std::numeric_limits<float>::max();
    v[n - 1] = std::numeric_limits<float>::denorm_min();
    ASSERT_TRUE(AllFinite(v.data(), n));
    ASSERT_EQ(FirstNonFinite(v.data(), n), -1);
    for (int64_t pos = 0; pos < n; ++pos) {
      for (float b : bad) {
        std::vector<float> w = v;
        w[pos] = b;
        ASSERT_FALSE(AllFinite(w.data(), n)) << "n=" << n << " pos=" << pos;
        ASSERT_EQ(FirstNonFinite(w.data(), n), pos);
      }
    }
  }
}

}  // namespace
}  // namespace geops::datacenter
