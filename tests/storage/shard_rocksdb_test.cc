// A shard over the RocksDB store, closed and reopened in-process: the same
// values, the same clocks, and retried batches stay duplicates, whatever
// the durability (a clean close commits what is pending).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "storage/rocksdb_shard_store.h"
#include "tests/storage/counter_workload.h"
#include "tests/storage/storage_test_util.h"

namespace geops::storage {
namespace {

using datacenter::Shard;
using datacenter::testing::SameBytes;
using datacenter::testing::ShardSnapshot;
using datacenter::testing::SnapshotOf;
using datacenter::testing::TestModel;
using datacenter::testing::TestOptions;
using testing::StoreOptions;
using testing::TempDir;

struct Opened {
  std::unique_ptr<ShardStore> store;  // declared first: outlives the shard
  std::unique_ptr<Shard> shard;
};

Opened Open(const std::string& dir, const ModelSpec& spec, const ShardOptions& o, Durability d) {
  Opened out;
  auto store = OpenRocksDbShardStore(StoreOptions(dir, d), ShardStoreSpec::Of(spec, o));
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return out;
  out.store = std::move(store).value();
  auto shard = Shard::Create(spec, o, out.store.get());
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  if (shard.ok()) out.shard = std::move(shard).value();
  return out;
}

size_t BatchSize(const ModelSpec& spec, const std::vector<ChunkKey>& keys) {
  return static_cast<size_t>(datacenter::testing::ElementsOf(spec, keys));
}

class ShardOverRocksDbTest : public ::testing::TestWithParam<Durability> {};

TEST_P(ShardOverRocksDbTest, AReopenedShardHasTheSameSnapshotAndClocksAndRetriesAreDuplicates) {
  TempDir tmp;
  const std::string dir = tmp.Sub("us-east-1-shard-0");
  const ModelSpec spec = TestModel(InitKind::kNormal);
  const ShardOptions o = TestOptions(3, 2, 0);
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 2);
  ShardSnapshot before;
  std::vector<Clock> clocks;
  {
    Opened site = Open(dir, spec, o, GetParam());
    ASSERT_NE(site.shard, nullptr);
    std::vector<std::thread> workers;
    for (WorkerId w = 0; w < 3; ++w) {
      workers.emplace_back([&, w] {
        ASSERT_TRUE(site.shard->RegisterWorker(w, spec.Fingerprint(), "").ok());
        std::vector<float> batch(datacenter::testing::ElementsOf(spec, keys));
        for (Clock c = 0; c < 5 + w; ++c) {
          for (size_t i = 0; i < batch.size(); ++i) batch[i] = 0.001f * static_cast<float>((i + c * 7 + w) % 13);
          ASSERT_TRUE(site.shard->Update(w, c, keys, batch).ok());
          ASSERT_TRUE(site.shard->AdvanceClock(w, c + 1, false).ok());
        }
      });
    }
    for (std::thread& t : workers) t.join();
    ASSERT_TRUE(site.shard->Update(2, 7, keys, std::vector<float>(BatchSize(spec, keys), 0.5f)).ok());
    before = SnapshotOf(*site.shard);
    for (const WorkerState& w : site.shard->GetStatus().workers) clocks.push_back(w.clock);
    EXPECT_GT(site.shard->GetStatus().store_commits, 0);
  }
  Opened site = Open(dir, spec, o, GetParam());
  ASSERT_NE(site.shard, nullptr);
  EXPECT_TRUE(SameBytes(SnapshotOf(*site.shard), before));
  const ShardStatus st = site.shard->GetStatus();
  for (WorkerId w = 0; w < 3; ++w) EXPECT_EQ(st.workers[w].clock, clocks[w]) << "worker " << w;
  EXPECT_EQ(clocks, (std::vector<Clock>{5, 6, 7}));
  EXPECT_EQ(st.shard_clock, 5);
  for (WorkerId w = 0; w < 3; ++w) {
    Result<RegisterReply> reg = site.shard->RegisterWorker(w, spec.Fingerprint(), "");
    ASSERT_TRUE(reg.ok());
    EXPECT_EQ(reg->worker_clock, clocks[w]);
    Result<UpdateReply> retry = site.shard->Update(w, clocks[w] - 1, keys, std::vector<float>(BatchSize(spec, keys), 1));
    ASSERT_TRUE(retry.ok());
    EXPECT_FALSE(retry->applied);
  }
  Result<UpdateReply> in_flight = site.shard->Update(2, 7, keys, std::vector<float>(BatchSize(spec, keys), 0.5f));
  ASSERT_TRUE(in_flight.ok());
  EXPECT_FALSE(in_flight->applied);
  EXPECT_TRUE(SameBytes(SnapshotOf(*site.shard), before));
}

INSTANTIATE_TEST_SUITE_P(Durabilities, ShardOverRocksDbTest,
                         ::testing::Values(Durability::kSync, Durability::kAsync, Durability::kOff),
                         [](const auto& info) { return std::string(DurabilityName(info.param)); });

TEST(ShardOverRocksDbTest, AStoreOfAnotherShardIsRefusedBeforeAnythingIsServed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ModelSpec spec = TestModel();
  { Opened first = Open(dir, spec, TestOptions(2, 2, 0), Durability::kSync); }
  auto store = OpenRocksDbShardStore(StoreOptions(dir), ShardStoreSpec::Of(spec, TestOptions(2, 2, 1)));
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), ::testing::HasSubstr("shard id differs (stored 0, this process 1)"));
}

