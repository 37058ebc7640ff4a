#include "wan/replication/replicator.h"

#include <algorithm>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"

namespace geops::wan {
namespace {

// The tick loop's round when nothing happens (time_'s milliseconds); a
// clock report held back by report_every_clocks is flushed within
// ClockReporter::kFlushMs plus one such round.
constexpr int64_t kIdleRoundMs = 100;
// target_utilization: how often the links' bytes steer the cut-off. A few
// round trips of the slowest links, so that one interval sees the
// acknowledgements of what the one before sent.
constexpr int64_t kSteerIntervalMs = 1000;
// When this process started, for recovery metrics (static initialisation
// runs as the process starts).
const double kProcessStartUnix = UnixSeconds();

// A new store's incarnation: nanoseconds since the epoch, so that a store
// made later has a larger one.
uint64_t NewIncarnation() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  return std::max<uint64_t>(1, static_cast<uint64_t>(ns));
}

}  // namespace

Result<std::unique_ptr<Replicator>> Replicator::Create(const ModelSpec* spec, ReplicatorConfig config,
                                                       ReplicaTarget* target, WanTransport* transport) {
  if (spec == nullptr || target == nullptr || transport == nullptr) {
    return InvalidArgumentError("replicator needs a model, a shard and a transport");
  }
  GEOPS_RETURN_IF_ERROR(config.options.Validate());
  std::set<SiteId> seen;
  for (SiteId p : config.peers) {
    if (p == config.site) return InvalidArgumentError("replicator: site " + std::to_string(p) + " is its own peer");
    if (p < 0) return InvalidArgumentError("replicator: invalid peer id " + std::to_string(p));
    if (!seen.insert(p).second) return InvalidArgumentError("replicator: peer " + std::to_string(p) + " named twice");
  }
  SignificanceFilterOptions fo;
  fo.max_hold_clocks = config.options.max_hold_clocks;
  fo.value_epsilon = config.options.value_floor;
  GEOPS_ASSIGN_OR_RETURN(SignificanceFilter filter, SignificanceFilter::Create(fo));
  GEOPS_ASSIGN_OR_RETURN(ThresholdSchedule schedule, ThresholdSchedule::Create(config.options.threshold));
  std::vector<PeerOutbox> outboxes;
  for (SiteId p : config.peers) {
    SignificanceFilterOptions bo;  // a backlog: the same significance, no hold bound
    bo.value_epsilon = config.options.value_floor;
    GEOPS_ASSIGN_OR_RETURN(PeerOutbox out, PeerOutbox::Create(p, bo));
    outboxes.push_back(std::move(out));
  }
  std::unique_ptr<Replicator> r(new Replicator(spec, std::move(config), target, transport, std::move(filter),
                                               std::move(schedule), std::move(outboxes)));
  const std::vector<OutboundRecord> records = target->TakeRecoveredOutbound();
  GEOPS_ASSIGN_OR_RETURN(RecoveredOutbound recovered, OutboundJournal::Decode(records, *spec, r->config_.site));
  RecoveredOuter outer = std::move(recovered.outer);
  recovered.outer = RecoveredOuter{};
  r->recovery_.fresh_store = records.empty();
  r->incarnation_ = recovered.incarnation;
  if (r->incarnation_ == 0) {
    r->incarnation_ = NewIncarnation();
    r->incarnation_new_ = true;
  }
  for (const auto& [peer, inc] : recovered.peer_incarnations) r->inbox_.RestoreIncarnation(peer, inc);
  r->inbox_.SetOwnIncarnation(r->incarnation_);
  r->shipper_.set_incarnation(r->incarnation_);
  Replicator* self = r.get();
  r->inbox_.SetBootListener([self](SiteId origin, uint64_t boot) { self->OnPeerBoot(origin, boot); });
  r->inbox_.SetIncarnationListener([self](SiteId origin, uint64_t incarnation, bool reset) {
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (reset && self->outer_ != nullptr) {
        // It rejoins from its peers' states (Rejoin); this shard takes its
        // merged state once it has one (RunOuterResets).
        uint64_t& pending = self->outer_resets_[origin];
        if (incarnation > pending) self->outer_reset_heard_[origin] = UnixSeconds();
        pending = std::max(pending, incarnation);
        self->outer_reset_retry_ = SteadyClock::time_point{};
      } else if (reset) {
        self->resets_.Heard(origin, incarnation, UnixSeconds());
      } else {
        self->records_.emplace_back(origin, incarnation);
      }
    }
    self->cv_.notify_all();
  });
  GEOPS_RETURN_IF_ERROR(r->Restore(std::move(recovered)).WithContext("restoring the WAN outbound state"));
  r->recovery_.state_loaded_unix = UnixSeconds();
  r->recovery_.process_start_unix = kProcessStartUnix;
  if (r->options_.target_utilization > 0) {
    BandwidthControllerOptions bo;
    bo.target_utilization = r->options_.target_utilization;
    GEOPS_ASSIGN_OR_RETURN(BandwidthController steer, BandwidthController::Create(bo));
    r->steer_ = steer;
  }
  if (UsesOuterStep(r->options_.mode)) {
    GEOPS_RETURN_IF_ERROR(r->InitOuter(std::move(outer), /*new_store=*/records.empty()));
  }
  // From here on the shard's commits collect this replicator's records.
  r->journal_.set_enabled(target->SetOutboundParticipant(r.get()));
  r->outer_journal_.set_enabled(r->journal_.enabled());
  return r;
}

