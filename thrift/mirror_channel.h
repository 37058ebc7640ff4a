// MirrorChannel: a wan::PeerChannel over a Thrift MirrorClient, to the peer
// whose address a MirrorAddressBook holds (thrift/mirror_address_book.h).
// Until the peer's address is known every call answers Unavailable, which
// the sender retries.
//
// Thread-safety: a channel is used by one thread at a time (PeerChannel's
// rule); wire_bytes() from any.
#ifndef GEOPS_THRIFT_MIRROR_CHANNEL_H_
#define GEOPS_THRIFT_MIRROR_CHANNEL_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "thrift/host_port.h"
#include "thrift/mirror_address_book.h"
#include "thrift/mirror_channel_factory.h"
#include "thrift/mirror_client.h"
#include "thrift/mirror_identity.h"
#include "thrift/thrift_options.h"
#include "wan/link/peer_channel.h"

namespace geops::rpc {

class MirrorChannel : public wan::PeerChannel {
 public:
  // `book` must outlive the channel.
  MirrorChannel(const MirrorAddressBook* book, SiteId peer, MirrorIdentity self, ThriftClientOptions options);

  Result<wan::BatchAck> SendBatch(const wan::WanBatch& batch) override;
  Status SendClock(const wan::WanClockReport& report) override;
  Status SendNotice(const wan::WanNotice& notice) override;
  Status Heartbeat() override;
  Result<wan::BatchAck> RelayBatch(SiteId dest, const wan::WanBatch& batch) override;
  Result<wan::OuterStatePage> FetchOuterState(uint64_t incarnation, uint64_t snapshot, int32_t page) override;
  Status BeginBatch(const wan::WanBatch& batch) override;
  Result<wan::BatchAck> EndBatch() override;
  void Abandon() override;
  size_t max_in_flight() const override { return kMaxInFlight; }
  int64_t wire_bytes() const override { return wire_bytes_.load(std::memory_order_relaxed); }

 private:
  // The client, once the address is known; Unavailable before.
  static constexpr size_t kMaxInFlight = 64;
  // Longest a relaying site waits for the destination's answer, ms.
  static constexpr int64_t kRelayWaitMs = 5000;
  Result<MirrorClient*> Client();
  void Count();

  const MirrorAddressBook* const book_;
  const SiteId peer_;
  const MirrorIdentity self_;
  const ThriftClientOptions options_;
  std::unique_ptr<MirrorClient> client_;
  std::atomic<int64_t> wire_bytes_{0};
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_CHANNEL_H_
