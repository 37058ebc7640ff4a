// ClockTracker: the SSP clocks of one shard's site workers, their leases,
// and the waits of readers on the shard clock.
//
// Per worker (ids 0..num_workers-1) it holds the worker's clock, the clock of
// its last admitted update batch, whether it registered and finished, when it
// was last heard from and how many of its reads are waiting. A worker counts
// towards the shard clock while it is live (heard within the lease, or with a
// read in flight) or finished (a finished worker is exempt from the lease and
// counts at its final clock). Workers that never registered count at clock 0
// while the lease, measured from the tracker's start, runs. The shard clock is
// the minimum clock over counting workers; if none counts, the largest clock
// held for any worker. It can go down when a dropped worker comes back.
//
// Leases are evaluated lazily from timestamps read from the TimeSource given
// (the steady clock by default; a ManualTime in tests): nothing runs in the
// background.
// A waiting reader sleeps until the deadline, a clock advance, or the next
// lease expiry, whichever is first, so a dead worker releases readers on time.
//
// Thread-safety: all methods may be called concurrently; one mutex guards all
// state and is never held while calling out. Callers must serialise the
// AdmitUpdate/Advance calls of one worker with that worker's update apply
// (the Shard does so with a per-worker mutex), so that a clock advance never
// overtakes an admitted batch still being applied.
#ifndef GEOPS_DATACENTER_CLOCK_TRACKER_H_
#define GEOPS_DATACENTER_CLOCK_TRACKER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/ids.h"
#include "common/ps_types.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "common/time_source.h"

namespace geops::datacenter {

class ClockTracker {
 public:
  // REQUIRES: num_workers >= 1, lease > 0. `time` (null: SystemTime()) must
  // outlive the tracker; deadlines given to it are points on that time.
  ClockTracker(ShardId shard, int num_workers, std::chrono::milliseconds lease,
               const TimeSource* time = nullptr);
  ClockTracker(const ClockTracker&) = delete;
  ClockTracker& operator=(const ClockTracker&) = delete;

  struct Registration {
    Clock worker_clock = 0;  // the clock held for the worker; it resumes there
    Clock shard_clock = 0;
  };

  // For every method taking a worker: REQUIRES 0 <= worker < num_workers, and
  // Aborted ("worker N is not registered with shard S; register again") when
  // the worker never registered. A call that gets past that check renews the
  // worker's lease.

  // Registers the worker, or re-registers it: it keeps its held clock and
  // its last update clock, becomes live and is no longer finished.
  Registration Register(WorkerId worker);
  // The same for a named session: AlreadyExists, naming the holder, when
  // another session (both ids non-zero) holds the worker and was heard
  // within the lease and has not finished, unless session.takeover. The
  // session then holds the worker.
  Result<Registration> Register(WorkerId worker, const WorkerSession& session);

  // Renews the lease. With a session id (0: unchecked), FailedPrecondition
  // naming the holder when another session holds the worker now: the caller
  // was replaced (a supervisor's takeover, or its lease ran out and another
  // process registered) and must stop; its lease is not renewed.
  Status Touch(WorkerId worker, uint64_t session = 0);

  struct Admission {
    bool apply = false;  // false: a retry of a batch already admitted
    Clock shard_clock = 0;
    Clock previous = -1;  // for RevokeAdmission
    int32_t previous_part = -1;
  };
  // Admits the update batch (worker, clock). apply is true when the batch
  // must be applied (it is recorded as applied now, so the caller must apply
  // it), false for a retry: a clock below the held one, or the held clock's
  // batch again. InvalidArgument when clock is above the held clock (a jump);
  // FailedPrecondition for a new batch from a finished worker.
  // REQUIRES: clock >= 0.
  // `part`: the update of one clock may come in parts sent in increasing
  // order (each after the previous one was acknowledged; numbers may be
  // skipped); a part at or below the last one admitted at that clock is a
  // retry.
  Result<Admission> AdmitUpdate(WorkerId worker, Clock clock, int32_t part = 0);
  // Forgets an admission whose batch was refused before anything of it was
  // applied (its result would not be finite): a retry of (worker, clock) is
  // then a new batch again. Same serialisation as AdmitUpdate.
  void RevokeAdmission(WorkerId worker, Clock clock, const Admission& admission);

