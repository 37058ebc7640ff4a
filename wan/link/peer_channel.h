// PeerChannel: what actually carries WAN messages to one peer once the link
// model has let them go: a Thrift mirror connection in a site process
// (thrift/mirror_channel.h), a fake in tests. One channel per lane (bulk:
// batches and clock reports in order; priority: notices and heartbeats).
//
// Every call blocks for a bounded time. Unavailable or ResourceExhausted
// mean "try again later" (the ShapedTransport backs off and retries; batches
// are idempotent); any other error means the peer refused the message.
//
// Thread-safety: a channel is used by one thread at a time; wire_bytes()
// may be read from any thread.
#ifndef GEOPS_WAN_LINK_PEER_CHANNEL_H_
#define GEOPS_WAN_LINK_PEER_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "common/status.h"
#include "wan/wan_transport.h"

namespace geops::wan {

enum class Lane : int32_t { kBulk = 0, kPriority = 1 };

class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  // The peer's acknowledgement of the batch (BatchAck: quarantined or not).
  virtual Result<BatchAck> SendBatch(const WanBatch& batch) = 0;
  virtual Status SendClock(const WanClockReport& report) = 0;
  virtual Status SendNotice(const WanNotice& notice) = 0;
  virtual Status Heartbeat() = 0;
  // Bytes this channel put on the wire so far (framing included).
  virtual int64_t wire_bytes() const = 0;
};

// Makes the channel of one lane to one peer; called once per lane, on that
// lane's sender thread.
using PeerChannelFactory = std::function<std::unique_ptr<PeerChannel>(SiteId peer, Lane lane)>;

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_PEER_CHANNEL_H_
