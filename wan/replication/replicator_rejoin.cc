// The Replicator's part in a diloco or avg site that lost its store
// (docs/wan_replication.md, "A diloco site that lost its disk"):
//   - the site itself (Rejoin): asks every peer for its outer-step state,
//     merges them, goes on after its own last contribution a peer holds,
//     and resumes its workers where that contribution leaves them;
//   - each peer (RunOuterResets): once the site has rejoined, takes in its
//     merged state (a peer that lacked some of the lost site's
//     contributions gets them, or the steps they completed) and sends it
//     its own contributions after the last one it holds;
//   - both (ServeOuterState): answer those questions, page by page.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "wan/replication/replicator.h"

namespace geops::wan {
namespace {

// Records per page of an outer-state answer: at most about this many bytes
// (a frame well under the Thrift transport's limits), but at least one.
constexpr size_t kOuterPageBytes = size_t{8} << 20;
// One fetch of one page waits this long; a peer that cannot answer in time
// is asked again.
constexpr int64_t kFetchAttemptMs = 10000;
// How long a peer waits before asking a rejoining site again.
constexpr int64_t kResetRetryMs = 500;
// Between two rounds of asking the peers that have not answered (Rejoin).
constexpr int64_t kRejoinRetryMs = 200;

std::string Names(const std::vector<SiteId>& sites) {
  std::string out;
  for (SiteId s : sites) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

}  // namespace

Result<OuterStatePage> Replicator::ServeOuterState(SiteId origin, uint64_t /*incarnation*/, uint64_t snapshot,
                                                   int32_t page) {
  std::lock_guard<std::mutex> lock(mu_);
  if (outer_ == nullptr) return FailedPreconditionError("this shard's wan mode has no outer step");
  if (joining_) {
    // A new store, not merged with its peers' yet: it holds nothing of
    // the asker, and its state is not worth taking.
    OuterStatePage out;
    out.heard_incarnation = inbox_.Incarnation(origin);
    out.has_state = true;
    out.joining = true;
    out.pages = 1;
    return out;
  }
  OuterSnapshot& snap = outer_snapshots_[origin];
  if (page == 0) {
    // A new snapshot: the state as of now, split into pages by bytes.
    snap.id = ++outer_snapshot_ids_;
    snap.records.clear();
    snap.page_starts.assign(1, 0);
    size_t bytes = 0;
    for (OutboundRecord& r : EncodeOuterState(outer_->Export(), last_sync_)) {
      const size_t n = r.key.size() + r.value.size();
      if (bytes > 0 && bytes + n > kOuterPageBytes) {
        snap.page_starts.push_back(snap.records.size());
        bytes = 0;
      }
      bytes += n;
      snap.records.emplace_back(std::move(r.key), std::move(r.value));
    }
  } else if (snap.id == 0 || snap.id != snapshot || page >= static_cast<int32_t>(snap.page_starts.size())) {
    outer_snapshots_.erase(origin);
    return NotFoundError("outer state snapshot " + std::to_string(snapshot) + " page " + std::to_string(page) +
                         " is not kept here; start again at page 0");
  }
  OuterStatePage out;
  out.heard_incarnation = inbox_.Incarnation(origin);
  out.has_state = true;
  out.joining = joining_;
  out.snapshot = snap.id;
  out.page = page;
  out.pages = static_cast<int32_t>(snap.page_starts.size());
  const size_t from = snap.page_starts[static_cast<size_t>(page)];
  const size_t to = page + 1 < out.pages ? snap.page_starts[static_cast<size_t>(page) + 1] : snap.records.size();
  out.records.reserve(to - from);
  for (size_t i = from; i < to; ++i) out.records.push_back(snap.records[i]);
  if (page + 1 == out.pages) outer_snapshots_.erase(origin);  // the asker has it all
  return out;
}

Result<Replicator::PeerOuter> Replicator::FetchPeerOuter(SiteId peer, Deadline deadline) {
  PeerOuter got;
  uint64_t snapshot = 0;
  int32_t pages = 1;
  for (int32_t page = 0; page < pages; ++page) {
    const int64_t left = std::max<int64_t>(1, deadline.RemainingMs());
    GEOPS_ASSIGN_OR_RETURN(OuterStatePage p, transport_->FetchOuterState(peer, incarnation_, snapshot, page,
                                                                         std::min(left, kFetchAttemptMs)));
    if (page == 0) {
      got.heard = p.heard_incarnation;
      got.has_state = p.has_state;
      got.joining = p.joining;
      snapshot = p.snapshot;
      pages = p.pages;
      if (!p.has_state || p.joining) return got;  // nothing to merge
    } else if (p.snapshot != snapshot || p.page != page) {
      return UnavailableError("site " + std::to_string(peer) + " answered page " + std::to_string(p.page) +
                              " of snapshot " + std::to_string(p.snapshot) + " for page " + std::to_string(page) +
                              " of snapshot " + std::to_string(snapshot));
    }
    for (auto& [key, value] : p.records) {
      got.bytes += static_cast<int64_t>(key.size() + value.size());
      GEOPS_RETURN_IF_ERROR(DecodeOuterRecord(OutboundRecord{std::move(key), std::move(value)}, *spec_, &got.outer)
                                .WithContext("site " + std::to_string(peer) + "'s outer state"));
    }
  }
  if (!got.outer.present) {
    return DataLossError("site " + std::to_string(peer) + "'s outer state has no step record");
  }
  return got;
}

Result<std::unique_ptr<OuterStep>> Replicator::CopyOuterLocked() const {
  std::vector<SiteId> sites = config_.peers;
  sites.push_back(config_.site);
  auto copy = std::make_unique<OuterStep>(std::move(sites), options_.EffectiveOuter());
  for (const ChunkKey key : outer_->Chunks()) copy->InitChunk(key, outer_->Theta(key));
  GEOPS_RETURN_IF_ERROR(copy->Import(outer_->Export()));
  return copy;
}

Status Replicator::Rejoin(Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outer_ == nullptr || !joining_) return Status::Ok();
  }
  // Every peer's answer: a peer that cannot answer yet may hold this
  // site's work, so it is asked again until the deadline.
  std::map<SiteId, PeerOuter> got;
  Status last;
  while (got.size() < config_.peers.size()) {
    for (SiteId peer : config_.peers) {
      if (got.count(peer) > 0) continue;
      Result<PeerOuter> r = FetchPeerOuter(peer, deadline);
      if (r.ok()) {
        got.emplace(peer, std::move(r).value());
      } else if (r.status().code() == StatusCode::kUnimplemented) {
        // A transport that cannot ask (in-process tests without it):
        // nothing to learn from that peer.
        got.emplace(peer, PeerOuter{});
      } else if (r.status().code() == StatusCode::kDataLoss ||
                 r.status().code() == StatusCode::kFailedPrecondition) {
        return r.status().WithContext("asking site " + std::to_string(peer) + " for its outer state");
      } else {
        last = r.status();
      }
    }
    if (got.size() == config_.peers.size()) break;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return CancelledError("the replicator stopped while rejoining");
    }
    if (deadline.Expired()) {
      std::vector<SiteId> missing;
      for (SiteId peer : config_.peers) {
        if (got.count(peer) == 0) missing.push_back(peer);
      }
      return DeadlineExceededError("wan shard " + std::to_string(config_.shard) +
                                   ": a new store must hear from every peer before its workers start, and sites " +
                                   Names(missing) + " did not answer (last: " + last.ToString() + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kRejoinRetryMs));
  }
  // A peer that recorded an earlier incarnation of this site holds its
  // work (this one it may have heard of already: it announces itself at
  // Start).
  std::vector<SiteId> holders;
  for (const auto& [peer, p] : got) {
    if (p.heard != 0 && p.heard != incarnation_) holders.push_back(peer);
  }
  if (holders.empty()) {
    // No peer ever heard of an earlier incarnation: a first start.
    std::lock_guard<std::mutex> lock(mu_);
    joining_ = false;
    return Status::Ok();
  }
  if (options_.outer_fragments > 1) {
    return FailedPreconditionError(
        "wan shard " + std::to_string(config_.shard) + ": sites " + Names(holders) +
        " hold work of this site, which came back with a new store; streaming diloco (outer_fragments > 1) "
        "cannot take a site back (its contributions leave no single point to resume its workers at): bring its "
        "store back, or start the run again");
  }
  std::vector<WorkerRecord> workers;
  int64_t own = 0;
  Clock cut = 0;
  Status merged_status;
  Status durable = target_->RunDurable(
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        // Merged in a copy, so that a refusal changes nothing.
        Result<std::unique_ptr<OuterStep>> copy = CopyOuterLocked();
        merged_status = copy.status();
        if (!merged_status.ok()) return;
        OuterStep& merged = **copy;
        for (auto& [peer, p] : got) {
          if (!merged_status.ok()) break;
          if (!p.has_state || p.joining) continue;
          merged_status = merged.Merge(p.outer.state).status().WithContext("site " + std::to_string(peer));
        }
        if (!merged_status.ok()) return;
        own = merged.LastGiven(config_.site);
        const ContributionMark* mark = merged.LastMark(config_.site);
        if (own > 0 && mark == nullptr) {
          merged_status = DataLossError("no peer knows where this site's workers stopped: its contribution " +
                                        std::to_string(own) + " came without a mark");
          return;
        }
        const bool ended = merged.final_steps().count(config_.site) > 0;
        if (mark != nullptr) {
          cut = mark->cut;
          for (size_t w = 0; w < mark->covered.size(); ++w) {
            const CoveredBatch& c = mark->covered[w];
            if (c.clock < 0) continue;
            WorkerRecord r;
            r.worker = static_cast<WorkerId>(w);
            // The worker repeats the clock of its last batch held: the
            // parts held are duplicates, the rest (if any) is new. A
            // finished worker is done at the clock after it.
            r.clock = ended ? c.clock + 1 : c.clock;
            r.last_update_clock = c.clock;
            r.last_update_part = c.part;
            r.finished = ended;
            workers.push_back(r);
          }
          covered_ = mark->covered;
        }
        merged_status = target_->ResumeWorkers(workers);
        if (!merged_status.ok()) return;
        merged_status = outer_->Import(merged.Export());
        if (!merged_status.ok()) return;
        outer_journal_.MarkAll();
        for (const auto& [step, sites_given] : merged.Export().pending) {
          for (const auto& [site, chunks] : sites_given) outer_journal_.ContributionAdded(step, site);
        }
        own_steps_ = own;
        own_final_given_ = ended;
        last_sync_ = cut;
        // The replica: the synchronised model plus this site's own
        // contributions not applied yet (its workers' progress since).
        for (const ChunkKey key : outer_->Chunks()) {
          std::span<const float> theta = outer_->Theta(key);
          outer_scratch_.assign(theta.begin(), theta.end());
          for (int64_t step = outer_->next_step(); step <= own; ++step) {
            const std::vector<SparseChunkUpdate>* c = outer_->Contribution(step, config_.site);
            if (c == nullptr) continue;
            for (const SparseChunkUpdate& u : *c) {
              if (u.key != key) continue;
              for (size_t j = 0; j < u.indices.size(); ++j) outer_scratch_[u.indices[j]] += u.values[j];
            }
          }
          Status set = target_->SetChunkValue(key, outer_scratch_);
          if (!set.ok()) spdlog::error("wan shard {}: rejoining: {}", config_.shard, set.ToString());
        }
        // This site's stream to every peer goes on after its last
        // contribution (a peer that lacks some takes them from the merged
        // state it asks this site for).
        for (PeerOutbox& out : shipper_.outboxes()) {
          out.RestoreSeq(static_cast<uint64_t>(own));
          journal_.LastSeqChanged(out.peer(), static_cast<uint64_t>(own));
        }
        ApplyReadyLocked();
        joining_ = false;
      },
      Deadline::InMs(kDurableWaitMs));
  GEOPS_RETURN_IF_ERROR(merged_status.WithContext("wan shard " + std::to_string(config_.shard) +
                                                  ": merging the peers' outer states"));
  GEOPS_RETURN_IF_ERROR(durable);
  for (SiteId peer : config_.peers) {
    CatchUpSeqs(peer);
    inbox_.Recheck(peer);
  }
  std::string clocks;
  for (const WorkerRecord& w : workers) clocks += (clocks.empty() ? "" : ",") + std::to_string(w.clock);
  int64_t applied = 0;
  int64_t bytes = 0;
  for (const auto& [peer, p] : got) bytes += p.bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    applied = outer_->next_step() - 1;
    recovery_.rejoined = true;
    recovery_.rejoined_unix = UnixSeconds();
    recovery_.rejoin_bytes = bytes;
  }
  spdlog::warn("wan shard {}: this site lost its store and rejoined from sites {}: {} outer steps applied, its "
               "contributions go on after step {} (cut at clock {}), its workers resume at clocks [{}]",
               config_.shard, Names(holders), applied, own, cut, clocks);
  return Status::Ok();
}

