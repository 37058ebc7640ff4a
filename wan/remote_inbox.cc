#include "wan/remote_inbox.h"

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

Status RemoteInbox::OnBatch(const WanBatch& batch) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(batch.origin));
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
  if (batch.seq > now) return NotYetApplied(batch, now);
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
  views_.clear();
  views_.reserve(batch.chunks.size());
  for (const SparseChunkUpdate& u : batch.chunks) {
    views_.push_back(RemoteChunkDelta{u.key, u.num_elements, u.indices, u.values});
  }
  Result<RemoteApplyResult> r = target_->ApplyRemote(origin, seq, views_);
  if (!r.ok()) {
    ++stats_.batches_refused;
    return r.status().WithContext("batch " + std::to_string(seq) + " from site " + std::to_string(origin));
  }
  if (r->applied) {
    ++stats_.batches_applied;
    stats_.elements_applied += r->elements;
  } else {
    ++stats_.batches_duplicate;
  }
  return Status::Ok();
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
  if (report.clock < 0) return InvalidArgumentError("clock report with negative clock");
  std::lock_guard<std::mutex> lock(mu_);
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
  return Status::Ok();
}

Status RemoteInbox::OnNotice(const WanNotice& notice) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(notice.origin));
  gate_->AddNotice(notice.origin, notice.seq, notice.keys, notice.timeout_ms);
  return Status::Ok();
}

Status RemoteInbox::OnHeartbeat(SiteId origin) {
  GEOPS_RETURN_IF_ERROR(CheckOrigin(origin));
  gate_->OnPeerHeard(origin);
  return Status::Ok();
}

InboxStats RemoteInbox::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace geops::wan
