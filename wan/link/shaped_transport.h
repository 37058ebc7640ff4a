// ShapedTransport: the WanTransport of a site process. Each outbound peer
// link holds its bytes until the link model lets them go, then sends them
// over a real connection:
//
//   Send* (any thread) -> libuv loop thread: a LinkShaper per peer and lane
//   (bulk: token bucket at the link's scheduled bandwidth plus its one-way
//   delay; priority: the delay and the outages only, so notices overtake
//   queued batches but wait out an outage like everything else)
//   -> when the model delivers a message, a LaneSender thread per peer and
//   lane sends it through a PeerChannel (a Thrift mirror connection) and,
//   for a batch the peer accepted, calls the delivery callback.
//
// Heartbeats go straight to the connection when the priority lane is
// idle, but only while the link model carries anything: a peer behind an
// outage hears nothing, as over a real WAN, and its lease runs out.
// Clock reports take the priority lane: a receiver holds a report until
// the batches through its last_seq have landed, so it need not queue behind
// them. (A report riding inside a batch, WanBatch::report, goes with the
// batch.) `time_scale` runs the link model that many times faster than real
// time (bandwidth x scale, delays / scale) for fast tests.
// With relay_after_ms set, a peer whose link has acknowledged nothing that
// long gets its batches through a third site instead (the batch goes as a
// relay call through this site's link to that site, which carries it on
// with Forward), until its own link answers again
// (docs/wan_replication.md, "Relaying round an outage").
// Statistics per link: bytes offered to the model and delivered, bytes on
// the wire (framing included), the offered (scheduled) and achieved
// bandwidth over the link's busy span, retries, relayed and forwarded
// batches.
//
// Thread-safety: all public methods may be called from any thread. The
// shapers live on the loop thread; submissions reach it through a mutex-
// guarded queue and a uv_async handle. submit_mu_ is never held while
// calling a shaper, a sender or the delivery callback.
#ifndef GEOPS_WAN_LINK_SHAPED_TRANSPORT_H_
#define GEOPS_WAN_LINK_SHAPED_TRANSPORT_H_

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "wan/link/lane_sender.h"
#include "wan/link/link_schedule.h"
#include "wan/link/link_shaper.h"
#include "wan/link/peer_channel.h"
#include "wan/wan_transport.h"

namespace geops::wan {

struct ShapedTransportOptions {
  double time_scale = 1.0;       // trace seconds per real second, > 0
  double burst_bytes = 0;        // token bucket depth per link, bytes
  int64_t heartbeat_ms = 1000;   // priority-lane heartbeat when idle; 0 = none
  LaneSenderOptions sender;      // retries (heartbeat_ms above overrides its period)
  // The kernel limits each link's rate (a tc qdisc on the host, as in
  // experiments/run_netns.sh): the bulk lane then holds messages for the
  // link's delay and outages only. Estimates still use the modelled rate.
  bool kernel_rate = false;
  // false: the links are real (sites in different regions): nothing is
  // held, every message goes to its connection at once, and the links
  // given only inform the estimates (rate and delay as expected, the queue
  // as the bytes offered and not yet acknowledged by the peer).
  bool emulate_links = true;
  // Relaying round an outage (docs/wan_replication.md): a batch a peer has
  // not acknowledged this long, ms, goes again through another peer whose
  // link answers, and so do the peer's next batches until its own link
  // acknowledges one again. This site also carries others' batches on
  // (Forward). 0 = off: nothing is relayed, and nothing is forwarded.
  int64_t relay_after_ms = 0;

  Status Validate() const;
};

struct PeerLink {
  SiteId peer = 0;
  std::string name;       // "us-east-1->eu-west-1", for reports
  LinkSchedule schedule;  // the directed link towards the peer
};

struct LinkStats {
  SiteId peer = 0;
  std::string name;
  int64_t batches = 0;           // batches delivered to the peer
  int64_t messages = 0;          // all messages offered (both lanes)
  int64_t bytes_offered = 0;     // bulk-lane bytes offered to the link model
  int64_t bytes_delivered = 0;   // bulk-lane bytes the model delivered
  int64_t wire_bytes = 0;        // bytes the connections sent (both lanes, framing included)
  double first_offer_s = -1;     // trace seconds; -1 before the first message
  double last_delivery_s = -1;
  double offered_bps = 0;        // mean scheduled bandwidth over [first_offer, last_delivery]
  double achieved_bps = 0;       // bytes_delivered * 8 over that span
  int64_t retries = 0;
  int64_t refused = 0;
  int64_t relayed = 0;     // batches for this peer that another site carried (acknowledged so)
  int64_t relay_turns = 0; // times the batches for this peer were sent (again) through a relay
  int64_t forwarded = 0;   // batches of other sites this site carried to this peer
};

class ShapedTransport : public WanTransport, public BatchForwarder {
 public:
  // Starts the loop thread and one sender thread per peer and lane.
  // InvalidArgument for bad options, no links, or a peer named twice.
  static Result<std::unique_ptr<ShapedTransport>> Start(std::vector<PeerLink> links,
                                                        ShapedTransportOptions options,
                                                        PeerChannelFactory channels);
  // Stops everything; messages not yet sent are dropped.
  ~ShapedTransport() override;

