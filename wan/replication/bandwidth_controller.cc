#include "wan/replication/bandwidth_controller.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace geops::wan {
namespace {

Status Bad(const char* field, double v, const char* want) {
  return InvalidArgumentError(std::string("bandwidth controller: ") + field + " must be " + want +
                              ", got " + std::to_string(v));
}

}  // namespace

Result<BandwidthController> BandwidthController::Create(BandwidthControllerOptions o) {
  if (!(o.target_utilization > 0 && o.target_utilization <= 1)) {
    return Bad("target_utilization", o.target_utilization, "in (0, 1]");
  }
  if (!(o.gain > 0 && o.gain <= 2)) return Bad("gain", o.gain, "in (0, 2]");
  if (!(o.max_step > 1) || !std::isfinite(o.max_step)) return Bad("max_step", o.max_step, "> 1");
  if (!(o.deadband >= 0 && o.deadband < 1)) return Bad("deadband", o.deadband, "in [0, 1)");
  if (!(o.min_multiplier > 0) || !std::isfinite(o.min_multiplier)) {
    return Bad("min_multiplier", o.min_multiplier, "> 0");
  }
  if (!(o.max_multiplier >= o.min_multiplier) || !std::isfinite(o.max_multiplier)) {
    return Bad("max_multiplier", o.max_multiplier, ">= min_multiplier");
  }
  if (!(o.initial_multiplier >= o.min_multiplier && o.initial_multiplier <= o.max_multiplier)) {
    return Bad("initial_multiplier", o.initial_multiplier, "within [min, max]_multiplier");
  }
  return BandwidthController(o);
}

double BandwidthController::Update(double shipped_bytes, double interval_s,
                                   double link_bits_per_s) {
  if (!(interval_s > 0) || !(link_bits_per_s > 0) || !(shipped_bytes >= 0) ||
      !std::isfinite(shipped_bytes) || !std::isfinite(interval_s) ||
      !std::isfinite(link_bits_per_s)) {
    return multiplier_;
  }
  double ratio = (shipped_bytes / interval_s) / TargetBytesPerSecond(link_bits_per_s);
  if (std::fabs(ratio - 1.0) <= options_.deadband) return multiplier_;
  double step = ratio > 0 ? std::pow(ratio, options_.gain) : 0.0;
  step = std::clamp(step, 1.0 / options_.max_step, options_.max_step);
  multiplier_ = std::clamp(multiplier_ * step, options_.min_multiplier, options_.max_multiplier);
  return multiplier_;
}

}  // namespace geops::wan
