// The outbound journal's records: what Collect writes decodes back to the
// same state, rows without mass and acknowledged batches are deleted, and a
// damaged record is refused with DataLoss naming it.
#include "wan/outbound_journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "wan/codec.h"

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
  auto backlog_of = [&](SiteId peer) -> const SignificanceFilter* { return peer == 2 ? &backlog : nullptr; };
  j.Collect(acc, backlog_of, &puts, &deletes);
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
  j.Collect(acc, backlog_of, &puts, &deletes);
  Apply(&store, puts, deletes);
  r = OutboundJournal::Decode(Records(store), spec, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->accumulator.empty());
  ASSERT_EQ(r->batches.at(2).size(), 1u);
  EXPECT_EQ(r->batches.at(2)[0].seq, 2u);
}

TEST(OutboundJournalTest, DisabledJournalRecordsNothing) {
  SignificanceFilter acc = SignificanceFilter::Create().value();
  OutboundJournal j;
  j.AccumulatorChanged({0, 0});
  j.LastSeqChanged(1, 5);
  std::vector<OutboundRecord> puts;
  std::vector<std::string> deletes;
  j.Collect(acc, [](SiteId) { return nullptr; }, &puts, &deletes);
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

}  // namespace
}  // namespace geops::wan