Status Replicator::WaitRejoined(Deadline deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (outer_ == nullptr) return Status::Ok();
  while (rejoin_started_ && !rejoined_) {
    if (rejoined_cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !rejoined_) {
      return DeadlineExceededError("wan shard " + std::to_string(config_.shard) + " is still rejoining its peers");
    }
  }
  return rejoined_.value_or(Status::Ok());
}

void Replicator::CatchUpSeqs(SiteId peer) {
  int64_t given = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outer_ == nullptr) return;
    given = outer_->LastGiven(peer);
  }
  for (uint64_t seq = target_->LastAppliedSeq(peer) + 1; seq <= static_cast<uint64_t>(given); ++seq) {
    Result<RemoteApplyResult> r = target_->ApplyRemote(peer, seq, {});
    if (!r.ok()) {
      spdlog::error("wan shard {}: consuming seq {} of site {}: {}", config_.shard, seq, peer, r.status().ToString());
      return;
    }
  }
}

Status Replicator::TakeStateLocked(const OuterStep::State& state, const std::string& whose) {
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<OuterStep> merged, CopyOuterLocked());
  GEOPS_ASSIGN_OR_RETURN(const OuterStep::MergeResult result, merged->Merge(state));
  GEOPS_RETURN_IF_ERROR(outer_->Import(merged->Export()));
  for (int64_t step = result.skipped_from; step <= result.skipped_to; ++step) outer_journal_.StepApplied(step);
  for (const auto& [step, site] : result.added) outer_journal_.ContributionAdded(step, site);
  outer_journal_.MetaChanged();
  if (result.skipped_to >= result.skipped_from) {
    // Steps taken applied: the replica is the new synchronised model plus
    // this site's unshipped progress, as after a step applied here.
    for (const ChunkKey key : outer_->Chunks()) {
      std::span<const float> theta = outer_->Theta(key);
      outer_scratch_.assign(theta.begin(), theta.end());
      std::span<const float> acc = filter_.Accumulated(key);
      for (size_t i = 0; i < acc.size() && i < outer_scratch_.size(); ++i) outer_scratch_[i] += acc[i];
      Status set = target_->SetChunkValue(key, outer_scratch_);
      if (!set.ok()) spdlog::error("wan shard {}: taking {}'s steps: {}", config_.shard, whose, set.ToString());
    }
    stats_.outer_steps_applied += result.skipped_to - result.skipped_from + 1;
  }
  return Status::Ok();
}

