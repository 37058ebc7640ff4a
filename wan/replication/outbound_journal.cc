#include "wan/replication/outbound_journal.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "wan/codec/batch_envelope.h"
#include "wan/replication/record_keys.h"

namespace geops::wan {
namespace {

constexpr char kAccumulator = 'a';
constexpr char kBacklog = 'b';
constexpr char kBatch = 'o';
constexpr char kSeq = 's';
constexpr char kIncarnation = 'i';
constexpr char kPeerIncarnation = 'k';

std::string AccumulatorKey(ChunkKey key) {
  std::string k(1, kAccumulator);
  PutBe32(&k, key.table);
  PutBe32(&k, key.chunk);
  return k;
}
std::string BacklogKey(SiteId peer, ChunkKey key) {
  std::string k(1, kBacklog);
  PutBe32(&k, static_cast<uint32_t>(peer));
  PutBe32(&k, key.table);
  PutBe32(&k, key.chunk);
  return k;
}
std::string BatchKey(SiteId peer, uint64_t seq) {
  std::string k(1, kBatch);
  PutBe32(&k, static_cast<uint32_t>(peer));
  PutBe64(&k, seq);
  return k;
}
std::string SeqKey(SiteId peer) {
  std::string k(1, kSeq);
  PutBe32(&k, static_cast<uint32_t>(peer));
  return k;
}
std::string PeerIncarnationKey(SiteId peer) {
  std::string k(1, kPeerIncarnation);
  PutBe32(&k, static_cast<uint32_t>(peer));
  return k;
}
std::string U64Value(uint64_t v) {
  std::string value(sizeof(uint64_t), '\0');
  std::memcpy(value.data(), &v, sizeof(v));  // little-endian hosts only (checked in CMake)
  return value;
}
uint64_t GetU64(const std::string& value) {
  uint64_t v;
  std::memcpy(&v, value.data(), sizeof(v));
  return v;
}

Status DecodeRow(const ModelSpec& spec, ChunkKey key, const std::string& value, const std::string& where,
                 SparseChunkUpdate* out) {
  std::vector<float> row;
  GEOPS_RETURN_IF_ERROR(DecodeChunkRow(spec, key, value, where, &row));
  out->key = key;
  out->num_elements = static_cast<uint32_t>(row.size());
  out->indices.clear();
  out->values.clear();
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == 0.0f) continue;
    out->indices.push_back(static_cast<uint32_t>(i));
    out->values.push_back(row[i]);
  }
  return Status::Ok();
}

}  // namespace

void OutboundJournal::AccumulatorChanged(ChunkKey key) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  accumulator_.insert(key);
}

void OutboundJournal::BacklogChanged(SiteId peer, ChunkKey key) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  backlog_.emplace(peer, key);
}

void OutboundJournal::BatchSent(SiteId peer, const WanBatch& batch) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  sent_[{peer, batch.seq}] = batch.payload;
  acked_.erase({peer, batch.seq});
}

void OutboundJournal::BatchAcked(SiteId peer, uint64_t seq) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (sent_.erase({peer, seq}) > 0) return;  // never reached the store: nothing to delete
  acked_.emplace(peer, seq);
}

void OutboundJournal::LastSeqChanged(SiteId peer, uint64_t last_seq) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  seqs_[peer] = last_seq;
}

void OutboundJournal::IncarnationChanged(uint64_t incarnation) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  incarnation_ = incarnation;
}

void OutboundJournal::PeerIncarnationChanged(SiteId peer, uint64_t incarnation) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  peer_incarnations_[peer] = incarnation;
}