  void SetDeliveryCallback(DeliveryCallback callback) override;
  void SendBatch(SiteId peer, WanBatch batch) override;
  void SendClock(SiteId peer, WanClockReport report) override;
  void SendNotice(SiteId peer, WanNotice notice) override;
  double EstimateDeliverySeconds(SiteId peer, int64_t bytes) override;
  double BandwidthBytesPerSecond(SiteId peer) override;
  double EstimateReportSeconds(SiteId peer) override;
  // A call on a connection of its own, outside the lanes. With emulated
  // links it takes at least the modelled time of the page's bytes on the
  // link (one way, its queue included), and an outage answers Unavailable.
  Result<OuterStatePage> FetchOuterState(SiteId peer, uint64_t incarnation, uint64_t snapshot, int32_t page,
                                         int64_t timeout_ms) override;
  // BatchForwarder: carries another site's batch over the link to `dest`
  // (its bulk lane, shaped like this site's own batches) and waits for
  // dest's answer. FailedPrecondition when relaying is off.
  Result<BatchAck> Forward(SiteId dest, WanBatch batch, int64_t timeout_ms) override;
  // Answers every Forward waiting (Unavailable) and refuses new ones.
  void StopForwarding();

  // Blocks until every message offered so far has been sent, or the
  // deadline (false).
  bool WaitQuiet(Deadline deadline) const;
  void Stop();

  std::vector<LinkStats> stats() const;

 private:
  struct Peer;
  struct Submission {
    size_t peer = 0;
    Lane lane = Lane::kBulk;
    WanMessage message;
  };

  explicit ShapedTransport(ShapedTransportOptions options);
  double RealNow() const;
  // Relaying (loop thread, every relay period): turns each peer whose
  // oldest batch has waited past relay_after_ms to another relay.
  static void OnRelayTimer(uv_timer_t* handle);
  void CheckRelays();
  // A peer that could carry batches for `dest` now, preferably not
  // `avoid` (it is taken again when it is the only one); null if none.
  // REQUIRES: relay_mu_ held.
  Peer* ChooseRelay(const Peer& dest, SiteId avoid, double now);
  // Sends the batches for `dest` not yet acknowledged through `via` (or
  // straight, when null: those not sent straight yet). REQUIRES: relay_mu_.
  void Reroute(Peer& dest, Peer* via, double now);
  // `dest` acknowledged everything through `seq`. REQUIRES: relay_mu_.
  void AckedThrough(Peer& dest, uint64_t seq);
  bool RelayWanted(const WanMessage& m);
  void Submit(SiteId peer, Lane lane, WanMessage message, int64_t bytes);
  Peer* Find(SiteId peer) const;
  double TraceNow() const;
  // Whether the emulated link to `p` would carry a heartbeat sent now (any
  // thread): false while it is in an outage.
  bool HeartbeatArrives(const Peer& p) const;
  static void OnWake(uv_async_t* handle);
  void DrainSubmissions();  // loop thread
  void OnSent(Peer* p, const WanMessage& m, const BatchAck& ack);

  const ShapedTransportOptions options_;
  PeerChannelFactory channels_;  // set by Start
  std::vector<std::unique_ptr<Peer>> peers_;
  SteadyClock::time_point origin_;

  uv_loop_t loop_;
  uv_async_t wake_;
  uv_timer_t relay_timer_;
  std::thread loop_thread_;

  mutable std::mutex submit_mu_;
  std::vector<Submission> submissions_;  // GUARDED_BY(submit_mu_)
  bool stopping_ = false;                // GUARDED_BY(submit_mu_)
  bool stopped_ = false;                 // GUARDED_BY(submit_mu_)
  DeliveryCallback callback_;            // GUARDED_BY(submit_mu_); copied before use

  // Relay state of every peer lives in Peer, GUARDED_BY(relay_mu_). Order:
  // relay_mu_ -> submit_mu_.
  mutable std::mutex relay_mu_;
  std::mutex forward_mu_;  // a leaf lock
  std::set<std::shared_ptr<ForwardWaiter>> waiters_;  // GUARDED_BY(forward_mu_): Forward calls waiting
  bool forwarding_stopped_ = false;                   // GUARDED_BY(forward_mu_)
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_SHAPED_TRANSPORT_H_