Status Replicator::TakeRejoinedLocked(SiteId peer, uint64_t incarnation, const OuterStep::State& state,
                                      int64_t* resent) {
  GEOPS_RETURN_IF_ERROR(TakeStateLocked(state, "site " + std::to_string(peer)));
  // The rejoined site holds this site's contributions through the step its
  // state names; the later ones go to it again. Those applied here since
  // (with contributions taken from another rejoined site's state) are gone:
  // the stream goes on after them, and the gap makes the rejoined site
  // take this site's state, which holds their steps (RunOuterCatchUps).
  auto held_it = state.given.find(config_.site);
  int64_t held = held_it == state.given.end() ? 0 : held_it->second;
  std::vector<WanBatch> again;
  for (int64_t step = held + 1; step <= own_steps_; ++step) {
    const std::vector<SparseChunkUpdate>* c = outer_->Contribution(step, config_.site);
    if (c == nullptr) {
      if (step >= outer_->next_step()) {
        return InternalError("this site's contribution " + std::to_string(step) + " is neither held nor applied");
      }
      held = step;  // applied here
      continue;
    }
    const ContributionMark* mark = outer_->MarkOf(step, config_.site);
    std::vector<std::pair<Clock, int32_t>> covered;
    if (mark != nullptr) {
      for (const CoveredBatch& b : mark->covered) covered.emplace_back(b.clock, b.part);
    }
    auto f = outer_->final_steps().find(config_.site);
    GEOPS_ASSIGN_OR_RETURN(WanBatch batch,
                           shipper_.EncodeAgain(step, mark != nullptr ? mark->cut : 0,
                                                f != outer_->final_steps().end() && f->second == step, *c,
                                                mark != nullptr ? &covered : nullptr));
    again.push_back(std::move(batch));
  }
  *resent = static_cast<int64_t>(again.size());
  shipper_.RestartContributions(peer, static_cast<uint64_t>(held), std::move(again));
  journal_.PeerIncarnationChanged(peer, incarnation);
  std::erase_if(acks_, [peer](const auto& a) { return a.first == peer; });
  if (drained_) {
    // The rejoined site needs this site's drained report again.
    drained_ = false;
    drain_acked_ = false;
    stats_.drained = false;
  }
  ApplyReadyLocked();
  spdlog::info("wan shard {}: took in site {}'s state after it rejoined (incarnation {}): {} outer steps applied, "
               "{} contributions of this site go to it again",
               config_.shard, peer, incarnation, outer_->next_step() - 1, own_steps_ - held);
  return Status::Ok();
}