DeferredRecords* OutboundJournal::Collect(SignificanceFilter* accumulator,
                                          const std::function<SignificanceFilter*(SiteId)>& backlog,
                                          std::vector<OutboundRecord>* puts, std::vector<std::string>* deletes) {
  if (!enabled_) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  rows_.clear();
  if (!accumulator_.empty() && accumulator_rows_ == nullptr) {
    accumulator_rows_ = std::make_unique<CapturedRows>(accumulator);
  }
  for (const ChunkKey key : accumulator_) {
    accumulator_rows_->Capture(key);
    rows_.push_back(CapturedRow{AccumulatorKey(key), accumulator_rows_.get(), key});
  }
  accumulator_.clear();
  for (const auto& [peer, key] : backlog_) {
    SignificanceFilter* b = backlog(peer);
    if (b == nullptr) {
      deletes->push_back(BacklogKey(peer, key));
      continue;
    }
    std::unique_ptr<CapturedRows>& rows = backlog_rows_[peer];
    if (rows == nullptr) rows = std::make_unique<CapturedRows>(b);
    rows->Capture(key);
    rows_.push_back(CapturedRow{BacklogKey(peer, key), rows.get(), key});
  }
  backlog_.clear();
  for (const auto& [id, seq] : acked_) deletes->push_back(BatchKey(id, seq));
  acked_.clear();
  for (auto& [id, payload] : sent_) {
    puts->push_back(OutboundRecord{BatchKey(id.first, id.second),
                                   std::string(reinterpret_cast<const char*>(payload.data()), payload.size())});
  }
  sent_.clear();
  for (const auto& [peer, seq] : seqs_) puts->push_back(OutboundRecord{SeqKey(peer), U64Value(seq)});
  seqs_.clear();
  if (incarnation_ != 0) puts->push_back(OutboundRecord{std::string(1, kIncarnation), U64Value(incarnation_)});
  incarnation_ = 0;
  for (const auto& [peer, inc] : peer_incarnations_) {
    puts->push_back(OutboundRecord{PeerIncarnationKey(peer), U64Value(inc)});
  }
  peer_incarnations_.clear();
  return rows_.empty() ? nullptr : this;
}

void OutboundJournal::Release() {
  if (accumulator_rows_ != nullptr) accumulator_rows_->Release();
  for (auto& [peer, rows] : backlog_rows_) rows->Release();
  rows_.clear();
}

OutboundJournal::CaptureStats OutboundJournal::capture_stats() const {
  CaptureStats out;
  std::lock_guard<std::mutex> lock(mu_);
  auto add = [&](const CapturedRows& rows) {
    out.rows_saved += rows.rows_saved();
    out.peak_saved_bytes += rows.peak_saved_bytes();
  };
  if (accumulator_rows_ != nullptr) add(*accumulator_rows_);
  for (const auto& [peer, rows] : backlog_rows_) add(*rows);
  return out;
}

OutboundSummary OutboundSummary::Of(std::span<const OutboundRecord> records) {
  OutboundSummary out;
  for (const OutboundRecord& r : records) {
    const std::string& k = r.key;
    const char kind = k.empty() ? '\0' : k[0];
    if (kind == kAccumulator && k.size() == 9) {
      ++out.accumulator_rows;
    } else if (kind == kBacklog && k.size() == 13) {
      ++out.peers[static_cast<SiteId>(GetBe32(&k[1]))].backlog_rows;
    } else if (kind == kBatch && k.size() == 13) {
      Peer& p = out.peers[static_cast<SiteId>(GetBe32(&k[1]))];
      const uint64_t seq = GetBe64(&k[5]);
      p.first_seq = p.batches == 0 ? seq : std::min(p.first_seq, seq);
      ++p.batches;
      p.batch_bytes += static_cast<int64_t>(r.value.size());
    } else if (kind == kSeq && k.size() == 5 && r.value.size() == sizeof(uint64_t)) {
      out.peers[static_cast<SiteId>(GetBe32(&k[1]))].last_assigned = GetU64(r.value);
    } else if (kind == kIncarnation && k.size() == 1 && r.value.size() == sizeof(uint64_t) && GetU64(r.value) != 0) {
      out.incarnation = GetU64(r.value);
    } else if (kind == kPeerIncarnation && k.size() == 5 && r.value.size() == sizeof(uint64_t)) {
      out.peers[static_cast<SiteId>(GetBe32(&k[1]))].incarnation = GetU64(r.value);
    } else if (IsOuterRecord(k)) {
      ++out.outer_records;
    } else {
      ++out.unknown;
    }
  }
  return out;
}

