#include "wan/link/token_bucket.h"

#include <algorithm>

namespace geops::wan {

TokenBucket::TokenBucket(LinkSchedule schedule, double burst_bytes)
    : schedule_(std::move(schedule)),
      burst_bytes_(burst_bytes > 0 ? burst_bytes : 0),
      tokens_(burst_bytes_) {}

LinkRelease TokenBucket::Offer(double t, uint64_t bytes) {
  t = std::max({t, last_offer_, 0.0});
  last_offer_ = t;
  const double start = std::max(t, last_sent_);
  if (burst_bytes_ > 0) {
    tokens_ = std::min(burst_bytes_, tokens_ + schedule_.BitsBetween(last_sent_, start) / 8.0);
  }
  const double need = static_cast<double>(bytes);
  double sent;
  if (need <= tokens_) {
    sent = start;
    tokens_ -= need;
  } else {
    sent = schedule_.TransmitEnd(start, (need - tokens_) * 8.0);
    tokens_ = 0;
  }
  const double delivered = std::max(sent + schedule_.DelayAt(sent), last_delivered_);
  last_sent_ = sent;
  last_delivered_ = delivered;
  bytes_offered_ += bytes;
  ++messages_;
  return LinkRelease{start, sent, delivered};
}

}  // namespace geops::wan