void Replicator::RunOuterResets() {
  std::map<SiteId, uint64_t> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending = outer_resets_;
  }
  bool retry = false;
  for (const auto& [peer, incarnation] : pending) {
    Result<PeerOuter> got = FetchPeerOuter(peer, Deadline::InMs(kFetchAttemptMs));
    if (!got.ok() || got->joining || !got->has_state) {
      retry = true;
      if (!got.ok()) {
        spdlog::info("wan shard {}: site {} came back with a new store; asking for its state: {}", config_.shard,
                     peer, got.status().ToString());
      }
      continue;
    }
    Status taken;
    int64_t resent = 0;
    Status reset = inbox_.ResetOrigin(peer, incarnation, [&]() -> Status {
      Status durable = target_->RunDurable(
          [&] {
            std::lock_guard<std::mutex> lock(mu_);
            taken = TakeRejoinedLocked(peer, incarnation, got->outer.state, &resent);
          },
          Deadline::InMs(kDurableWaitMs));
      GEOPS_RETURN_IF_ERROR(taken);
      GEOPS_RETURN_IF_ERROR(durable);
      CatchUpSeqs(peer);
      return Status::Ok();
    });
    if (!reset.ok()) {
      spdlog::error("wan shard {}: taking in the state of site {} (incarnation {}): {}", config_.shard, peer,
                    incarnation, reset.ToString());
      retry = true;
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = outer_resets_.find(peer);
    if (it != outer_resets_.end() && it->second == incarnation) outer_resets_.erase(it);
    StreamResetEvent e;
    e.peer = peer;
    e.incarnation = incarnation;
    e.heard_unix = outer_reset_heard_[peer];
    e.reset_unix = UnixSeconds();
    e.snapshot_elements = resent;  // here: this site's contributions sent to it again
    outer_reset_events_.push_back(e);
  }
  std::lock_guard<std::mutex> lock(mu_);
  outer_reset_retry_ = retry ? time_->Now() + std::chrono::milliseconds(kResetRetryMs) : SteadyClock::time_point{};
}

