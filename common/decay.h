// HalfCosineDecay: the learning-rate schedule of geops' trainer, shared with
// what follows it (the asp significance threshold, wan/replication/
// threshold_schedule.h), so that both decay alike: `from` at clock 0 to
// `to` at clock clocks - 1, along half a cosine. Clocks outside
// [0, clocks - 1] count as its nearest end; clocks <= 1 gives `from`.
#ifndef GEOPS_COMMON_DECAY_H_
#define GEOPS_COMMON_DECAY_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace geops {

inline double HalfCosineDecay(double from, double to, int64_t clock, int64_t clocks) {
  if (clocks <= 1) return from;
  const double last = static_cast<double>(clocks - 1);
  const double progress = std::clamp(static_cast<double>(clock), 0.0, last) / last;
  return to + 0.5 * (from - to) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace geops

#endif  // GEOPS_COMMON_DECAY_H_
