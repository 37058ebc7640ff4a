#include "wan/link/link_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace geops::wan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool NonNegativeFinite(double v) { return v >= 0 && std::isfinite(v); }

}  // namespace

LinkSchedule LinkSchedule::Constant(double bandwidth_bps, double delay_s) {
  return LinkSchedule({LinkSegment{0, bandwidth_bps, delay_s}}, 0);
}

LinkSchedule LinkSchedule::WithBandwidth(double bandwidth_bps) const {
  std::vector<LinkSegment> segs;
  for (const LinkSegment& s : segments_) {
    const double bps = s.bandwidth_bps > 0 ? bandwidth_bps : 0;
    if (!segs.empty() && segs.back().bandwidth_bps == bps && segs.back().delay_s == s.delay_s) continue;
    segs.push_back(LinkSegment{s.start_s, bps, s.delay_s});
  }
  return LinkSchedule(std::move(segs), period_);
}

Result<LinkSchedule> LinkSchedule::Create(std::vector<LinkSegment> segments, double loop_period_s) {
  if (segments.empty()) return InvalidArgumentError("link schedule: no segments");
  for (size_t i = 0; i < segments.size(); ++i) {
    const LinkSegment& s = segments[i];
    std::string where = "link schedule segment " + std::to_string(i);
    if (i == 0 && s.start_s != 0) {
      return InvalidArgumentError(where + ": first segment must start at 0, got " +
                                  std::to_string(s.start_s));
    }
    if (i > 0 && !(s.start_s > segments[i - 1].start_s)) {
      return InvalidArgumentError(where + ": start " + std::to_string(s.start_s) +
                                  " is not after the previous start");
    }
    if (!std::isfinite(s.start_s)) return InvalidArgumentError(where + ": start is not finite");
    if (!NonNegativeFinite(s.bandwidth_bps)) {
      return InvalidArgumentError(where + ": bandwidth must be >= 0 and finite, got " +
                                  std::to_string(s.bandwidth_bps));
    }
    if (!NonNegativeFinite(s.delay_s)) {
      return InvalidArgumentError(where + ": delay must be >= 0 and finite, got " +
                                  std::to_string(s.delay_s));
    }
  }
  if (!NonNegativeFinite(loop_period_s)) {
    return InvalidArgumentError("link schedule: loop period must be >= 0 and finite");
  }
  if (loop_period_s > 0 && !(loop_period_s > segments.back().start_s)) {
    return InvalidArgumentError("link schedule: loop period " + std::to_string(loop_period_s) +
                                " must exceed the last segment start " +
                                std::to_string(segments.back().start_s));
  }
  return LinkSchedule(std::move(segments), loop_period_s);
}

LinkSchedule::LinkSchedule(std::vector<LinkSegment> segments, double period)
    : segments_(std::move(segments)), period_(period) {
  cum_.resize(segments_.size());
  double c = 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    cum_[i] = c;
    if (i + 1 < segments_.size()) {
      c += segments_[i].bandwidth_bps * (segments_[i + 1].start_s - segments_[i].start_s);
    }
  }
  if (period_ > 0) {
    period_bits_ = c + segments_.back().bandwidth_bps * (period_ - segments_.back().start_s);
  }
}

size_t LinkSchedule::IndexAt(double local_t) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), local_t,
                             [](double t, const LinkSegment& s) { return t < s.start_s; });
  return it == segments_.begin() ? 0 : static_cast<size_t>(it - segments_.begin()) - 1;
}

const LinkSegment& LinkSchedule::At(double t) const {
  if (!(t > 0)) return segments_.front();
  if (period_ > 0) t = std::fmod(t, period_);
  return segments_[IndexAt(t)];
}

double LinkSchedule::Cumulative(double t) const {
  if (!(t > 0)) return 0;
  double base = 0;
  if (period_ > 0) {
    double cycles = std::floor(t / period_);
    base = cycles * period_bits_;
    t -= cycles * period_;
    if (t < 0) t = 0;
  }
  size_t i = IndexAt(t);
  return base + cum_[i] + segments_[i].bandwidth_bps * (t - segments_[i].start_s);
}

double LinkSchedule::Inverse(double bits) const {
  if (!(bits > 0)) return 0;
  double base_t = 0;
  if (period_ > 0) {
    if (!(period_bits_ > 0)) return kInf;
    double cycles = std::floor(bits / period_bits_);
    double rest = bits - cycles * period_bits_;
    if (!(rest > 0)) {  // reached exactly at a cycle end: find it inside the previous cycle
      cycles -= 1;
      rest = period_bits_;
    }
    base_t = cycles * period_;
    bits = rest;
  }
  // First segment whose end reaches `bits`; it has bandwidth > 0.
  const size_t n = segments_.size();
  size_t i = static_cast<size_t>(
      std::upper_bound(cum_.begin(), cum_.end(), bits, [](double b, double c) { return b <= c; }) -
      cum_.begin());
  i = i == 0 ? 0 : i - 1;  // last segment with cum_[i] < bits
  double bw = segments_[i].bandwidth_bps;
  if (i + 1 == n && period_ == 0 && !(bw > 0)) return kInf;
  if (!(bw > 0)) return base_t + (i + 1 < n ? segments_[i + 1].start_s : period_);
  double t = segments_[i].start_s + (bits - cum_[i]) / bw;
  double end = i + 1 < n ? segments_[i + 1].start_s : (period_ > 0 ? period_ : kInf);
  return base_t + std::min(t, end);
}

double LinkSchedule::BitsBetween(double t0, double t1) const {
  if (!(t1 > t0)) return 0;
  return std::max(0.0, Cumulative(t1) - Cumulative(t0));
}

double LinkSchedule::TransmitEnd(double t0, double bits) const {
  if (t0 < 0) t0 = 0;
  if (!(bits > 0)) return t0;
  double t = Inverse(Cumulative(t0) + bits);
  return std::max(t, t0);
}

}  // namespace geops::wan
