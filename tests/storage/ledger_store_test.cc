// The per-origin ledger of a ShardStore, checked the same way on the RocksDB
// store and on both in-memory test doubles, so that tests which run shards
// over the doubles see what the real store would do: adds accumulate in
// double precision, origins stay apart, a clear removes one origin's rows
// before the adds of its commit, and malformed adds are refused whole.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "storage/rocksdb_shard_store.h"
#include "tests/storage/fault_injecting_shard_store.h"
#include "tests/storage/memory_shard_store.h"
#include "tests/storage/storage_test_util.h"

namespace geops::storage {
namespace {

using datacenter::testing::TestModel;
using datacenter::testing::TestOptions;
using ::testing::HasSubstr;
using testing::FaultInjectingShardStore;
using testing::MemoryShardStore;

enum class StoreKind { kRocksDb, kMemory, kFaultInjecting };

std::string KindName(const ::testing::TestParamInfo<StoreKind>& info) {
  switch (info.param) {
    case StoreKind::kRocksDb: return "RocksDb";
    case StoreKind::kMemory: return "Memory";
    case StoreKind::kFaultInjecting: return "FaultInjecting";
  }
  return "Unknown";
}

LedgerAdd MakeAdd(SiteId origin, const ChunkExtent& chunk, std::vector<uint32_t> indices, std::vector<float> values) {
  return LedgerAdd{origin, chunk.key, static_cast<uint32_t>(chunk.elements), std::move(indices), std::move(values)};
}

// `elements` zeros with `at` set.
std::vector<double> Dense(int64_t elements, const std::vector<std::pair<uint32_t, double>>& at) {
  std::vector<double> out(static_cast<size_t>(elements), 0.0);
  for (const auto& [i, v] : at) out[i] = v;
  return out;
}

class LedgerStoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  // A store initialised as a shard does it: a first commit with every chunk.
  LedgerStoreTest() : spec_(ShardStoreSpec::Of(TestModel(), TestOptions(2, 2, 0))) {
    Reopen();
    ShardCommit first;
    for (const ChunkExtent& c : spec_.chunks) first.chunks.Add(c.key, std::vector<float>(c.elements, 1.0f));
    EXPECT_TRUE(store_->Commit(first).ok());
  }

  // A process restart: the RocksDB store is closed and opened again; an
  // in-memory store outlives its users anyway.
  void Reopen() {
    switch (GetParam()) {
      case StoreKind::kRocksDb: {
        store_.reset();
        Result<std::unique_ptr<ShardStore>> store =
            OpenRocksDbShardStore(testing::StoreOptions(tmp_.Sub("store"), Durability::kOff), spec_);
        ASSERT_TRUE(store.ok()) << store.status().ToString();
        store_ = std::move(store).value();
        break;
      }
      case StoreKind::kMemory:
        if (!store_) store_ = std::make_unique<MemoryShardStore>(spec_.fingerprint);
        break;
      case StoreKind::kFaultInjecting:
        if (!store_) store_ = std::make_unique<FaultInjectingShardStore>(spec_.fingerprint, Durability::kSync);
        break;
    }
  }