  // Moves the worker's clock to new_clock == held + 1 and wakes readers.
  // new_clock <= held is a retry: nothing changes, except that finished with
  // new_clock == held finishes the worker at its held clock. InvalidArgument
  // for new_clock > held + 1; FailedPrecondition for advancing a finished
  // worker. Returns the shard clock. REQUIRES: new_clock >= 0.
  Result<Clock> Advance(WorkerId worker, Clock new_clock, bool finished);

  // Blocks until the shard clock is >= reader_clock - staleness (staleness
  // kAsync: no wait), or `deadline`, then DeadlineExceeded naming the reader's
  // clock, the clock it needs, the shard clock and the workers holding it
  // back. While waiting the reader counts as heard. Adds the time spent
  // waiting to *waited_seconds (also on failure). Returns the shard clock.
  // REQUIRES: reader_clock >= 0, staleness >= kAsync.
  // Unavailable(why) instead, at once, after Interrupt().
  Result<Clock> WaitForClock(WorkerId worker, Clock reader_clock, int64_t staleness,
                             SteadyClock::time_point deadline, double* waited_seconds);

  // Ends every wait, now and later, with Unavailable(why): the shard is
  // stopping and its readers should retry elsewhere or later.
  void Interrupt(const std::string& why);

  Clock ShardClock() const;

  // The persistent part of a worker's state: its clock, the clock of its
  // last admitted batch, and whether it finished. REQUIRES: 0 <= worker < n.
  WorkerRecord Record(WorkerId worker) const;
  // Sets the persistent part of record.worker's state from a store, before
  // the shard serves. The worker stays unregistered (it must register
  // again) but counts at the restored clock like any unregistered worker,
  // and a finished one keeps counting at its final clock.
  // REQUIRES: 0 <= record.worker < n, 0 <= record.clock,
  // -1 <= record.last_update_clock <= record.clock.
  void Restore(const WorkerRecord& record);

  // One entry per worker, by id. `live`: heard within the lease or a read in
  // flight (a finished worker may be not live yet still count).
  std::vector<WorkerState> States() const;

 private:
  struct Slot {
    bool registered = false;
    bool finished = false;
    Clock clock = 0;
    Clock last_update_clock = -1;  // clock of the last admitted batch, -1: none
    int32_t last_update_part = -1; // its part
    int reads_in_flight = 0;
    SteadyClock::time_point last_heard;  // shard start for never-registered workers
    uint64_t session = 0;                // the session holding it (WorkerSession::id); 0: anonymous
    std::string holder;                  // its WorkerSession::holder
  };

  bool LiveLocked(const Slot& s, SteadyClock::time_point now) const;
  bool CountsLocked(const Slot& s, SteadyClock::time_point now) const {
    return s.finished || LiveLocked(s, now);
  }
  // Shard clock at `now`. If next_expiry is not null, sets it to the earliest
  // future lease expiry among counting workers (time_point::max() if none).
  Clock ShardClockLocked(SteadyClock::time_point now, SteadyClock::time_point* next_expiry) const;
  Status CheckRegisteredLocked(WorkerId worker) const;
  std::string HoldersLocked(WorkerId reader, Clock required, SteadyClock::time_point now) const;

  const ShardId shard_;
  const std::chrono::milliseconds lease_;
  const TimeSource* const time_;

  mutable std::mutex mu_;
  std::string interrupted_;  // GUARDED_BY(mu_); non-empty after Interrupt()
  std::condition_variable advanced_;  // signalled when a worker's clock moves or it finishes
  std::vector<Slot> slots_;           // GUARDED_BY(mu_)
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_CLOCK_TRACKER_H_
