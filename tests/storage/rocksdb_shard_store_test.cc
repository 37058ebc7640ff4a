// The RocksDB store on its own: creation, commits that survive a reopen, the
// ledger through flushes and compactions, and the directories it must refuse
// without changing a byte of them. (The ledger's behaviour shared with the
// in-memory stores is in ledger_store_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "storage/rocksdb_shard_store.h"
#include "storage/store_format.h"
#include "tests/storage/rocksdb_surgery.h"
#include "tests/storage/storage_test_util.h"

namespace geops::storage {
namespace {

namespace fs = std::filesystem;
using datacenter::testing::TestModel;
using datacenter::testing::TestOptions;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::DirDigest;
using testing::StoreOptions;
using testing::TempDir;

ShardStoreSpec Spec(int workers = 2, int shards = 2, ShardId shard = 0, InitKind init = InitKind::kUniform) {
  return ShardStoreSpec::Of(TestModel(init), TestOptions(workers, shards, shard));
}

// Every chunk of `spec` set to `value` + its element index / 1000.
void AddAllChunks(const ShardStoreSpec& spec, float value, ShardCommit* commit) {
  for (const ChunkExtent& c : spec.chunks) {
    float* out = commit->chunks.Append(c.key, c.elements);
    for (int64_t i = 0; i < c.elements; ++i) out[i] = value + static_cast<float>(i) / 1000.0f;
  }
}

std::unique_ptr<ShardStore> OpenOk(const std::string& dir, const ShardStoreSpec& spec,
                                   Durability durability = Durability::kSync) {
  Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir, durability), spec);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

// A store with one commit: every chunk at 1.x, workers 0 and 1, origin 3.
void MakeCommittedStore(const std::string& dir, const ShardStoreSpec& spec) {
  std::unique_ptr<ShardStore> store = OpenOk(dir, spec);
  ASSERT_NE(store, nullptr);
  ShardCommit c;
  AddAllChunks(spec, 1.0f, &c);
  c.workers = {{0, 4, 3, false}, {1, 2, -1, true}};
  c.origins = {{3, 99}};
  c.shard_clock = 2;
  ASSERT_TRUE(store->Commit(c).ok());
}

LedgerAdd MakeAdd(SiteId origin, const ChunkExtent& chunk, std::vector<uint32_t> indices, std::vector<float> values) {
  return LedgerAdd{origin, chunk.key, static_cast<uint32_t>(chunk.elements), std::move(indices), std::move(values)};
}

// MakeCommittedStore, then a commit with ledger rows: origin 1 in chunks 0
// and 1, origin 3 in chunk 0 (element 1: 2.5).
void MakeStoreWithLedger(const std::string& dir, const ShardStoreSpec& spec) {
  MakeCommittedStore(dir, spec);
  std::unique_ptr<ShardStore> store = OpenOk(dir, spec);
  ASSERT_NE(store, nullptr);
  ShardCommit c;
  c.ledger_adds = {MakeAdd(1, spec.chunks[0], {0}, {1.0f}), MakeAdd(1, spec.chunks[1], {2}, {1.0f}),
                   MakeAdd(3, spec.chunks[0], {1}, {2.5f})};
  ASSERT_TRUE(store->Commit(c).ok());
}

TEST(RocksDbShardStoreTest, CreatesAFreshStoreWhereThereIsNone) {
  TempDir tmp;
  const ShardStoreSpec spec = Spec();
  for (const std::string& dir : {tmp.Sub("a/b/shard-0"), tmp.Sub("empty")}) {
    if (dir == tmp.Sub("empty")) fs::create_directory(dir);
    std::unique_ptr<ShardStore> store = OpenOk(dir, spec);
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(fs::exists(dir + "/" + format::kMarkerFile));
    Result<ShardState> state = store->Load();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(state->commits, 0u);
    EXPECT_EQ(state->format_version, format::kFormatVersion);
    EXPECT_EQ(state->fingerprint.model, spec.fingerprint.model);
    EXPECT_EQ(state->fingerprint.model_summary, spec.fingerprint.model_summary);
    EXPECT_TRUE(state->chunks.empty());
    EXPECT_TRUE(state->workers.empty());
    EXPECT_EQ(store->durability(), Durability::kSync);
    EXPECT_THAT(store->name(), HasSubstr(dir));
    for (const auto& entry : fs::directory_iterator(fs::path(dir).parent_path())) {
      EXPECT_THAT(entry.path().filename().string(), Not(HasSubstr(".creating")));
    }
  }
}

TEST(RocksDbShardStoreTest, CommitsSurviveAReopen) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = Spec();
  MakeCommittedStore(dir, spec);
  {
    std::unique_ptr<ShardStore> store = OpenOk(dir, spec, Durability::kOff);
    ShardCommit c;  // one chunk and one worker change
    c.chunks.Add(spec.chunks[1].key, std::vector<float>(spec.chunks[1].elements, -7.5f));
    c.workers = {{0, 5, 4, false}};
    c.shard_clock = 3;
    ASSERT_TRUE(store->Commit(c).ok());
  }
  std::unique_ptr<ShardStore> store = OpenOk(dir, spec);
  Result<ShardState> state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->commits, 2u);
  EXPECT_EQ(state->shard_clock, 3);
  ASSERT_EQ(state->chunks.size(), spec.chunks.size());
  for (size_t i = 0; i < spec.chunks.size(); ++i) {
    EXPECT_EQ(state->chunks.key(i), spec.chunks[i].key);
    const std::span<const float> v = state->chunks.values(i);
    ASSERT_EQ(static_cast<int64_t>(v.size()), spec.chunks[i].elements);
    for (size_t e = 0; e < v.size(); ++e) {
      const float want = i == 1 ? -7.5f : 1.0f + static_cast<float>(e) / 1000.0f;
      ASSERT_EQ(v[e], want) << "chunk " << i << " element " << e;
    }
  }
  ASSERT_EQ(state->workers.size(), 2u);
  EXPECT_EQ(state->workers[0].worker, 0);
  EXPECT_EQ(state->workers[0].clock, 5);
  EXPECT_EQ(state->workers[0].last_update_clock, 4);
  EXPECT_FALSE(state->workers[0].finished);
  EXPECT_EQ(state->workers[1].clock, 2);
  EXPECT_EQ(state->workers[1].last_update_clock, -1);
  EXPECT_TRUE(state->workers[1].finished);
  ASSERT_EQ(state->origins.size(), 1u);
  EXPECT_EQ(state->origins[0].origin, 3);
  EXPECT_EQ(state->origins[0].seq, 99u);
}

