// PeerChannel: what actually carries WAN messages to one peer once the link
// model has let them go: a Thrift mirror connection in a site process
// (thrift/mirror_channel.h), a fake in tests. One channel per lane (bulk:
// batches and clock reports in order; priority: notices and heartbeats).
//
// Every call blocks for a bounded time. Unavailable or ResourceExhausted
// mean "try again later" (the ShapedTransport backs off and retries; batches
// are idempotent); any other error means the peer refused the message.
//
// Batches may be pipelined: BeginBatch sends one without waiting for its
// acknowledgement, EndBatch waits for the acknowledgement of the oldest
// batch begun and not yet ended, in the order begun. Over a real WAN a
// batch per round trip would leave the link idle for most of each round
// trip (a 256 KiB batch takes 31 ms at 67 Mbit/s, the round trip 85 ms);
// with several in flight the link stays busy. After any error of either
// call, or a refusal, the caller calls Abandon(): every batch begun and not
// ended is then forgotten (its acknowledgement may never come) and the
// caller sends them again (batches are idempotent). The default
// implementation does not pipeline: BeginBatch only remembers the batch
// and EndBatch sends it with SendBatch (max_in_flight() = 1).
//
// Thread-safety: a channel is used by one thread at a time; wire_bytes()
// may be read from any thread.
#ifndef GEOPS_WAN_LINK_PEER_CHANNEL_H_
#define GEOPS_WAN_LINK_PEER_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "common/status.h"
#include "wan/wan_transport.h"

namespace geops::wan {

// kRelay: batches this site asks the peer to carry on to a third site
// (their own connection: a relay call waits for the third site's answer).
enum class Lane : int32_t { kBulk = 0, kPriority = 1, kRelay = 2 };

class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  // The peer's acknowledgement of the batch (BatchAck: quarantined or not).
  virtual Result<BatchAck> SendBatch(const WanBatch& batch) = 0;
  virtual Status SendClock(const WanClockReport& report) = 0;
  virtual Status SendNotice(const WanNotice& notice) = 0;
  virtual Status Heartbeat() = 0;
  // Asks the peer to carry `batch` (this site's) on to site `dest` and
  // returns dest's acknowledgement (WanReceiver::OnRelay). A channel that
  // cannot relay refuses (FailedPrecondition).
  virtual Result<BatchAck> RelayBatch(SiteId dest, const WanBatch& batch);
  // One page of the peer's outer-step state (WanReceiver::OnOuterState).
  // A channel that cannot ask answers Unimplemented.
  virtual Result<OuterStatePage> FetchOuterState(uint64_t incarnation, uint64_t snapshot, int32_t page);
  // Pipelined batches (see above). REQUIRES for BeginBatch: fewer than
  // max_in_flight() begun and not ended; `batch` stays alive until its
  // EndBatch or Abandon. REQUIRES for the others: none begun (for EndBatch:
  // at least one).
  virtual Status BeginBatch(const WanBatch& batch);
  virtual Result<BatchAck> EndBatch();
  virtual void Abandon();
  virtual size_t max_in_flight() const { return 1; }
  // Bytes this channel put on the wire so far (framing included).
  virtual int64_t wire_bytes() const = 0;

 private:
  std::deque<const WanBatch*> begun_;  // default BeginBatch/EndBatch
};

// Makes the channel of one lane to one peer; called once per lane, on that
// lane's sender thread.
using PeerChannelFactory = std::function<std::unique_ptr<PeerChannel>(SiteId peer, Lane lane)>;

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_PEER_CHANNEL_H_
