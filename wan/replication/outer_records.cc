#include "wan/replication/outer_records.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <span>

#include "wan/codec/byte_io.h"
#include "wan/replication/record_keys.h"

namespace geops::wan {
namespace {

constexpr char kTheta = 't';
constexpr char kMomentum = 'm';
constexpr char kContribution = 'c';
constexpr char kMeta = 'u';
// 1: no marks; 2: each site's last mark after its flags.
constexpr uint32_t kMetaVersion = 2;

std::string RowKey(char kind, ChunkKey key) {
  std::string k(1, kind);
  PutBe32(&k, key.table);
  PutBe32(&k, key.chunk);
  return k;
}

std::string ContributionKey(int64_t step, SiteId site) {
  std::string k(1, kContribution);
  PutBe64(&k, static_cast<uint64_t>(step));
  PutBe32(&k, static_cast<uint32_t>(site));
  return k;
}

std::string Bytes(const std::vector<uint8_t>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size()); }

std::string Row(std::span<const float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

void PutMark(ByteWriter* w, const ContributionMark& mark) {
  w->Put(static_cast<int64_t>(mark.cut));
  w->Put(static_cast<uint32_t>(mark.covered.size()));
  for (const CoveredBatch& c : mark.covered) {
    w->Put(static_cast<int64_t>(c.clock));
    w->Put(static_cast<int32_t>(c.part));
  }
}

std::string EncodeContribution(const std::vector<SparseChunkUpdate>& chunks, const ContributionMark* mark) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.Put(static_cast<uint32_t>(chunks.size()));
  for (const SparseChunkUpdate& u : chunks) {
    w.Put(u.key.table);
    w.Put(u.key.chunk);
    w.Put(u.num_elements);
    w.Put(static_cast<uint32_t>(u.indices.size()));
    w.PutBytes(u.indices.data(), u.indices.size() * sizeof(uint32_t));
    w.PutBytes(u.values.data(), u.values.size() * sizeof(float));
  }
  if (mark != nullptr && mark->known()) PutMark(&w, *mark);  // optional trailer
  return Bytes(out);
}

std::string EncodeMeta(int64_t next_step, const std::map<SiteId, int64_t>& given,
                       const std::map<SiteId, int64_t>& final_steps, const std::vector<uint64_t>& digests,
                       const std::function<const ContributionMark*(SiteId)>& last_mark, Clock last_sync) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.Put(kMetaVersion);
  w.Put(static_cast<int64_t>(next_step));
  w.Put(static_cast<int64_t>(last_sync));
  w.Put(static_cast<uint32_t>(given.size()));
  for (const auto& [site, step] : given) {
    w.Put(static_cast<int32_t>(site));
    w.Put(static_cast<int64_t>(step));
    auto f = final_steps.find(site);
    w.Put(static_cast<uint8_t>(f != final_steps.end() && f->second == step ? 1 : 0));
    const ContributionMark* mark = last_mark(site);
    PutMark(&w, mark != nullptr ? *mark : ContributionMark{});
  }
  w.Put(static_cast<uint32_t>(digests.size()));
  for (uint64_t d : digests) w.Put(d);
  return Bytes(out);
}

std::string EncodeMeta(const OuterStep& outer, Clock last_sync) {
  return EncodeMeta(outer.next_step(), outer.given(), outer.final_steps(), outer.digests(),
                    [&outer](SiteId site) { return outer.LastMark(site); }, last_sync);
}

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

Status DecodeChunkRow(const ModelSpec& spec, ChunkKey key, const std::string& value, const std::string& where,
                      std::vector<float>* out) {
  if (!spec.HasChunk(key)) return DataLossError(where + ": the model has no such chunk");
  const int64_t n = spec.ChunkElements(key);
  if (static_cast<int64_t>(value.size()) != n * int64_t{sizeof(float)}) {
    return DataLossError(where + ": " + std::to_string(value.size()) + " bytes, expected " +
                         std::to_string(n * sizeof(float)) + " for a chunk of " + std::to_string(n) + " floats");
  }
  out->resize(static_cast<size_t>(n));
  std::memcpy(out->data(), value.data(), value.size());
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite((*out)[static_cast<size_t>(i)])) {
      return DataLossError(where + ": element " + std::to_string(i) + " is not finite");
    }
  }
  return Status::Ok();
}

