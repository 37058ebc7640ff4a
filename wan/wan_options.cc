#include "wan/wan_options.h"

#include <cmath>

namespace geops::wan {

std::string_view WanModeName(WanMode mode) {
  switch (mode) {
    case WanMode::kBsp: return "bsp";
    case WanMode::kAllAsync: return "all-async";
    case WanMode::kAsp: return "asp";
    case WanMode::kAvg: return "avg";
    case WanMode::kDiloco: return "diloco";
  }
  return "unknown";
}

Result<WanMode> ParseWanMode(std::string_view text) {
  if (text == "bsp") return WanMode::kBsp;
  if (text == "all-async") return WanMode::kAllAsync;
  if (text == "asp") return WanMode::kAsp;
  if (text == "avg") return WanMode::kAvg;
  if (text == "diloco") return WanMode::kDiloco;
  return InvalidArgumentError("wan mode must be \"bsp\", \"all-async\", \"asp\", \"avg\" or \"diloco\", got \"" +
                              std::string(text) + "\"");
}

std::string_view ValueCodecName(ValueCodec codec) {
  switch (codec) {
    case ValueCodec::kFp32: return "fp32";
    case ValueCodec::kFp16: return "fp16";
    case ValueCodec::kInt8: return "int8";
    case ValueCodec::kSign: return "sign";
    case ValueCodec::kInt4: return "int4";
  }
  return "unknown";
}

Result<ValueCodec> ParseValueCodec(std::string_view text) {
  if (text == "fp32") return ValueCodec::kFp32;
  if (text == "fp16") return ValueCodec::kFp16;
  if (text == "int8") return ValueCodec::kInt8;
  if (text == "sign") return ValueCodec::kSign;
  if (text == "int4") return ValueCodec::kInt4;
  return InvalidArgumentError(
      "codec must be \"fp32\", \"fp16\", \"int8\", \"int4\" or \"sign\", got \"" +
      std::string(text) + "\"");
}

OuterOptions WanOptions::EffectiveOuter() const {
  // avg: the sites' models, averaged
  if (mode == WanMode::kAvg) return OuterOptions{1.0, 0.0, false, true, outer_fragments};
  return OuterOptions{outer_lr, outer_momentum, outer_nesterov, outer_average_last, outer_fragments};
}

int64_t WanOptions::EffectiveDs() const {
  switch (mode) {
    case WanMode::kBsp: return 0;
    case WanMode::kAllAsync: return -1;
    case WanMode::kAsp: return staleness_ds;
    case WanMode::kAvg:
    case WanMode::kDiloco: return -1;  // the outer step bounds them (OuterOptions)
  }
  return -1;
}

Status WanOptions::Validate() const {
  const std::string p = "wan options: ";
  if (mode != WanMode::kBsp && mode != WanMode::kAllAsync && mode != WanMode::kAsp && mode != WanMode::kAvg &&
      mode != WanMode::kDiloco) {
    return InvalidArgumentError(p + "unknown mode " + std::to_string(static_cast<int>(mode)));
  }
  if (staleness_ds < -1) return InvalidArgumentError(p + "staleness_ds must be >= 0, or -1 for none");
  if (max_drift_allowance < 0 || max_drift_allowance > 1000000) {
    return InvalidArgumentError(p + "max_drift_allowance must be in [0, 1000000]");
  }
  GEOPS_RETURN_IF_ERROR(ThresholdSchedule::Create(threshold).status().WithContext("wan options"));
  if (!(value_floor > 0) || !std::isfinite(value_floor)) {
    return InvalidArgumentError(p + "value_floor must be > 0 and finite");
  }
  if (static_cast<uint8_t>(codec) >= kNumValueCodecs) return InvalidArgumentError(p + "unknown codec");
  if (averaging_period < 1) return InvalidArgumentError(p + "averaging_period must be >= 1");
  if (outer_fragments < 1 || averaging_period % outer_fragments != 0) {
    return InvalidArgumentError(p + "outer_fragments must be >= 1 and divide averaging_period (" +
                                std::to_string(averaging_period) + "), got " + std::to_string(outer_fragments));
  }
  if (!outer_overlap && outer_fragments > 1) {
    return InvalidArgumentError(p + "outer_overlap = false needs outer_fragments = 1 "
                                "(streaming overlaps by design), got " + std::to_string(outer_fragments));
  }
  if (!(outer_lr > 0) || !std::isfinite(outer_lr)) return InvalidArgumentError(p + "outer_lr must be > 0");
  if (!(outer_momentum >= 0 && outer_momentum < 1)) {
    return InvalidArgumentError(p + "outer_momentum must be in [0, 1)");
  }
  if (max_inflight_batches < 1) return InvalidArgumentError(p + "max_inflight_batches must be >= 1");
  if (backlog_revisit < 1 || backlog_revisit > 1000000) {
    return InvalidArgumentError(p + "backlog_revisit must be in [1, 1000000]");
  }
  if (!(max_queue_seconds > 0) || !std::isfinite(max_queue_seconds)) {
    return InvalidArgumentError(p + "max_queue_seconds must be > 0");
  }
  if (!(max_batch_seconds > 0) || !std::isfinite(max_batch_seconds)) {
    return InvalidArgumentError(p + "max_batch_seconds must be > 0");
  }
  if (min_batch_bytes < 1024) return InvalidArgumentError(p + "min_batch_bytes must be >= 1024");
  if (slice_elements < 1024) return InvalidArgumentError(p + "slice_elements must be >= 1024");
  if (!(notice_min_seconds >= 0) || !std::isfinite(notice_min_seconds)) {
    return InvalidArgumentError(p + "notice_min_seconds must be >= 0");
  }
  if (notice_timeout_ms < 1) return InvalidArgumentError(p + "notice_timeout_ms must be >= 1");
  if (peer_lease_ms < 1) return InvalidArgumentError(p + "peer_lease_ms must be >= 1");
  if (max_hold_clocks < 0) return InvalidArgumentError(p + "max_hold_clocks must be >= 0");
  if (max_reorder_batches < 1) return InvalidArgumentError(p + "max_reorder_batches must be >= 1");
  if (tie_backlog_clocks < 0) return InvalidArgumentError(p + "tie_backlog_clocks must be >= 0");
  if (tie_backlog_clocks > 0 && !tie_backlog) {
    return InvalidArgumentError(p + "tie_backlog_clocks bounds tie_backlog, which is off (set tie_backlog = true)");
  }
  if (!(target_utilization >= 0 && target_utilization <= 1)) {
    return InvalidArgumentError(p + "target_utilization must be in [0, 1] (0: no steering)");
  }
  if (target_utilization > 0 && mode != WanMode::kAsp) {
    return InvalidArgumentError(p + "target_utilization steers asp's significance cut-off; mode " +
                                std::string(WanModeName(mode)) + " has none");
  }
  if (report_every_clocks < 1) return InvalidArgumentError(p + "report_every_clocks must be >= 1");
  if (report_every_clocks > 1 && mode != WanMode::kAsp && mode != WanMode::kAllAsync) {
    return InvalidArgumentError(p + "report_every_clocks applies to asp and all-async only (mode " +
                                std::string(WanModeName(mode)) + " takes every clock's report)");
  }
  if (report_every_clocks > 1 && mode == WanMode::kAsp && staleness_ds >= 0 && report_every_clocks > staleness_ds) {
    return InvalidArgumentError(p + "report_every_clocks (" + std::to_string(report_every_clocks) +
                                ") exceeds staleness_ds (" + std::to_string(staleness_ds) +
                                "): a peer's view of this site would lag more than the drift bound");
  }
  if (tie_backlog_last_clocks < 0) return InvalidArgumentError(p + "tie_backlog_last_clocks must be >= 0");
  if (tie_backlog_last_clocks > 0 && !tie_backlog) {
    return InvalidArgumentError(p + "tie_backlog_last_clocks times tie_backlog, which is off (set tie_backlog = true)");
  }
  if (tie_backlog_last_clocks > threshold.last_clock) {
    return InvalidArgumentError(p + "tie_backlog_last_clocks (" + std::to_string(tie_backlog_last_clocks) +
                                ") exceeds the training's clocks (" + std::to_string(threshold.last_clock) + ")");
  }
  if (tie_backlog && !fresh_first) {
    // Without it every link that keeps codec residuals in its backlog looks
    // full: a tick's held updates would leave only at the next tick, and
    // sites held at the bound by each other's reports would never tick.
    return InvalidArgumentError(p + "tie_backlog needs fresh_first = true");
  }
  return Status::Ok();
}

}  // namespace geops::wan
