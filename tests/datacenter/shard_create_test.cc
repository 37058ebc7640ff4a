// Shard construction: options are checked once, every owned chunk starts at
// ModelSpec::InitChunk, and GetStatus describes the shard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using ::testing::HasSubstr;
using testing::MakeShard;
using testing::SameBytes;
using testing::SnapshotOf;
using testing::TestModel;
using testing::TestOptions;

TEST(ShardCreateTest, RejectsBadOptions) {
  const ModelSpec spec = TestModel();
  struct Case {
    std::function<void(ShardOptions*)> mutate;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](ShardOptions* o) { o->num_shards = 0; }, "num_shards"},
      {[](ShardOptions* o) { o->shard_id = 2; o->num_shards = 2; }, "shard_id 2 outside [0, 2)"},
      {[](ShardOptions* o) { o->shard_id = -1; }, "shard_id -1"},
      {[](ShardOptions* o) { o->num_workers = 0; }, "num_workers"},
      {[](ShardOptions* o) { o->num_workers = 100000; }, "num_workers must be <= 65536"},
      {[](ShardOptions* o) { o->worker_lease_ms = 5; }, "worker_lease_ms"},
      {[](ShardOptions* o) { o->max_read_wait_ms = 0; }, "max_read_wait_ms"},
      {[](ShardOptions* o) { o->max_batch_bytes = 100; }, "max_batch_bytes"},
  };
  for (const Case& c : cases) {
    ShardOptions o = TestOptions(2);
    c.mutate(&o);
    Result<std::unique_ptr<Shard>> shard = Shard::Create(spec, o);
    ASSERT_FALSE(shard.ok()) << c.needle;
    EXPECT_EQ(shard.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(shard.status().message(), HasSubstr(c.needle));
  }
  EXPECT_FALSE(Shard::Create(ModelSpec(), TestOptions(2)).ok());  // a model without tables
}

TEST(ShardCreateTest, ChunksStartAtInitialValuesOnEveryReplica) {
  const ModelSpec spec = TestModel(InitKind::kNormal);
  constexpr int kShards = 3;
  int64_t chunks = 0;
  for (ShardId s = 0; s < kShards; ++s) {
    auto a = MakeShard(spec, TestOptions(1, kShards, s));
    auto b = MakeShard(spec, TestOptions(4, kShards, s));  // a replica in another site
    const testing::ShardSnapshot snap = SnapshotOf(*a);
    EXPECT_TRUE(SameBytes(snap, SnapshotOf(*b)));
    ASSERT_EQ(snap.size(), spec.ChunksOfShard(s, kShards).size());
    for (const auto& [key, values] : snap) {
      EXPECT_EQ(spec.ShardOf(key, kShards), s);
      std::vector<float> want(spec.ChunkElements(key));
      spec.InitChunk(key, want.data());
      EXPECT_EQ(values, want) << "table " << key.table << " chunk " << key.chunk;
    }
    chunks += static_cast<int64_t>(snap.size());
  }
  EXPECT_EQ(chunks, spec.total_chunks());
}

TEST(ShardCreateTest, StatusDescribesShardAndWorkers) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(3, 2, 1));
  ASSERT_TRUE(shard->RegisterWorker(2, 0, "").ok());
  ASSERT_TRUE(shard->AdvanceClock(2, 1, false).ok());
  const ShardStatus st = shard->GetStatus();
  EXPECT_EQ(st.shard_id, 1);
  EXPECT_EQ(st.num_shards, 2);
  const std::vector<ChunkKey> owned = spec.ChunksOfShard(1, 2);
  EXPECT_EQ(st.num_chunks, static_cast<int64_t>(owned.size()));
  EXPECT_EQ(st.num_elements, testing::ElementsOf(spec, owned));
  EXPECT_EQ(st.shard_clock, 0);  // workers 0 and 1 have not registered yet
  ASSERT_EQ(st.workers.size(), 3u);
  for (WorkerId w = 0; w < 3; ++w) {
    EXPECT_EQ(st.workers[w].worker_id, w);
    EXPECT_EQ(st.workers[w].clock, w == 2 ? 1 : 0);
    EXPECT_TRUE(st.workers[w].live);
    EXPECT_FALSE(st.workers[w].finished);
  }
  Result<RegisterReply> r = shard->RegisterWorker(0, spec.Fingerprint(), "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shard_id, 1);
  EXPECT_EQ(r->num_shards, 2);
  EXPECT_EQ(r->worker_clock, 0);
  EXPECT_EQ(r->lease_ms, 10000);
}

}  // namespace
}  // namespace geops::datacenter