namespace {

// A mark (PutMark): DataLoss naming `where` when truncated or not sane.
Status GetMark(ByteReader* r, const std::string& where, ContributionMark* mark) {
  int64_t cut = 0;
  uint32_t n = 0;
  if (!r->Get(&cut) || !r->Get(&n)) return DataLossError(where + ": truncated in a mark");
  if (cut < -1 || r->remaining() < size_t{n} * (sizeof(int64_t) + sizeof(int32_t))) {
    return DataLossError(where + ": a mark that does not parse");
  }
  mark->cut = cut;
  mark->covered.resize(n);
  for (CoveredBatch& c : mark->covered) {
    int64_t clock = 0;
    int32_t part = 0;
    if (!r->Get(&clock) || !r->Get(&part)) return DataLossError(where + ": truncated in a mark");
    if (clock < -1 || part < -1) {
      return DataLossError(where + ": a mark with clock " + std::to_string(clock) + " part " + std::to_string(part));
    }
    c = CoveredBatch{clock, part};
  }
  return Status::Ok();
}

Status DecodeContribution(const ModelSpec& spec, const std::string& value, const std::string& where,
                          std::vector<SparseChunkUpdate>* out, ContributionMark* mark) {
  ByteReader r(AsBytes(value));
  uint32_t chunks = 0;
  if (!r.Get(&chunks)) return DataLossError(where + ": truncated");
  for (uint32_t c = 0; c < chunks; ++c) {
    SparseChunkUpdate u;
    uint32_t n = 0;
    if (!r.Get(&u.key.table) || !r.Get(&u.key.chunk) || !r.Get(&u.num_elements) || !r.Get(&n)) {
      return DataLossError(where + ": truncated in chunk " + std::to_string(c));
    }
    if (!spec.HasChunk(u.key) || spec.ChunkElements(u.key) != static_cast<int64_t>(u.num_elements) ||
        n > u.num_elements) {
      return DataLossError(where + ": chunk " + std::to_string(c) + " does not match the model");
    }
    std::span<const uint8_t> idx, vals;
    if (!r.Take(size_t{n} * sizeof(uint32_t), &idx) || !r.Take(size_t{n} * sizeof(float), &vals)) {
      return DataLossError(where + ": truncated in chunk " + std::to_string(c));
    }
    u.indices.resize(n);
    u.values.resize(n);
    if (n > 0) {
      std::memcpy(u.indices.data(), idx.data(), idx.size());
      std::memcpy(u.values.data(), vals.data(), vals.size());
    }
    for (uint32_t j = 0; j < n; ++j) {
      if (u.indices[j] >= u.num_elements || !std::isfinite(u.values[j])) {
        return DataLossError(where + ": chunk " + std::to_string(c) + " entry " + std::to_string(j) +
                             " is out of range or not finite");
      }
    }
    out->push_back(std::move(u));
  }
  if (r.remaining() != 0) {
    GEOPS_RETURN_IF_ERROR(GetMark(&r, where, mark));
    if (!mark->known()) return DataLossError(where + ": a mark with no cut clock");
  }
  if (r.remaining() != 0) return DataLossError(where + ": " + std::to_string(r.remaining()) + " bytes too many");
  return Status::Ok();
}

Status DecodeMeta(const std::string& value, const std::string& where, RecoveredOuter* out) {
  ByteReader r(AsBytes(value));
  uint32_t version = 0, sites = 0, digests = 0;
  int64_t next = 0, last_sync = 0;
  if (!r.Get(&version)) return DataLossError(where + ": truncated");
  if (version != 1 && version != kMetaVersion) {
    return DataLossError(where + ": version " + std::to_string(version) + ", expected 1 or " +
                         std::to_string(kMetaVersion));
  }
  if (!r.Get(&next) || !r.Get(&last_sync) || !r.Get(&sites)) return DataLossError(where + ": truncated");
  OuterStep::State& s = out->state;
  for (uint32_t i = 0; i < sites; ++i) {
    int32_t site = 0;
    int64_t given = 0;
    uint8_t ended = 0;
    if (!r.Get(&site) || !r.Get(&given) || !r.Get(&ended)) return DataLossError(where + ": truncated");
    s.given[site] = given;
    if (ended != 0) s.final_step[site] = given;
    if (version >= 2) {
      ContributionMark mark;
      GEOPS_RETURN_IF_ERROR(GetMark(&r, where, &mark));
      if (mark.known()) s.last_marks[site] = std::move(mark);
    }
  }
  if (!r.Get(&digests) || r.remaining() != size_t{digests} * sizeof(uint64_t)) {
    return DataLossError(where + ": the digests do not match their count");
  }
  s.digests.resize(digests);
  for (uint64_t& d : s.digests) {
    if (!r.Get(&d)) return DataLossError(where + ": truncated");
  }
  s.next_step = next;
  out->last_sync = last_sync;
  out->present = true;
  return Status::Ok();
}

}  // namespace

bool IsOuterRecord(const std::string& key) {
  return !key.empty() && (key[0] == kTheta || key[0] == kMomentum || key[0] == kContribution || key[0] == kMeta);
}

