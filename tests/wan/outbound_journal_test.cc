// The outbound journal's records: what Collect writes decodes back to the
// same state, rows without mass and acknowledged batches are deleted, and a
// damaged record is refused with DataLoss naming it.
#include "wan/replication/outbound_journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "wan/codec/codec.h"

namespace geops::wan {
namespace {

using ::testing::HasSubstr;

ModelSpec Model() {
  Result<ModelSpec> spec = ModelSpec::Create({{"w", 8, 16}, {"b", 1, 5}}, 256);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::move(spec).value();
}

WanBatch Batch(SiteId origin, uint64_t seq, ChunkKey key, uint32_t n) {
  BatchHeader h;
  h.origin = origin;
  h.seq = seq;
  h.clock = 7;
  WanBatch b{origin, seq, 7, {}};
  BatchEncoder enc;
  SparseChunkUpdate u{key, n, {1}, {2.5f}};
  EXPECT_TRUE(enc.Encode(h, std::vector<SparseChunkUpdate>{u}, &b.payload, nullptr).ok());
  return b;
}

// Applies a commit's records to a map, as the store does (deletes first).
void Apply(std::map<std::string, std::string>* store, const std::vector<OutboundRecord>& puts,
           const std::vector<std::string>& deletes) {
  for (const std::string& k : deletes) store->erase(k);
  for (const OutboundRecord& r : puts) (*store)[r.key] = r.value;
}

// Collect() as a commit sees it: the small records, then the captured rows
// read as a store reads them (a row with no mass becomes a delete), then
// the release that follows a commit.
void CollectAll(OutboundJournal& j, SignificanceFilter* acc,
                const std::function<SignificanceFilter*(SiteId)>& backlog, std::vector<OutboundRecord>* puts,
                std::vector<std::string>* deletes) {
  DeferredRecords* rows = j.Collect(acc, backlog, puts, deletes);
  if (rows == nullptr) return;
  for (size_t i = 0; i < rows->size(); ++i) {
    std::string value;
    if (rows->Read(i, &value)) {
      puts->push_back(OutboundRecord{rows->key(i), std::move(value)});
    } else {
      deletes->push_back(rows->key(i));
    }
  }
  j.Release();
}

std::vector<OutboundRecord> Records(const std::map<std::string, std::string>& store) {
  std::vector<OutboundRecord> out;
  for (const auto& [k, v] : store) out.push_back({k, v});
  return out;
}

TEST(OutboundJournalTest, WhatIsCollectedDecodesToTheSameState) {
  const ModelSpec spec = Model();
  const ChunkKey w0{0, 0}, b0{1, 0};
  const uint32_t nw = static_cast<uint32_t>(spec.ChunkElements(w0));
  const uint32_t nb = static_cast<uint32_t>(spec.ChunkElements(b0));
  SignificanceFilter acc = SignificanceFilter::Create().value();
  SignificanceFilter backlog = SignificanceFilter::Create().value();
  ASSERT_TRUE(acc.AddSparse(w0, nw, std::vector<uint32_t>{0, 3}, std::vector<float>{1.0f, -4.0f}).ok());
  ASSERT_TRUE(backlog.AddSparse(b0, nb, std::vector<uint32_t>{4}, std::vector<float>{0.5f}).ok());
  OutboundJournal j;
  j.set_enabled(true);
  j.AccumulatorChanged(w0);
  j.BacklogChanged(2, b0);
  const WanBatch sent1 = Batch(0, 1, w0, nw), sent2 = Batch(0, 2, w0, nw);
  j.BatchSent(2, sent1);
  j.BatchSent(2, sent2);
  j.LastSeqChanged(2, 2);
  std::map<std::string, std::string> store;
  std::vector<OutboundRecord> puts;
  std::vector<std::string> deletes;
  auto backlog_of = [&](SiteId peer) -> SignificanceFilter* { return peer == 2 ? &backlog : nullptr; };
  CollectAll(j, &acc, backlog_of, &puts, &deletes);
  Apply(&store, puts, deletes);

  Result<RecoveredOutbound> r = OutboundJournal::Decode(Records(store), spec, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->accumulator.size(), 1u);
  EXPECT_EQ(r->accumulator[0].indices, (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(r->accumulator[0].values, (std::vector<float>{1.0f, -4.0f}));
  ASSERT_EQ(r->backlogs.at(2).size(), 1u);
  EXPECT_EQ(r->backlogs.at(2)[0].values, (std::vector<float>{0.5f}));
  ASSERT_EQ(r->batches.at(2).size(), 2u);
  EXPECT_EQ(r->batches.at(2)[0].seq, 1u);
  EXPECT_EQ(r->batches.at(2)[1].payload, sent2.payload);
  EXPECT_EQ(r->last_seq.at(2), 2u);
  OutboundSummary sum = OutboundSummary::Of(Records(store));
  EXPECT_EQ(sum.accumulator_rows, 1);
  EXPECT_EQ(sum.peers.at(2).batches, 2);
  EXPECT_EQ(sum.peers.at(2).first_seq, 1u);
  EXPECT_EQ(sum.peers.at(2).last_assigned, 2u);

  // The accumulator is shipped (its row empties), batch 1 is acknowledged:
  // both records go.
  std::vector<SparseChunkUpdate> taken;
  acc.DrainAll(&taken);
  j.AccumulatorChanged(w0);
  j.BatchAcked(2, 1);
  puts.clear();
  deletes.clear();
  CollectAll(j, &acc, backlog_of, &puts, &deletes);
  Apply(&store, puts, deletes);
  r = OutboundJournal::Decode(Records(store), spec, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->accumulator.empty());
  ASSERT_EQ(r->batches.at(2).size(), 1u);
  EXPECT_EQ(r->batches.at(2)[0].seq, 2u);
}

// Rows are captured copy-on-write: the store reads them after the capture,
// while the replicator goes on changing them.
TEST(OutboundJournalTest, RowsAreWrittenAsCapturedThoughTheFiltersChangeBeforeTheStoreReadsThem) {
  const ModelSpec spec = Model();
  const ChunkKey w0{0, 0}, w1{0, 1}, b0{1, 0};
  const uint32_t nw = static_cast<uint32_t>(spec.ChunkElements(w0));
  const uint32_t nb = static_cast<uint32_t>(spec.ChunkElements(b0));
  SignificanceFilter acc = SignificanceFilter::Create().value();
  SignificanceFilter backlog = SignificanceFilter::Create().value();
  ASSERT_TRUE(acc.AddSparse(w0, nw, std::vector<uint32_t>{1}, std::vector<float>{2.0f}).ok());
  ASSERT_TRUE(acc.AddSparse(w1, nw, std::vector<uint32_t>{0}, std::vector<float>{3.0f}).ok());
  ASSERT_TRUE(backlog.AddSparse(b0, nb, std::vector<uint32_t>{4}, std::vector<float>{0.5f}).ok());
  OutboundJournal j;
  j.set_enabled(true);
  j.AccumulatorChanged(w0);
  j.AccumulatorChanged(w1);
  j.BacklogChanged(2, b0);
  std::vector<OutboundRecord> puts;
  std::vector<std::string> deletes;
  DeferredRecords* rows =
      j.Collect(&acc, [&](SiteId peer) -> SignificanceFilter* { return peer == 2 ? &backlog : nullptr; }, &puts,
                &deletes);
  ASSERT_NE(rows, nullptr);
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_TRUE(puts.empty()) << "rows are not copied at the capture";
  // After the capture: w0 is drained (its row empties), w1 grows, and the
  // backlog row is taken. None of it may reach this commit.
  std::vector<SparseChunkUpdate> taken;
  ASSERT_TRUE(acc.AddSparse(w1, nw, std::vector<uint32_t>{0}, std::vector<float>{10.0f}).ok());
  backlog.DrainAll(&taken);
  std::map<std::string, std::string> store;
  for (size_t i = 0; i < rows->size(); ++i) {
    std::string value;
    ASSERT_TRUE(rows->Read(i, &value)) << "row " << i << " held mass at the capture";
    store[rows->key(i)] = value;
  }
  acc.DrainAll(&taken);  // after the store read it: nothing to keep
  j.Release();
  // w1 and the backlog row were copied before they changed; nothing else.
  EXPECT_EQ(j.capture_stats().rows_saved, 2);
  EXPECT_EQ(j.capture_stats().peak_saved_bytes, int64_t{nw + nb} * int64_t{sizeof(float)});
  Result<RecoveredOutbound> r = OutboundJournal::Decode(Records(store), spec, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->accumulator.size(), 2u);
  EXPECT_EQ(r->accumulator[0].values, (std::vector<float>{2.0f}));
  EXPECT_EQ(r->accumulator[1].values, (std::vector<float>{3.0f}));
  ASSERT_EQ(r->backlogs.at(2).size(), 1u);
  EXPECT_EQ(r->backlogs.at(2)[0].values, (std::vector<float>{0.5f}));

  // The next commit: w1 changed and then emptied, so its record goes.
  j.AccumulatorChanged(w1);
  puts.clear();
  deletes.clear();
  CollectAll(j, &acc, [](SiteId) -> SignificanceFilter* { return nullptr; }, &puts, &deletes);
  EXPECT_TRUE(puts.empty());
  ASSERT_EQ(deletes.size(), 1u);
}

// A filter changed by its owner while the committer reads captured rows:
// every row read is the row at the capture, exactly.
TEST(OutboundJournalTest, ConcurrentChangesNeverLeakIntoCapturedRows) {
  const ModelSpec spec = Model();
  std::vector<ChunkKey> keys;
  for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
    for (const ChunkKey k : spec.ChunksOfTable(t)) keys.push_back(k);
  }
  SignificanceFilter acc = SignificanceFilter::Create().value();
  OutboundJournal j;
  j.set_enabled(true);
  for (int round = 1; round <= 30 && !::testing::Test::HasFailure(); ++round) {
    for (const ChunkKey k : keys) {
      ASSERT_TRUE(acc.Add(k, std::vector<float>(spec.ChunkElements(k), 1.0f)).ok());
      j.AccumulatorChanged(k);
    }
    std::vector<OutboundRecord> puts;
    std::vector<std::string> deletes;
    DeferredRecords* rows = j.Collect(&acc, [](SiteId) -> SignificanceFilter* { return nullptr; }, &puts, &deletes);
    ASSERT_NE(rows, nullptr);
    std::atomic<bool> started{false};
    std::thread owner([&] {
      for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
        acc.Add(*it, std::vector<float>(spec.ChunkElements(*it), 0.5f)).IgnoreError();
        started.store(true);
      }
      std::vector<SparseChunkUpdate> taken;
      acc.DrainAll(&taken);
    });
    while (!started.load()) std::this_thread::yield();
    for (size_t i = 0; i < rows->size(); ++i) {
      std::string value;
      EXPECT_TRUE(rows->Read(i, &value));
      std::vector<float> row(value.size() / sizeof(float));
      std::memcpy(row.data(), value.data(), value.size());
      const size_t n = row.size();
      EXPECT_EQ(row, std::vector<float>(n, 1.0f)) << "round " << round << ", row " << i;
    }
    owner.join();
    j.Release();
  }
}

TEST(OutboundJournalTest, DisabledJournalRecordsNothing) {
  SignificanceFilter acc = SignificanceFilter::Create().value();
  OutboundJournal j;
  j.AccumulatorChanged({0, 0});
  j.LastSeqChanged(1, 5);
  std::vector<OutboundRecord> puts;
  std::vector<std::string> deletes;
  CollectAll(j, &acc, [](SiteId) -> SignificanceFilter* { return nullptr; }, &puts, &deletes);
  EXPECT_TRUE(puts.empty());
  EXPECT_TRUE(deletes.empty());
}

TEST(OutboundJournalTest, DamagedRecordsAreDataLossNamingTheRecord) {
  const ModelSpec spec = Model();
  auto decode = [&](OutboundRecord r) { return OutboundJournal::Decode({&r, 1}, spec, 0).status(); };
  std::string key(1, 'a');
  key += std::string("\0\0\0\0\0\0\0\0", 8);
  const std::string short_row(12, '\0');
  Status s = decode({key, short_row});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("bytes, expected"));
  std::string nan_row(static_cast<size_t>(spec.ChunkElements({0, 0})) * 4, '\0');
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan_row.data() + 8, &nan, 4);
  s = decode({key, nan_row});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("element 2 is not finite"));
  std::string unknown_chunk = key;
  unknown_chunk[8] = 9;  // chunk 9 of table 0: not in the model
  EXPECT_THAT(decode({unknown_chunk, nan_row}).message(), HasSubstr("no such chunk"));
  EXPECT_EQ(decode({"z", "x"}).code(), StatusCode::kDataLoss);
  // A stored batch whose header names another seq than its key.
  const WanBatch b = Batch(0, 3, {0, 0}, static_cast<uint32_t>(spec.ChunkElements({0, 0})));
  std::string bkey(1, 'o');
  bkey += std::string("\0\0\0\2", 4) + std::string("\0\0\0\0\0\0\0\4", 8);
  s = decode({bkey, std::string(b.payload.begin(), b.payload.end())});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("expected origin 0 seq 4"));
}


