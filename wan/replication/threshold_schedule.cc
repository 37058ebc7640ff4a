#include "wan/replication/threshold_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/decay.h"

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
  if (!(options.final_lr_ratio >= 0 && options.final_lr_ratio <= 1)) {
    return InvalidArgumentError("threshold: final_lr_ratio must be in [0, 1], got " +
                                std::to_string(options.final_lr_ratio));
  }
  if (options.settle_clocks < 0 || options.last_clock < 0) {
    return InvalidArgumentError("threshold: settle_clocks and last_clock must be >= 0, got " +
                                std::to_string(options.settle_clocks) + " and " + std::to_string(options.last_clock));
  }
  if (options.settle_clocks > options.last_clock) {
    return InvalidArgumentError("threshold: settle_clocks (" + std::to_string(options.settle_clocks) +
                                ") must not exceed the training's clocks (" + std::to_string(options.last_clock) + ")");
  }
  return ThresholdSchedule(options);
}

double ThresholdSchedule::LearningRateRatio(Clock k) const {
  return HalfCosineDecay(1.0, options_.final_lr_ratio, k, options_.lr_clocks);  // 1 for lr_clocks <= 1
}

double ThresholdSchedule::SettleRatio(Clock k) const {
  if (options_.settle_clocks <= 0) return 1.0;
  const double left = static_cast<double>(options_.last_clock - 1 - k);
  return std::clamp(left / static_cast<double>(options_.settle_clocks), 0.0, 1.0);
}

double ThresholdSchedule::Base(Clock k) const {
  const double kk = static_cast<double>(std::max<Clock>(k, 0));
  const double t = options_.decay ? options_.initial / std::sqrt(kk + 1.0) : options_.initial;
  return std::max(options_.floor, t) * LearningRateRatio(k) * SettleRatio(k);
}

void ThresholdSchedule::set_multiplier(double m) {
  if (std::isfinite(m) && m > 0) multiplier_ = m;
}

}  // namespace geops::wan
