// The Replicator's outbound half for asp, bsp and all-async: each slice of
// a tick is encoded once and sent to every peer whose link keeps up, or
// added to that peer's backlog; backlogs are cut into batches when the
// window opens; notices announce slow batches; batches leave only after the
// tick's changes are durable. The tick loop: replicator.cc; avg and diloco:
// replicator_outer.cc.
#include <algorithm>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "wan/codec/batch_restamp.h"
#include "wan/replication/replicator.h"

namespace geops::wan {
namespace {

// Largest batch cut when the whole backlog must go (drain, bsp, avg).
constexpr int64_t kUnlimitedBudgetBytes = int64_t{256} << 20;

}  // namespace

int64_t Replicator::Window(bool finishing) const {
  if (finishing || options_.mode == WanMode::kBsp || UsesOuterStep(options_.mode)) return 0;
  return options_.max_inflight_batches;
}

int64_t Replicator::BudgetBytes(SiteId peer, bool finishing) {
  // A cut is one slice at most (fp32 values and 32-bit indices), like a
  // tick's own batches: what it takes, encodes and the peer decodes stays
  // bounded however large the backlog.
  const int64_t slice = options_.slice_elements * 8;
  if (Window(finishing) == 0) return std::min(kUnlimitedBudgetBytes, slice);
  const double bw = transport_->BandwidthBytesPerSecond(peer);
  if (!(bw > 0)) return std::min(kUnlimitedBudgetBytes, slice);
  return std::min(slice, std::max<int64_t>(options_.min_batch_bytes, static_cast<int64_t>(bw * options_.max_batch_seconds)));
}

bool Replicator::LinkKeepsUp(const PeerOutbox& out, int64_t bytes, bool finishing) {
  if (Window(finishing) == 0 || out.inflight() == 0) return true;
  return transport_->EstimateDeliverySeconds(out.peer(), bytes) <= options_.max_queue_seconds;
}

void Replicator::MaybeNotice(PeerOutbox& out, uint64_t seq, const std::vector<ChunkKey>& keys, int64_t bytes,
                             bool finishing) {
  if (options_.mode != WanMode::kAsp || finishing || keys.empty()) return;
  const double eta = transport_->EstimateDeliverySeconds(out.peer(), bytes);
  if (!(eta > options_.notice_min_seconds)) return;
  WanNotice n;
  n.origin = config_.site;
  n.seq = seq;
  n.keys = keys;
  n.timeout_ms = options_.notice_timeout_ms;
  n.incarnation = incarnation_;
  n.dest_incarnation = inbox_.Incarnation(out.peer());
  out.CountNotice();
  outgoing_.push_back(Outgoing{out.peer(), std::move(n)});
}

void Replicator::ShipSelected(Clock k, bool finishing) {
  if (selected_.empty()) return;
  const double start = NowSeconds();
  BatchHeader header;
  header.origin = config_.site;
  header.seq = 0;  // stamped per peer
  header.clock = k;
  header.codec = finishing ? ValueCodec::kFp32 : options_.EffectiveCodec();
  Result<EncodeStats> st = encoder_.Encode(header, selected_, &payload_, &residuals_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.encode_seconds += NowSeconds() - start;
    if (!st.ok()) {
      // Nothing was encoded: everything goes back, to be tried next tick.
      spdlog::error("wan shard {}: encoding clock {} failed: {}", config_.shard, k, st.status().ToString());
      for (const SparseChunkUpdate& u : selected_) filter_.AddSparse(u).IgnoreError();
      return;
    }
    ++stats_.batches_encoded;
    for (const SparseChunkUpdate& r : residuals_) filter_.AddSparse(r).IgnoreError();
  }
  if (st->chunks_out == 0) return;
  std::vector<ChunkKey> keys;
  keys.reserve(selected_.size());
  for (const SparseChunkUpdate& u : selected_) keys.push_back(u.key);
  bool decoded = false;
  const int64_t window = Window(finishing);
  for (PeerOutbox& out : outboxes_) {
    if (Addressable(out) && out.CanSendDirect(window) &&
        LinkKeepsUp(out, static_cast<int64_t>(payload_.size()), finishing)) {
      WanBatch batch;
      batch.origin = config_.site;
      batch.seq = out.AssignSeq();
      batch.clock = k;
      batch.payload = payload_;
      Status s = RestampBatchSeq(batch.payload, batch.seq);
      if (!s.ok()) spdlog::error("wan shard {}: {}", config_.shard, s.ToString());
      MaybeNotice(out, batch.seq, keys, static_cast<int64_t>(batch.payload.size()), finishing);
      out.OnSent(batch.seq, static_cast<int64_t>(batch.payload.size()), st->elements_out);
      Emit(out.peer(), std::move(batch));
      continue;
    }
    if (!decoded) {
      BatchDecoder decoder;
      Status s = decoder.Decode(payload_, &decoded_);
      if (!s.ok()) {
        spdlog::error("wan shard {}: own batch does not decode: {}", config_.shard, s.ToString());
        continue;
      }
      decoded = true;
    }
    Status s = out.AddToBacklog(decoded_.chunks);
    if (!s.ok()) spdlog::error("wan shard {}: backlog for site {}: {}", config_.shard, out.peer(), s.ToString());
    for (const SparseChunkUpdate& u : decoded_.chunks) journal_.BacklogChanged(out.peer(), u.key);
  }
}

void Replicator::ServeBacklogs(Clock k, bool finishing) {
  const int64_t window = Window(finishing);
  float threshold = -1.0f;
  if (options_.mode == WanMode::kAsp && !finishing) {
    std::lock_guard<std::mutex> lock(mu_);
    threshold = static_cast<float>(schedule_.At(k));
  }
  std::vector<ChunkKey> keys;
  for (PeerOutbox& out : outboxes_) {
    while (Addressable(out) && out.backlogged() && out.WindowOpen(window) && LinkKeepsUp(out, 0, finishing)) {
      BacklogCut cut;
      cut.origin = config_.site;
      cut.clock = k;
      cut.codec = finishing ? ValueCodec::kFp32 : options_.EffectiveCodec();
      cut.compress = options_.compress;
      cut.threshold = threshold;
      cut.budget_bytes = BudgetBytes(out.peer(), finishing);
      cut.max_elements = 2 * options_.slice_elements;
      cut.lookup = &lookup_;
      Result<std::optional<WanBatch>> batch = out.CutFromBacklog(cut, &keys);
      if (!batch.ok()) {
        spdlog::error("wan shard {}: backlog for site {}: {}", config_.shard, out.peer(), batch.status().ToString());
        break;
      }
      if (!batch->has_value()) break;
      for (const ChunkKey& key : keys) journal_.BacklogChanged(out.peer(), key);
      MaybeNotice(out, (*batch)->seq, keys, static_cast<int64_t>((*batch)->payload.size()), finishing);
      Emit(out.peer(), std::move(**batch));
      // A lossy codec leaves residuals behind: only the drain loops on.
      if (!finishing && threshold >= 0) break;
    }
  }
}

void Replicator::Emit(SiteId peer, WanBatch batch) {
  batch.incarnation = incarnation_;
  batch.dest_incarnation = inbox_.Incarnation(peer);
  journal_.BatchSent(peer, batch);
  journal_.LastSeqChanged(peer, batch.seq);
  outgoing_.push_back(Outgoing{peer, std::move(batch)});
}

void Replicator::FlushOutgoing() {
  // Notices first: they announce batches behind them.
  for (Outgoing& o : outgoing_) {
    if (auto* n = std::get_if<WanNotice>(&o.message)) transport_->SendNotice(o.peer, std::move(*n));
  }
  for (Outgoing& o : outgoing_) {
    if (auto* b = std::get_if<WanBatch>(&o.message)) transport_->SendBatch(o.peer, std::move(*b));
  }
  outgoing_.clear();
}

}  // namespace geops::wan