  void Commit(const std::vector<SiteId>& clears, const std::vector<LedgerAdd>& adds) {
    ShardCommit c;
    c.ledger_clears = clears;
    c.ledger_adds = adds;
    const Status s = store_->Commit(c);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<LedgerRow> Ledger(SiteId origin) {
    Result<std::vector<LedgerRow>> rows = store_->ReadLedger(origin);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? std::move(rows).value() : std::vector<LedgerRow>{};
  }

  // The chunk keys of `rows`, in the order given.
  static std::vector<ChunkKey> Keys(const std::vector<LedgerRow>& rows) {
    std::vector<ChunkKey> keys;
    for (const LedgerRow& r : rows) keys.push_back(r.key);
    return keys;
  }

  const ChunkExtent& chunk(size_t i) const { return spec_.chunks[i]; }

  testing::TempDir tmp_;
  const ShardStoreSpec spec_;
  std::unique_ptr<ShardStore> store_;
};

TEST_P(LedgerStoreTest, AddsAccumulateExactlyInDouble) {
  ASSERT_GE(chunk(0).elements, 64);
  const float tenth = 0.1f, small = 1e-3f;
  double want_tenths = 0.0, want_small = 0.0;
  for (int round = 0; round < 3; ++round) {  // through reopens (RocksDB flushes the log into tables)
    for (int i = 0; i < 100; ++i) {
      std::vector<LedgerAdd> adds = {MakeAdd(1, chunk(0), {3}, {tenth})};
      want_tenths += static_cast<double>(tenth);
      if (i % 4 == 0) {
        adds.push_back(MakeAdd(1, chunk(0), {0, 3, 63}, {small, tenth, -small}));
        want_small += static_cast<double>(small);
        want_tenths += static_cast<double>(tenth);
      }
      Commit({}, adds);
    }
    Reopen();
  }
  const std::vector<LedgerRow> rows = Ledger(1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, chunk(0).key);
  EXPECT_EQ(rows[0].values, Dense(chunk(0).elements, {{0, want_small}, {3, want_tenths}, {63, -want_small}}));
  // Summed in float, 375 tenths would be visibly off.
  float f = 0.0f;
  for (int i = 0; i < 375; ++i) f += tenth;
  EXPECT_NE(static_cast<double>(f), want_tenths);
}

TEST_P(LedgerStoreTest, SparseAddsTouchOnlyTheirElementsAndRowsComeInKeyOrder) {
  ASSERT_GE(spec_.chunks.size(), 3u);
  // Two adds to one row in one commit, rows written out of key order.
  Commit({}, {MakeAdd(1, chunk(2), {1}, {4.0f}), MakeAdd(1, chunk(0), {0, 2}, {1.0f, 2.0f}),
              MakeAdd(1, chunk(0), {2, 5}, {0.5f, -3.0f})});
  Commit({}, {MakeAdd(1, chunk(0), {}, {}), MakeAdd(1, chunk(2), {1, 2}, {1.0f, 1.5f})});
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<LedgerRow> rows = Ledger(1);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(Keys(rows), (std::vector<ChunkKey>{chunk(0).key, chunk(2).key}));
    EXPECT_EQ(rows[0].values, Dense(chunk(0).elements, {{0, 1.0}, {2, 2.5}, {5, -3.0}}));
    EXPECT_EQ(rows[1].values, Dense(chunk(2).elements, {{1, 5.0}, {2, 1.5}}));
    Reopen();
  }
}

TEST_P(LedgerStoreTest, OriginsStayApartAndAClearRemovesOnlyItsOrigin) {
  Commit({}, {MakeAdd(1, chunk(0), {0}, {1.0f}), MakeAdd(2, chunk(0), {0}, {2.0f}), MakeAdd(2, chunk(1), {1}, {2.0f}),
              MakeAdd(3, chunk(1), {1}, {3.0f})});
  EXPECT_EQ(Ledger(1).size(), 1u);
  EXPECT_EQ(Ledger(2).size(), 2u);
  EXPECT_EQ(Ledger(3).size(), 1u);
  EXPECT_TRUE(Ledger(0).empty());
  EXPECT_TRUE(Ledger(4).empty());

  // Origin 2 cleared and added to in one commit: only the new add is left.
  Commit({2}, {MakeAdd(2, chunk(1), {3}, {7.0f}), MakeAdd(1, chunk(0), {0}, {1.0f})});
  Reopen();
  std::vector<LedgerRow> two = Ledger(2);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].key, chunk(1).key);
  EXPECT_EQ(two[0].values, Dense(chunk(1).elements, {{3, 7.0}}));
  std::vector<LedgerRow> one = Ledger(1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].values, Dense(chunk(0).elements, {{0, 2.0}}));
  std::vector<LedgerRow> three = Ledger(3);
  ASSERT_EQ(three.size(), 1u);
  EXPECT_EQ(three[0].values, Dense(chunk(1).elements, {{1, 3.0}}));

  // A clear of an origin without rows, and one that empties origin 3.
  Commit({5, 3}, {});
  EXPECT_TRUE(Ledger(3).empty());
  EXPECT_EQ(Ledger(1).size(), 1u);
  EXPECT_EQ(Ledger(2).size(), 1u);
  // A cleared origin starts again from zero.
  Commit({}, {MakeAdd(3, chunk(1), {1}, {0.25f})});
  Reopen();
  three = Ledger(3);
  ASSERT_EQ(three.size(), 1u);
  EXPECT_EQ(three[0].values, Dense(chunk(1).elements, {{1, 0.25}}));
}

