#include "common/time_source.h"

namespace geops {
namespace {

class SteadyTime final : public TimeSource {
 public:
  SteadyClock::time_point Now() const override { return SteadyClock::now(); }
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 SteadyClock::time_point until) const override {
    cv.wait_until(lock, until);
  }
};

}  // namespace

const TimeSource* SystemTime() {
  static const SteadyTime time;
  return &time;
}

ManualTime::ManualTime() : now_(SteadyClock::now()) {}

SteadyClock::time_point ManualTime::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

void ManualTime::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                           SteadyClock::time_point until) const {
  if (Now() >= until) return;
  ++waiters_;
  cv.wait_for(lock, kManualPollInterval);
  --waiters_;
}

void ManualTime::Advance(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  now_ += std::chrono::duration_cast<SteadyClock::duration>(d);
}

}  // namespace geops
