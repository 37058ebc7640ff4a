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

Result<OuterStatePage> ReceiverSlot::OnOuterState(SiteId origin, uint64_t incarnation, uint64_t snapshot,
                                                  int32_t page) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  // Before its shard exists a site cannot say what its store holds.
  if (receiver_ == nullptr) return UnavailableError(who_ + " has not loaded its shard yet");
  return receiver_->OnOuterState(origin, incarnation, snapshot, page);
}

void ReceiverSlot::SetForwarder(BatchForwarder* forwarder) {
  std::unique_lock<std::shared_mutex> lock(relay_mu_);  // waits for the relays in flight
  forwarder_ = forwarder;
}

Result<BatchAck> ReceiverSlot::OnRelay(SiteId dest, const WanBatch& batch, int64_t timeout_ms) {
  std::shared_lock<std::shared_mutex> lock(relay_mu_);
  if (forwarder_ == nullptr) {
    return FailedPreconditionError(who_ + " does not relay batches ([wan] relay_after_ms is 0, or its WAN side "
                                          "is not up yet)");
  }
  return forwarder_->Forward(dest, batch, timeout_ms);
}

bool ReceiverSlot::AcceptsRelayed() const {
  std::shared_lock<std::shared_mutex> lock(relay_mu_);
  return forwarder_ != nullptr;
}

}  // namespace geops::wan