Status Replicator::Restore(RecoveredOutbound recovered) {
  if (recovered.empty()) return Status::Ok();
  recovery_.recovered = true;
  for (const SparseChunkUpdate& u : recovered.accumulator) GEOPS_RETURN_IF_ERROR(filter_.AddSparse(u));
  for (auto& [peer, rows] : recovered.backlogs) {
    PeerOutbox* out = shipper_.OutboxFor(peer);
    if (out == nullptr) return DataLossError("a backlog for site " + std::to_string(peer) + ", which is not a peer");
    GEOPS_RETURN_IF_ERROR(out->AddToBacklog(rows));
  }
  for (const auto& [peer, seq] : recovered.last_seq) {
    PeerOutbox* out = shipper_.OutboxFor(peer);
    if (out == nullptr) return DataLossError("a seq for site " + std::to_string(peer) + ", which is not a peer");
    out->RestoreSeq(seq);
  }
  for (auto& [peer, batches] : recovered.batches) {
    PeerOutbox* out = shipper_.OutboxFor(peer);
    if (out == nullptr) return DataLossError("batches for site " + std::to_string(peer) + ", which is not a peer");
    std::vector<WanBatch> sent;
    for (WanBatch& b : batches) {
      if (b.seq <= out->last_seq()) {
        sent.push_back(std::move(b));
      } else if (UsesOuterStep(options_.mode)) {
        // A contribution that was waiting for this peer's link: it waits again.
        shipper_.RestoreContribution(peer, std::move(b));
      } else {
        return DataLossError("batch " + std::to_string(b.seq) + " for site " + std::to_string(peer) +
                             " is beyond the last seq assigned (" + std::to_string(out->last_seq()) + ")");
      }
    }
    resend_.emplace_back(peer, std::move(sent));
  }
  spdlog::info("wan shard {}: restored outbound state: {} accumulator chunks, {} backlogs, {} peers with batches to resend",
               config_.shard, recovered.accumulator.size(), recovered.backlogs.size(), resend_.size());
  return Status::Ok();
}

Replicator::Replicator(const ModelSpec* spec, ReplicatorConfig config, ReplicaTarget* target,
                       WanTransport* transport, SignificanceFilter filter, ThresholdSchedule schedule,
                       std::vector<PeerOutbox> outboxes)
    : spec_(spec),
      config_(std::move(config)),
      options_(config_.options),
      target_(target),
      transport_(transport),
      time_(config_.time != nullptr ? config_.time : SystemTime()),
      gate_(config_.peers, config_.options.EffectiveDs(), std::chrono::milliseconds(config_.options.peer_lease_ms),
            config_.time),
      inbox_(target, &gate_, config_.site, config_.options.max_reorder_batches),
      filter_(std::move(filter)),
      schedule_(std::move(schedule)),
      allowance_(config_.options.mode == WanMode::kAsp ? config_.options.max_drift_allowance : 0),
      outbox_stats_(outboxes.size()),
      outbox_seq_(outboxes.size(), 0),
      shipper_(ShipperConfig{config_.site, config_.shard, &config_.options, transport, &inbox_, &journal_, time_},
               std::move(outboxes)),
      reporter_(config_.options, config_.site, transport, shipper_.outboxes().size()) {
  lookup_ = [this](ChunkKey key) { return LookupValue(key); };
  element_lookup_ = [this](ChunkKey key, std::span<const uint32_t> at, float* out) {
    return spec_->HasChunk(key) && target_->ReadChunkElements(key, at, out).ok();
  };
}