void Replicator::RunOuterCatchUps() {
  std::vector<SiteId> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = time_->Now();
    for (auto it = outer_gaps_.begin(); it != outer_gaps_.end();) {
      if (outer_ == nullptr || static_cast<uint64_t>(outer_->LastGiven(it->first)) + 1 >= it->second.first) {
        it = outer_gaps_.erase(it);  // closed by itself (reordering)
        continue;
      }
      if (now >= it->second.second) due.push_back(it->first);
      ++it;
    }
  }
  for (SiteId peer : due) {
    Result<PeerOuter> got = FetchPeerOuter(peer, Deadline::InMs(kFetchAttemptMs));
    Status taken = got.ok() ? Status::Ok() : got.status();
    if (got.ok() && (got->joining || !got->has_state)) taken = UnavailableError("it is rejoining");
    if (taken.ok()) {
      Status durable = target_->RunDurable(
          [&] {
            std::lock_guard<std::mutex> lock(mu_);
            taken = TakeStateLocked(got->outer.state, "site " + std::to_string(peer));
            if (taken.ok()) ApplyReadyLocked();
          },
          Deadline::InMs(kDurableWaitMs));
      if (taken.ok()) taken = durable;
    }
    if (taken.ok()) {
      CatchUpSeqs(peer);
      inbox_.Recheck(peer);
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = outer_gaps_.find(peer);
    if (it == outer_gaps_.end()) continue;
    if (taken.ok()) {
      spdlog::info("wan shard {}: took site {}'s state to fill a gap in its contributions: {} outer steps applied",
                   config_.shard, peer, outer_->next_step() - 1);
      outer_gaps_.erase(it);
    } else {
      spdlog::info("wan shard {}: site {}'s contributions have a gap; asking for its state: {}", config_.shard, peer,
                   taken.ToString());
      it->second.second = time_->Now() + std::chrono::milliseconds(kResetRetryMs);
    }
  }
}

}  // namespace geops::wan
