#include "wan/replication/remote_inbox.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

namespace geops::wan {

RemoteInbox::RemoteInbox(ReplicaTarget* target, MirrorGate* gate, SiteId self, int64_t max_reorder,
                         DecodeLimits limits)
    : target_(target), gate_(gate), self_(self), max_reorder_(max_reorder), limits_(limits) {}

Status RemoteInbox::CheckOrigin(SiteId origin) const {
  if (origin == self_) {
    return InvalidArgumentError("message claims to come from site " + std::to_string(origin) +
                                ", which is this site");
  }
  if (origin < 0) return InvalidArgumentError("message from invalid site id " + std::to_string(origin));
  return Status::Ok();
}

void RemoteInbox::SetOwnIncarnation(uint64_t incarnation) {
  std::lock_guard<std::mutex> lock(incarnation_mu_);
  own_incarnation_ = incarnation;
}

void RemoteInbox::RestoreIncarnation(SiteId origin, uint64_t incarnation) {
  std::lock_guard<std::mutex> lock(incarnation_mu_);
  incarnations_[origin] = incarnation;
}

void RemoteInbox::SetIncarnationListener(IncarnationListener listener) { listener_ = std::move(listener); }

uint64_t RemoteInbox::Incarnation(SiteId origin) const {
  std::lock_guard<std::mutex> lock(incarnation_mu_);
  auto it = incarnations_.find(origin);
  return it == incarnations_.end() ? 0 : it->second;
}

void RemoteInbox::ConfirmIncarnation(SiteId origin, uint64_t incarnation) {
  std::lock_guard<std::mutex> lock(incarnation_mu_);
  auto it = unconfirmed_.find(origin);
  if (it != unconfirmed_.end() && it->second == incarnation) unconfirmed_.erase(it);
}

namespace {

// The answer to a batch of an incarnation not yet durably recorded here.
Status BeingRecorded(SiteId origin, uint64_t incarnation) {
  return UnavailableError("site " + std::to_string(origin) + " (incarnation " + std::to_string(incarnation) +
                          ") is being recorded; resend shortly");
}

}  // namespace

Status RemoteInbox::AdmitIncarnation(SiteId origin, uint64_t incarnation, Kind kind) {
  if (incarnation == 0) return Status::Ok();  // a sender that does not say
  bool first = false;
  bool newer = false;
  {
    std::lock_guard<std::mutex> lock(incarnation_mu_);
    uint64_t& known = incarnations_[origin];
    if (known == 0) {
      known = incarnation;
      unconfirmed_[origin] = incarnation;
      first = true;
    } else if (known == incarnation) {
      if (auto p = pending_resets_.find(origin); p != pending_resets_.end() && p->second > incarnation) {
        // A newer incarnation exists: this one is gone, and what it still
        // had on the way counts nowhere (a rejoin has taken this site's
        // state without it).
        stale_refused_.fetch_add(1, std::memory_order_relaxed);
        return FailedPreconditionError("message from incarnation " + std::to_string(incarnation) + " of site " +
                                       std::to_string(origin) + ", which came back as incarnation " +
                                       std::to_string(p->second) + "; dropped");
      }
      if (kind != Kind::kBatch || unconfirmed_.count(origin) == 0) return Status::Ok();
      return BeingRecorded(origin, incarnation);
    } else if (incarnation < known) {
      stale_refused_.fetch_add(1, std::memory_order_relaxed);
      return FailedPreconditionError("message from incarnation " + std::to_string(incarnation) + " of site " +
                                     std::to_string(origin) + ", which has since restarted as incarnation " +
                                     std::to_string(known) + "; dropped");
    } else {
      uint64_t& pending = pending_resets_[origin];
      newer = pending < incarnation;
      pending = std::max(pending, incarnation);
    }
  }
  if ((first || newer) && listener_) listener_(origin, incarnation, !first);
  if (kind == Kind::kHeartbeat || (first && kind == Kind::kReport)) return Status::Ok();
  if (first) {
    return BeingRecorded(origin, incarnation);
  }
  return UnavailableError("site " + std::to_string(origin) + " came back with an empty store (incarnation " +
                          std::to_string(incarnation) + "); its streams are being reset, resend shortly");
}

Status RemoteInbox::CheckDestination(SiteId origin, uint64_t dest_incarnation, const std::string& what) {
  std::lock_guard<std::mutex> lock(incarnation_mu_);
  if (dest_incarnation == 0 || own_incarnation_ == 0 || dest_incarnation == own_incarnation_) return Status::Ok();
  stale_refused_.fetch_add(1, std::memory_order_relaxed);
  return FailedPreconditionError(what + " from site " + std::to_string(origin) + " was made for incarnation " +
                                 std::to_string(dest_incarnation) + " of this site, which is incarnation " +
                                 std::to_string(own_incarnation_) + " (it lost its store since); dropped");
}

Status RemoteInbox::StillCurrent(SiteId origin, uint64_t incarnation) {
  if (incarnation == 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(incarnation_mu_);
  if (auto p = pending_resets_.find(origin); p != pending_resets_.end() && p->second > incarnation) {
    stale_refused_.fetch_add(1, std::memory_order_relaxed);
    return FailedPreconditionError("message from incarnation " + std::to_string(incarnation) + " of site " +
                                   std::to_string(origin) + ", which came back as incarnation " +
                                   std::to_string(p->second) + " meanwhile; dropped");
  }
  auto it = incarnations_.find(origin);
  if (it == incarnations_.end() || it->second == incarnation) return Status::Ok();
  stale_refused_.fetch_add(1, std::memory_order_relaxed);
  return FailedPreconditionError("message from incarnation " + std::to_string(incarnation) + " of site " +
                                 std::to_string(origin) + ", whose streams were reset for incarnation " +
                                 std::to_string(it->second) + " meanwhile; dropped");
}

Status RemoteInbox::ResetOrigin(SiteId origin, uint64_t incarnation, const std::function<Status()>& reset) {
  std::lock_guard<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(reset());
  origins_.erase(origin);
  ++stats_.origin_resets;
  {
    std::lock_guard<std::mutex> inc_lock(incarnation_mu_);
    incarnations_[origin] = incarnation;
    unconfirmed_.erase(origin);  // the reset recorded it durably
    auto it = pending_resets_.find(origin);
    if (it != pending_resets_.end() && it->second <= incarnation) pending_resets_.erase(it);
  }
  gate_->ResetPeer(origin);
  return Status::Ok();
}

Status RemoteInbox::OnBatch(const WanBatch& batch) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(batch.origin));
  GEOPS_RETURN_IF_ERROR(AdmitIncarnation(batch.origin, batch.incarnation, Kind::kBatch));
  GEOPS_RETURN_IF_ERROR(CheckDestination(batch.origin, batch.dest_incarnation,
                                         "batch " + std::to_string(batch.seq)));
  if (batch.seq == 0) return InvalidArgumentError("batch from site " + std::to_string(batch.origin) + " has seq 0");
  if (batch.seq <= target_->LastAppliedSeq(batch.origin)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches_duplicate;
    return Status::Ok();
  }
  DecodedBatch decoded;
  BatchDecoder decoder(limits_);
  Status s = decoder.Decode(batch.payload, &decoded);
  if (s.ok() && (decoded.header.origin != batch.origin || decoded.header.seq != batch.seq)) {
    s = InvalidArgumentError("batch header says origin " + std::to_string(decoded.header.origin) + " seq " +
                             std::to_string(decoded.header.seq) + ", the message says origin " +
                             std::to_string(batch.origin) + " seq " + std::to_string(batch.seq));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) {
    ++stats_.batches_refused;
    return s.WithContext("batch " + std::to_string(batch.seq) + " from site " + std::to_string(batch.origin));
  }
  // The origin may have been reset since the batch was admitted.
  GEOPS_RETURN_IF_ERROR(StillCurrent(batch.origin, batch.incarnation));
  Origin& o = origins_[batch.origin];
  const uint64_t last = target_->LastAppliedSeq(batch.origin);
  if (batch.seq <= last) {
    ++stats_.batches_duplicate;
    return Status::Ok();
  }
  if (o.early.count(batch.seq)) return NotYetApplied(batch, last);
  if (batch.seq != last + 1) {
    if (static_cast<int64_t>(o.early.size()) >= max_reorder_) {
      return ResourceExhaustedError("batch " + std::to_string(batch.seq) + " from site " +
                                    std::to_string(batch.origin) + " is ahead of seq " + std::to_string(last + 1) +
                                    " and " + std::to_string(o.early.size()) + " batches wait already; resend later");
    }
    ++stats_.batches_buffered;
  }
  stats_.bytes_received += static_cast<int64_t>(batch.payload.size());
  o.early.emplace(batch.seq, std::move(decoded));
  GEOPS_RETURN_IF_ERROR(DrainLocked(batch.origin, o));
  const uint64_t now = target_->LastAppliedSeq(batch.origin);
  if (batch.seq > now) {
    if (gap_listener_) gap_listener_(batch.origin, batch.seq);
    return NotYetApplied(batch, now);
  }
  return Status::Ok();
}

