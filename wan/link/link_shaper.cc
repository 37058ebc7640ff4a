#include "wan/link/link_shaper.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <string>

namespace geops::wan {
namespace {

// Messages due within this much real time are delivered now rather than
// after one more timer round (about the kernel's default timer slack).
constexpr double kEarlyRealSeconds = 50e-6;

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
  std::unique_ptr<LinkShaper> s(new LinkShaper(loop, std::move(schedule), options, std::move(sink)));
  if (s->timer_->fd < 0) return InternalError("link shaper: timerfd_create failed");
  return s;
}

LinkShaper::LinkShaper(uv_loop_t* loop, LinkSchedule schedule, LinkShaperOptions options, Sink sink)
    : loop_(loop),
      options_(options),
      sink_(std::move(sink)),
      bucket_(std::move(schedule), options.burst_bytes),
      timer_(new Timer),
      origin_ns_(uv_hrtime()) {
  timer_->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_->fd < 0) return;  // Create reports it
  uv_poll_init(loop_, &timer_->poll, timer_->fd);
  timer_->poll.data = this;
}

LinkShaper::~LinkShaper() {
  if (timer_->fd < 0) {
    delete timer_;
    return;
  }
  uv_poll_stop(&timer_->poll);
  timer_->poll.data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_->poll), [](uv_handle_t* h) {
    Timer* t = reinterpret_cast<Timer*>(h);
    close(t->fd);
    delete t;
  });
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

void LinkShaper::OnTimer(uv_poll_t* poll, int /*status*/, int /*events*/) {
  auto* self = static_cast<LinkShaper*>(poll->data);
  if (self == nullptr) return;
  uint64_t expirations = 0;
  while (read(self->timer_->fd, &expirations, sizeof(expirations)) < 0 && errno == EINTR) {
  }
  self->DeliverDue();
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
  itimerspec when{};  // zero: disarmed
  const double due = queue_.empty() ? 0 : queue_.front().delivered_s;
  // Not finite: the link never carries it (a permanent outage).
  if (!queue_.empty() && std::isfinite(due)) {
    // The real time the message is due, on uv_hrtime's clock; one already
    // due fires at once (an absolute time in the past), never 0 (disarms).
    const double due_ns = static_cast<double>(origin_ns_) + std::max(0.0, due) / options_.time_scale * 1e9;
    const uint64_t ns = std::max<uint64_t>(1, static_cast<uint64_t>(std::min(due_ns, 9.2e18)));
    when.it_value.tv_sec = static_cast<time_t>(ns / 1000000000u);
    when.it_value.tv_nsec = static_cast<long>(ns % 1000000000u);
  }
  timerfd_settime(timer_->fd, TFD_TIMER_ABSTIME, &when, nullptr);
  // Polled only while armed, like a uv timer: an idle shaper keeps no
  // handle active, so the loop may end.
  // (Started and stopped only on a change: each is an epoll_ctl.)
  const bool active = uv_is_active(reinterpret_cast<uv_handle_t*>(&timer_->poll)) != 0;
  if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) {
    if (active) uv_poll_stop(&timer_->poll);
  } else if (!active) {
    uv_poll_start(&timer_->poll, UV_READABLE, &LinkShaper::OnTimer);
  }
}

}  // namespace geops::wan
