// LinkSchedule: the conditions of one directed WAN link over time, as a
// piecewise-constant sequence of (bandwidth, one-way delay) segments on the
// trace's clock, optionally repeating with a period (Mahimahi traces loop).
//
// Besides lookups it integrates the bandwidth: BitsBetween(t0, t1) is what
// the link can carry in [t0, t1], and TransmitEnd(t0, bits) is when a
// transfer of `bits` started at t0 has fully left; both are exact for the
// piecewise-constant model, and O(log segments).
//
// Immutable after Create(); safe to share between threads.
#ifndef GEOPS_WAN_LINK_LINK_SCHEDULE_H_
#define GEOPS_WAN_LINK_LINK_SCHEDULE_H_

#include <cstddef>
#include <vector>

#include "common/status.h"

namespace geops::wan {

struct LinkSegment {
  double start_s = 0;        // trace time at which the segment begins, seconds
  double bandwidth_bps = 0;  // bits per second, >= 0 (0 = outage)
  double delay_s = 0;        // one-way propagation delay, seconds, >= 0
};

class LinkSchedule {
 public:
  // A link of constant bandwidth and delay. REQUIRES: both >= 0 and finite.
  static LinkSchedule Constant(double bandwidth_bps, double delay_s);

  // `segments`: start times strictly increasing, the first exactly 0;
  // bandwidth and delay finite and >= 0. `loop_period_s`: 0 = the last
  // segment lasts forever; > 0 = the schedule repeats every loop_period_s,
  // which must exceed the last start. Returns InvalidArgument naming the
  // segment and field otherwise.
  static Result<LinkSchedule> Create(std::vector<LinkSegment> segments, double loop_period_s = 0);

  LinkSchedule() : LinkSchedule(Constant(0, 0)) {}

  // The same delays, period and outages with every non-zero bandwidth set
  // to `bandwidth_bps` (> 0): a lane of small messages that waits out the
  // link's outages and its delay but never its rate.
  LinkSchedule WithBandwidth(double bandwidth_bps) const;

  // The segment in force at trace time t (t < 0 counts as 0).
  const LinkSegment& At(double t) const;
  double BandwidthAt(double t) const { return At(t).bandwidth_bps; }
  double DelayAt(double t) const { return At(t).delay_s; }

  // Bits the link carries in [t0, t1]; 0 when t1 <= t0.
  double BitsBetween(double t0, double t1) const;
  // Earliest t >= t0 with BitsBetween(t0, t) >= bits; t0 when bits <= 0;
  // +infinity when the link never carries that much.
  double TransmitEnd(double t0, double bits) const;
  // BitsBetween(t0, t1) / (t1 - t0). REQUIRES: t1 > t0.
  double MeanBandwidth(double t0, double t1) const { return BitsBetween(t0, t1) / (t1 - t0); }

  const std::vector<LinkSegment>& segments() const { return segments_; }
  double loop_period_s() const { return period_; }
  // The time a non-looping schedule settles into its last segment, or the
  // period of a looping one.
  double horizon_s() const { return period_ > 0 ? period_ : segments_.back().start_s; }

 private:
  LinkSchedule(std::vector<LinkSegment> segments, double period);
  size_t IndexAt(double local_t) const;
  double Cumulative(double t) const;  // bits carried in [0, t]
  double Inverse(double bits) const;  // smallest t with Cumulative(t) >= bits

  std::vector<LinkSegment> segments_;
  std::vector<double> cum_;  // cum_[i]: bits in [0, segments_[i].start_s]
  double period_ = 0;
  double period_bits_ = 0;  // bits per period when looping
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_LINK_SCHEDULE_H_
