// DriftAllowance: how many of this shard's clocks a clock report spends on
// its way to a peer, so the drift bound can count them (asp: the gate's
// bound is DS + this allowance, WanOptions::max_drift_allowance).
//
// A peer's mirror clock is what its last report said when it left. On a
// link whose delay lasts several clocks a site in step with its peers
// already sees them that many clocks behind; a bound of DS alone would
// make it stall for the link, not for a slow peer. The allowance is
// ceil(delivery / period), where period is the shard's typical clock
// period: the 25th percentile of its last 16 per-clock intervals, which
// the clocks held at the bound (longer) barely move, so a stalled site
// does not tighten its own bound. Capped at `max_clocks`.
//
// Time comes from the caller (seconds on any monotonic clock), so tests
// need not sleep. Thread-compatible.
#ifndef GEOPS_WAN_REPLICATION_DRIFT_ALLOWANCE_H_
#define GEOPS_WAN_REPLICATION_DRIFT_ALLOWANCE_H_

#include <cstdint>
#include <deque>

#include "common/ids.h"

namespace geops::wan {

class DriftAllowance {
 public:
  static constexpr size_t kWindow = 16;    // intervals kept
  static constexpr size_t kMinIntervals = 4;  // before which the period is unknown

  explicit DriftAllowance(int64_t max_clocks) : max_clocks_(max_clocks) {}

  // The shard reached `clock` at `now_s`. Clocks that do not move forward
  // are ignored.
  void OnClock(Clock clock, double now_s);
  // The typical seconds per clock; 0 until kMinIntervals are known.
  double period_s() const;
  // ceil(delivery_s / period_s()) in [0, max_clocks]; 0 while the period
  // is unknown or delivery_s <= 0.
  int64_t ClocksFor(double delivery_s) const;

 private:
  const int64_t max_clocks_;
  Clock last_clock_ = -1;
  double last_s_ = 0;
  std::deque<double> intervals_;  // seconds per clock, newest last
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_DRIFT_ALLOWANCE_H_
