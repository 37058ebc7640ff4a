#include "datacenter/clock_tracker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>

#include "common/options.h"

namespace geops::datacenter {
namespace {

int64_t MsBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// Longest single sleep of a waiting reader; it re-checks and sleeps again.
constexpr std::chrono::hours kMaxSleep{1};
// Workers named in a DeadlineExceeded message before "and N more".
constexpr int kMaxHoldersNamed = 8;

}  // namespace

ClockTracker::ClockTracker(ShardId shard, int num_workers, std::chrono::milliseconds lease, const TimeSource* time)
    : shard_(shard), lease_(lease), time_(time != nullptr ? time : SystemTime()), slots_(num_workers) {
  const SteadyClock::time_point start = time_->Now();
  for (Slot& s : slots_) s.last_heard = start;
}

bool ClockTracker::LiveLocked(const Slot& s, SteadyClock::time_point now) const {
  return s.reads_in_flight > 0 || now - s.last_heard < lease_;
}

Clock ClockTracker::ShardClockLocked(SteadyClock::time_point now,
                                     SteadyClock::time_point* next_expiry) const {
  Clock min_counting = std::numeric_limits<Clock>::max();
  Clock max_known = 0;
  bool any = false;
  SteadyClock::time_point next = SteadyClock::time_point::max();
  for (const Slot& s : slots_) {
    max_known = std::max(max_known, s.clock);
    if (!CountsLocked(s, now)) continue;
    any = true;
    min_counting = std::min(min_counting, s.clock);
    if (!s.finished && s.reads_in_flight == 0) next = std::min(next, s.last_heard + lease_);
  }
  if (next_expiry != nullptr) *next_expiry = next;
  return any ? min_counting : max_known;
}

Status ClockTracker::CheckRegisteredLocked(WorkerId worker) const {
  if (slots_[worker].registered) return Status::Ok();
  return AbortedError("worker " + std::to_string(worker) + " is not registered with shard " +
                      std::to_string(shard_) + "; register again");
}

ClockTracker::Registration ClockTracker::Register(WorkerId worker) {
  return *Register(worker, WorkerSession{});
}

Result<ClockTracker::Registration> ClockTracker::Register(WorkerId worker, const WorkerSession& session) {
  std::lock_guard<std::mutex> lock(mu_);
  const SteadyClock::time_point now = time_->Now();
  Slot& s = slots_[worker];
  const bool other = s.registered && s.session != 0 && session.id != 0 && s.session != session.id;
  if (other && !s.finished && now - s.last_heard < lease_ && !session.takeover) {
    const double heard = std::chrono::duration<double>(now - s.last_heard).count();
    char ago[96];
    std::snprintf(ago, sizeof(ago), "heard %.1f s ago; its lease is %.1f s", heard,
                  std::chrono::duration<double>(lease_).count());
    return AlreadyExistsError("worker " + std::to_string(worker) + " is already live at shard " +
                              std::to_string(shard_) + ", held by " + (s.holder.empty() ? "another process" : s.holder) +
                              " (" + ago + "), so " + (session.holder.empty() ? "this process" : session.holder) +
                              " may not register as it too: give every process its own worker id (GEOPS_WORKER, "
                              "or torchrun's LOCAL_RANK); if the holder died, the id is free once its lease ends");
  }
  s.registered = true;
  s.finished = false;
  s.last_heard = now;
  if (session.id != 0 || s.session == 0) {
    s.session = session.id;
    s.holder = session.holder;
  }
  return Registration{s.clock, ShardClockLocked(now, nullptr)};
}

Status ClockTracker::Touch(WorkerId worker, uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(CheckRegisteredLocked(worker));
  Slot& s = slots_[worker];
  if (session != 0 && s.session != 0 && s.session != session) {
    return FailedPreconditionError("worker " + std::to_string(worker) + " of shard " + std::to_string(shard_) +
                                   " is held by " + (s.holder.empty() ? "another process" : s.holder) +
                                   " now: this process was replaced (restarted by a supervisor, or silent past "
                                   "its lease while another registered) and must stop");
  }
  s.last_heard = time_->Now();
  return Status::Ok();
}

Result<ClockTracker::Admission> ClockTracker::AdmitUpdate(WorkerId worker, Clock clock, int32_t part) {
  std::lock_guard<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(CheckRegisteredLocked(worker));
  const SteadyClock::time_point now = time_->Now();
  Slot& s = slots_[worker];
  s.last_heard = now;
  if (clock > s.clock) {
    return InvalidArgumentError("update from worker " + std::to_string(worker) +
                                ": clock jumps from " + std::to_string(s.clock) + " to " +
                                std::to_string(clock) +
                                "; a batch must carry the worker's current clock");
  }
  if (part < 0) {
    return InvalidArgumentError("update from worker " + std::to_string(worker) + " at clock " +
                                std::to_string(clock) + ": part " + std::to_string(part) + " is negative");
  }
  if (clock < s.clock || (clock == s.last_update_clock && part <= s.last_update_part)) {
    return Admission{false, ShardClockLocked(now, nullptr)};
  }
  if (s.finished) {
    return FailedPreconditionError("worker " + std::to_string(worker) + " finished at clock " +
                                   std::to_string(s.clock) + " and cannot push updates; register again to continue");
  }
  const Admission admission{true, ShardClockLocked(now, nullptr), s.last_update_clock, s.last_update_part};
  s.last_update_clock = clock;
  s.last_update_part = part;
  return admission;
}

void ClockTracker::RevokeAdmission(WorkerId worker, Clock clock, const Admission& admission) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker < 0 || worker >= static_cast<WorkerId>(slots_.size())) return;
  Slot& s = slots_[worker];
  if (admission.apply && s.last_update_clock == clock) {
    s.last_update_clock = admission.previous;
    s.last_update_part = admission.previous_part;
  }
}

