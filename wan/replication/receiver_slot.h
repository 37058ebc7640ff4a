// ReceiverSlot: a WanReceiver that a shard's mirror service can serve
// before the shard exists. A site whose model its workers bring (topology
// workload "client") listens on its mirror port from the start, so that
// its peers and the launcher learn the address at once, but it has no
// shard, and so no Replicator, until the first worker's schema and values
// are in. Until Set() every message is answered Unavailable ("waiting for
// its model"), which a sender retries; after it, messages go to the
// receiver set.
//
// Thread-safety: all methods may be called concurrently. Clear() waits for
// the calls in flight on the receiver it removes (receiver calls never
// block for long), so that receiver may be destroyed once Clear() returns.
#ifndef GEOPS_WAN_REPLICATION_RECEIVER_SLOT_H_
#define GEOPS_WAN_REPLICATION_RECEIVER_SLOT_H_

#include <shared_mutex>
#include <string>

#include "wan/wan_transport.h"

namespace geops::wan {

class ReceiverSlot : public WanReceiver {
 public:
  // `who` names this end in the Unavailable message, e.g. "site B shard 0".
  explicit ReceiverSlot(std::string who) : who_(std::move(who)) {}

  // REQUIRES: `receiver` stays alive until Clear() returned.
  void Set(WanReceiver* receiver);
  void Clear();

  Status OnBatch(const WanBatch& batch) override;
  Status OnClock(const WanClockReport& report) override;
  Status OnNotice(const WanNotice& notice) override;
  Status OnHeartbeat(SiteId origin, uint64_t incarnation) override;
  void OnPeerBoot(SiteId origin, uint64_t boot) override;
  std::string QuarantineOf(SiteId origin, uint64_t seq) const override;
  Result<OuterStatePage> OnOuterState(SiteId origin, uint64_t incarnation, uint64_t snapshot,
                                      int32_t page) override;

  // Relaying (ShapedTransport::Forward): with a forwarder set, this site
  // carries peers' batches on and takes batches relayed to it. Setting
  // null waits for the relay calls in flight (stop the forwarder first,
  // so that they return at once). REQUIRES: `forwarder` stays alive until
  // it is replaced.
  void SetForwarder(BatchForwarder* forwarder);
  Result<BatchAck> OnRelay(SiteId dest, const WanBatch& batch, int64_t timeout_ms) override;
  bool AcceptsRelayed() const override;

 private:
  template <typename Call>
  Status Forward(Call&& call);

  const std::string who_;
  mutable std::shared_mutex mu_;
  WanReceiver* receiver_ = nullptr;  // GUARDED_BY(mu_)
  mutable std::shared_mutex relay_mu_;
  BatchForwarder* forwarder_ = nullptr;  // GUARDED_BY(relay_mu_)
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_RECEIVER_SLOT_H_