Status RemoteInbox::NotYetApplied(const WanBatch& batch, uint64_t last) const {
  // Only an applied (and, with a store, durable) batch is acknowledged: the
  // sender forgets what is acknowledged, and a buffered batch would die with
  // this process. It stays buffered; the sender's retry is acknowledged once
  // the batches before it have landed.
  return UnavailableError("batch " + std::to_string(batch.seq) + " from site " + std::to_string(batch.origin) +
                          " waits for seq " + std::to_string(last + 1) + " (buffered, not applied yet); resend");
}

Status RemoteInbox::ApplyLocked(SiteId origin, uint64_t seq, const DecodedBatch& batch) {
  auto refused = [&](const Status& s) {
    ++stats_.batches_refused;
    return s.WithContext("batch " + std::to_string(seq) + " from site " + std::to_string(origin));
  };
  if (sink_) {
    if (seq != target_->LastAppliedSeq(origin) + 1) return Status::Ok();  // a duplicate: nothing to do
    Status s = sink_(origin, seq, batch);
    if (!s.ok()) return refused(s);
    // The seq is consumed like an applied batch's; nothing is added.
    Result<RemoteApplyResult> r = target_->ApplyRemote(origin, seq, {});
    if (!r.ok()) return refused(r.status());
    ++stats_.batches_applied;
    for (const SparseChunkUpdate& u : batch.chunks) stats_.elements_applied += static_cast<int64_t>(u.values.size());
    return Status::Ok();
  }
  views_.clear();
  views_.reserve(batch.chunks.size());
  for (const SparseChunkUpdate& u : batch.chunks) {
    views_.push_back(RemoteChunkDelta{u.key, u.num_elements, u.indices, u.values});
  }
  Result<RemoteApplyResult> r = target_->ApplyRemote(origin, seq, views_);
  if (!r.ok()) return refused(r.status());
  if (r->quarantined) {
    ++stats_.batches_quarantined;
    spdlog::error("WAN {}; quarantined (the stream goes on with seq {})", r->quarantine, seq + 1);
    auto& remembered = origins_[origin].quarantined;
    remembered[seq] = r->quarantine;
    if (remembered.size() > kRememberedQuarantines) remembered.erase(remembered.begin());
  } else if (r->applied) {
    ++stats_.batches_applied;
    stats_.elements_applied += r->elements;
  } else {
    ++stats_.batches_duplicate;
  }
  return Status::Ok();
}