TEST(RocksDbShardStoreTest, ChunksAndLedgerAreLz4Compressed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  MakeCommittedStore(dir, Spec());
  bool found = false;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.path().filename().string().starts_with("OPTIONS-")) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (const char* family : {"chunks", "ledger"}) {
      const size_t at = s.find(std::string("[CFOptions \"") + family + "\"]");
      ASSERT_NE(at, std::string::npos) << family;
      const size_t end = s.find("[CFOptions", at + 1);
      const std::string section = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
      EXPECT_THAT(section, HasSubstr("compression=kLZ4Compression")) << family;
      if (std::string_view(family) == "ledger") {
        EXPECT_THAT(section, HasSubstr("geops.LedgerSum"));
      }
    }
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(RocksDbShardStoreTest, RefusesAnotherConfigurationNamingWhatDiffersAndChangesNothing) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  MakeCommittedStore(dir, Spec(2, 2, 0));
  struct Case {
    ShardStoreSpec spec;
    std::string differs;
  };
  const std::vector<Case> cases = {
      {Spec(2, 2, 0, InitKind::kNormal), "model differs"},
      {Spec(2, 3, 0), "shard count differs (stored 2, this process 3)"},
      {Spec(2, 2, 1), "shard id differs (stored 0, this process 1)"},
      {Spec(3, 2, 0), "worker count differs (stored 2, this process 3)"},
  };
  const auto before = DirDigest(dir);
  for (const Case& c : cases) {
    Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir), c.spec);
    ASSERT_FALSE(store.ok()) << c.differs;
    EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(store.status().message(), HasSubstr(c.differs));
    EXPECT_EQ(DirDigest(dir), before) << c.differs;
  }
  // Only the part that differs is named.
  Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir), Spec(3, 2, 0));
  EXPECT_THAT(store.status().message(), Not(HasSubstr("model differs")));
  EXPECT_THAT(store.status().message(), Not(HasSubstr("shard id differs")));
  // The digest does see what an accepted open changes (a new log, manifest).
  EXPECT_NE(OpenOk(dir, Spec(2, 2, 0)), nullptr);
  EXPECT_NE(DirDigest(dir), before);
}

