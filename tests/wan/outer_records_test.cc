// The outer step's records (outer_records.h): a state journalled at any
// point decodes to an OuterStep that goes on bit-identically with the one
// that wrote it; applied steps leave no contribution records behind; and a
// damaged record is refused with DataLoss naming it.
#include "wan/replication/outer_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace geops::wan {
namespace {

using ::testing::HasSubstr;

ModelSpec Model() {
  Result<ModelSpec> spec = ModelSpec::Create({{"w", 8, 16}, {"b", 1, 5}}, 64);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::move(spec).value();
}

std::vector<ChunkKey> Keys(const ModelSpec& spec) {
  std::vector<ChunkKey> out;
  for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
    for (const ChunkKey k : spec.ChunksOfTable(t)) out.push_back(k);
  }
  return out;
}

OuterStep NewStep(const ModelSpec& spec) {
  OuterStep o({0, 1, 2}, OuterOptions{0.7, 0.9, true, true});
  for (const ChunkKey k : Keys(spec)) {
    std::vector<float> v(static_cast<size_t>(spec.ChunkElements(k)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
    o.InitChunk(k, v);
  }
  return o;
}

// Site `site`'s contribution to `step`: a few entries of every chunk.
std::vector<SparseChunkUpdate> Contribution(const ModelSpec& spec, int64_t step, SiteId site) {
  std::vector<SparseChunkUpdate> out;
  for (const ChunkKey k : Keys(spec)) {
    SparseChunkUpdate u;
    u.key = k;
    u.num_elements = static_cast<uint32_t>(spec.ChunkElements(k));
    for (uint32_t i = static_cast<uint32_t>(site + step) % 3; i < u.num_elements; i += 3) {
      u.indices.push_back(i);
      u.values.push_back(0.125f * static_cast<float>((i + 7 * step + site) % 9) - 0.5f);
    }
    out.push_back(std::move(u));
  }
  return out;
}

// Applies a commit's records to a map, as the store does (deletes first).
void Commit(OuterJournal& j, const OuterStep& o, Clock last_sync, std::map<std::string, std::string>* store) {
  std::vector<OutboundRecord> puts;
  std::vector<std::string> deletes;
  j.Collect(o, last_sync, &puts, &deletes);
  for (const std::string& k : deletes) store->erase(k);
  for (const OutboundRecord& r : puts) (*store)[r.key] = r.value;
}

Result<RecoveredOuter> Decode(const std::map<std::string, std::string>& store, const ModelSpec& spec) {
  RecoveredOuter out;
  for (const auto& [k, v] : store) {
    EXPECT_TRUE(IsOuterRecord(k)) << k;
    GEOPS_RETURN_IF_ERROR(DecodeOuterRecord(OutboundRecord{k, v}, spec, &out));
  }
  return out;
}

Status Add(OuterStep* o, OuterJournal* j, const ModelSpec& spec, int64_t step, SiteId site, bool final = false) {
  GEOPS_RETURN_IF_ERROR(o->Add(step, site, Contribution(spec, step, site), final));
  j->ContributionAdded(step, site);
  return Status::Ok();
}

void ApplyReady(OuterStep* o, OuterJournal* j) {
  while (o->Ready()) {
    ASSERT_TRUE(o->ApplyNext([](ChunkKey, std::span<const float>) {}).ok());
    j->StepApplied(o->next_step() - 1);
  }
}

TEST(OuterRecordsTest, AJournalledStateGoesOnBitIdenticallyAfterARestore) {
  const ModelSpec spec = Model();
  OuterStep a = NewStep(spec);
  OuterJournal j;
  j.set_enabled(true);
  j.MarkAll();
  std::map<std::string, std::string> store;
  Commit(j, a, 0, &store);
  // Steps 1-3 applied (some commits in between), site 2 ends at step 3;
  // step 4 has contributions of sites 0 and 1 waiting, site 0 already gave
  // step 5.
  for (int64_t step = 1; step <= 3; ++step) {
    for (SiteId s = 0; s < 3; ++s) ASSERT_TRUE(Add(&a, &j, spec, step, s, s == 2 && step == 3).ok());
    if (step == 2) Commit(j, a, 8, &store);
    ApplyReady(&a, &j);
  }
  ASSERT_TRUE(Add(&a, &j, spec, 4, 0).ok());
  Commit(j, a, 12, &store);
  ASSERT_TRUE(Add(&a, &j, spec, 4, 1).ok());
  ASSERT_TRUE(Add(&a, &j, spec, 5, 0).ok());
  j.MetaChanged();
  Commit(j, a, 20, &store);

  for (const auto& [k, v] : store) {
    if (k[0] == 'c') {
      EXPECT_GE(k[8], 4) << "a contribution record of an applied step is left";
    }
  }
  Result<RecoveredOuter> rec = Decode(store, spec);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_TRUE(rec->present);
  EXPECT_EQ(rec->last_sync, 20);
  OuterStep b = NewStep(spec);
  // b starts from other initial values: everything must come from the store.
  ASSERT_TRUE(b.Import(std::move(rec->state)).ok());
  EXPECT_EQ(b.next_step(), 4);
  EXPECT_EQ(b.digests(), a.digests());
  EXPECT_EQ(b.LastGiven(0), 5);
  EXPECT_EQ(b.LastGiven(2), 3);
  EXPECT_FALSE(b.Add(4, 2, {}, false).ok()) << "site 2 ended at step 3";
  for (OuterStep* o : {&a, &b}) {
    ASSERT_TRUE(o->Add(5, 1, Contribution(spec, 5, 1), true).ok());
    ASSERT_TRUE(o->Add(6, 0, Contribution(spec, 6, 0), true).ok());
    for (int i = 0; i < 3 && o->Ready(); ++i) ASSERT_TRUE(o->ApplyNext([](ChunkKey, std::span<const float>) {}).ok());
    EXPECT_TRUE(o->Finished());
  }
  EXPECT_EQ(b.digests(), a.digests());
  for (const ChunkKey k : Keys(spec)) {
    std::span<const float> ta = a.Theta(k), tb = b.Theta(k), ma = a.Momentum(k), mb = b.Momentum(k);
    ASSERT_EQ(std::memcmp(ta.data(), tb.data(), ta.size_bytes()), 0);
    ASSERT_EQ(std::memcmp(ma.data(), mb.data(), ma.size_bytes()), 0);
  }
}

// Where each contribution leaves its site's workers travels with it: the
// marks of contributions not applied yet, and each site's last mark, come
// back from the store as they went in, also from a state encoded whole
// (what a peer fetches).
TEST(OuterRecordsTest, MarksComeBackFromTheRecords) {
  const ModelSpec spec = Model();
  OuterStep a = NewStep(spec);
  OuterJournal j;
  j.set_enabled(true);
  j.MarkAll();
  auto mark = [](Clock cut, int w) {
    ContributionMark m;
    m.cut = cut;
    for (int i = 0; i < w; ++i) m.covered.push_back(CoveredBatch{cut - 1 + i, i % 2 == 0 ? 0 : 3});
    m.covered.push_back(CoveredBatch{});  // a worker that sent nothing
    return m;
  };
  for (SiteId s = 0; s < 3; ++s) ASSERT_TRUE(a.Add(1, s, Contribution(spec, 1, s), false, mark(8, s + 1)).ok());
  for (SiteId s = 0; s < 3; ++s) j.ContributionAdded(1, s);
  ApplyReady(&a, &j);
  ASSERT_TRUE(a.Add(2, 0, Contribution(spec, 2, 0), false, mark(16, 2)).ok());
  j.ContributionAdded(2, 0);
  ASSERT_TRUE(a.Add(2, 1, Contribution(spec, 2, 1), false).ok()) << "a contribution without a mark";
  j.ContributionAdded(2, 1);
  std::map<std::string, std::string> store;
  Commit(j, a, 16, &store);
  Result<RecoveredOuter> rec = Decode(store, spec);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const OuterStep::State want = a.Export();
  EXPECT_EQ(rec->state.pending_marks, want.pending_marks);
  EXPECT_EQ(rec->state.last_marks, want.last_marks);
  ASSERT_EQ(want.last_marks.count(0), 1u);
  EXPECT_EQ(want.last_marks.at(0), mark(16, 2));
  EXPECT_EQ(want.last_marks.count(1), 0u) << "site 1's last contribution came without one";
  EXPECT_EQ(want.last_marks.at(2), mark(8, 3)) << "an applied contribution's mark stays the site's last";
  std::map<std::string, std::string> whole;
  for (const OutboundRecord& r : EncodeOuterState(want, 16)) whole[r.key] = r.value;
  Result<RecoveredOuter> again = Decode(whole, spec);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->state.pending_marks, want.pending_marks);
  EXPECT_EQ(again->state.last_marks, want.last_marks);
  EXPECT_EQ(again->state.given, want.given);
  EXPECT_EQ(again->state.digests, want.digests);
  EXPECT_EQ(again->state.theta, want.theta);
  EXPECT_EQ(again->state.next_step, want.next_step);
}

TEST(OuterRecordsTest, DamagedRecordsAreDataLossNamingTheRecord) {
  const ModelSpec spec = Model();
  OuterStep a = NewStep(spec);
  OuterJournal j;
  j.set_enabled(true);
  j.MarkAll();
  ASSERT_TRUE(Add(&a, &j, spec, 1, 0).ok());
  std::map<std::string, std::string> store;
  Commit(j, a, 4, &store);
  ASSERT_TRUE(Decode(store, spec).ok());
  const std::string theta = std::string("t") + std::string(4, '\0') + std::string(4, '\0');
  const std::string contribution = std::string("c") + std::string(7, '\0') + "\x01" + std::string(4, '\0');
  ASSERT_EQ(store.count(theta), 1u);
  ASSERT_EQ(store.count(contribution), 1u);
  struct Case {
    std::string key;
    std::string value;
    std::string needle;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::string nan_row = store[theta];
  std::memcpy(nan_row.data() + 4 * sizeof(float), &nan, sizeof(float));
  std::string bad_version = store["u"];
  bad_version[0] = 9;
  const std::vector<Case> cases = {
      {theta, store[theta].substr(4), "outer state record 't\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00': 60 bytes, expected 64"},
      {theta, nan_row, "element 4 is not finite"},
      {std::string("t") + std::string(4, '\0') + std::string("\0\0\0\x09", 4), store[theta],
       "the model has no such chunk"},
      {contribution, store[contribution].substr(0, store[contribution].size() - 3), "truncated"},
      {contribution, store[contribution] + "x", "truncated in a mark"},
      {contribution, store[contribution] + std::string(12, '\0') + "x", "1 bytes too many"},
      {"u", bad_version, "outer state record 'u': version 9"},
      {"u", store["u"].substr(0, 10), "outer state record 'u': truncated"},
      {"uu", store["u"], "key of 2 bytes"},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> damaged = store;
    damaged[c.key] = c.value;
    const Status s = Decode(damaged, spec).status();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.needle;
    EXPECT_THAT(s.message(), HasSubstr(c.needle));
  }
  // A state that decodes but does not fit the run: Import refuses it whole.
  Result<RecoveredOuter> rec = Decode(store, spec);
  ASSERT_TRUE(rec.ok());
  OuterStep::State foreign = rec->state;
  foreign.given[7] = 1;
  OuterStep b = NewStep(spec);
  const Status s = b.Import(foreign);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("site 7 is not part of the run"));
  EXPECT_EQ(b.LastGiven(0), 0) << "a refused import changed the state";
  OuterStep::State short_theta = rec->state;
  short_theta.theta.erase(short_theta.theta.begin());
  EXPECT_THAT(b.Import(short_theta).message(), HasSubstr("theta and"));
}

}  // namespace
}  // namespace geops::wan
