// The Replicator's avg and diloco half: contributions to the outer step,
// the step itself, and what the gate learns of it (docs/wan_replication.md,
// "The outer step"). The tick loop and the other modes: replicator.cc.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "wan/replication/replicator.h"

namespace geops::wan {

Status Replicator::InitOuter(RecoveredOuter outer, bool new_store) {
  if (!outer.present && !new_store) {
    return FailedPreconditionError(
        "wan mode " + std::string(WanModeName(options_.mode)) +
        ": the shard's store holds WAN state of another mode and no outer step state; start this mode on a "
        "new store");
  }
  std::vector<SiteId> sites = config_.peers;
  sites.push_back(config_.site);
  outer_ = std::make_unique<OuterStep>(std::move(sites), options_.EffectiveOuter());
  // theta starts at the shard's values now: the model's initial values,
  // the same at every site.
  std::vector<float> values;
  for (TableId t = 0; t < static_cast<TableId>(spec_->num_tables()); ++t) {
    for (const ChunkKey key : spec_->ChunksOfTable(t)) {
      values.resize(static_cast<size_t>(spec_->ChunkElements(key)));
      if (target_->ReadChunkValue(key, values.data()).ok()) outer_->InitChunk(key, values);
    }
  }
  // What a contribution cut now would hold of each worker: everything
  // through its last batch the store has (in the accumulator, or in an
  // earlier contribution).
  for (const WorkerRecord& w : target_->WorkerRecords()) {
    if (w.last_update_clock < 0 || w.worker < 0) continue;
    if (static_cast<size_t>(w.worker) >= covered_.size()) covered_.resize(static_cast<size_t>(w.worker) + 1);
    covered_[static_cast<size_t>(w.worker)] = CoveredBatch{w.last_update_clock, w.last_update_part};
  }
  joining_ = new_store;  // a new store: Rejoin asks the peers first
  inbox_.SetOuterStateSource([this](SiteId origin, uint64_t incarnation, uint64_t snapshot, int32_t page) {
    return ServeOuterState(origin, incarnation, snapshot, page);
  });
  if (outer.present) {
    // A restart: the steps go on where the store left them.
    outer_journal_.Restored(outer.state);
    GEOPS_RETURN_IF_ERROR(outer_->Import(std::move(outer.state)).WithContext("restoring the outer step"));
    last_sync_ = outer.last_sync;
    own_steps_ = outer_->LastGiven(config_.site);
    own_final_given_ = outer_->final_steps().count(config_.site) > 0;
    recovery_.recovered = true;
    spdlog::info("wan shard {}: restored the outer step: {} steps applied, {} contributions of this site, "
                 "last at clock {}",
                 config_.shard, outer_->next_step() - 1, own_steps_, last_sync_);
  } else {
    outer_journal_.MarkAll();  // a new store's first commit holds theta0
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    PublishOuterLocked();
  }
  gate_.SetOuterPeriod(SyncPeriod(), options_.outer_overlap ? options_.outer_fragments : 0);
  inbox_.SetBatchSink([this](SiteId origin, uint64_t seq, const DecodedBatch& batch) {
    return OnContribution(origin, seq, batch);
  });
  inbox_.SetGapListener([this](SiteId origin, uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& gap = outer_gaps_[origin];
    if (gap.first == 0) gap.second = time_->Now() + std::chrono::milliseconds(kGapGraceMs);
    gap.first = std::max(gap.first, seq);
  });
  return Status::Ok();
}

void Replicator::ShipContribution(Clock k, bool finishing) {
  bool due = false;
  int64_t step = 0;  // only this thread moves own_steps_
  std::optional<ContributionMark> mark;
  {
    std::lock_guard<std::mutex> lock(mu_);
    due = step_due_ && !own_final_given_;
    step_due_ = false;
    step = own_steps_ + 1;
    mark = std::move(cut_mark_);
    cut_mark_.reset();
  }
  if (due) {
    const double start = NowSeconds();
    std::vector<std::pair<Clock, int32_t>> covered;
    if (mark) {
      for (const CoveredBatch& c : mark->covered) covered.emplace_back(c.clock, c.part);
    }
    Result<EncodeStats> st = shipper_.EncodeContribution(step, k, finishing, selected_, &residuals_, &shipped_,
                                                         mark ? &covered : nullptr);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.encode_seconds += NowSeconds() - start;
    if (!st.ok()) {
      // Nothing leaves: everything goes back, to be tried next tick.
      spdlog::error("wan shard {}: encoding the contribution of clock {} failed: {}", config_.shard, k,
                    st.status().ToString());
      for (const SparseChunkUpdate& u : selected_) filter_.AddSparse(u).IgnoreError();
      return;
    }
    ++stats_.batches_encoded;
    // Error feedback: what the codec could not carry stays for the next step.
    for (const SparseChunkUpdate& r : residuals_) filter_.AddSparse(r).IgnoreError();
    // Every site adds what its peers will decode: the same bits everywhere.
    own_steps_ = step;
    Status s = outer_->Add(step, config_.site, shipped_, finishing, mark.value_or(ContributionMark{}));
    if (s.ok()) {
      outer_journal_.ContributionAdded(step, config_.site);
    } else {
      spdlog::error("wan shard {}: own contribution: {}", config_.shard, s.ToString());
    }
    own_final_given_ = finishing;
    ApplyReadyLocked();
  }
  // Contributions leave in step order once the peer is addressable.
  shipper_.SendContributions(finishing);
}

Status Replicator::OnContribution(SiteId origin, uint64_t seq, const DecodedBatch& batch) {
  // One change to persistent state: the contribution, and the step it may
  // complete with the chunk values that step sets, commit together, and
  // before the inbox consumes the batch's seq (which it does only after
  // this returns OK): a crash in between redelivers the batch, found given.
  Status added = Status::Ok();
  Status durable = target_->RunDurable(
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        // Given already (the inbox took it, then could not mark its seq):
        // the redelivery is the same batch.
        if (static_cast<int64_t>(seq) <= outer_->LastGiven(origin)) return;
        ContributionMark mark;
        if (batch.header.marked) {
          mark.cut = batch.header.clock;
          for (const auto& [clock, part] : batch.covered) mark.covered.push_back(CoveredBatch{clock, part});
        }
        added = outer_->Add(static_cast<int64_t>(seq), origin, batch.chunks, batch.header.final, std::move(mark));
        if (!added.ok()) return;
        outer_journal_.ContributionAdded(static_cast<int64_t>(seq), origin);
        ApplyReadyLocked();
      },
      Deadline::InMs(kDurableWaitMs));
  GEOPS_RETURN_IF_ERROR(added);
  return durable;
}

