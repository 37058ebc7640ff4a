// The messages one shard exchanges with its mirrors (shard i of every other
// site), and the two interfaces that carry them:
//   WanTransport  the outbound side: one ordered stream per peer for batches
//                 and clock reports, and a priority lane for notices. The
//                 Replicator sends through it; implementations are the
//                 shaped Thrift links (ShapedTransport) and in-memory test
//                 networks.
//   WanReceiver   the inbound side: what the peer's transport calls when a
//                 message arrives (the Replicator implements it).
//
// Delivery contract of a transport: messages of one peer stream reach the
// receiver at least once, normally in the order sent; the receiver
// deduplicates batches by (origin, seq) and puts reordered ones back in
// order, so a transport may retry freely. A transport reports each batch
// the receiver accepted through the delivery callback (acknowledgement).
//
// The message structs are values; thread-compatible.
#ifndef GEOPS_WAN_WAN_TRANSPORT_H_
#define GEOPS_WAN_WAN_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace geops::wan {

// One encoded batch (docs/wan_batch_format.md); origin, seq and clock are
// repeated from its header so that a transport need not parse it.
//
// Incarnations: a shard's store is born with an incarnation number (larger
// for a store created later); a site restarted from its store keeps it, a
// site that lost its store comes back with a new one. Every message carries
// its sender's incarnation (0: unknown, not checked) and the incarnation of
// the receiver it was made for (0: unknown): a receiver drops a batch,
// clock report or notice made for an earlier incarnation of itself (it
// speaks of a stream that no longer exists), and a receiver that
// hears a new incarnation of a peer first resets that peer's streams
// (Replicator, "disk loss").
// A clock report that rides with a batch (WanBatch::report): the report
// "my shard clock is `clock`; you have had every batch through this one",
// from the batch's origin and for the batch's incarnations (ReportOf). A
// tied report waits at the receiver for the batch it names anyway, so one
// made in the same round as that batch goes with it, not as a message of
// its own (Replicator, docs/wan_replication.md "Reports that ride").
struct RidingReport {
  Clock clock = 0;
  bool drained = false;
};

struct WanBatch {
  SiteId origin = 0;
  uint64_t seq = 0;   // 1, 2, 3, ... per (origin, destination)
  Clock clock = 0;    // origin shard clock when it was cut
  std::vector<uint8_t> payload;
  uint64_t incarnation = 0;       // the sender's
  uint64_t dest_incarnation = 0;  // the receiver's, as the sender knew it
  // Sent by this site for `origin`, whose own link to the receiver is out
  // (ShapedTransport::Forward): the channel names this site as the relay.
  bool relayed = false;
  std::optional<RidingReport> report = std::nullopt;  // a clock report riding with the batch
};

// "My shard clock is `clock`; you have had every batch through `last_seq`."
// A receiver takes the clock only once it has applied the batches through
// last_seq (0: at once). `drained`: the origin's workers all finished and
// last_seq is its final batch: nothing more will come.
struct WanClockReport {
  SiteId origin = 0;
  Clock clock = 0;
  uint64_t last_seq = 0;
  bool drained = false;
  uint64_t incarnation = 0;       // the sender's
  uint64_t dest_incarnation = 0;  // the receiver's, as the sender knew it
};

// The clock report riding with `batch`; REQUIRES: batch.report.
inline WanClockReport ReportOf(const WanBatch& batch) {
  return WanClockReport{batch.origin,      batch.report->clock,  batch.seq,
                        batch.report->drained, batch.incarnation, batch.dest_incarnation};
}

// Selective barrier: batch `seq` of `origin`, which touches `keys`, is on
// its way and will take long; hold local reads of exactly those chunks until
// it lands, at most timeout_ms.
struct WanNotice {
  SiteId origin = 0;
  uint64_t seq = 0;
  std::vector<ChunkKey> keys;
  int64_t timeout_ms = 10000;
  uint64_t incarnation = 0;       // the sender's
  uint64_t dest_incarnation = 0;  // the receiver's, as the sender knew it
};

// What a receiver said when it accepted batch `seq`.
struct BatchAck {
  uint64_t seq = 0;
  // Empty: applied (now or before) or buffered to apply in order. Otherwise
  // the receiver could not add the batch to its replica (a sum would not be
  // finite), kept it aside whole (quarantined), consumed its seq and went
  // on; this says where and why (docs/wan_replication.md).
  std::string quarantined;
};

// One page of a peer's outer-step state (avg, diloco), as a site that lost
// its store fetches it to rejoin (docs/wan_replication.md, "A diloco site
// that lost its disk"). The pages of one snapshot together hold the
// peer's whole state as its store's records (wan/replication/outer_records.h).
struct OuterStatePage {
  // The asker's incarnation as this peer last recorded it (0: it never
  // heard of the asker, so it holds nothing of it).
  uint64_t heard_incarnation = 0;
  bool has_state = false;  // false: the peer keeps no outer state (yet)
  // The peer is rejoining itself: its state holds nothing of the asker
  // (its store is new) and is not merged with its peers' yet.
  bool joining = false;
  uint64_t snapshot = 0;   // the snapshot the pages come from
  int32_t page = 0;
  int32_t pages = 0;
  std::vector<std::pair<std::string, std::string>> records;  // key, value
};