TEST(RocksDbShardStoreTest, RefusesDirectoriesThatAreNotStoresAndChangesNothing) {
  TempDir tmp;
  const ShardStoreSpec spec = Spec();
  struct Case {
    std::string name;
    std::function<void(const std::string&)> make;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"user files", [](const std::string& d) { fs::create_directories(d); testing::WriteFile(d + "/notes.txt", "mine"); },
       "is not empty and is not a geops shard store"},
      {"plain rocksdb", [](const std::string& d) { ASSERT_TRUE(testing::CreatePlainRocksDb(d).ok()); },
       "holds a RocksDB database that is not a geops shard store"},
      {"store without marker",
       [&](const std::string& d) {
         MakeCommittedStore(d, spec);
         fs::remove(d + "/" + format::kMarkerFile);
       },
       "holds a RocksDB database that is not a geops shard store"},
  };
  for (const Case& c : cases) {
    const std::string dir = tmp.Sub(c.name);
    c.make(dir);
    const auto before = DirDigest(dir);
    Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir), spec);
    ASSERT_FALSE(store.ok()) << c.name;
    EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << c.name;
    EXPECT_THAT(store.status().message(), HasSubstr(c.needle)) << c.name;
    EXPECT_EQ(DirDigest(dir), before) << c.name;
  }
  testing::WriteFile(tmp.Sub("a-file"), "x");
  Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(tmp.Sub("a-file")), spec);
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("is not a directory"));
}

TEST(RocksDbShardStoreTest, RefusesDamagedStoresWithDataLossAndChangesNothing) {
  TempDir tmp;
  const ShardStoreSpec spec = Spec();
  const ChunkKey first = spec.chunks[0].key;
  const ChunkKey other_shards = Spec(2, 2, 1).chunks[0].key;
  auto chunk_key = [](ChunkKey k) {
    const format::ChunkKeyBytes b = format::EncodeChunkKey(k);
    return std::string(b.data(), b.size());
  };
  auto chunk_value = [](std::vector<float> v, int corrupt) {
    const format::ChunkHeader h = format::EncodeChunkHeader(v, 1);  // the store's one commit
    std::string out(h.data(), h.size());
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    if (corrupt == 1) out.back() ^= 0x10;        // payload no longer matches its checksum
    if (corrupt == 2) out.resize(out.size() - 8);  // fewer floats than the header says
    return out;
  };
  const std::vector<float> right(spec.chunks[0].elements, 2.0f);
  struct Case {
    std::string name;
    std::function<void(const std::string&)> damage;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"garbage CURRENT", [](const std::string& d) { testing::WriteFile(d + "/CURRENT", "garbage\n"); },
       "cannot read its column families"},
      {"no MANIFEST",
       [](const std::string& d) {
         for (const auto& e : fs::directory_iterator(d)) {
           if (e.path().filename().string().starts_with("MANIFEST")) fs::remove(e.path());
         }
       },
       "is damaged"},
      {"damaged marker", [](const std::string& d) { testing::WriteFile(d + "/" + format::kMarkerFile, "hello"); },
       "GEOPS_STORE is damaged"},
      {"missing family", [](const std::string& d) { ASSERT_TRUE(testing::DropFamily(d, "chunks").ok()); },
       "column family 'chunks' is missing"},
      {"missing ledger family", [](const std::string& d) { ASSERT_TRUE(testing::DropFamily(d, "ledger").ok()); },
       "column family 'ledger' is missing"},
      {"missing meta record",
       [](const std::string& d) { ASSERT_TRUE(testing::DeleteRaw(d, "meta", "fingerprint/model").ok()); },
       "meta record 'fingerprint/model' is missing"},
      {"bad worker record",
       [](const std::string& d) { ASSERT_TRUE(testing::PutRaw(d, "meta", format::WorkerKey(0), "xx").ok()); },
       "worker record 0 has 2 bytes"},
      {"short chunk value",
       [&](const std::string& d) { ASSERT_TRUE(testing::PutRaw(d, "chunks", chunk_key(first), "abc").ok()); },
       "shorter than its header"},
      {"truncated chunk value",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "chunks", chunk_key(first), chunk_value(right, 2)).ok());
       },
       "payload bytes"},
      {"checksum mismatch",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "chunks", chunk_key(first), chunk_value(right, 1)).ok());
       },
       "fails its checksum"},
      {"chunk of the wrong size",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "chunks", chunk_key(first), chunk_value({1, 2, 3}, 0)).ok());
       },
       "has 3 values, the model says"},
      {"chunk of another shard",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "chunks", chunk_key(other_shards), chunk_value(right, 0)).ok());
       },
       "which this shard does not own"},
      {"missing chunk",
       [&](const std::string& d) { ASSERT_TRUE(testing::DeleteRaw(d, "chunks", chunk_key(first)).ok()); },
       "is missing"},
      {"bad chunk key", [&](const std::string& d) { ASSERT_TRUE(testing::PutRaw(d, "chunks", "xyz", "v").ok()); },
       "a chunk key has 3 bytes"},
  };
  for (const Case& c : cases) {
    const std::string dir = tmp.Sub(c.name);
    MakeCommittedStore(dir, spec);
    c.damage(dir);
    const auto before = DirDigest(dir);
    Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir), spec);
    ASSERT_FALSE(store.ok()) << c.name;
    EXPECT_EQ(store.status().code(), StatusCode::kDataLoss) << c.name << ": " << store.status().ToString();
    EXPECT_THAT(store.status().message(), HasSubstr(c.needle)) << c.name;
    EXPECT_EQ(DirDigest(dir), before) << c.name;
  }
}

