#include "wan/replication/mirror_gate.h"

#include <algorithm>

namespace geops::wan {

MirrorGate::MirrorGate(std::vector<SiteId> peers, int64_t ds, std::chrono::milliseconds lease,
                       const TimeSource* time)
    : ds_(ds), lease_(lease), time_(time != nullptr ? time : SystemTime()) {
  stats_.max_bound_clocks = ds < 0 ? -1 : ds;
  const auto now = time_->Now();
  for (SiteId p : peers) peers_[p].heard = now;
}

namespace {
double ToUnix(SteadyClock::time_point t, SteadyClock::time_point now) {
  return UnixSeconds() - std::chrono::duration<double>(now - t).count();
}
}  // namespace

void MirrorGate::RefreshLivenessLocked(SteadyClock::time_point now) const {
  for (auto& [id, p] : peers_) {
    if (p.down || p.drained || now - p.heard <= lease_) continue;
    p.down = true;
    stats_.down_events.push_back(PeerDownEvent{id, ToUnix(p.heard, now), UnixSeconds(), 0});
  }
}

MirrorGate::Peer& MirrorGate::HeardLocked(SiteId peer, SteadyClock::time_point now) {
  RefreshLivenessLocked(now);
  Peer& p = peers_[peer];
  p.heard = now;
  if (p.down) {
    p.down = false;
    p.rejoining = true;
    // What it reported before it went silent is old news: it counts again
    // from its next report (a link that was out delivers the held report
    // a moment after the first heartbeat), or a lease from now if none
    // comes (CountsLocked).
    p.awaiting_report = true;
    p.back = now;
    for (auto it = stats_.down_events.rbegin(); it != stats_.down_events.rend(); ++it) {
      if (it->peer == peer) {
        if (it->back_unix == 0) it->back_unix = UnixSeconds();
        break;
      }
    }
  }
  return p;
}

bool MirrorGate::CaughtUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = time_->Now();
  RefreshLivenessLocked(now);
  const Clock slack = std::max<int64_t>(ds_, 0);
  for (const auto& [id, p] : peers_) {
    if (p.drained || p.down) continue;
    if (!p.reported || own_clock_ + slack < p.clock) return false;
  }
  return true;
}

Clock MirrorGate::MinMirrorLocked(SteadyClock::time_point now) const {
  bool any = false;
  Clock min = own_clock_;
  for (const auto& [id, p] : peers_) {
    if (!CountsLocked(p, now)) continue;
    min = any ? std::min(min, p.clock) : p.clock;
    any = true;
  }
  return min;
}

bool MirrorGate::AllDrainedLocked() const {
  for (const auto& [id, p] : peers_) {
    if (!p.drained) return false;
  }
  return !outer_outstanding_;  // and, with an outer step, the last one is applied
}

MirrorGate::Hold MirrorGate::HoldLocked(std::span<const ChunkKey> keys, SteadyClock::time_point now) {
  RefreshLivenessLocked(now);
  if (local_finished_ && !AllDrainedLocked()) return Hold::kFinal;
  if (ds_ >= 0 && own_clock_ - MinMirrorLocked(now) > BoundLocked()) return Hold::kDrift;
  if (outer_period_ > 0 && !local_finished_ && own_clock_ / outer_period_ - outer_in_flight_ > outer_applied_) {
    return Hold::kOuter;
  }
  if (notices_.empty()) return Hold::kNone;
  for (const ChunkKey& key : keys) {
    auto [begin, end] = notices_.equal_range(key);
    for (auto it = begin; it != end;) {
      if (it->second.expiry <= now) {
        ++stats_.notices_expired;
        it = notices_.erase(it);
        continue;
      }
      return Hold::kNotice;
    }
  }
  return Hold::kNone;
}

std::string MirrorGate::DescribeLocked(Hold hold, std::span<const ChunkKey> keys,
                                       SteadyClock::time_point now) const {
  switch (hold) {
    case Hold::kFinal: {
      std::string waiting;
      for (const auto& [id, p] : peers_) {
        if (!p.drained) waiting += (waiting.empty() ? "" : ", ") + std::to_string(id);
      }
      return "the site finished; waiting for the final updates of site(s) " + waiting;
    }
    case Hold::kDrift: {
      std::string behind;
      const Clock min = MinMirrorLocked(now);
      for (const auto& [id, p] : peers_) {
        if (CountsLocked(p, now) && p.clock == min) {
          behind += (behind.empty() ? "" : ", ") + std::to_string(id);
        }
      }
      return "shard clock " + std::to_string(own_clock_) + " is more than DS=" + std::to_string(ds_) +
             (allowance_ > 0 ? " + " + std::to_string(allowance_) + " (clocks in delivery)" : std::string()) +
             " clocks ahead of mirror clock " + std::to_string(min) + " (site(s) " + behind + ")";
    }
    case Hold::kNotice:
      return "a requested chunk is under a selective-barrier notice whose batch has not landed";
    case Hold::kOuter:
      return "shard clock " + std::to_string(own_clock_) + " needs outer step " +
             std::to_string(own_clock_ / outer_period_ - outer_in_flight_) + " (every " +
             std::to_string(outer_period_) + " clocks), and step " + std::to_string(outer_applied_) +
             " is the last applied: some site's contribution has not arrived";
    case Hold::kNone:
      break;
  }
  return "";
}

