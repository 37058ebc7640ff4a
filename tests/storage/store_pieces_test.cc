// Commits written in pieces: a commit larger than a write batch reaches
// RocksDB in several, and only its last one (with the commit count) makes
// it live. Checked here: what several pieces write is read back whole; the
// records of a commit whose last piece never came are never read, not even
// after a later commit; a store written by format 2 (no slots) is read and
// upgraded at its next commit. Kills mid-commit are in crash_restart_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "storage/rocksdb_shard_store.h"
#include "storage/store_format.h"
#include "tests/storage/rocksdb_surgery.h"
#include "tests/storage/storage_test_util.h"

namespace geops::storage {
namespace {

using datacenter::testing::TestModel;
using datacenter::testing::TestOptions;
using testing::TempDir;

ShardStoreSpec Spec() { return ShardStoreSpec::Of(TestModel(InitKind::kUniform), TestOptions(2, 1, 0)); }

// Small pieces: every commit of the test model is many write batches.
StorageOptions PieceOptions(const std::string& dir) {
  StorageOptions o = testing::StoreOptions(dir);
  o.commit_piece_bytes = 4096;
  return o;
}

std::unique_ptr<ShardStore> Open(const std::string& dir, const ShardStoreSpec& spec) {
  Result<std::unique_ptr<ShardStore>> store = OpenRocksDbShardStore(PieceOptions(dir), spec);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

// Chunk `i` of `spec` at `value` + element / 1000.
void AddChunk(const ShardStoreSpec& spec, size_t i, float value, ShardCommit* commit) {
  float* out = commit->chunks.Append(spec.chunks[i].key, spec.chunks[i].elements);
  for (int64_t e = 0; e < spec.chunks[i].elements; ++e) out[e] = value + static_cast<float>(e) / 1000.0f;
}

// The value each chunk holds at element 0, in key order.
std::vector<float> FirstValues(const ShardState& state) {
  std::vector<float> out;
  for (size_t i = 0; i < state.chunks.size(); ++i) out.push_back(state.chunks.values(i)[0]);
  return out;
}

std::map<std::string, std::string> Outbox(const ShardState& state) {
  std::map<std::string, std::string> out;
  for (const OutboundRecord& r : state.outbound) out[r.key] = r.value;
  return out;
}

// One commit to the store in `dir`: every chunk at 1.x, and `outbox`.
void CommitEverything(const std::string& dir, const ShardStoreSpec& spec, std::vector<OutboundRecord> outbox) {
  std::unique_ptr<ShardStore> store = Open(dir, spec);
  ASSERT_NE(store, nullptr);
  ShardCommit c;
  for (size_t i = 0; i < spec.chunks.size(); ++i) AddChunk(spec, i, 1.0f, &c);
  c.outbound_puts = std::move(outbox);
  ASSERT_TRUE(store->Commit(c).ok());
}

Result<ShardState> Reload(const std::string& dir, const ShardStoreSpec& spec) {
  std::unique_ptr<ShardStore> store = Open(dir, spec);
  if (store == nullptr) return UnavailableError("cannot open " + dir);
  return store->Load();
}

TEST(StorePiecesTest, ACommitOfManyPiecesIsReadBackWhole) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = Spec();
  ASSERT_GT(spec.chunks.size(), 3u);
  const std::string big(20000, 'x');  // five pieces by itself
  {
    std::unique_ptr<ShardStore> store = Open(dir, spec);
    ASSERT_NE(store, nullptr);
    for (int round = 1; round <= 3; ++round) {  // each chunk alternates slots
      ShardCommit c;
      for (size_t i = 0; i < spec.chunks.size(); ++i) AddChunk(spec, i, static_cast<float>(round), &c);
      c.outbound_puts = {{"a-big", big + std::to_string(round)}, {"s2", "seq" + std::to_string(round)}};
      if (round < 3) c.outbound_puts.push_back({"s1", "seq" + std::to_string(round)});
      if (round == 3) c.outbound_deletes = {"s1", "s2"};  // a put in the same commit wins over its delete
      c.workers = {{0, round, round - 1, false}};
      c.shard_clock = round;
      ASSERT_TRUE(store->Commit(c).ok()) << round;
    }
  }
  Result<ShardState> state = Reload(dir, spec);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->commits, 3u);
  EXPECT_EQ(state->format_version, format::kFormatVersion);
  EXPECT_EQ(FirstValues(*state), std::vector<float>(spec.chunks.size(), 3.0f));
  for (size_t i = 0; i < state->chunks.size(); ++i) {
    ASSERT_EQ(state->chunks.values(i).size(), static_cast<size_t>(spec.chunks[i].elements));
    EXPECT_FLOAT_EQ(state->chunks.values(i).back(), 3.0f + static_cast<float>(spec.chunks[i].elements - 1) / 1000.0f);
  }
  const std::map<std::string, std::string> outbox = Outbox(*state);
  EXPECT_EQ(outbox.size(), 2u);
  EXPECT_TRUE(outbox.contains("a-big") && outbox.at("a-big") == big + "3");
  EXPECT_TRUE(outbox.contains("s2") && outbox.at("s2") == "seq3");
  ASSERT_EQ(state->workers.size(), 1u);
  EXPECT_EQ(state->workers[0].clock, 3);
}

TEST(StorePiecesTest, RecordsOfACommitWhoseLastPieceNeverCameAreNeverRead) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = Spec();
  CommitEverything(dir, spec, {{"k", "one"}});  // commit 1: every record in slot 0
  // What the pieces of commit 2 leave when the process dies before its
  // last piece: chunk 0 and record "k" in slot 1, a new record "n".
  std::vector<float> nines(spec.chunks[0].elements, 9.0f);
  const format::ChunkHeader h = format::EncodeChunkHeader(nines, 2);
  std::string value(h.data(), h.size());
  value.append(reinterpret_cast<const char*>(nines.data()), nines.size() * sizeof(float));
  ASSERT_TRUE(testing::PutRaw(dir, "chunks", format::ChunkSlotKey(spec.chunks[0].key, 1), value).ok());
  ASSERT_TRUE(testing::PutRaw(dir, "outbox", format::OutboxSlotKey("k", 1), format::EncodeOutboxSlotValue(2, "two")).ok());
  ASSERT_TRUE(testing::PutRaw(dir, "outbox", format::OutboxSlotKey("n", 0), format::EncodeOutboxSlotValue(2, "new")).ok());