TEST(RocksDbShardStoreTest, RefusesANewerFormat) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  MakeCommittedStore(dir, Spec());
  ASSERT_TRUE(testing::PutRaw(dir, "meta", "format_version", format::EncodeI32(format::kFormatVersion + 1)).ok());
  Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir), Spec());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("newer than this build reads"));
}

TEST(RocksDbShardStoreTest, RefusesAnOlderFormatAndChangesNothing) {
  TempDir tmp;
  const ShardStoreSpec spec = Spec();
  const std::string old_version = format::EncodeI32(format::kOldestReadableFormat - 1);
  struct Case {
    std::string name;
    std::function<void(const std::string&)> make_old;
  };
  const std::vector<Case> cases = {
      // As a format-1 store really is: no ledger family.
      {"format 1 layout",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::DropFamily(d, "ledger").ok());
         ASSERT_TRUE(testing::PutRaw(d, "meta", "format_version", old_version).ok());
       }},
      {"old version number", [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "meta", "format_version", old_version).ok());
       }},
  };
  for (const Case& c : cases) {
    const std::string dir = tmp.Sub(c.name);
    MakeCommittedStore(dir, spec);
    c.make_old(dir);
    const auto before = DirDigest(dir);
    Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(StoreOptions(dir), spec);
    ASSERT_FALSE(store.ok()) << c.name;
    EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << c.name << ": " << store.status().ToString();
    EXPECT_THAT(store.status().message(), HasSubstr("has format version 1, older than this build reads (2 to 3)"));
    EXPECT_THAT(store.status().message(), HasSubstr(dir));
    Result<StoreInfo> info = InspectShardStore(dir);
    EXPECT_EQ(info.status().code(), StatusCode::kFailedPrecondition) << c.name;
    EXPECT_EQ(DirDigest(dir), before) << c.name;
  }
}

