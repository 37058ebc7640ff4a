#include "common/histogram.h"

#include <algorithm>
#include <cmath>

namespace geops {

void Histogram::Observe(double seconds) {
  if (!(seconds > 0)) seconds = 0;  // NaN too
  const auto it = std::lower_bound(kUpperBounds.begin(), kUpperBounds.end(), seconds);
  counts_[static_cast<size_t>(it - kUpperBounds.begin())].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  const double ns = std::min(seconds * 1e9, 1e18);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot s;
  s.upper_bounds.assign(kUpperBounds.begin(), kUpperBounds.end());
  s.counts.reserve(counts_.size());
  for (const auto& c : counts_) s.counts.push_back(c.load(std::memory_order_relaxed));
  s.count = count_.load(std::memory_order_relaxed);
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

}  // namespace geops