std::string U64(uint64_t v) {
  std::string out(sizeof(v), '\0');
  std::memcpy(out.data(), &v, sizeof(v));
  return out;
}

TEST(OutboundJournalTest, IncarnationsRoundTripAndShowInTheSummary) {
  const ModelSpec spec = Model();
  SignificanceFilter acc = SignificanceFilter::Create().value();
  auto no_backlog = [](SiteId) -> SignificanceFilter* { return nullptr; };
  OutboundJournal j;
  j.set_enabled(true);
  j.IncarnationChanged(42);
  j.PeerIncarnationChanged(1, 7);
  j.PeerIncarnationChanged(2, 9);
  j.PeerIncarnationChanged(2, 11);  // the last one counts
  std::map<std::string, std::string> store;
  std::vector<OutboundRecord> puts;
  std::vector<std::string> deletes;
  CollectAll(j, &acc, no_backlog, &puts, &deletes);
  EXPECT_EQ(puts.size(), 3u);
  EXPECT_TRUE(deletes.empty());
  Apply(&store, puts, deletes);
  EXPECT_EQ(store.at("i"), U64(42));
  EXPECT_EQ(store.at(std::string("k\0\0\0\2", 5)), U64(11));

  Result<RecoveredOutbound> r = OutboundJournal::Decode(Records(store), spec, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->incarnation, 42u);
  EXPECT_EQ(r->peer_incarnations, (std::map<SiteId, uint64_t>{{1, 7}, {2, 11}}));
  EXPECT_TRUE(r->empty()) << "incarnations are not outbound state";
  OutboundSummary sum = OutboundSummary::Of(Records(store));
  EXPECT_EQ(sum.incarnation, 42u);
  ASSERT_EQ(sum.peers.size(), 2u);
  EXPECT_EQ(sum.peers.at(1).incarnation, 7u);
  EXPECT_EQ(sum.peers.at(2).incarnation, 11u);
  EXPECT_EQ(sum.peers.at(2).batches, 0);
  EXPECT_EQ(sum.unknown, 0);

  // Collected once: nothing changed, nothing written again.
  puts.clear();
  CollectAll(j, &acc, no_backlog, &puts, &deletes);
  EXPECT_TRUE(puts.empty());
  // One peer restarts: only its record is rewritten.
  j.PeerIncarnationChanged(1, 8);
  CollectAll(j, &acc, no_backlog, &puts, &deletes);
  ASSERT_EQ(puts.size(), 1u);
  EXPECT_EQ(puts[0].key, std::string("k\0\0\0\1", 5));
  Apply(&store, puts, deletes);
  r = OutboundJournal::Decode(Records(store), spec, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->incarnation, 42u);
  EXPECT_EQ(r->peer_incarnations, (std::map<SiteId, uint64_t>{{1, 8}, {2, 11}}));

  // A disabled journal (no store) records none of it.
  OutboundJournal off;
  off.IncarnationChanged(5);
  off.PeerIncarnationChanged(1, 5);
  puts.clear();
  CollectAll(off, &acc, no_backlog, &puts, &deletes);
  EXPECT_TRUE(puts.empty());
}