TEST(RocksDbShardStoreTest, LedgerRowsSurviveReopensFlushesAndCompactions) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = Spec();
  MakeCommittedStore(dir, spec);
  // What the ledger must hold, summed here in the same precision.
  std::map<std::pair<SiteId, ChunkKey>, std::vector<double>> want;
  auto record = [&](const LedgerAdd& add) {
    std::vector<double>& row = want[{add.origin, add.key}];
    row.resize(add.num_elements);
    for (size_t i = 0; i < add.indices.size(); ++i) row[add.indices[i]] += static_cast<double>(add.values[i]);
  };
  auto check = [&](ShardStore& store) {
    for (SiteId origin : {1, 2}) {
      Result<std::vector<LedgerRow>> rows = store.ReadLedger(origin);
      ASSERT_TRUE(rows.ok()) << rows.status().ToString();
      size_t n = 0;
      for (const auto& [row, sums] : want) {
        if (row.first != origin) continue;
        ASSERT_LT(n, rows->size());
        EXPECT_EQ((*rows)[n].key, row.second);
        EXPECT_EQ((*rows)[n].values, sums) << "origin " << origin << " chunk " << row.second.chunk;
        ++n;
      }
      EXPECT_EQ(n, rows->size());
    }
  };
  // Every reopen flushes the log into a table; after a few, RocksDB
  // compacts them, merging what it finds of each row.
  for (int round = 0; round < 8; ++round) {
    std::unique_ptr<ShardStore> store = OpenOk(dir, spec, Durability::kOff);
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 60; ++i) {
      ShardCommit c;
      const ChunkExtent& chunk = spec.chunks[static_cast<size_t>(i) % 3];
      const uint32_t at = static_cast<uint32_t>((round * 7 + i) % chunk.elements);
      c.ledger_adds = {MakeAdd(1 + i % 2, chunk, {at}, {0.1f * static_cast<float>(i % 5 + 1)})};
      if (round == 5 && i == 30) c.ledger_clears = {2};  // a range deletion among the rows
      if (round == 5 && i == 30) std::erase_if(want, [](const auto& e) { return e.first.first == 2; });
      for (const LedgerAdd& add : c.ledger_adds) record(add);
      ASSERT_TRUE(store->Commit(c).ok());
    }
    check(*store);
  }
  std::unique_ptr<ShardStore> store = OpenOk(dir, spec);
  check(*store);
}

TEST(RocksDbShardStoreTest, ADamagedLedgerIsDataLossNamingTheRow) {
  TempDir tmp;
  const ShardStoreSpec spec = Spec();
  const ChunkExtent& first = spec.chunks[0];
  const std::string row = "ledger of origin 3, chunk (table " + std::to_string(first.key.table) + ", chunk " +
                          std::to_string(first.key.chunk) + ")";
  const std::string key = format::LedgerKey(3, first.key);
  auto raw_add = [](uint32_t num_elements, uint32_t index) {
    std::string out(1, static_cast<char>(format::kLedgerAddTag));
    const uint32_t fields[3] = {num_elements, 1, index};
    const float value = 1.0f;
    out.append(reinterpret_cast<const char*>(fields), sizeof(fields));
    out.append(reinterpret_cast<const char*>(&value), sizeof(value));
    return out;
  };
  struct Case {
    std::string name;
    std::function<void(const std::string&)> damage;
    std::string needle;
    bool inspect_sees_it;  // InspectShardStore knows no model: it cannot tell a row's right size
  };
  const std::vector<Case> cases = {
      {"garbage row", [&](const std::string& d) { ASSERT_TRUE(testing::PutRaw(d, "ledger", key, "abc").ok()); },
       row + ": a ledger entry has 3 bytes, shorter than its header", true},
      {"garbage add on a row",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::MergeRaw(d, "ledger", key, raw_add(first.elements, first.elements + 5)).ok());
       },
       row + ": a sparse ledger add has index " + std::to_string(first.elements + 5) + " at pair 0, beyond", true},
      {"good add on a garbage row",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "ledger", key, std::string("\x02\x01\0\0\0", 5)).ok());
         std::unique_ptr<ShardStore> store = OpenOk(d, spec);
         ShardCommit c;
         c.ledger_adds = {MakeAdd(3, first, {1}, {1.0f})};
         ASSERT_TRUE(store->Commit(c).ok());
       },
       row + ": a dense ledger row has 0 payload bytes for 1 sums", true},
      {"add of another size", [&](const std::string& d) {
         ASSERT_TRUE(testing::MergeRaw(d, "ledger", key, raw_add(first.elements + 1, 0)).ok());
       },
       row + ": a ledger entry is for " + std::to_string(first.elements + 1) + " elements", true},
      {"row of the wrong size",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::PutRaw(d, "ledger", key, format::EncodeLedgerRow(std::vector<double>{1, 2, 3})).ok());
       },
       row + " has 3 sums, but the chunk has " + std::to_string(first.elements) + " floats", false},
      {"row of another shard's chunk",
       [&](const std::string& d) {
         const ChunkExtent other = Spec(2, 2, 1).chunks[0];
         const std::vector<double> sums(static_cast<size_t>(other.elements), 1.0);
         ASSERT_TRUE(testing::PutRaw(d, "ledger", format::LedgerKey(3, other.key), format::EncodeLedgerRow(sums)).ok());
       },
       "is for a chunk this shard does not own", false},
      {"bad key",
       [&](const std::string& d) { ASSERT_TRUE(testing::PutRaw(d, "ledger", key.substr(0, 4) + "x", "v").ok()); },
       "a ledger key has 5 bytes, expected 12", true},
  };
  for (const Case& c : cases) {
    const std::string dir = tmp.Sub(c.name);
    MakeStoreWithLedger(dir, spec);
    c.damage(dir);
    Result<StoreInfo> info = InspectShardStore(dir);
    if (c.inspect_sees_it) {
      EXPECT_EQ(info.status().code(), StatusCode::kDataLoss) << c.name << ": " << info.status().ToString();
      EXPECT_THAT(info.status().message(), HasSubstr(c.needle)) << c.name;
    } else {
      EXPECT_TRUE(info.ok()) << c.name << ": " << info.status().ToString();
    }
    std::unique_ptr<ShardStore> store = OpenOk(dir, spec);  // the ledger is read when asked for, not at open
    ASSERT_NE(store, nullptr) << c.name;
    Result<std::vector<LedgerRow>> rows = store->ReadLedger(3);
    ASSERT_FALSE(rows.ok()) << c.name;
    EXPECT_EQ(rows.status().code(), StatusCode::kDataLoss) << c.name << ": " << rows.status().ToString();
    EXPECT_THAT(rows.status().message(), HasSubstr("shard store " + dir + " is damaged")) << c.name;
    EXPECT_THAT(rows.status().message(), HasSubstr(c.needle)) << c.name;
    Result<std::vector<LedgerRow>> other = store->ReadLedger(1);  // another origin reads as before
    ASSERT_TRUE(other.ok()) << c.name << ": " << other.status().ToString();
    EXPECT_EQ(other->size(), 2u) << c.name;
  }
}