  {
    std::unique_ptr<ShardStore> store = Open(dir, spec);
    ASSERT_NE(store, nullptr);
    Result<ShardState> state = store->Load();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(state->commits, 1u);
    EXPECT_EQ(FirstValues(*state), std::vector<float>(spec.chunks.size(), 1.0f));
    EXPECT_EQ(Outbox(*state), (std::map<std::string, std::string>{{"k", "one"}}));
    // The real commit 2 touches neither chunk 0 nor "k" nor "n": the
    // leftovers, which carry its number, must not become live with it.
    ShardCommit c;
    AddChunk(spec, 1, 5.0f, &c);
    ASSERT_TRUE(store->Commit(c).ok());
  }
  Result<ShardState> state = Reload(dir, spec);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->commits, 2u);
  std::vector<float> expected(spec.chunks.size(), 1.0f);
  expected[1] = 5.0f;
  EXPECT_EQ(FirstValues(*state), expected);
  EXPECT_EQ(Outbox(*state), (std::map<std::string, std::string>{{"k", "one"}}));
}

TEST(StorePiecesTest, AFormatTwoStoreIsReadAndUpgradedAtItsNextCommit) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = Spec();
  CommitEverything(dir, spec, {});
  // Rewrite it as format 2 wrote it: 16-byte chunk headers, outbox records
  // under their own keys, version 2.
  for (const ChunkExtent& chunk : spec.chunks) {
    const std::vector<float> v(chunk.elements, 7.0f);
    const uint32_t fields[4] = {1, static_cast<uint32_t>(v.size()), format::Checksum(v), 0};
    std::string value(reinterpret_cast<const char*>(fields), sizeof(fields));
    value.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    ASSERT_TRUE(testing::PutRaw(dir, "chunks", format::ChunkSlotKey(chunk.key, 0), value).ok());
  }
  ASSERT_TRUE(testing::PutRaw(dir, "outbox", "k", "old").ok());
  ASSERT_TRUE(testing::PutRaw(dir, "outbox", "gone", "old").ok());
  ASSERT_TRUE(testing::PutRaw(dir, "meta", format::kFormatVersionKey, format::EncodeI32(2)).ok());
  {
    std::unique_ptr<ShardStore> store = Open(dir, spec);
    ASSERT_NE(store, nullptr);
    Result<ShardState> state = store->Load();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(state->format_version, 2);
    EXPECT_EQ(FirstValues(*state), std::vector<float>(spec.chunks.size(), 7.0f));
    EXPECT_EQ(Outbox(*state), (std::map<std::string, std::string>{{"gone", "old"}, {"k", "old"}}));
    ShardCommit c;
    AddChunk(spec, 0, 8.0f, &c);
    c.outbound_puts = {{"k", "new"}};
    c.outbound_deletes = {"gone"};
    ASSERT_TRUE(store->Commit(c).ok());
    ShardCommit d;  // a delete after the upgrade leaves no older form behind
    d.outbound_deletes = {"k"};
    ASSERT_TRUE(store->Commit(d).ok());
  }
  Result<ShardState> state = Reload(dir, spec);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->format_version, format::kFormatVersion);
  std::vector<float> expected(spec.chunks.size(), 7.0f);
  expected[0] = 8.0f;
  EXPECT_EQ(FirstValues(*state), expected);
  EXPECT_TRUE(state->outbound.empty());
}

TEST(StorePiecesTest, APieceSizeOutsideItsRangeIsRefused) {
  StorageOptions o = testing::StoreOptions("unused");
  o.commit_piece_bytes = 100;
  EXPECT_THAT(o.Validate().message(), ::testing::HasSubstr("commit_piece_bytes must be in 4096.."));
}

}  // namespace
}  // namespace geops::storage