std::string RemoteInbox::QuarantineOf(SiteId origin, uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto o = origins_.find(origin);
  if (o == origins_.end()) return {};
  auto it = o->second.quarantined.find(seq);
  return it == o->second.quarantined.end() ? std::string() : it->second;
}

Status RemoteInbox::DrainLocked(SiteId origin, Origin& o) {
  uint64_t last = target_->LastAppliedSeq(origin);
  Status result;
  while (!o.early.empty()) {
    auto it = o.early.begin();
    if (it->first <= last) {
      o.early.erase(it);
      continue;
    }
    if (it->first != last + 1) break;
    Status s = ApplyLocked(origin, it->first, it->second);
    o.early.erase(it);
    if (!s.ok()) {
      // A batch the shard refuses cannot be applied later either; the
      // origin's stream is stuck until it resends a valid one.
      result = s;
      break;
    }
    last = target_->LastAppliedSeq(origin);
  }
  gate_->OnPeerApplied(origin, last);
  auto& held = o.held_reports;
  for (auto it = held.begin(); it != held.end();) {
    if (it->last_seq <= last) {
      gate_->OnPeerClock(origin, it->clock, it->drained);
      it = held.erase(it);
    } else {
      ++it;
    }
  }
  return result;
}

Status RemoteInbox::OnClock(const WanClockReport& report) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(report.origin));
  GEOPS_RETURN_IF_ERROR(AdmitIncarnation(report.origin, report.incarnation, Kind::kReport));
  GEOPS_RETURN_IF_ERROR(CheckDestination(report.origin, report.dest_incarnation, "a clock report"));
  if (report.clock < 0) return InvalidArgumentError("clock report with negative clock");
  std::lock_guard<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(StillCurrent(report.origin, report.incarnation));
  Origin& o = origins_[report.origin];
  if (report.last_seq <= target_->LastAppliedSeq(report.origin)) {
    gate_->OnPeerClock(report.origin, report.clock, report.drained);
    return Status::Ok();
  }
  if (static_cast<int64_t>(o.held_reports.size()) >= 4 * max_reorder_) {
    // Keep the newest: an older report says less.
    o.held_reports.erase(o.held_reports.begin());
  }
  o.held_reports.push_back(report);
  gate_->OnPeerHeard(report.origin);
  if (gap_listener_) gap_listener_(report.origin, report.last_seq);
  return Status::Ok();
}