Replicator::~Replicator() {
  Stop();
  if (journal_.enabled()) {
    // Commit what the journal still holds, then leave the shard's commits
    // (inside a scope, so no commit is collecting from us meanwhile).
    const Deadline deadline = Deadline::InMs(10000);
    Status s = target_->RunDurable([] {}, deadline);
    if (!s.ok()) spdlog::warn("wan shard {}: final outbound commit: {}", config_.shard, s.ToString());
    target_->RunDurable([this] { target_->SetOutboundParticipant(nullptr); }, deadline).IgnoreError();
  }
}

void Replicator::Start() {
  transport_->SetDeliveryCallback([this](SiteId peer, const BatchAck& ack) {
    if (!ack.quarantined.empty()) {
      // The peer could not add the batch to its replica and kept it aside:
      // its replica now lacks these deltas (docs/wan_replication.md).
      spdlog::error("wan shard {}: site {} quarantined batch {} of this site: {}", config_.shard, peer, ack.seq,
                    ack.quarantined);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      acks_.emplace_back(peer, ack.seq);
      if (!ack.quarantined.empty()) ++quarantined_by_peer_[peer];
    }
    cv_.notify_all();
  });
  if (incarnation_new_ && journal_.enabled()) {
    // The store's incarnation is durable before anything carrying it leaves.
    Status s = target_->RunDurable([this] { journal_.IncarnationChanged(incarnation_); },
                                   Deadline::InMs(kDurableWaitMs));
    if (!s.ok()) spdlog::error("wan shard {}: recording the store's incarnation: {}", config_.shard, s.ToString());
    incarnation_new_ = false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stop_) return;
  // Batches handed to the link before a crash and never acknowledged go
  // again, in seq order; the peer drops those it applied.
  recovery_.batches_resent += shipper_.ResendRestored(std::move(resend_));
  resend_.clear();
  // Announce this incarnation (and the clock it resumes at) to every peer:
  // a peer sends batches only to an incarnation it has heard of.
  const Clock clock = target_->ShardClock();
  for (const PeerOutbox& out : shipper_.outboxes()) {
    transport_->SendClock(out.peer(), WanClockReport{config_.site, clock, 0, false, incarnation_,
                                                     inbox_.Incarnation(out.peer())});
  }
  const bool rejoin = outer_ != nullptr && joining_;
  rejoin_started_ = rejoin;
  if (rejoin) {
    target_->HoldWorkers("its site has a new store and first asks its peers what they hold of it (wan mode " +
                         std::string(WanModeName(options_.mode)) + "); retry shortly");
  }
  thread_ = std::thread([this, rejoin] {
    NameThisThread("wan-replicator");
    if (rejoin) {
      Status s = Rejoin(Deadline::InMs(kRejoinWaitMs));
      if (!s.ok()) spdlog::error("wan shard {}: {}", config_.shard, s.ToString());
      target_->ReleaseWorkers(s);
      {
        std::lock_guard<std::mutex> lock(mu_);
        rejoined_ = s;
      }
      rejoined_cv_.notify_all();
    }
    Loop();
  });
}


void Replicator::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  drained_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const float* Replicator::LookupValue(ChunkKey key) {
  if (!spec_->HasChunk(key)) return nullptr;
  value_scratch_.resize(static_cast<size_t>(spec_->ChunkElements(key)));
  if (!target_->ReadChunkValue(key, value_scratch_.data()).ok()) return nullptr;
  return value_scratch_.data();
}