TEST_P(LedgerStoreTest, RefusesAMalformedAddAndWritesNothingOfItsCommit) {
  Commit({}, {MakeAdd(1, chunk(0), {0}, {1.0f})});
  LedgerAdd other_size = MakeAdd(1, chunk(0), {0}, {1.0f});
  other_size.num_elements += 1;
  struct Case {
    std::string name;
    std::vector<SiteId> clears;
    LedgerAdd add;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"index out of range", {}, MakeAdd(1, chunk(0), {static_cast<uint32_t>(chunk(0).elements)}, {1.0f}),
       "is beyond num_elements"},
      {"indices out of order", {}, MakeAdd(1, chunk(0), {4, 2}, {1.0f, 1.0f}), "is not above the one before it"},
      {"lengths differ", {}, MakeAdd(1, chunk(0), {4, 5}, {1.0f}), "has 2 indices but 1 values"},
      {"not finite", {}, MakeAdd(1, chunk(0), {4}, {std::numeric_limits<float>::infinity()}), "not finite"},
      {"negative origin", {}, MakeAdd(-2, chunk(0), {4}, {1.0f}), "the origin is negative"},
      {"negative clear", {-1}, MakeAdd(1, chunk(0), {4}, {1.0f}), "clears the ledger of the negative origin -1"},
      {"another row size", {}, other_size, "has num_elements " + std::to_string(other_size.num_elements)},
  };
  for (const Case& c : cases) {
    ShardCommit commit;
    commit.ledger_clears = c.clears;
    commit.ledger_adds = {MakeAdd(1, chunk(1), {0}, {1.0f}), c.add};  // the good add goes nowhere either
    commit.workers = {{0, 1, 0, false}};
    const Status s = store_->Commit(commit);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.needle)) << c.name;
    EXPECT_THAT(s.message(), HasSubstr("commit 3")) << c.name;
  }
  Reopen();
  Result<ShardState> state = store_->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->commits, 2u);
  EXPECT_TRUE(state->workers.empty());
  const std::vector<LedgerRow> rows = Ledger(1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].values, Dense(chunk(0).elements, {{0, 1.0}}));
}

INSTANTIATE_TEST_SUITE_P(Stores, LedgerStoreTest,
                         ::testing::Values(StoreKind::kRocksDb, StoreKind::kMemory, StoreKind::kFaultInjecting),
                         KindName);

TEST(FaultInjectingLedgerTest, TheLedgerReadsTheVisibleImageAndLosesUnsyncedAdds) {
  const ShardStoreSpec spec = ShardStoreSpec::Of(TestModel(), TestOptions(2, 2, 0));
  FaultInjectingShardStore store(spec.fingerprint, Durability::kOff);
  const ChunkExtent& c = spec.chunks[0];
  ShardCommit commit;
  commit.ledger_adds = {MakeAdd(1, c, {0}, {1.0f})};
  ASSERT_TRUE(store.Commit(commit).ok());
  Result<std::vector<LedgerRow>> rows = store.ReadLedger(1);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 1u);  // the OS kept it: a restarted process sees it
  EXPECT_TRUE(store.durable_image().ledger.empty());
  EXPECT_EQ(store.visible_image().ledger.size(), 1u);
  store.DropUnsyncedWrites();  // the machine crashed
  rows = store.ReadLedger(1);
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());

  // A failed commit changes no ledger.
  store.FailNextCommits(1);
  EXPECT_EQ(store.Commit(commit).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(store.ReadLedger(1)->empty());
}

}  // namespace
}  // namespace geops::storage