Result<Clock> ClockTracker::Advance(WorkerId worker, Clock new_clock, bool finished) {
  std::lock_guard<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(CheckRegisteredLocked(worker));
  const SteadyClock::time_point now = time_->Now();
  Slot& s = slots_[worker];
  s.last_heard = now;
  if (new_clock > s.clock + 1) {
    return InvalidArgumentError("worker " + std::to_string(worker) + ": clock jumps from " +
                                std::to_string(s.clock) + " to " + std::to_string(new_clock) +
                                "; AdvanceClock moves one iteration at a time");
  }
  if (new_clock == s.clock + 1) {
    if (s.finished) {
      return FailedPreconditionError("worker " + std::to_string(worker) + " finished at clock " +
                                     std::to_string(s.clock) + " and cannot advance; register again to continue");
    }
    s.clock = new_clock;
    s.finished = finished;
    advanced_.notify_all();
  } else if (new_clock == s.clock && finished && !s.finished) {
    s.finished = true;
    advanced_.notify_all();
  }
  return ShardClockLocked(now, nullptr);
}

Result<Clock> ClockTracker::WaitForClock(WorkerId worker, Clock reader_clock, int64_t staleness,
                                         SteadyClock::time_point deadline,
                                         double* waited_seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(CheckRegisteredLocked(worker));
  if (!interrupted_.empty()) return UnavailableError(interrupted_);
  Slot& self = slots_[worker];  // slots_ never resizes
  const SteadyClock::time_point start = time_->Now();
  self.last_heard = start;
  SteadyClock::time_point next_expiry;
  Clock clock = ShardClockLocked(start, &next_expiry);
  if (staleness == kAsync) return clock;
  const Clock required = reader_clock - staleness;
  if (clock >= required) return clock;

  ++self.reads_in_flight;  // the waiting reader is being heard from: no lease expiry
  SteadyClock::time_point now = start;
  while (clock < required && now < deadline && interrupted_.empty()) {
    time_->WaitUntil(advanced_, lock, std::min({deadline, next_expiry, now + kMaxSleep}));
    now = time_->Now();
    clock = ShardClockLocked(now, &next_expiry);
  }
  --self.reads_in_flight;
  self.last_heard = now;
  *waited_seconds += std::chrono::duration<double>(now - start).count();
  if (clock >= required) return clock;
  if (!interrupted_.empty()) return UnavailableError(interrupted_);
  return DeadlineExceededError(
      "worker " + std::to_string(worker) + " read at clock " + std::to_string(reader_clock) +
      " with staleness " + std::to_string(staleness) + " needs shard clock >= " +
      std::to_string(required) + ", but shard " + std::to_string(shard_) + " is at clock " +
      std::to_string(clock) + " after waiting " + std::to_string(MsBetween(start, now)) +
      " ms; held back by " + HoldersLocked(worker, required, now));
}

void ClockTracker::Interrupt(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = why.empty() ? "interrupted" : why;
  }
  advanced_.notify_all();
}

std::string ClockTracker::HoldersLocked(WorkerId reader, Clock required,
                                        SteadyClock::time_point now) const {
  std::string out;
  int named = 0;
  int more = 0;
  for (size_t w = 0; w < slots_.size(); ++w) {
    const Slot& s = slots_[w];
    if (!CountsLocked(s, now) || s.clock >= required) continue;
    if (named == kMaxHoldersNamed) {
      ++more;
      continue;
    }
    if (named > 0) out += ", ";
    ++named;
    out += "worker " + std::to_string(w) + " at clock " + std::to_string(s.clock) + " (";
    if (static_cast<WorkerId>(w) == reader) {
      out += "the reader itself";
    } else if (s.finished) {
      out += "finished";
    } else if (!s.registered) {
      out += "never registered; dropped in " +
             std::to_string(std::max<int64_t>(0, MsBetween(now, s.last_heard + lease_))) + " ms";
    } else {
      out += "heard " + std::to_string(MsBetween(s.last_heard, now)) + " ms ago";
    }
    out += ")";
  }
  if (more > 0) out += " and " + std::to_string(more) + " more";
  if (named == 0) out = "no worker: every lease has run out and no worker holds a clock that high";
  return out;
}

Clock ClockTracker::ShardClock() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ShardClockLocked(time_->Now(), nullptr);
}

WorkerRecord ClockTracker::Record(WorkerId worker) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Slot& s = slots_[worker];
  return WorkerRecord{worker, s.clock, s.last_update_clock, s.finished, s.last_update_part};
}

void ClockTracker::Restore(const WorkerRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[record.worker];
  s.clock = record.clock;
  s.last_update_clock = record.last_update_clock;
  s.last_update_part = record.last_update_clock < 0 ? -1 : record.last_update_part;
  s.finished = record.finished;
  advanced_.notify_all();
}

std::vector<WorkerState> ClockTracker::States() const {
  std::lock_guard<std::mutex> lock(mu_);
  const SteadyClock::time_point now = time_->Now();
  std::vector<WorkerState> out;
  out.reserve(slots_.size());
  for (size_t w = 0; w < slots_.size(); ++w) {
    const Slot& s = slots_[w];
    WorkerState state;
    state.worker_id = static_cast<WorkerId>(w);
    state.clock = s.clock;
    state.live = LiveLocked(s, now);
    state.finished = s.finished;
    state.ms_since_heard = s.reads_in_flight > 0 ? 0 : MsBetween(s.last_heard, now);
    out.push_back(state);
  }
  return out;
}

}  // namespace geops::datacenter