Status MirrorGate::WaitReadable(std::span<const ChunkKey> keys, Clock shard_clock, bool site_finished,
                                Deadline deadline, double* waited) {
  std::unique_lock<std::mutex> lock(mu_);
  auto now = time_->Now();
  own_clock_ = std::max(own_clock_, shard_clock);
  local_finished_ = local_finished_ || site_finished;
  if (!interrupted_.empty()) return UnavailableError(interrupted_);
  Hold hold = HoldLocked(keys, now);
  if (hold == Hold::kNone) {
    AdmittedLocked(own_clock_ - MinMirrorLocked(now));
    return Status::Ok();
  }
  ++stats_.reads_held;
  const auto start = now;
  auto last = now;
  while (hold != Hold::kNone) {
    if (!interrupted_.empty()) {
      if (waited != nullptr) *waited += std::chrono::duration<double>(now - start).count();
      return UnavailableError(interrupted_);
    }
    if (now >= deadline.when()) {
      ++stats_.reads_timed_out;
      std::string why = DescribeLocked(hold, keys, now);
      const double w = std::chrono::duration<double>(now - start).count();
      if (waited != nullptr) *waited += w;
      return DeadlineExceededError("read held by the WAN gate: " + why);
    }
    const auto wake = std::min(deadline.when(), now + std::chrono::milliseconds(kPollMs));
    time_->WaitUntil(changed_, lock, wake);
    now = time_->Now();
    const double slice = std::chrono::duration<double>(now - last).count();
    last = now;
    if (hold == Hold::kFinal) stats_.final_wait_seconds += slice;
    if (hold == Hold::kDrift) stats_.drift_wait_seconds += slice;
    if (hold == Hold::kOuter) stats_.outer_wait_seconds += slice;
    if (hold == Hold::kNotice) stats_.notice_wait_seconds += slice;
    hold = HoldLocked(keys, now);
  }
  AdmittedLocked(own_clock_ - MinMirrorLocked(now));
  hold_wait_.Observe(std::chrono::duration<double>(now - start).count());
  if (waited != nullptr) *waited += std::chrono::duration<double>(now - start).count();
  return Status::Ok();
}

Status MirrorGate::WaitAdvance(Clock new_clock, Deadline deadline, double* waited) {
  if (ds_ < 0) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  auto now = time_->Now();
  // Only live, undrained peers in step hold an advance (MinMirrorLocked
  // falls back to the own clock when there is none: nothing to wait for).
  auto held = [&] {
    bool any = false;
    for (const auto& [id, p] : peers_) any = any || CountsLocked(p, now);
    return any && new_clock - 1 - MinMirrorLocked(now) > BoundLocked();
  };
  if (!interrupted_.empty()) return UnavailableError(interrupted_);
  RefreshLivenessLocked(now);
  if (!held()) {
    AdmittedLocked(new_clock - 1 - MinMirrorLocked(now));
    return Status::Ok();
  }
  const auto start = now;
  auto last = now;
  while (held()) {
    if (!interrupted_.empty()) {
      if (waited != nullptr) *waited += std::chrono::duration<double>(now - start).count();
      return UnavailableError(interrupted_);
    }
    if (now >= deadline.when()) {
      if (waited != nullptr) *waited += std::chrono::duration<double>(now - start).count();
      return DeadlineExceededError("clock advance to " + std::to_string(new_clock) + " held by the WAN gate: " +
                                   DescribeLocked(Hold::kDrift, {}, now));
    }
    time_->WaitUntil(changed_, lock, std::min(deadline.when(), now + std::chrono::milliseconds(kPollMs)));
    now = time_->Now();
    stats_.drift_wait_seconds += std::chrono::duration<double>(now - last).count();
    last = now;
    RefreshLivenessLocked(now);
  }
  AdmittedLocked(new_clock - 1 - MinMirrorLocked(now));
  hold_wait_.Observe(std::chrono::duration<double>(now - start).count());
  if (waited != nullptr) *waited += std::chrono::duration<double>(now - start).count();
  return Status::Ok();
}