void Replicator::OnLocalUpdate(WorkerId worker, Clock clock, int32_t part, std::span<const ChunkKey> keys,
                               std::span<const float> values) {
  std::lock_guard<std::mutex> lock(mu_);
  if (outer_ != nullptr && worker >= 0) {
    // The outer step's contribution names, per worker, the last batch
    // (clock, part) whose update it holds (ContributionMark): a worker's
    // batches are applied in order, so that is the latest one.
    if (static_cast<size_t>(worker) >= covered_.size()) covered_.resize(static_cast<size_t>(worker) + 1);
    covered_[static_cast<size_t>(worker)] = CoveredBatch{clock, part};
  }
  size_t offset = 0;
  for (const ChunkKey key : keys) {
    const size_t n = static_cast<size_t>(spec_->ChunkElements(key));
    if (offset + n > values.size()) break;  // the shard validated the batch; never happens
    // The shard refused the whole update had any value been NaN/Inf.
    Status s = filter_.AddFinite(key, values.subspan(offset, n));
    if (!s.ok()) spdlog::error("wan shard {}: local update not accumulated: {}", config_.shard, s.ToString());
    journal_.AccumulatorChanged(key);
    offset += n;
  }
  stats_.elements_pushed += static_cast<int64_t>(offset);
}

void Replicator::OnShardClock(Clock shard_clock, bool all_finished) {
  if (all_finished && outer_ != nullptr) {
    // Before the gate learns the site finished: its final reads wait for
    // this site's last contribution and the step that holds it.
    std::lock_guard<std::mutex> lock(mu_);
    if (!own_final_given_) gate_.OnOuterStep(outer_->next_step() - 1, true);
  }
  if (options_.mode == WanMode::kAsp && options_.max_drift_allowance > 0) {
    // The drift bound counts the clocks a report now needs to reach the
    // slowest-reached peer (DriftAllowance).
    double worst = 0;
    for (SiteId peer : config_.peers) worst = std::max(worst, transport_->EstimateReportSeconds(peer));
    int64_t clocks = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      allowance_.OnClock(shard_clock, SecondsOf(time_->Now()));
      clocks = allowance_.ClocksFor(worst);
    }
    gate_.SetDriftAllowance(clocks);
  }
  gate_.SetOwnClock(shard_clock, all_finished);
  {
    std::lock_guard<std::mutex> lock(mu_);
    target_clock_ = std::max(target_clock_, shard_clock);
    finished_ = finished_ || all_finished;
  }
  cv_.notify_all();
}