Status DecodeOuterRecord(const OutboundRecord& record, const ModelSpec& spec, RecoveredOuter* out) {
  const std::string& k = record.key;
  const std::string where = "outer state record '" + PrintableKey(k) + "'";
  if (k.empty()) return DataLossError("outer state record with an empty key");
  switch (k[0]) {
    case kTheta:
    case kMomentum: {
      if (k.size() != 9) return DataLossError(where + ": key of " + std::to_string(k.size()) + " bytes, expected 9");
      const ChunkKey key{GetBe32(&k[1]), GetBe32(&k[5])};
      auto& rows = k[0] == kTheta ? out->state.theta : out->state.momentum;
      return DecodeChunkRow(spec, key, record.value, where, &rows[key]);
    }
    case kContribution: {
      if (k.size() != 13) return DataLossError(where + ": key of " + std::to_string(k.size()) + " bytes, expected 13");
      const int64_t step = static_cast<int64_t>(GetBe64(&k[1]));
      const SiteId site = static_cast<SiteId>(GetBe32(&k[9]));
      ContributionMark mark;
      GEOPS_RETURN_IF_ERROR(DecodeContribution(spec, record.value, where, &out->state.pending[step][site], &mark));
      if (mark.known()) out->state.pending_marks[step][site] = std::move(mark);
      return Status::Ok();
    }
    case kMeta:
      if (k.size() != 1) return DataLossError(where + ": key of " + std::to_string(k.size()) + " bytes, expected 1");
      return DecodeMeta(record.value, where, out);
    default:
      return DataLossError(where + ": not an outer state record");
  }
}

void OuterJournal::MarkAll() {
  rows_ = true;
  meta_ = true;
}

void OuterJournal::Restored(const OuterStep::State& state) {
  for (const auto& [step, sites] : state.pending) {
    for (const auto& [site, chunks] : sites) stored_.emplace(step, site);
  }
}

void OuterJournal::ContributionAdded(int64_t step, SiteId site) {
  if (!enabled_) return;
  added_.emplace(step, site);
  meta_ = true;
}

void OuterJournal::StepApplied(int64_t step) {
  if (!enabled_) return;
  rows_ = true;
  meta_ = true;
  std::erase_if(added_, [step](const auto& a) { return a.first == step; });
  for (auto it = stored_.begin(); it != stored_.end();) {
    if (it->first == step) {
      deletes_.push_back(ContributionKey(it->first, it->second));
      it = stored_.erase(it);
    } else {
      ++it;
    }
  }
}

void OuterJournal::Collect(const OuterStep& outer, Clock last_sync, std::vector<OutboundRecord>* puts,
                           std::vector<std::string>* deletes) {
  if (!enabled_) return;
  for (std::string& d : deletes_) deletes->push_back(std::move(d));
  deletes_.clear();
  for (const auto& [step, site] : added_) {
    const std::vector<SparseChunkUpdate>* c = outer.Contribution(step, site);
    if (c == nullptr) continue;  // applied since: StepApplied dropped it
    puts->push_back(OutboundRecord{ContributionKey(step, site), EncodeContribution(*c, outer.MarkOf(step, site))});
    stored_.emplace(step, site);
  }
  added_.clear();
  if (rows_) {
    for (const ChunkKey key : outer.Chunks()) {
      puts->push_back(OutboundRecord{RowKey(kTheta, key), Row(outer.Theta(key))});
      puts->push_back(OutboundRecord{RowKey(kMomentum, key), Row(outer.Momentum(key))});
    }
    rows_ = false;
  }
  if (meta_) {
    puts->push_back(OutboundRecord{std::string(1, kMeta), EncodeMeta(outer, last_sync)});
    meta_ = false;
  }
}

std::vector<OutboundRecord> EncodeOuterState(const OuterStep::State& state, Clock last_sync) {
  std::vector<OutboundRecord> records;
  records.reserve(state.theta.size() * 2 + 1);
  for (const auto& [key, row] : state.theta) records.push_back(OutboundRecord{RowKey(kTheta, key), Row(row)});
  for (const auto& [key, row] : state.momentum) records.push_back(OutboundRecord{RowKey(kMomentum, key), Row(row)});
  for (const auto& [step, sites] : state.pending) {
    auto marks = state.pending_marks.find(step);
    for (const auto& [site, chunks] : sites) {
      const ContributionMark* mark = nullptr;
      if (marks != state.pending_marks.end()) {
        if (auto m = marks->second.find(site); m != marks->second.end()) mark = &m->second;
      }
      records.push_back(OutboundRecord{ContributionKey(step, site), EncodeContribution(chunks, mark)});
    }
  }
  records.push_back(OutboundRecord{
      std::string(1, kMeta),
      EncodeMeta(state.next_step, state.given, state.final_step, state.digests,
                 [&state](SiteId site) -> const ContributionMark* {
                   auto m = state.last_marks.find(site);
                   return m == state.last_marks.end() ? nullptr : &m->second;
                 },
                 last_sync)});
  return records;
}

}  // namespace geops::wan