void MirrorGate::Interrupt(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = why.empty() ? "interrupted" : why;
  }
  changed_.notify_all();
}

void MirrorGate::SetOuterPeriod(int64_t period, int64_t in_flight) {
  std::lock_guard<std::mutex> lock(mu_);
  outer_period_ = period;
  outer_in_flight_ = std::max<int64_t>(0, in_flight);
}

void MirrorGate::OnOuterStep(int64_t applied, bool outstanding) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outer_applied_ = std::max(outer_applied_, applied);
    outer_outstanding_ = outstanding;
  }
  changed_.notify_all();
}

void MirrorGate::SetDriftAllowance(int64_t clocks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    allowance_ = std::max<int64_t>(clocks, 0);
    if (ds_ >= 0) stats_.max_bound_clocks = std::max(stats_.max_bound_clocks, BoundLocked());
  }
  changed_.notify_all();
}

int64_t MirrorGate::DriftBound() const {
  std::lock_guard<std::mutex> lock(mu_);
  return BoundLocked();
}

void MirrorGate::AdmittedLocked(int64_t drift) { stats_.max_drift_clocks = std::max(stats_.max_drift_clocks, drift); }

void MirrorGate::SetOwnClock(Clock clock, bool local_finished) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    own_clock_ = std::max(own_clock_, clock);
    local_finished_ = local_finished_ || local_finished;
    RefreshLivenessLocked(time_->Now());
  }
  changed_.notify_all();
}

void MirrorGate::OnPeerClock(SiteId peer, Clock clock, bool drained) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& p = HeardLocked(peer, time_->Now());
    p.clock = p.rejoining ? clock : std::max(p.clock, clock);
    p.rejoining = false;
    p.awaiting_report = false;
    p.reported = true;
    p.drained = p.drained || drained;
    if (p.catching_up && own_clock_ - p.clock <= ds_) {
      p.catching_up = false;
      for (auto it = stats_.down_events.rbegin(); it != stats_.down_events.rend(); ++it) {
        if (it->peer == peer) {
          if (it->in_step_unix == 0) it->in_step_unix = UnixSeconds();
          break;
        }
      }
    }
  }
  changed_.notify_all();
}

void MirrorGate::OnPeerHeard(SiteId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  HeardLocked(peer, time_->Now());
}

void MirrorGate::OnPeerApplied(SiteId peer, uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& p = HeardLocked(peer, time_->Now());
    p.applied = std::max(p.applied, seq);
    for (auto it = notices_.begin(); it != notices_.end();) {
      if (it->second.peer == peer && it->second.seq <= seq) {
        it = notices_.erase(it);
      } else {
        ++it;
      }
    }
  }
  changed_.notify_all();
}

void MirrorGate::AddNotice(SiteId peer, uint64_t seq, std::span<const ChunkKey> keys, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Peer& p = HeardLocked(peer, time_->Now());
  ++stats_.notices;
  if (seq <= p.applied) return;
  const auto expiry = time_->Now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 1));
  for (const ChunkKey& k : keys) notices_.emplace(k, Notice{peer, seq, expiry});
}

void MirrorGate::ResetPeer(SiteId peer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& p = HeardLocked(peer, time_->Now());
    p.clock = 0;  // the new incarnation starts over
    p.catching_up = ds_ >= 0;
    p.applied = 0;
    p.drained = false;
    p.reported = false;
    p.rejoining = true;
    std::erase_if(notices_, [peer](const auto& entry) { return entry.second.peer == peer; });
  }
  changed_.notify_all();
}

bool MirrorGate::AllPeersDrained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return AllDrainedLocked();
}

bool MirrorGate::WaitAllPeersDrained(Deadline deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  while (!AllDrainedLocked() && time_->Now() < deadline.when()) time_->WaitUntil(changed_, lock, deadline.when());
  return AllDrainedLocked();
}

Clock MirrorGate::MinMirrorClock() const {
  std::lock_guard<std::mutex> lock(mu_);
  return MinMirrorLocked(time_->Now());
}

GateStats MirrorGate::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLivenessLocked(time_->Now());
  GateStats s = stats_;
  s.hold_wait = hold_wait_.Snapshot();
  return s;
}

std::vector<ChunkKey> MirrorGate::NoticedChunks() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = time_->Now();
  std::vector<ChunkKey> out;
  for (const auto& [key, n] : notices_) {
    if (n.expiry > now && (out.empty() || out.back() != key)) out.push_back(key);
  }
  return out;
}

}  // namespace geops::wan