TEST(OutboundJournalTest, MalformedIncarnationRecordsAreDataLossNamingTheRecord) {
  const ModelSpec spec = Model();
  auto decode = [&](OutboundRecord r) { return OutboundJournal::Decode({&r, 1}, spec, 0).status(); };
  struct Case {
    OutboundRecord record;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{std::string("i\0", 2), U64(3)}, "outbox record 'i\\x00': malformed incarnation record"},
      {{"i", std::string(4, '\1')}, "outbox record 'i': malformed incarnation record"},
      {{"i", U64(0)}, "outbox record 'i': malformed incarnation record"},
      {{std::string("k\0\0\1", 4), U64(3)}, "outbox record 'k\\x00\\x00\\x01': malformed peer incarnation record"},
      {{std::string("k\0\0\0\1\0", 6), U64(3)},
       "outbox record 'k\\x00\\x00\\x00\\x01\\x00': malformed peer incarnation record"},
      {{std::string("k\0\0\0\1", 5), std::string(7, '\1')},
       "outbox record 'k\\x00\\x00\\x00\\x01': malformed peer incarnation record"},
  };
  for (const Case& c : cases) {
    const Status s = decode(c.record);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.needle;
    EXPECT_THAT(s.message(), HasSubstr(c.needle));
    // The summary does not trust them either.
    const OutboundSummary sum = OutboundSummary::Of({&c.record, 1});
    if (c.record.value != U64(0)) {
      EXPECT_EQ(sum.unknown, 1) << c.needle;
    }
    EXPECT_EQ(sum.incarnation, 0u) << c.needle;
    EXPECT_TRUE(sum.peers.empty()) << c.needle;
  }
  // A good record next to a bad one does not save it.
  const std::vector<OutboundRecord> mixed = {{"i", U64(4)}, {std::string("k\0\0\1", 4), U64(3)}};
  EXPECT_EQ(OutboundJournal::Decode(mixed, spec, 0).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace geops::wan