void Replicator::ShipSelected(Clock k, bool finishing) {
  if (selected_.empty()) return;
  const double start = NowSeconds();
  Result<EncodeStats> st = shipper_.Ship(k, selection_since_, finishing, selected_, &residuals_);
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

void Replicator::ServeBacklogs(Clock k, bool finishing) {
  float threshold = -1.0f;  // everything
  if (options_.mode == WanMode::kAsp && !finishing) {
    std::lock_guard<std::mutex> lock(mu_);
    threshold = static_cast<float>(schedule_.At(k));
  }
  shipper_.ServeBacklogs(k, finishing, threshold, &lookup_, &element_lookup_);
}

bool Replicator::SelectLocked(Clock k, bool finishing, SelectSlice* slice) {
  const double start = NowSeconds();
  SelectStats st;
  step_due_ = false;
  // The outer step's contribution is one batch: it is never sliced.
  SelectSlice whole;
  const SelectSlice& limit = outer_ != nullptr ? whole : *slice;
  if (finishing) {
    st = filter_.DrainAll(&selected_, limit);
    step_due_ = true;
    if (outer_ != nullptr) MarkCutLocked(k);
  } else {
    switch (options_.mode) {
      case WanMode::kAsp:
        st = filter_.Select(k, lookup_, static_cast<float>(schedule_.At(k)), &selected_, limit);
        break;
      case WanMode::kBsp:
      case WanMode::kAllAsync:
        st = filter_.DrainAll(&selected_, limit);
        break;
      case WanMode::kAvg:
      case WanMode::kDiloco:
        if (k / SyncPeriod() > last_sync_ / SyncPeriod()) {
          // Streaming (outer_fragments > 1): only the chunks of this
          // contribution's fragment; the others keep accumulating.
          SelectSlice fragment;
          const int64_t step = own_steps_ + 1;
          if (options_.outer_fragments > 1) fragment.only = [&](ChunkKey key) { return outer_->Covers(step, key); };
          st = filter_.DrainAll(&selected_, fragment);
          last_sync_ = k;
          outer_journal_.MetaChanged();
          step_due_ = true;
          MarkCutLocked(k);
        } else {
          selected_.clear();
        }
        break;
    }
  }
  for (const SparseChunkUpdate& u : selected_) journal_.AccumulatorChanged(u.key);
  stats_.elements_selected += st.elements_selected;
  stats_.select_seconds += NowSeconds() - start;
  if (st.chunks_scanned > 0) {
    slice->has_after = true;
    slice->after = st.last;
  }
  return st.more && outer_ == nullptr;
}

void Replicator::TickChanges(const std::vector<std::pair<SiteId, uint64_t>>& acks, Clock k, bool tick,
                             bool finishing, bool reselect) {
  // The tick's updates leave slice by slice (WanOptions::slice_elements),
  // each selected, encoded and shipped before the next is selected. While
  // every peer's link is full (asp), selection stops: the rest stays in the
  // accumulator, where it coalesces as a backlog would, without a second
  // copy of its rows; the next tick goes on after the last chunk visited,
  // so that no chunk waits behind the others. `reselect` (no tick) selects
  // again at clock k what such a hold left (tie_backlog: the reports wait
  // for it).
  for (const auto& [peer, seq] : acks) shipper_.OnAcked(peer, seq);
  const bool selects = tick || finishing || reselect;
  SelectSlice slice;
  slice.max_elements = options_.slice_elements;
  bool wrap = false;  // started after resume_after_: the chunks before it come last
  if (outer_ == nullptr && resume_pending_ && !finishing) {
    slice.has_after = true;
    slice.after = resume_after_;
    wrap = true;
  }
  bool more = false;
  const bool held = selects && outer_ == nullptr && HoldInAccumulator(finishing);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // What this round selects (or holds) was given to the shard from this
    // clock on: the clock after the last tick whose selection was whole.
    selection_since_ = held_since_.value_or(ticked_ + 1);
    if (held) {
      selected_.clear();
      ++stats_.select_holds;
    } else if (selects) {
      more = SelectLocked(k, finishing, &slice);
    } else {
      selected_.clear();
    }
    if (tick || finishing) {
      ticked_ = k;
      ++stats_.ticks;
      stats_.ticked_clock = k;
    }
  }
  if (held && !held_since_) held_since_ = selection_since_;
  if (outer_ != nullptr) {
    ShipContribution(k, finishing);
    return;
  }
  if (selects && !held) {
    resume_pending_ = false;
    bool held_later = false;
    ShipSelected(k, finishing);
    while (true) {
      if (!more && wrap) {  // the tail is done: now the chunks before the resume point
        wrap = false;
        slice = SelectSlice{};
        slice.max_elements = options_.slice_elements;
        more = true;
      }
      if (!more) break;
      if (HoldInAccumulator(finishing)) {
        if (slice.has_after) {
          resume_pending_ = true;
          resume_after_ = slice.after;
        }
        held_later = true;
        if (!held_since_) held_since_ = selection_since_;
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.select_holds;
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        more = SelectLocked(k, finishing, &slice);
      }
      ShipSelected(k, finishing);
    }
    if (!held_later) held_since_.reset();  // the whole accumulator was looked at
  }
  ServeBacklogs(k, finishing);
}

void Replicator::CheckCaughtUp() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if ((!recovery_.recovered && !recovery_.fresh_store) || recovery_.caught_up_unix != 0) return;
  }
  if (!gate_.CaughtUp()) return;
  const int64_t bytes = inbox_.stats().bytes_received;
  std::lock_guard<std::mutex> lock(mu_);
  if (recovery_.caught_up_unix != 0) return;
  recovery_.caught_up_unix = UnixSeconds();
  recovery_.catch_up_bytes = bytes;
  // Said for a restart from the store; a fresh store (a first start, or a
  // site rebuilt after a disk loss, which its peers' stream_resets record)
  // only at debug level.
  spdlog::log(recovery_.recovered ? spdlog::level::info : spdlog::level::debug,
              "wan shard {}: back within DS of every live peer {:.3f} s after the state was loaded ({} bytes received)",
              config_.shard, recovery_.caught_up_unix - recovery_.state_loaded_unix, bytes);
}