TEST(ShardOverRocksDbTest, AQuarantinedWanBatchIsKeptInTheStoreWithItsOriginSeqAndReason) {
  // A WAN batch that would make a value infinite is not applied; the store
  // keeps it whole (every chunk, the harmless one too) for an operator, and
  // the store still opens as before.
  TempDir tmp;
  const std::string dir = tmp.Sub("shard-0");
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  ASSERT_GE(keys.size(), 2u);
  const std::vector<uint32_t> at0 = {0};
  const std::vector<uint32_t> at12 = {1, 2};
  const std::vector<float> big = {3e38f};
  const std::vector<float> small = {0.5f, -0.25f};
  const RemoteChunkDelta bad[] = {
      {keys[0], static_cast<uint32_t>(spec.ChunkElements(keys[0])), at0, big},
      {keys[1], static_cast<uint32_t>(spec.ChunkElements(keys[1])), at12, small}};
  ShardSnapshot before;
  {
    Opened site = Open(dir, spec, o, Durability::kSync);
    ASSERT_NE(site.shard, nullptr);
    ASSERT_TRUE(site.shard->ApplyRemote(4, 1, {bad, 1}).ok());  // 3e38: finite
    before = SnapshotOf(*site.shard);
    Result<RemoteApplyResult> r = site.shard->ApplyRemote(4, 2, bad);  // 6e38: not
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->quarantined);
    EXPECT_TRUE(SameBytes(before, SnapshotOf(*site.shard)));
  }
  Result<StoreInfo> info = InspectShardStore(dir);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->quarantined.size(), 1u);
  const QuarantineRecord& q = info->quarantined[0];
  EXPECT_EQ(q.origin, 4);
  EXPECT_EQ(q.seq, 2u);
  EXPECT_GT(q.unix_micros, 0);
  EXPECT_THAT(q.reason, ::testing::HasSubstr("batch 2 from site 4"));
  EXPECT_THAT(q.reason, ::testing::HasSubstr("not finite"));
  ASSERT_EQ(q.chunks.size(), 2u);
  EXPECT_EQ(q.chunks[0].key, keys[0]);
  EXPECT_EQ(q.chunks[0].indices, at0);
  EXPECT_EQ(q.chunks[0].values, big);
  EXPECT_EQ(q.chunks[1].key, keys[1]);
  EXPECT_EQ(q.chunks[1].num_elements, static_cast<uint32_t>(spec.ChunkElements(keys[1])));
  EXPECT_EQ(q.chunks[1].indices, at12);
  EXPECT_EQ(q.chunks[1].values, small);
  Opened again = Open(dir, spec, o, Durability::kSync);
  ASSERT_NE(again.shard, nullptr);
  EXPECT_EQ(again.shard->LastAppliedSeq(4), 2u);
  EXPECT_TRUE(SameBytes(before, SnapshotOf(*again.shard)));
}

}  // namespace
}  // namespace geops::storage
