// SummarizeReplica: per-table min, max, sum and non-finite count over the
// chunks a shard owns, as `geops worker --check` prints them.
#include "datacenter/replica_summary.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using testing::MakeShard;
using testing::TestModel;
using testing::TestOptions;

TEST(ReplicaSummaryTest, SumsTheChunksTheShardOwnsTableByTable) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  // Shard 1 of 2: w/1, b/0 (with shard 0 w/0, w/2), big/1, big/3, ...
  std::unique_ptr<Shard> shard = MakeShard(spec, TestOptions(1, 2, 1));
  ASSERT_NE(shard, nullptr);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(1, 2);
  int64_t owned = 0;
  for (ChunkKey k : keys) owned += spec.ChunkElements(k);
  std::vector<float> values(static_cast<size_t>(owned), 2.0f);
  values[0] = -3.0f;  // the first element of the first chunk (table w)
  ASSERT_TRUE(shard->Update(0, 0, keys, values).ok());

  Result<ReplicaSummary> r = SummarizeReplica(*shard);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shard_id, 1);
  ASSERT_EQ(r->tables.size(), 3u);
  int64_t total = 0;
  for (const TableSummary& t : r->tables) {
    total += t.elements;
    EXPECT_EQ(t.nonfinite, 0);
    EXPECT_EQ(t.max, 2.0);
    EXPECT_EQ(t.min, t.table == 0 ? -3.0 : 2.0) << "table " << t.table;
    EXPECT_EQ(t.sum, t.table == 0 ? 2.0 * (t.elements - 1) - 3.0 : 2.0 * t.elements);
  }
  EXPECT_EQ(total, owned);
  EXPECT_EQ(r->tables[0].elements, 64);  // w/1
  EXPECT_EQ(r->tables[1].elements, 5);   // b/0
}

TEST(ReplicaSummaryTest, ReadsAShardNobodyRegisteredWith) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  std::unique_ptr<Shard> shard = MakeShard(spec, TestOptions(2));
  ASSERT_NE(shard, nullptr);
  Result<ReplicaSummary> r = SummarizeReplica(*shard);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shard_clock, 0);
  for (const TableSummary& t : r->tables) {
    EXPECT_EQ(t.min, 0.0);
    EXPECT_EQ(t.max, 0.0);
  }
}

}  // namespace
}  // namespace geops::datacenter