void Replicator::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Work, or every kIdleRoundMs of this replicator's time: a link may
    // have opened for a backlog, or a drain that could not complete may now.
    const auto due = [this] {
      return stop_ || target_clock_ > ticked_ || (finished_ && !drained_ && !drain_retry_wait_) || !acks_.empty() ||
             resets_.Pending() || !records_.empty() || !report_again_.empty() ||
             (!outer_resets_.empty() && time_->Now() >= outer_reset_retry_) || GapDueLocked();
    };
    const auto until = time_->Now() + std::chrono::milliseconds(kIdleRoundMs);
    while (!due() && time_->Now() < until) time_->WaitUntil(cv_, lock, until);
    if (stop_) return;
    drain_retry_wait_ = false;
    if (resets_.Pending()) {
      lock.unlock();
      RunResets();
      lock.lock();
    }
    if (!outer_resets_.empty() && time_->Now() >= outer_reset_retry_) {
      lock.unlock();
      RunOuterResets();
      lock.lock();
    }
    if (GapDueLocked()) {
      lock.unlock();
      RunOuterCatchUps();
      lock.lock();
    }
    std::vector<std::pair<SiteId, uint64_t>> records;
    records.swap(records_);
    std::vector<std::pair<SiteId, uint64_t>> acks;
    acks.swap(acks_);
    std::vector<SiteId> report_again;
    report_again.swap(report_again_);
    const Clock k = target_clock_;
    const bool tick = k > ticked_;
    const bool finishing = finished_ && !drained_;
    const bool was_drained = drained_;
    lock.unlock();

    // A wake-up with no tick, drain or acknowledgement only serves backlogs
    // (a link may have opened); with none, nothing can change: skip the
    // persistence round trip (the loop wakes every 100 ms).
    const bool backlogged = shipper_.Waiting();
    // tie_backlog: a report gives the clock through which this shard's
    // updates have left for that peer, so a round whose cut emptied a
    // backlog, or that could select what a hold left in the accumulator,
    // reports too, tick or not: a peer held at the drift bound by this
    // site's last report may be what keeps this site from ticking.
    const bool backlog_tied = options_.TiesBacklogAt(k) && !finishing && !was_drained &&
                              (options_.mode == WanMode::kAsp || options_.mode == WanMode::kAllAsync);
    const bool reselect = backlog_tied && !tick && held_since_ && !HoldInAccumulator(false);
    const bool work = tick || finishing || !acks.empty() || backlogged || !records.empty() || reselect;
    // Everything this round changes commits together, and only then do its
    // batches leave: a crash can neither lose nor repeat what a peer saw.
    Status durable = work ? target_->RunDurable(
                                [&] {
                                  // A record a reset has overtaken (the peer came
                                  // back again since) must not lower the
                                  // incarnation that reset stored.
                                  for (const auto& [peer, inc] : records) {
                                    if (inbox_.Incarnation(peer) == inc) journal_.PeerIncarnationChanged(peer, inc);
                                  }
                                  TickChanges(acks, k, tick, finishing, reselect);
                                },
                                Deadline::InMs(kDurableWaitMs))
                          : Status::Ok();
    if (durable.ok()) {
      for (const auto& [peer, inc] : records) inbox_.ConfirmIncarnation(peer, inc);
    } else {
      // What the store did not take must not reach a peer: after the
      // restart this site will ship it again from its last durable state,
      // and a peer that had it already would count it twice. (A store that
      // fails stays failed; the shard takes no more changes either.)
      spdlog::error("wan shard {}: outbound state of clock {} is not durable ({}); not sending it", config_.shard,
                    k, durable.ToString());
      shipper_.DropOutgoing();
      lock.lock();
      records_.insert(records_.end(), records.begin(), records.end());  // again next round
      lock.unlock();
    }
    // The drain is complete once every peer's backlog has left (a peer not
    // heard from yet keeps its backlog until it is; the drain goes on).
    bool drain_complete = finishing && durable.ok();
    const auto now = time_->Now();
    ClockReporter::Outcome reported;
    const ClockReporter::Round round{k, tick, finishing, was_drained, backlog_tied, held_since_, incarnation_, now};
    if (reporter_.Due(round)) {
      std::vector<ClockReporter::PeerView> peers;
      peers.reserve(shipper_.outboxes().size());
      for (const PeerOutbox& out : shipper_.outboxes()) {
        peers.push_back(ClockReporter::PeerView{out.peer(), out.SentThrough(k), out.last_seq(),
                                                shipper_.NothingWaitsFor(out), inbox_.Incarnation(out.peer())});
      }
      // A tied report rides with the batch of this round it names: the
      // peer would hold it until that batch landed anyway.
      reported = reporter_.Report(round, peers, [this](SiteId peer, const WanClockReport& report) {
        return shipper_.AttachReport(peer, report);
      });
      drain_complete = drain_complete && reported.all_drained;
    }
    // The round's batches leave after its reports are made, so that those
    // reports can ride with them.
    if (durable.ok()) shipper_.Flush();
    for (SiteId peer : report_again) {
      for (size_t i = 0; i < shipper_.outboxes().size(); ++i) {
        if (shipper_.outboxes()[i].peer() != peer) continue;
        if (std::optional<WanClockReport> again = reporter_.SendAgain(i, peer)) {
          spdlog::info("wan shard {}: site {} (re)started; sending it clock {} again{}", config_.shard, peer,
                       again->clock, again->drained ? " (drained)" : "");
        }
      }
    }
    CheckCaughtUp();
    Steer(now);
    const bool in_flight = shipper_.InFlight();

    lock.lock();
    stats_.reports_sent += reported.sent;
    stats_.reports_held += reported.held;
    stats_.reports_riding += reported.riding;
    for (size_t i = 0; i < shipper_.outboxes().size(); ++i) {
      outbox_stats_[i] = shipper_.outboxes()[i].stats();
      outbox_seq_[i] = shipper_.outboxes()[i].last_seq();
    }
    // A drain that could not complete (a peer not reached yet) is tried
    // again on the next event or after the 100 ms wait, not at once.
    drain_retry_wait_ = finishing && !drain_complete;
    if (drain_complete) {
      drained_ = true;
      stats_.drained = true;
      spdlog::info("wan shard {}: drained at clock {}", config_.shard, k);
    }
    if (drained_ && !in_flight && !drain_acked_) drain_acked_ = true;
    drained_cv_.notify_all();
  }
}

