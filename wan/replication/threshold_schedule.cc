#include "wan/replication/threshold_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace geops::wan {

Result<ThresholdSchedule> ThresholdSchedule::Create(ThresholdOptions options) {
  if (!(options.initial >= 0) || !std::isfinite(options.initial)) {
    return InvalidArgumentError("threshold: initial must be >= 0 and finite, got " +
                                std::to_string(options.initial));
  }
  if (!(options.floor >= 0) || !std::isfinite(options.floor)) {
    return InvalidArgumentError("threshold: floor must be >= 0 and finite, got " +
                                std::to_string(options.floor));
  }
  return ThresholdSchedule(options);
}

double ThresholdSchedule::Base(Clock k) const {
  if (!options_.decay) return std::max(options_.floor, options_.initial);
  double kk = static_cast<double>(std::max<Clock>(k, 0));
  return std::max(options_.floor, options_.initial / std::sqrt(kk + 1.0));
}

void ThresholdSchedule::set_multiplier(double m) {
  if (std::isfinite(m) && m > 0) multiplier_ = m;
}

}  // namespace geops::wan
