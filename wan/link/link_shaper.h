// LinkShaper: holds the outbound messages of one directed WAN link on a
// libuv loop and hands each to a sink callback when the link model
// (TokenBucket over a LinkSchedule) says its last byte reaches the far end.
// The real connection plugs in as the sink.
//
// Time: the shaper's trace clock starts at 0 when it is created and runs
// `time_scale` times faster than real time, so time_scale 10 replays ten
// trace seconds per real second (bandwidth effectively x10, delays /10) for
// fast tests. One timer is armed for the head of the queue only: a Linux
// timerfd (nanosecond resolution, absolute CLOCK_MONOTONIC time, the clock
// of uv_hrtime) polled by the loop, since libuv's own timers count whole
// milliseconds and so delivered about a millisecond late on average.
//
// Thread-safety: not thread-safe. Create, use and destroy it on the thread
// that runs `loop`. The sink runs on that thread too and must not destroy
// the shaper.
#ifndef GEOPS_WAN_LINK_LINK_SHAPER_H_
#define GEOPS_WAN_LINK_LINK_SHAPER_H_

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "wan/link/link_schedule.h"
#include "wan/link/token_bucket.h"

namespace geops::wan {

struct LinkShaperOptions {
  double time_scale = 1.0;                          // trace seconds per real second, > 0
  double burst_bytes = 0;                           // token bucket depth, bytes, >= 0
  uint64_t max_queued_bytes = uint64_t{256} << 20;  // Send() refuses beyond this, > 0

  Status Validate() const;
};

struct ShapedMessage {
  std::vector<uint8_t> payload;
  uint64_t id = 0;         // 0, 1, 2, ... in Send() order
  double offered_s = 0;    // trace time of Send()
  double delivered_s = 0;  // trace time the model delivers it
};

struct LinkShaperStats {
  uint64_t messages_offered = 0;
  uint64_t bytes_offered = 0;
  uint64_t messages_delivered = 0;
  uint64_t bytes_delivered = 0;
  uint64_t messages_refused = 0;  // Send() over max_queued_bytes
  double last_delivered_s = 0;    // trace time of the latest delivery
};

class LinkShaper {
 public:
  using Sink = std::function<void(ShapedMessage message)>;

  // Returns InvalidArgument for bad options, a null loop or an empty sink.
  static Result<std::unique_ptr<LinkShaper>> Create(uv_loop_t* loop, LinkSchedule schedule,
                                                    LinkShaperOptions options, Sink sink);
  // Drops undelivered messages and closes the timer (its memory is freed
  // when the loop next runs).
  ~LinkShaper();
  LinkShaper(const LinkShaper&) = delete;
  LinkShaper& operator=(const LinkShaper&) = delete;

  // Queues `payload` at the current trace time. Never blocks. Returns
  // ResourceExhausted (payload dropped, nothing queued) when the queued
  // bytes would exceed max_queued_bytes; the caller retries later.
  Status Send(std::vector<uint8_t> payload);

  // Trace seconds since creation.
  double NowTraceSeconds() const;
  size_t queued_messages() const { return queue_.size(); }
  uint64_t queued_bytes() const { return queued_bytes_; }
  const LinkShaperStats& stats() const { return stats_; }
  const TokenBucket& model() const { return bucket_; }

 private:
  LinkShaper(uv_loop_t* loop, LinkSchedule schedule, LinkShaperOptions options, Sink sink);
  static void OnTimer(uv_poll_t* poll, int status, int events);
  void DeliverDue();
  void Arm();

  uv_loop_t* loop_;
  LinkShaperOptions options_;
  Sink sink_;
  TokenBucket bucket_;
  struct Timer {
    uv_poll_t poll;  // first: the close callback gets it as the handle
    int fd = -1;     // the timerfd
  };
  Timer* timer_;  // owned; closed asynchronously by the destructor
  uint64_t origin_ns_;
  std::deque<ShapedMessage> queue_;
  uint64_t queued_bytes_ = 0;
  uint64_t next_id_ = 0;
  LinkShaperStats stats_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_LINK_SHAPER_H_