TEST(RocksDbShardStoreTest, ASecondOpenOfAnOpenStoreIsUnavailable) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  std::unique_ptr<ShardStore> first = OpenOk(dir, Spec());
  Result<std::unique_ptr<ShardStore>> second = OpenRocksDbShardStore(StoreOptions(dir), Spec());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
}

TEST(RocksDbShardStoreTest, InspectReadsAStoreWithoutChangingIt) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = Spec();
  MakeCommittedStore(dir, spec);
  const auto before = DirDigest(dir);
  Result<StoreInfo> info = InspectShardStore(dir);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(DirDigest(dir), before);
  EXPECT_EQ(info->state.commits, 1u);
  EXPECT_EQ(info->state.fingerprint.num_workers, 2);
  EXPECT_EQ(info->state.workers.size(), 2u);
  EXPECT_EQ(info->state.chunks.size(), spec.chunks.size());
  int64_t chunks = 0;
  for (const StoreInfo::Table& t : info->tables) chunks += t.chunks;
  EXPECT_EQ(chunks, static_cast<int64_t>(spec.chunks.size()));
  EXPECT_GT(info->disk_bytes, 0);
  EXPECT_EQ(info->outbox_records, 0);
  EXPECT_TRUE(info->ledger_rows.empty());
  MakeStoreWithLedger(tmp.Sub("with-ledger"), spec);
  Result<StoreInfo> with_ledger = InspectShardStore(tmp.Sub("with-ledger"));
  ASSERT_TRUE(with_ledger.ok()) << with_ledger.status().ToString();
  EXPECT_EQ(with_ledger->ledger_rows, (std::map<SiteId, int64_t>{{1, 2}, {3, 1}}));

  Result<StoreInfo> none = InspectShardStore(tmp.Sub("nothing-here"));
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  fs::create_directory(tmp.Sub("junk"));
  testing::WriteFile(tmp.Sub("junk/x"), "y");
  EXPECT_EQ(InspectShardStore(tmp.Sub("junk")).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace geops::storage
