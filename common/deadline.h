// Deadline: a point on the steady clock by which a blocking call must return.
// Every blocking call in geops takes one. A value type; thread-compatible.
#ifndef GEOPS_COMMON_DEADLINE_H_
#define GEOPS_COMMON_DEADLINE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace geops {

using SteadyClock = std::chrono::steady_clock;

class Deadline {
 public:
  explicit Deadline(SteadyClock::time_point when) : when_(when) {}
  // A deadline `ms` milliseconds from now (ms <= 0 means already passed).
  static Deadline InMs(int64_t ms) {
    return Deadline(SteadyClock::now() + std::chrono::milliseconds(ms));
  }
  SteadyClock::time_point when() const { return when_; }
  bool Expired() const { return SteadyClock::now() >= when_; }
  // Milliseconds left, never negative.
  int64_t RemainingMs() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when_ - SteadyClock::now());
    return std::max<int64_t>(0, left.count());
  }
  // The earlier of the two.
  Deadline Min(const Deadline& other) const { return Deadline(std::min(when_, other.when_)); }

 private:
  SteadyClock::time_point when_;
};

// Seconds since an arbitrary fixed point, as a double; for metrics.
inline double NowSeconds() {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

// Seconds since the Unix epoch (wall clock), as a double; for metrics that
// other processes compare.
inline double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace geops

#endif  // GEOPS_COMMON_DEADLINE_H_
