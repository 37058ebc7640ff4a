// BandwidthController: steers the significance threshold so that the bytes a
// site ships per second stay near a target share of the measured WAN link
// bandwidth.
//
// Once per control interval the caller reports how many bytes were shipped
// in it and the link bandwidth measured meanwhile. The controller multiplies
// its output by (rate / target)^gain, each step bounded to
// [1 / max_step, max_step] and the output to [min_multiplier,
// max_multiplier]: shipping too much raises the threshold (fewer, larger
// updates), an idle link lowers it. Within +-deadband of the target it holds
// still. The output feeds ThresholdSchedule::set_multiplier().
//
// Thread-compatible value type.
#ifndef GEOPS_WAN_REPLICATION_BANDWIDTH_CONTROLLER_H_
#define GEOPS_WAN_REPLICATION_BANDWIDTH_CONTROLLER_H_

#include "common/status.h"

namespace geops::wan {

struct BandwidthControllerOptions {
  double target_utilization = 0.8;  // share of the link bandwidth to aim for, in (0, 1]
  double gain = 0.5;                // exponent applied to rate / target per update, in (0, 2]
  double max_step = 2.0;            // largest factor of change per update, > 1
  double deadband = 0.05;           // relative error treated as on target, in [0, 1)
  double min_multiplier = 0.01;     // lower bound of the output, > 0
  double max_multiplier = 1000.0;   // upper bound of the output, >= min_multiplier
  double initial_multiplier = 1.0;  // output before the first update, within the bounds
};

class BandwidthController {
 public:
  // InvalidArgument naming the first bad field.
  static Result<BandwidthController> Create(BandwidthControllerOptions options = {});

  // Feeds one interval: `shipped_bytes` sent over `interval_s` seconds while
  // the link measured `link_bits_per_s`. Returns the new multiplier. An
  // interval <= 0, a bandwidth <= 0 or a non-finite input changes nothing.
  double Update(double shipped_bytes, double interval_s, double link_bits_per_s);

  double multiplier() const { return multiplier_; }
  // Bytes per second the controller aims for at the given bandwidth.
  double TargetBytesPerSecond(double link_bits_per_s) const {
    return options_.target_utilization * link_bits_per_s / 8.0;
  }

 private:
  explicit BandwidthController(BandwidthControllerOptions options)
      : options_(options), multiplier_(options.initial_multiplier) {}
  BandwidthControllerOptions options_;
  double multiplier_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_BANDWIDTH_CONTROLLER_H_