void Replicator::Steer(SteadyClock::time_point now) {
  if (!steer_) return;
  const std::vector<PeerOutbox>& outboxes = shipper_.outboxes();
  const auto restart = [&] {
    steer_since_ = now;
    steer_bytes_.clear();
    for (const PeerOutbox& out : outboxes) steer_bytes_.push_back(out.stats().bytes_sent);
  };
  if (!steer_since_) return restart();
  const double interval = std::chrono::duration<double>(now - *steer_since_).count();
  if (interval * 1000 < kSteerIntervalMs) return;
  // The busiest link: the most bytes handed to it against its bandwidth.
  // Links of unknown bandwidth (0: not modelled) do not steer.
  double busiest = -1;
  double bytes = 0;
  double bits_per_s = 0;
  for (size_t i = 0; i < outboxes.size(); ++i) {
    const double bw = transport_->BandwidthBytesPerSecond(outboxes[i].peer());
    if (!(bw > 0)) continue;
    const double sent = static_cast<double>(outboxes[i].stats().bytes_sent - steer_bytes_[i]);
    if (sent / bw > busiest) {
      busiest = sent / bw;
      bytes = sent;
      bits_per_s = 8 * bw;
    }
  }
  if (busiest >= 0) {
    const double m = steer_->Update(bytes, interval, bits_per_s);
    std::lock_guard<std::mutex> lock(mu_);
    schedule_.set_multiplier(m);
    stats_.threshold_multiplier = schedule_.multiplier();
  }
  restart();
}

