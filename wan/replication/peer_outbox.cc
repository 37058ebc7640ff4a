#include "wan/replication/peer_outbox.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "wan/codec/batch_format.h"

namespace geops::wan {
namespace {

// A record's size bound: the longest head, the scale, the values, and about
// one byte of index per value (what Rice and delta-varint take at the
// densities a backlog holds). No LZ4 gain assumed.
int64_t EstimateOne(const SparseChunkUpdate& u, ValueCodec codec) {
  const uint64_t n = u.values.size();
  return static_cast<int64_t>(batch_format::kMaxChunkHeadSize +
                              (batch_format::HasScale(codec) ? batch_format::kScaleSize : 0) +
                              batch_format::ValueBytes(codec, n) + n);
}

}  // namespace

int64_t EstimateEncodedBytes(std::span<const SparseChunkUpdate> updates, ValueCodec codec) {
  int64_t total = batch_format::kHeaderSize;
  for (const SparseChunkUpdate& u : updates) total += EstimateOne(u, codec);
  return total;
}

Result<PeerOutbox> PeerOutbox::Create(SiteId peer, SignificanceFilterOptions options) {
  GEOPS_ASSIGN_OR_RETURN(SignificanceFilter f, SignificanceFilter::Create(options));
  return PeerOutbox(peer, std::move(f), options.value_epsilon);
}

void PeerOutbox::ResetStream(std::vector<SparseChunkUpdate>* old) {
  backlog_.DrainAll(old);
  next_ = SelectSlice{};
  pending_since_.reset();
  inflight_.clear();
  last_seq_ = 0;
}

std::vector<uint64_t> PeerOutbox::InflightSeqs() const {
  std::vector<uint64_t> seqs;
  seqs.reserve(inflight_.size());
  for (const auto& [seq, sent] : inflight_) seqs.push_back(seq);
  return seqs;
}

void PeerOutbox::OnSent(uint64_t seq, int64_t bytes, int64_t elements) {
  inflight_.emplace(seq, std::nullopt);
  ++stats_.batches_sent;
  stats_.bytes_sent += bytes;
  stats_.elements_sent += elements;
}

void PeerOutbox::StampSent(uint64_t seq, SteadyClock::time_point at) {
  auto it = inflight_.find(seq);
  if (it != inflight_.end()) it->second = at;
}

void PeerOutbox::OnAcked(uint64_t seq, std::optional<SteadyClock::time_point> at) {
  auto it = inflight_.find(seq);
  if (it == inflight_.end()) return;
  if (at && it->second && *at >= *it->second) {
    // An average over the last few acknowledgements (weight 1/8 each).
    constexpr double kWeight = 0.125;
    const double s = std::chrono::duration<double>(*at - *it->second).count();
    ack_seconds_ = ack_seconds_ > 0 ? ack_seconds_ + kWeight * (s - ack_seconds_) : s;
    stats_.ack_seconds = ack_seconds_;
  }
  inflight_.erase(it);
  ++stats_.batches_acked;
}

Status PeerOutbox::AddToBacklog(std::span<const SparseChunkUpdate> updates) {
  Status first;
  for (const SparseChunkUpdate& u : updates) {
    Status s = backlog_.AddSparse(u, /*fresh=*/true);
    if (!s.ok() && first.ok()) first = s;
  }
  stats_.max_backlog_chunks = std::max(stats_.max_backlog_chunks, backlog_.dirty_chunks());
  return first;
}

void PeerOutbox::NotePending(Clock k) {
  if (!pending_since_) pending_since_ = k;
}

Clock PeerOutbox::SentThrough(Clock k) const {
  return HasPending() ? std::min(k, *pending_since_ - 1) : k;
}

void PeerOutbox::TrimToBudget(const BacklogCut& cut, std::vector<SparseChunkUpdate>* taken) {
  if (cut.budget_bytes <= 0 || EstimateEncodedBytes(*taken, cut.codec) <= cut.budget_bytes) return;
  // Score: the largest significance |u| / max(|w|, value floor) in the chunk.
  std::vector<double> score(taken->size(), 0.0);
  const double floor = value_floor_;
  for (size_t i = 0; i < taken->size(); ++i) {
    const SparseChunkUpdate& u = (*taken)[i];
    const float* w = cut.lookup != nullptr && *cut.lookup ? (*cut.lookup)(u.key) : nullptr;
    double best = 0;
    for (size_t j = 0; j < u.values.size(); ++j) {
      const double mag = w != nullptr ? std::max(std::fabs(double{w[u.indices[j]]}), floor) : floor;
      best = std::max(best, std::fabs(double{u.values[j]}) / mag);
    }
    score[i] = best;
  }
  std::vector<size_t> order(taken->size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  int64_t bytes = batch_format::kHeaderSize;
  std::vector<SparseChunkUpdate> keep;
  for (size_t idx : order) {
    SparseChunkUpdate& u = (*taken)[idx];
    const int64_t b = EstimateOne(u, cut.codec);
    if (keep.empty() || bytes + b <= cut.budget_bytes) {
      bytes += b;
      keep.push_back(std::move(u));
    } else {
      backlog_.AddSparse(u, /*fresh=*/true).IgnoreError();  // came out of this filter: same shape
    }
  }
  ++stats_.backlog_trimmed;
  *taken = std::move(keep);
}

Result<std::optional<WanBatch>> PeerOutbox::CutFromBacklog(const BacklogCut& cut, std::vector<ChunkKey>* keys) {
  keys->clear();
  if (!backlogged()) return std::optional<WanBatch>();
  const ChunkValueLookup empty;
  const ChunkElementLookup no_elements;
  const auto take = [&](const SelectSlice& slice) {
    SelectStats st = cut.threshold < 0
                         ? backlog_.DrainAll(&taken_, slice)
                         : backlog_.SelectFresh(cut.clock, cut.lookup != nullptr ? *cut.lookup : empty,
                                                cut.elements != nullptr ? *cut.elements : no_elements,
                                                cut.threshold, cut.revisit, &taken_, slice, cut.revisit_clocks);
    ++stats_.backlog_scans;
    if (cut.revisit_clocks > 0) ++stats_.backlog_scans_clock_spaced;
    stats_.backlog_elements_scanned += st.elements_scanned;
    return st;
  };
  SelectSlice slice = next_;
  slice.max_elements = cut.max_elements;
  SelectStats taken = take(slice);
  if (taken_.empty() && slice.has_after) {  // nothing after the cursor: wrap around
    slice.has_after = false;
    taken = take(slice);
  }
  // A cut that looked at every chunk and sends all it took leaves nothing
  // significant behind: everything given before it has left (SentThrough).
  bool whole = !slice.has_after && !taken.more;
  next_ = SelectSlice{};
  if (taken.more) {
    next_.has_after = true;
    next_.after = taken.last;
  }
  if (taken_.empty()) {
    if (whole) pending_since_.reset();
    return std::optional<WanBatch>();
  }
  const size_t took = taken_.size();
  TrimToBudget(cut, &taken_);
  whole = whole && taken_.size() == took;
  WanBatch batch;
  batch.origin = cut.origin;
  batch.seq = last_seq_ + 1;
  batch.clock = cut.clock;
  BatchHeader header;
  header.origin = cut.origin;
  header.seq = batch.seq;
  header.clock = cut.clock;
  header.codec = cut.codec;
  EncoderOptions eo;
  eo.compress = cut.compress;
  encoder_ = BatchEncoder(eo);
  Result<EncodeStats> st = encoder_.Encode(header, taken_, &batch.payload, &residuals_);
  if (!st.ok()) {
    for (const SparseChunkUpdate& u : taken_) backlog_.AddSparse(u, /*fresh=*/true).IgnoreError();
    return st.status();
  }
  for (const SparseChunkUpdate& r : residuals_) backlog_.AddSparse(r).IgnoreError();
  if (whole) pending_since_.reset();
  if (st->chunks_out == 0) return std::optional<WanBatch>();  // everything went back as residual
  for (const SparseChunkUpdate& u : taken_) keys->push_back(u.key);
  AssignSeq();
  ++stats_.backlog_batches;
  OnSent(batch.seq, static_cast<int64_t>(batch.payload.size()), st->elements_out);
  return std::optional<WanBatch>(std::move(batch));
}

}  // namespace geops::wan
