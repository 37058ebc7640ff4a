// TokenBucket: the pure model of one directed WAN link: a token bucket that
// fills at the link's scheduled bandwidth, plus the one-way delay.
//
// Messages are offered in order at trace times t. A message's bytes leave
// as soon as tokens allow (fluid model): up to `burst_bytes` saved while the
// link was idle go at once, the rest at the scheduled rate, and nothing
// overtakes an earlier message. Each message then arrives one delay later
// (the delay in force when its last byte leaves), never before an earlier
// message (the link is one ordered stream). Everything is computed from the
// times passed in, so tests need no sleeping; LinkShaper drives it in real
// time.
//
// Thread-compatible value type.
#ifndef GEOPS_WAN_LINK_TOKEN_BUCKET_H_
#define GEOPS_WAN_LINK_TOKEN_BUCKET_H_

#include <cstdint>

#include "wan/link/link_schedule.h"

namespace geops::wan {

// When one offered message crosses the link, in trace seconds.
struct LinkRelease {
  double start_s = 0;      // its first byte leaves
  double sent_s = 0;       // its last byte leaves the sender
  double delivered_s = 0;  // its last byte reaches the receiver
};

class TokenBucket {
 public:
  // burst_bytes: bucket depth in bytes (>= 0; values below 0 count as 0).
  // The bucket starts full.
  explicit TokenBucket(LinkSchedule schedule, double burst_bytes = 0);

  // Offers `bytes` at trace time t. Offer times should not decrease; an
  // earlier t is treated as the latest one offered.
  LinkRelease Offer(double t, uint64_t bytes);

  const LinkSchedule& schedule() const { return schedule_; }
  // Trace time at which everything offered so far has left the sender.
  double busy_until() const { return last_sent_; }
  uint64_t bytes_offered() const { return bytes_offered_; }
  uint64_t messages_offered() const { return messages_; }

 private:
  LinkSchedule schedule_;
  double burst_bytes_;
  double tokens_;  // bytes available at last_sent_
  double last_offer_ = 0;
  double last_sent_ = 0;
  double last_delivered_ = 0;
  uint64_t bytes_offered_ = 0;
  uint64_t messages_ = 0;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_TOKEN_BUCKET_H_