class WanReceiver {
 public:
  virtual ~WanReceiver() = default;
  // Each may be called from any thread, concurrently. Errors are replies to
  // the sender: InvalidArgument / DataLoss for a bad message (do not resend
  // it as is), ResourceExhausted or Unavailable for "later, please".
  virtual Status OnBatch(const WanBatch& batch) = 0;
  virtual Status OnClock(const WanClockReport& report) = 0;
  virtual Status OnNotice(const WanNotice& notice) = 0;
  virtual Status OnHeartbeat(SiteId origin, uint64_t incarnation) = 0;
  // The peer's heartbeat named the process it comes from (`boot`, new at
  // every start of that process). A boot not heard before means the peer
  // (re)started and lost what it knew of this site's progress: the
  // receiver sends it its current clock report again (Replicator).
  virtual void OnPeerBoot(SiteId /*origin*/, uint64_t /*boot*/) {}
  // Why batch `seq` of `origin` was quarantined, empty when it was not (or
  // when this process no longer remembers: it keeps the latest few per
  // origin; the shard's store keeps them all). Asked after OnBatch accepted
  // the batch, to answer its sender.
  virtual std::string QuarantineOf(SiteId /*origin*/, uint64_t /*seq*/) const { return {}; }
  // Relaying (docs/wan_replication.md, "Relaying round an outage"): a
  // peer whose own link to `dest` is out asks this site to carry `batch`
  // (origin: that peer) over this site's link to `dest`. Returns dest's
  // acknowledgement, or Unavailable when none came within timeout_ms (the
  // peer asks again or waits for its own link). FailedPrecondition where
  // this site does not relay.
  virtual Result<BatchAck> OnRelay(SiteId /*dest*/, const WanBatch& /*batch*/, int64_t /*timeout_ms*/) {
    return FailedPreconditionError("this site does not relay batches ([wan] relay_after_ms is 0)");
  }
  // Whether this site takes batches that a third site relays (it relays
  // too). A relayed batch is checked as its origin's own, but comes over
  // the relaying site's connection.
  virtual bool AcceptsRelayed() const { return false; }
  // Page `page` of this site's outer-step state for `origin` (incarnation
  // `incarnation`), which lost its store and rejoins: page 0 takes a new
  // snapshot (snapshot 0 asks for one), later pages name it. Unavailable
  // while this site cannot answer yet (it is rejoining itself), NotFound
  // for a snapshot no longer kept (start again at page 0),
  // FailedPrecondition in a mode without an outer step.
  virtual Result<OuterStatePage> OnOuterState(SiteId /*origin*/, uint64_t /*incarnation*/, uint64_t /*snapshot*/,
                                              int32_t /*page*/) {
    return FailedPreconditionError("this site keeps no outer step state (wan mode is not avg or diloco)");
  }
};

// Hands a batch that arrived to `receiver`, then the report riding with it,
// if any. The batch's answer is the push's answer, with one exception: a
// report the receiver cannot take now (Unavailable, ResourceExhausted)
// makes the whole push "later, please", so the sender sends the batch again
// (the receiver deduplicates it) and the report with it. A report refused
// for good does not undo its batch: the push succeeds, and *report_refused
// (if given) says why the report was not taken.
inline Status DeliverBatch(WanReceiver& receiver, const WanBatch& batch, std::string* report_refused = nullptr) {
  Status s = receiver.OnBatch(batch);
  if (!s.ok() || !batch.report) return s;
  Status r = receiver.OnClock(ReportOf(batch));
  if (r.ok()) return s;
  if (r.code() == StatusCode::kUnavailable || r.code() == StatusCode::kResourceExhausted) return r;
  if (report_refused != nullptr) *report_refused = r.ToString();
  return s;
}

// What carries a relayed batch on: the transport of the relaying site
// (ShapedTransport). Forward blocks until `dest` acknowledged the batch,
// it refused it (its error), or the deadline (Unavailable).
class BatchForwarder {
 public:
  virtual ~BatchForwarder() = default;
  virtual Result<BatchAck> Forward(SiteId dest, WanBatch batch, int64_t timeout_ms) = 0;
};

class WanTransport {
 public:
  virtual ~WanTransport() = default;

  // Called once `peer` accepted batch ack.seq (applied, buffered or
  // quarantined it: BatchAck). Set once, before the first Send.
  using DeliveryCallback = std::function<void(SiteId peer, const BatchAck& ack)>;
  virtual void SetDeliveryCallback(DeliveryCallback callback) = 0;

  // Queue a message for `peer` and return at once; never block on the
  // network. Batches of one peer form one ordered stream; clock reports may
  // overtake them (a receiver holds a report until its last_seq landed).
  virtual void SendBatch(SiteId peer, WanBatch batch) = 0;
  virtual void SendClock(SiteId peer, WanClockReport report) = 0;
  // Notices take the priority lane: they overtake queued batches.
  virtual void SendNotice(SiteId peer, WanNotice notice) = 0;

  // Seconds until `bytes` queued now would be delivered to `peer`
  // (queue + transmission + delay); 0 when the link is not modelled.
  virtual double EstimateDeliverySeconds(SiteId peer, int64_t bytes) = 0;
  // The link's current bandwidth to `peer`, bytes per second; 0 = unknown.
  virtual double BandwidthBytesPerSecond(SiteId peer) = 0;
  // Seconds until a clock report sent now would reach `peer` (the link's
  // delay, and the rest of an outage); 0 when the link is not modelled.
  virtual double EstimateReportSeconds(SiteId /*peer*/) { return 0; }
  // Asks `peer` for a page of its outer-step state (WanReceiver::OnOuterState)
  // as this site, incarnation `incarnation`, and waits for the answer up to
  // `timeout_ms`: a call, outside the ordered streams. Unavailable when the
  // peer does not answer in time.
  virtual Result<OuterStatePage> FetchOuterState(SiteId /*peer*/, uint64_t /*incarnation*/, uint64_t /*snapshot*/,
                                                 int32_t /*page*/, int64_t /*timeout_ms*/) {
    return UnimplementedError("this transport cannot fetch a peer's outer step state");
  }
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_WAN_TRANSPORT_H_