void Replicator::OnPeerBoot(SiteId origin, uint64_t boot) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, first] = boots_.try_emplace(origin, boot);
  if (!first && it->second == boot) return;
  it->second = boot;
  report_again_.push_back(origin);
  cv_.notify_all();
}

void Replicator::RunResets() {
  StreamResets::Hooks hooks;
  hooks.restart_stream = [this](SiteId peer, std::span<const ChunkMass> own, StreamResetEvent* event) {
    PeerOutbox* out = shipper_.OutboxFor(peer);
    if (out == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);  // the accumulator
    event->snapshot_elements = RestartStream(
        out, own, [this](ChunkKey key) { return filter_.Accumulated(key); }, event->incarnation, &journal_,
        config_.shard);
  };
  hooks.done = [this](const StreamResetEvent& event) {
    std::lock_guard<std::mutex> lock(mu_);
    // Acknowledgements of the old stream's seqs mean nothing for the new one.
    std::erase_if(acks_, [&event](const auto& a) { return a.first == event.peer; });
    if (drained_) {
      // This site had shipped its final updates; the new peer needs them
      // (its snapshot, now in the backlog) and the drained marker again:
      // drain once more (the other peers get an empty drain).
      drained_ = false;
      drain_acked_ = false;
      stats_.drained = false;
    }
  };
  resets_.Run(&inbox_, target_, config_.shard, hooks);
}

DeferredRecords* Replicator::CollectOutbound(std::vector<OutboundRecord>* puts, std::vector<std::string>* deletes) {
  std::lock_guard<std::mutex> lock(mu_);
  DeferredRecords* deferred = journal_.Collect(
      &filter_,
      [this](SiteId peer) -> SignificanceFilter* {
        PeerOutbox* o = shipper_.OutboxFor(peer);
        return o != nullptr ? o->mutable_backlog() : nullptr;
      },
      puts, deletes);
  if (outer_ != nullptr) outer_journal_.Collect(*outer_, last_sync_, puts, deletes);
  return deferred;
}

void Replicator::ReleaseOutbound() { journal_.Release(); }

bool Replicator::WaitDrainAcknowledged(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_cv_.wait_until(lock, deadline.when(), [this] { return drain_acked_ || stop_; }) && drain_acked_;
}

ReplicatorStats Replicator::stats() const {
  ReplicatorStats out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = stats_;
    out.residual_norm = filter_.ResidualNorm();
    out.drain_bytes = shipper_.drain_bytes();
    out.dirty_chunks = filter_.dirty_chunks();
    for (size_t i = 0; i < outbox_stats_.size(); ++i) {
      auto q = quarantined_by_peer_.find(config_.peers[i]);
      out.peers.push_back(PeerReplicationStats{config_.peers[i], outbox_seq_[i], outbox_stats_[i],
                                               q == quarantined_by_peer_.end() ? 0 : q->second});
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.recovery = recovery_;
    out.stream_resets = resets_.events();
    out.stream_resets.insert(out.stream_resets.end(), outer_reset_events_.begin(), outer_reset_events_.end());
  }
  out.incarnation = incarnation_;
  const OutboundJournal::CaptureStats js = journal_.capture_stats();
  out.journal_rows_saved = js.rows_saved;
  out.journal_peak_saved_bytes = js.peak_saved_bytes;
  out.inbox = inbox_.stats();
  out.gate = gate_.stats();
  return out;
}

void Replicator::PendingFor(SiteId peer, ChunkKey key, std::vector<double>* out) const {
  out->assign(static_cast<size_t>(spec_->ChunkElements(key)), 0.0);
  std::lock_guard<std::mutex> lock(mu_);
  std::span<const float> acc = filter_.Accumulated(key);
  for (size_t i = 0; i < acc.size() && i < out->size(); ++i) (*out)[i] += acc[i];
  for (const PeerOutbox& o : shipper_.outboxes()) {
    if (o.peer() != peer) continue;
    std::span<const float> b = o.backlog().Accumulated(key);
    for (size_t i = 0; i < b.size() && i < out->size(); ++i) (*out)[i] += b[i];
  }
}

}  // namespace geops::wan
