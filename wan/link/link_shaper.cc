#include "wan/link/link_shaper.h"

#include <cmath>
#include <string>

namespace geops::wan {
namespace {

// Messages due within this much real time are delivered now rather than
// after one more timer round (uv timers have millisecond resolution).
constexpr double kEarlyRealSeconds = 0.001;

}  // namespace

Status LinkShaperOptions::Validate() const {
  if (!(time_scale > 0) || !std::isfinite(time_scale)) {
    return InvalidArgumentError("link shaper: time_scale must be > 0 and finite, got " +
                                std::to_string(time_scale));
  }
  if (!(burst_bytes >= 0) || !std::isfinite(burst_bytes)) {
    return InvalidArgumentError("link shaper: burst_bytes must be >= 0, got " +
                                std::to_string(burst_bytes));
  }
  if (max_queued_bytes == 0) return InvalidArgumentError("link shaper: max_queued_bytes is 0");
  return Status::Ok();
}

Result<std::unique_ptr<LinkShaper>> LinkShaper::Create(uv_loop_t* loop, LinkSchedule schedule,
                                                       LinkShaperOptions options, Sink sink) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (loop == nullptr) return InvalidArgumentError("link shaper: null loop");
  if (!sink) return InvalidArgumentError("link shaper: empty sink");
  return std::unique_ptr<LinkShaper>(
      new LinkShaper(loop, std::move(schedule), options, std::move(sink)));
}

LinkShaper::LinkShaper(uv_loop_t* loop, LinkSchedule schedule, LinkShaperOptions options, Sink sink)
    : loop_(loop),
      options_(options),
      sink_(std::move(sink)),
      bucket_(std::move(schedule), options.burst_bytes),
      timer_(new uv_timer_t),
      origin_ns_(uv_hrtime()) {
  uv_timer_init(loop_, timer_);
  timer_->data = this;
}

LinkShaper::~LinkShaper() {
  uv_timer_stop(timer_);
  timer_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(timer_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
}

double LinkShaper::NowTraceSeconds() const {
  return static_cast<double>(uv_hrtime() - origin_ns_) * 1e-9 * options_.time_scale;
}

Status LinkShaper::Send(std::vector<uint8_t> payload) {
  const uint64_t size = payload.size();
  if (queued_bytes_ + size > options_.max_queued_bytes) {
    ++stats_.messages_refused;
    return ResourceExhaustedError(
        "link shaper: " + std::to_string(queued_bytes_) + " bytes queued, " + std::to_string(size) +
        " more would exceed max_queued_bytes " + std::to_string(options_.max_queued_bytes));
  }
  const double now = NowTraceSeconds();
  LinkRelease r = bucket_.Offer(now, size);
  ShapedMessage m;
  m.payload = std::move(payload);
  m.id = next_id_++;
  m.offered_s = now;
  m.delivered_s = r.delivered_s;
  const bool was_empty = queue_.empty();
  queue_.push_back(std::move(m));
  queued_bytes_ += size;
  ++stats_.messages_offered;
  stats_.bytes_offered += size;
  if (was_empty) Arm();
  return Status::Ok();
}

void LinkShaper::OnTimer(uv_timer_t* timer) {
  auto* self = static_cast<LinkShaper*>(timer->data);
  if (self != nullptr) self->DeliverDue();
}

void LinkShaper::DeliverDue() {
  const double early = kEarlyRealSeconds * options_.time_scale;
  while (!queue_.empty() && queue_.front().delivered_s <= NowTraceSeconds() + early) {
    ShapedMessage m = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= m.payload.size();
    ++stats_.messages_delivered;
    stats_.bytes_delivered += m.payload.size();
    stats_.last_delivered_s = m.delivered_s;
    sink_(std::move(m));
  }
  Arm();
}

void LinkShaper::Arm() {
  uv_timer_stop(timer_);
  if (queue_.empty()) return;
  const double due = queue_.front().delivered_s;
  if (!std::isfinite(due)) return;  // the link never carries it (permanent outage)
  double wait_real = (due - NowTraceSeconds()) / options_.time_scale;
  uint64_t ms = wait_real > 0 ? static_cast<uint64_t>(std::ceil(wait_real * 1000.0)) : 0;
  uv_update_time(loop_);
  uv_timer_start(timer_, &LinkShaper::OnTimer, ms, 0);
}

}  // namespace geops::wan