void Replicator::MarkCutLocked(Clock k) {
  // Streaming contributions each hold one fragment's chunks: no single
  // clock says where a worker's updates end, so they carry no mark.
  if (options_.outer_fragments > 1) return;
  cut_mark_ = ContributionMark{k, covered_};
}

void Replicator::ApplyReadyLocked() {
  while (outer_->Ready()) {
    Status s = outer_->ApplyNext([&](ChunkKey key, std::span<const float> theta) {
      // The replica: the synchronised model plus what this site did since
      // its last contribution (and the codec's error feedback), which the
      // next step will carry.
      outer_scratch_.assign(theta.begin(), theta.end());
      std::span<const float> own = filter_.Accumulated(key);
      for (size_t i = 0; i < own.size() && i < outer_scratch_.size(); ++i) outer_scratch_[i] += own[i];
      Status set = target_->SetChunkValue(key, outer_scratch_);
      if (!set.ok()) spdlog::error("wan shard {}: outer step: {}", config_.shard, set.ToString());
    });
    if (!s.ok()) {
      spdlog::error("wan shard {}: {}", config_.shard, s.ToString());
      break;
    }
    outer_journal_.StepApplied(outer_->next_step() - 1);
    ++stats_.outer_steps_applied;
  }
  PublishOuterLocked();
}

void Replicator::PublishOuterLocked() {
  const bool final_to_come = finished_ && !own_final_given_;
  gate_.OnOuterStep(outer_->next_step() - 1, outer_->Outstanding() || final_to_come);
}

Result<std::vector<float>> Replicator::SyncedValue(ChunkKey key) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (outer_ == nullptr) {
    return FailedPreconditionError("wan mode " + std::string(WanModeName(options_.mode)) +
                                   " has no synchronised model (only avg and diloco do)");
  }
  std::span<const float> theta = outer_->Theta(key);
  if (theta.empty()) return InvalidArgumentError("this shard holds no synchronised value of that chunk");
  return std::vector<float>(theta.begin(), theta.end());
}

std::vector<uint64_t> Replicator::OuterDigests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outer_ == nullptr ? std::vector<uint64_t>() : outer_->digests();
}

}  // namespace geops::wan
