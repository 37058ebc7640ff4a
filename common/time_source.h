// TimeSource: where a component reads the time and waits for it to pass.
//
// Components whose behaviour depends on elapsed time (worker leases and read
// waits, the WAN gate's peer leases and notices, the replicator's idle
// rounds, the worker client's retry window and back-off) take one instead of
// reading the steady
// clock themselves, so that a test can drive them with a ManualTime: it
// moves time forward by exactly what the test says, and nothing needs to
// sleep for a lease to run out.
//
// Points in time are SteadyClock time points in both implementations (a
// ManualTime starts at the steady clock's reading when it is made), so a
// Deadline made from the real clock still compares sensibly: it passes once
// the manual time is moved beyond it.
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_COMMON_TIME_SOURCE_H_
#define GEOPS_COMMON_TIME_SOURCE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/deadline.h"

namespace geops {

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  virtual SteadyClock::time_point Now() const = 0;
  // Waits on `cv` (whose mutex `lock` holds) until it is notified or this
  // source's time reaches `until`. It may also return early (spuriously):
  // callers re-check their condition and the time, as with any condition
  // variable.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         SteadyClock::time_point until) const = 0;
};

// The steady clock. Never null; lives for the whole process.
const TimeSource* SystemTime();

// A time point as seconds since the steady clock's epoch (for rates and
// periods, like NowSeconds()).
inline double SecondsOf(SteadyClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// Time that moves only when told. A waiter re-checks every
// kManualPollInterval of real time (and when notified), so it sees an
// Advance within that interval without a registry of waiters.
class ManualTime final : public TimeSource {
 public:
  static constexpr std::chrono::milliseconds kManualPollInterval{1};

  ManualTime();
  SteadyClock::time_point Now() const override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 SteadyClock::time_point until) const override;
  // Moves time forward by `d` (a negative `d` is ignored: time never goes
  // back).
  void Advance(std::chrono::nanoseconds d);
  // Threads inside WaitUntil now: a test sees that a component has gone
  // back to waiting (so it has read the time it waits from) before it moves
  // time.
  int waiters() const { return waiters_.load(); }

 private:
  mutable std::mutex mu_;
  SteadyClock::time_point now_;  // GUARDED_BY(mu_)
  mutable std::atomic<int> waiters_{0};
};

}  // namespace geops

#endif  // GEOPS_COMMON_TIME_SOURCE_H_
