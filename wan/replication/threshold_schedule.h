// ThresholdSchedule: the significance cut-off t(k) used at shard clock k,
//     t(k) = max(floor, t0 / sqrt(k + 1)) * lr(k) * settle(k) * multiplier,
// where the multiplier is 1 unless a BandwidthController steers it, and
// settle(k) is 1 outside a settle window (below), and lr(k) is 1 unless
// the cut-off follows the workers' learning rate: then it is their
// half-cosine decay from 1 at clock 0 to final_lr_ratio at clock
// lr_clocks - 1 (the trainer's schedule divided by its initial rate), so
// that what a shard holds back stays about the same number of clocks'
// updates as the steps shrink, instead of growing as they do.
//
// With a settle window of R clocks before the training's last clock L - 1,
// t(k) is further multiplied by (L - 1 - k) / R over those clocks, falling
// to 0 at the last one: what a shard has held back leaves while clocks
// remain for every site to train against it, instead of arriving all at
// once in the final drain, where five sites' progress on the same weights
// adds up with nothing left to correct it.
//
// A small value type; thread-compatible.
#ifndef GEOPS_WAN_REPLICATION_THRESHOLD_SCHEDULE_H_
#define GEOPS_WAN_REPLICATION_THRESHOLD_SCHEDULE_H_

#include "common/ids.h"
#include "common/status.h"

namespace geops::wan {

struct ThresholdOptions {
  double initial = 0.01;  // t0, relative change (0.01 = 1%); >= 0
  double floor = 0.001;   // lower bound of the decayed value; 0 <= floor
  bool decay = true;      // false: t(k) = max(floor, t0) for every k
  // Follow the learning rate's half-cosine decay over lr_clocks clocks to
  // final_lr_ratio (in [0, 1]; 0 for a rate that decays to 0, when every
  // change ships at the last clock); lr_clocks 0 (default): do not follow it.
  int64_t lr_clocks = 0;
  double final_lr_ratio = 1.0;
  // Settle window: over the last settle_clocks of last_clock clocks, t(k)
  // falls linearly to 0 (above); settle_clocks 0 (default): no window.
  // settle_clocks > 0 needs last_clock >= settle_clocks.
  int64_t settle_clocks = 0;
  int64_t last_clock = 0;  // the training's clock count L
};

class ThresholdSchedule {
 public:
  // InvalidArgument naming the field when a value is negative or not finite.
  static Result<ThresholdSchedule> Create(ThresholdOptions options = {});

  // t(k) before steering. Clocks below 0 count as 0, clocks past lr_clocks
  // as its last.
  double Base(Clock k) const;
  // t(k) times the current multiplier.
  double At(Clock k) const { return Base(k) * multiplier_; }

  // Sets the steering multiplier (from a BandwidthController); values that
  // are not finite or <= 0 are ignored.
  void set_multiplier(double m);
  double multiplier() const { return multiplier_; }
  // lr(k) above: 1 when the cut-off does not follow the learning rate.
  double LearningRateRatio(Clock k) const;
  // The settle window's factor at clock k: 1 before it, (L - 1 - k) / R in
  // it, 0 from the last clock on.
  double SettleRatio(Clock k) const;

 private:
  explicit ThresholdSchedule(ThresholdOptions options) : options_(options) {}
  ThresholdOptions options_;
  double multiplier_ = 1.0;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_THRESHOLD_SCHEDULE_H_