Result<RecoveredOutbound> OutboundJournal::Decode(std::span<const OutboundRecord> records, const ModelSpec& spec,
                                                  SiteId self) {
  RecoveredOutbound out;
  for (const OutboundRecord& r : records) {
    const std::string where = "outbox record '" + PrintableKey(r.key) + "'";
    const std::string& k = r.key;
    if (k.empty()) return DataLossError("outbox record with an empty key");
    switch (k[0]) {
      case kAccumulator: {
        if (k.size() != 9) return DataLossError(where + ": key of " + std::to_string(k.size()) + " bytes, expected 9");
        SparseChunkUpdate u;
        GEOPS_RETURN_IF_ERROR(DecodeRow(spec, ChunkKey{GetBe32(&k[1]), GetBe32(&k[5])}, r.value, where, &u));
        if (!u.values.empty()) out.accumulator.push_back(std::move(u));
        break;
      }
      case kBacklog: {
        if (k.size() != 13) return DataLossError(where + ": key of " + std::to_string(k.size()) + " bytes, expected 13");
        const SiteId peer = static_cast<SiteId>(GetBe32(&k[1]));
        SparseChunkUpdate u;
        GEOPS_RETURN_IF_ERROR(DecodeRow(spec, ChunkKey{GetBe32(&k[5]), GetBe32(&k[9])}, r.value, where, &u));
        if (!u.values.empty()) out.backlogs[peer].push_back(std::move(u));
        break;
      }
      case kBatch: {
        if (k.size() != 13) return DataLossError(where + ": key of " + std::to_string(k.size()) + " bytes, expected 13");
        WanBatch b;
        const SiteId peer = static_cast<SiteId>(GetBe32(&k[1]));
        b.origin = self;
        b.seq = GetBe64(&k[5]);
        b.payload.assign(r.value.begin(), r.value.end());
        Result<BatchHeader> h = PeekBatchHeader(b.payload);
        if (!h.ok()) return DataLossError(where + ": the stored batch does not parse: " + h.status().ToString());
        if (h->origin != self || h->seq != b.seq) {
          return DataLossError(where + ": the stored batch says origin " + std::to_string(h->origin) + " seq " +
                               std::to_string(h->seq) + ", expected origin " + std::to_string(self) + " seq " +
                               std::to_string(b.seq));
        }
        b.clock = h->clock;
        out.batches[peer].push_back(std::move(b));  // keys sort by seq within a peer
        break;
      }
      case kSeq: {
        if (k.size() != 5 || r.value.size() != sizeof(uint64_t)) {
          return DataLossError(where + ": malformed last-seq record");
        }
        uint64_t seq;
        std::memcpy(&seq, r.value.data(), sizeof(seq));
        out.last_seq[static_cast<SiteId>(GetBe32(&k[1]))] = seq;
        break;
      }
      case kIncarnation:
        if (k.size() != 1 || r.value.size() != sizeof(uint64_t) || GetU64(r.value) == 0) {
          return DataLossError(where + ": malformed incarnation record");
        }
        out.incarnation = GetU64(r.value);
        break;
      case kPeerIncarnation:
        if (k.size() != 5 || r.value.size() != sizeof(uint64_t)) {
          return DataLossError(where + ": malformed peer incarnation record");
        }
        out.peer_incarnations[static_cast<SiteId>(GetBe32(&k[1]))] = GetU64(r.value);
        break;
      default:
        if (IsOuterRecord(k)) {
          GEOPS_RETURN_IF_ERROR(DecodeOuterRecord(r, spec, &out.outer));
          break;
        }
        return DataLossError(where + ": unknown record kind");
    }
  }
  return out;
}

}  // namespace geops::wan
