#include "wan/replication/drift_allowance.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace geops::wan {

void DriftAllowance::OnClock(Clock clock, double now_s) {
  if (clock <= last_clock_) return;
  if (last_clock_ >= 0 && now_s > last_s_) {
    intervals_.push_back((now_s - last_s_) / static_cast<double>(clock - last_clock_));
    if (intervals_.size() > kWindow) intervals_.pop_front();
  }
  last_clock_ = clock;
  last_s_ = now_s;
}

double DriftAllowance::period_s() const {
  if (intervals_.size() < kMinIntervals) return 0;
  std::vector<double> sorted(intervals_.begin(), intervals_.end());
  const size_t q = sorted.size() / 4;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(q), sorted.end());
  return sorted[q];
}

int64_t DriftAllowance::ClocksFor(double delivery_s) const {
  const double period = period_s();
  if (!(period > 0) || !(delivery_s > 0)) return 0;
  const double clocks = std::ceil(delivery_s / period - 1e-9);  // 0.2 / 0.05 is 4, not 5
  if (!(clocks < static_cast<double>(max_clocks_))) return max_clocks_;
  return static_cast<int64_t>(clocks);
}

}  // namespace geops::wan
