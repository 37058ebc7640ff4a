#include "wan/replication/receiver_slot.h"

#include <mutex>

namespace geops::wan {

void ReceiverSlot::Set(WanReceiver* receiver) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  receiver_ = receiver;
}

void ReceiverSlot::Clear() {
  std::unique_lock<std::shared_mutex> lock(mu_);  // waits for the calls in flight
  receiver_ = nullptr;
}

template <typename Call>
Status ReceiverSlot::Forward(Call&& call) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (receiver_ == nullptr) {
    return UnavailableError(who_ + " is waiting for its model: no worker of its site has registered it yet");
  }
  return call(receiver_);
}

Status ReceiverSlot::OnBatch(const WanBatch& batch) {
  return Forward([&](WanReceiver* r) { return r->OnBatch(batch); });
}

Status ReceiverSlot::OnClock(const WanClockReport& report) {
  return Forward([&](WanReceiver* r) { return r->OnClock(report); });
}

Status ReceiverSlot::OnNotice(const WanNotice& notice) {
  return Forward([&](WanReceiver* r) { return r->OnNotice(notice); });
}

Status ReceiverSlot::OnHeartbeat(SiteId origin, uint64_t incarnation) {
  return Forward([&](WanReceiver* r) { return r->OnHeartbeat(origin, incarnation); });
}

void ReceiverSlot::OnPeerBoot(SiteId origin, uint64_t boot) {
  Forward([&](WanReceiver* r) {
    r->OnPeerBoot(origin, boot);
    return Status::Ok();
  }).IgnoreError();
}

std::string ReceiverSlot::QuarantineOf(SiteId origin, uint64_t seq) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return receiver_ == nullptr ? std::string() : receiver_->QuarantineOf(origin, seq);
}

}  // namespace geops::wan