void RemoteInbox::Recheck(SiteId origin) {
  std::lock_guard<std::mutex> lock(mu_);
  auto o = origins_.find(origin);
  if (o == origins_.end()) return;
  Status s = DrainLocked(origin, o->second);
  if (!s.ok()) spdlog::warn("WAN site {}: {}", origin, s.ToString());
}

Status RemoteInbox::OnNotice(const WanNotice& notice) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(notice.origin));
  GEOPS_RETURN_IF_ERROR(AdmitIncarnation(notice.origin, notice.incarnation, Kind::kReport));
  GEOPS_RETURN_IF_ERROR(CheckDestination(notice.origin, notice.dest_incarnation,
                                         "a notice of batch " + std::to_string(notice.seq)));
  gate_->AddNotice(notice.origin, notice.seq, notice.keys, notice.timeout_ms);
  return Status::Ok();
}

Status RemoteInbox::OnHeartbeat(SiteId origin, uint64_t incarnation) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(origin));
  GEOPS_RETURN_IF_ERROR(AdmitIncarnation(origin, incarnation, Kind::kHeartbeat));
  gate_->OnPeerHeard(origin);
  return Status::Ok();
}

InboxStats RemoteInbox::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  InboxStats out = stats_;
  out.stale_refused = stale_refused_.load(std::memory_order_relaxed);
  return out;
}

Result<OuterStatePage> RemoteInbox::OnOuterState(SiteId origin, uint64_t incarnation, uint64_t snapshot,
                                                 int32_t page) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(origin));
  // The asker's incarnation counts as heard: a newer one than known means
  // the old one is gone, and from here on nothing of it is taken. The
  // state answered is then whole: an apply of the old incarnation's batch
  // in progress ends before it is read (mu_), and a later one is refused.
  GEOPS_RETURN_IF_ERROR(AdmitIncarnation(origin, incarnation, Kind::kHeartbeat));
  if (!outer_source_) return WanReceiver::OnOuterState(origin, incarnation, snapshot, page);
  std::lock_guard<std::mutex> lock(mu_);
  return outer_source_(origin, incarnation, snapshot, page);
}

}  // namespace geops::wan
