#include "wan/replication/outbound_shipper.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

namespace geops::wan {
namespace {

// Largest batch cut when the whole backlog must go (drain, bsp, avg).
constexpr int64_t kUnlimitedBudgetBytes = int64_t{256} << 20;

}  // namespace

OutboundShipper::OutboundShipper(ShipperConfig config, std::vector<PeerOutbox> outboxes)
    : config_(config),
      options_(*config_.options),
      outboxes_(std::move(outboxes)),
      encoder_(EncoderOptions{config_.options->compress, 1}) {
  if (config_.time == nullptr) config_.time = SystemTime();
}

int64_t OutboundShipper::Window(bool finishing) const {
  if (finishing || options_.mode == WanMode::kBsp || UsesOuterStep(options_.mode)) return 0;
  return options_.max_inflight_batches;
}

int64_t OutboundShipper::BudgetBytes(SiteId peer, bool finishing) const {
  // A cut is one slice at most (fp32 values and 32-bit indices), like a
  // tick's own batches: what it takes, encodes and the peer decodes stays
  // bounded however large the backlog.
  const int64_t slice = options_.slice_elements * 8;
  if (Window(finishing) == 0) return std::min(kUnlimitedBudgetBytes, slice);
  const double bw = config_.transport->BandwidthBytesPerSecond(peer);
  if (!(bw > 0)) return std::min(kUnlimitedBudgetBytes, slice);
  return std::min(slice, std::max<int64_t>(options_.min_batch_bytes, static_cast<int64_t>(bw * options_.max_batch_seconds)));
}

bool OutboundShipper::TakesDirect(const PeerOutbox& out, int64_t window, bool finishing) const {
  if (options_.fresh_first && !finishing) return out.WindowOpen(window) && !out.HasPending();
  return out.CanSendDirect(window);
}

bool OutboundShipper::LinkKeepsUp(const PeerOutbox& out, int64_t bytes, bool finishing) const {
  if (Window(finishing) == 0 || out.inflight() == 0) return true;
  return config_.transport->EstimateDeliverySeconds(out.peer(), bytes) <= options_.max_queue_seconds;
}

bool OutboundShipper::AllLinksFull(bool finishing) const {
  if (finishing || options_.mode != WanMode::kAsp || outboxes_.empty()) return false;
  const int64_t window = Window(finishing);
  bool opens = false;
  for (const PeerOutbox& out : outboxes_) {
    // A peer not yet heard from gets its share from the backlog (and a
    // snapshot) as before; one whose link has room takes the slice.
    if (!Addressable(out)) return false;
    const bool keeps_up = LinkKeepsUp(out, 0, finishing);
    if (TakesDirect(out, window, finishing) && keeps_up) return false;
    opens = opens || !keeps_up || !out.WindowOpen(window) || out.HasPending();
  }
  return opens;
}

void OutboundShipper::MaybeNotice(PeerOutbox& out, uint64_t seq, const std::vector<ChunkKey>& keys, int64_t bytes,
                                  bool finishing) {
  if (options_.mode != WanMode::kAsp || !options_.selective_barrier || finishing || keys.empty()) return;
  const double eta = config_.transport->EstimateDeliverySeconds(out.peer(), bytes);
  if (!(eta > options_.notice_min_seconds)) return;
  WanNotice n;
  n.origin = config_.site;
  n.seq = seq;
  n.keys = keys;
  n.timeout_ms = options_.notice_timeout_ms;
  n.incarnation = incarnation_;
  n.dest_incarnation = config_.inbox->Incarnation(out.peer());
  out.CountNotice();
  outgoing_.push_back(Outgoing{out.peer(), std::move(n)});
}

Result<EncodeStats> OutboundShipper::Ship(Clock k, Clock since, bool finishing,
                                          std::span<const SparseChunkUpdate> selected,
                                          std::vector<SparseChunkUpdate>* residuals) {
  if (selected.empty()) {
    residuals->clear();
    return EncodeStats{};
  }
  const ValueCodec codec = finishing ? ValueCodec::kFp32 : options_.EffectiveCodec();
  const int64_t window = Window(finishing);
  // What a receiver decodes is needed only for a backlog: it is not made
  // when every peer surely takes the batch now (whatever its size: the
  // link is not modelled or has nothing in flight, LinkKeepsUp).
  bool may_backlog = false;
  for (const PeerOutbox& out : outboxes_) {
    const bool surely_direct =
        Addressable(out) && TakesDirect(out, window, finishing) && (window == 0 || out.inflight() == 0);
    may_backlog = may_backlog || !surely_direct;
  }
  GEOPS_ASSIGN_OR_RETURN(EncodeStats st, encoder_.EncodePrepared(codec, selected, &body_, residuals,
                                                                 may_backlog ? &shipped_ : nullptr));
  if (st.chunks_out == 0) return st;
  keys_.clear();
  for (const SparseChunkUpdate& u : selected) keys_.push_back(u.key);
  for (PeerOutbox& out : outboxes_) {
    const bool direct =
        !may_backlog ||
        (Addressable(out) && TakesDirect(out, window, finishing) && LinkKeepsUp(out, st.batch_bytes, finishing));
    if (direct) {
      BatchHeader header;
      header.origin = config_.site;
      header.seq = out.AssignSeq();
      header.clock = k;
      WanBatch batch;
      batch.origin = config_.site;
      batch.seq = header.seq;
      batch.clock = k;
      SealPrepared(header, body_, &batch.payload);
      MaybeNotice(out, batch.seq, keys_, static_cast<int64_t>(batch.payload.size()), finishing);
      out.OnSent(batch.seq, static_cast<int64_t>(batch.payload.size()), st.elements_out);
      Emit(out.peer(), std::move(batch), finishing);
      continue;
    }
    Status s = out.AddToBacklog(shipped_);
    if (!s.ok()) spdlog::error("wan shard {}: backlog for site {}: {}", config_.shard, out.peer(), s.ToString());
    out.NotePending(since);
    for (const SparseChunkUpdate& u : shipped_) config_.journal->BacklogChanged(out.peer(), u.key);
  }
  return st;
}

void OutboundShipper::ServeBacklogs(Clock k, bool finishing, float threshold, const ChunkValueLookup* lookup,
                                    const ChunkElementLookup* elements) {
  NoteClock(k);
  const int64_t window = Window(finishing);
  for (PeerOutbox& out : outboxes_) {
    const bool fast = out.AcknowledgesWithinAClock(window, clock_seconds_);
    while (Addressable(out) && out.backlogged() && out.WindowOpen(window) && LinkKeepsUp(out, 0, finishing)) {
      BacklogCut cut;
      cut.origin = config_.site;
      cut.clock = k;
      cut.codec = finishing ? ValueCodec::kFp32 : options_.EffectiveCodec();
      cut.compress = options_.compress;
      cut.threshold = threshold;
      cut.budget_bytes = BudgetBytes(out.peer(), finishing);
      cut.max_elements = 2 * options_.slice_elements;
      cut.revisit = options_.backlog_revisit;
      cut.revisit_clocks = fast ? options_.backlog_revisit : 0;
      cut.lookup = lookup;
      cut.elements = elements;
      Result<std::optional<WanBatch>> batch = out.CutFromBacklog(cut, &keys_);
      if (!batch.ok()) {
        spdlog::error("wan shard {}: backlog for site {}: {}", config_.shard, out.peer(), batch.status().ToString());
        break;
      }
      if (!batch->has_value()) break;
      for (const ChunkKey& key : keys_) config_.journal->BacklogChanged(out.peer(), key);
      MaybeNotice(out, (*batch)->seq, keys_, static_cast<int64_t>((*batch)->payload.size()), finishing);
      Emit(out.peer(), std::move(**batch), finishing);
      // A lossy codec leaves residuals behind: only the drain loops on.
      if (!finishing && threshold >= 0) break;
    }
  }
}

Result<EncodeStats> OutboundShipper::EncodeContribution(int64_t step, Clock k, bool finishing,
                                                        std::span<const SparseChunkUpdate> selected,
                                                        std::vector<SparseChunkUpdate>* residuals,
                                                        std::vector<SparseChunkUpdate>* shipped,
                                                        const std::vector<std::pair<Clock, int32_t>>* covered) {
  const ValueCodec codec = finishing ? ValueCodec::kFp32 : options_.EffectiveCodec();
  GEOPS_ASSIGN_OR_RETURN(EncodeStats st,
                         encoder_.EncodePrepared(codec, selected, &body_, residuals, shipped, covered));
  BatchHeader header;
  header.origin = config_.site;
  header.seq = static_cast<uint64_t>(step);  // every peer gets the step as its seq
  header.clock = k;
  header.final = finishing;
  WanBatch batch{config_.site, static_cast<uint64_t>(step), k, {}, 0, 0};
  SealPrepared(header, body_, &batch.payload);
  for (PeerOutbox& out : outboxes_) {
    config_.journal->BatchSent(out.peer(), batch);
    deferred_[out.peer()].push_back(batch);
  }
  return st;
}

Result<WanBatch> OutboundShipper::EncodeAgain(int64_t step, Clock k, bool final,
                                              std::span<const SparseChunkUpdate> chunks,
                                              const std::vector<std::pair<Clock, int32_t>>* covered) {
  GEOPS_RETURN_IF_ERROR(
      encoder_.EncodePrepared(ValueCodec::kFp32, chunks, &body_, nullptr, nullptr, covered).status());
  BatchHeader header;
  header.origin = config_.site;
  header.seq = static_cast<uint64_t>(step);
  header.clock = k;
  header.final = final;
  WanBatch batch{config_.site, static_cast<uint64_t>(step), k, {}, 0, 0};
  SealPrepared(header, body_, &batch.payload);
  return batch;
}

void OutboundShipper::RestartContributions(SiteId peer, uint64_t held, std::vector<WanBatch> again) {
  PeerOutbox* out = OutboxFor(peer);
  if (out == nullptr) return;
  for (uint64_t seq : out->InflightSeqs()) config_.journal->BatchAcked(peer, seq);
  std::deque<WanBatch>& queue = deferred_[peer];
  for (const WanBatch& b : queue) config_.journal->BatchAcked(peer, b.seq);
  queue.clear();
  std::vector<SparseChunkUpdate> old;  // avg and diloco keep no backlog
  out->ResetStream(&old);
  out->RestoreSeq(held);
  config_.journal->LastSeqChanged(peer, held);
  for (WanBatch& b : again) {
    config_.journal->BatchSent(peer, b);
    queue.push_back(std::move(b));
  }
}

void OutboundShipper::SendContributions(bool finishing) {
  const int64_t window = Window(finishing);
  for (PeerOutbox& out : outboxes_) {
    std::deque<WanBatch>& queue = deferred_[out.peer()];
    while (!queue.empty() && Addressable(out) && out.CanSendDirect(window)) {
      WanBatch batch = std::move(queue.front());
      queue.pop_front();
      const uint64_t seq = out.AssignSeq();
      if (seq != batch.seq) {
        spdlog::error("wan shard {}: contribution {} to site {} got seq {}", config_.shard, batch.seq, out.peer(),
                      seq);
      }
      out.OnSent(batch.seq, static_cast<int64_t>(batch.payload.size()), 0);
      Emit(out.peer(), std::move(batch), finishing);
    }
  }
}

void OutboundShipper::OnAcked(SiteId peer, uint64_t seq) {
  if (PeerOutbox* out = OutboxFor(peer)) {
    out->OnAcked(seq, config_.time->Now());
    config_.journal->BatchAcked(peer, seq);
  }
}

int64_t OutboundShipper::ResendRestored(std::vector<std::pair<SiteId, std::vector<WanBatch>>> batches) {
  int64_t sent = 0;
  for (auto& [peer, list] : batches) {
    PeerOutbox* out = OutboxFor(peer);
    if (out == nullptr) continue;  // Restore checked the peers
    for (WanBatch& b : list) {
      b.incarnation = incarnation_;
      b.dest_incarnation = config_.inbox->Incarnation(peer);
      out->OnSent(b.seq, static_cast<int64_t>(b.payload.size()), 0);
      ++sent;
      config_.transport->SendBatch(peer, std::move(b));
    }
  }
  return sent;
}

void OutboundShipper::NoteClock(Clock k) {
  const SteadyClock::time_point now = config_.time->Now();
  if (last_clock_ >= 0 && k <= last_clock_) return;
  if (last_clock_ >= 0) {
    // An average over the last few clocks seen (weight 1/8 each).
    constexpr double kWeight = 0.125;
    const double s = std::chrono::duration<double>(now - last_clock_at_).count() / static_cast<double>(k - last_clock_);
    clock_seconds_ = clock_seconds_ > 0 ? clock_seconds_ + kWeight * (s - clock_seconds_) : s;
  }
  last_clock_at_ = now;
  last_clock_ = k;
}

void OutboundShipper::Emit(SiteId peer, WanBatch batch, bool finishing) {
  if (finishing) drain_bytes_ += static_cast<int64_t>(batch.payload.size());
  batch.incarnation = incarnation_;
  batch.dest_incarnation = config_.inbox->Incarnation(peer);
  config_.journal->BatchSent(peer, batch);
  config_.journal->LastSeqChanged(peer, batch.seq);
  outgoing_.push_back(Outgoing{peer, std::move(batch)});
}

void OutboundShipper::Flush() {
  for (Outgoing& o : outgoing_) {
    if (auto* n = std::get_if<WanNotice>(&o.message)) config_.transport->SendNotice(o.peer, std::move(*n));
  }
  const SteadyClock::time_point now = config_.time->Now();
  for (Outgoing& o : outgoing_) {
    if (auto* b = std::get_if<WanBatch>(&o.message)) {
      if (PeerOutbox* out = OutboxFor(o.peer)) out->StampSent(b->seq, now);
      config_.transport->SendBatch(o.peer, std::move(*b));
    }
  }
  outgoing_.clear();
}

bool OutboundShipper::AttachReport(SiteId peer, const WanClockReport& report) {
  if (report.last_seq == 0) return false;  // untied: the peer takes it at once, not once a batch landed
  for (auto it = outgoing_.rbegin(); it != outgoing_.rend(); ++it) {
    if (it->peer != peer) continue;
    auto* b = std::get_if<WanBatch>(&it->message);
    if (b == nullptr) continue;  // a notice
    if (b->seq != report.last_seq || b->origin != report.origin || b->incarnation != report.incarnation ||
        b->dest_incarnation != report.dest_incarnation) {
      return false;
    }
    b->report = RidingReport{report.clock, report.drained};
    return true;
  }
  return false;
}

bool OutboundShipper::Waiting() const {
  for (const PeerOutbox& out : outboxes_) {
    if (!NothingWaitsFor(out)) return true;
  }
  return false;
}

bool OutboundShipper::NothingWaitsFor(const PeerOutbox& out) const {
  const auto deferred = deferred_.find(out.peer());
  return !out.backlogged() && (deferred == deferred_.end() || deferred->second.empty());
}

bool OutboundShipper::InFlight() const {
  for (const PeerOutbox& out : outboxes_) {
    if (out.inflight() > 0) return true;
  }
  return false;
}

PeerOutbox* OutboundShipper::OutboxFor(SiteId peer) {
  for (PeerOutbox& o : outboxes_) {
    if (o.peer() == peer) return &o;
  }
  return nullptr;
}

}  // namespace geops::wan
