#include "wan/replication/threshold_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
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
  if (options.lr_clocks < 0) {
    return InvalidArgumentError("threshold: lr_clocks must be >= 0, got " + std::to_string(options.lr_clocks));
  }
  if (!(options.final_lr_ratio > 0 && options.final_lr_ratio <= 1)) {
    return InvalidArgumentError("threshold: final_lr_ratio must be in (0, 1], got " +
                                std::to_string(options.final_lr_ratio));
  }
  return ThresholdSchedule(options);
}

double ThresholdSchedule::LearningRateRatio(Clock k) const {
  if (options_.lr_clocks <= 1) return 1.0;
  const double last = static_cast<double>(options_.lr_clocks - 1);
  const double progress = std::clamp(static_cast<double>(k), 0.0, last) / last;
  const double f = options_.final_lr_ratio;
  return f + 0.5 * (1.0 - f) * (1.0 + std::cos(std::numbers::pi * progress));
}

double ThresholdSchedule::Base(Clock k) const {
  const double lr = LearningRateRatio(k);
  if (!options_.decay) return std::max(options_.floor, options_.initial) * lr;
  double kk = static_cast<double>(std::max<Clock>(k, 0));
  return std::max(options_.floor, options_.initial / std::sqrt(kk + 1.0)) * lr;
}

void ThresholdSchedule::set_multiplier(double m) {
  if (std::isfinite(m) && m > 0) multiplier_ = m;
}

}  // namespace geops::wan
