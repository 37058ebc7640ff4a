// LaneSender: one thread that sends the messages of one lane to one peer, in
// order, through a PeerChannel. A message the channel cannot take now
// (Unavailable, ResourceExhausted) is retried with exponential back-off
// until it goes or the sender stops, and holds back those behind it, so the
// lane stays ordered; one the peer refuses is logged and dropped. With a
// heartbeat period, an idle lane sends a heartbeat that often while the
// link is up (LaneSenderOptions::link_up). A clock
// report replaces any report still queued (the newer one says more).
//
// Thread-safety: Push, Stop and the counters may be called from any thread.
// The channel is created and used on the sender thread only. `on_sent` runs
// on the sender thread with no lock held.
#ifndef GEOPS_WAN_LINK_LANE_SENDER_H_
#define GEOPS_WAN_LINK_LANE_SENDER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>

#include "common/deadline.h"
#include "common/status.h"
#include "wan/link/peer_channel.h"
#include "wan/wan_transport.h"

namespace geops::wan {

// The answer to one relay call, which the relaying site's call waits for
// while the batch it forwards crosses its link (ShapedTransport::Forward).
class ForwardWaiter {
 public:
  void Complete(Result<BatchAck> result);
  // The answer, or Unavailable once `deadline` passed or Cancel() was called.
  Result<BatchAck> Wait(SteadyClock::time_point deadline);
  void Cancel();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;       // GUARDED_BY(mu_)
  bool cancelled_ = false;  // GUARDED_BY(mu_)
  Status status_;           // GUARDED_BY(mu_)
  BatchAck ack_;            // GUARDED_BY(mu_)
};

// A batch of this site's that the peer is asked to carry on to `dest`
// (relay lane: PeerChannel::RelayBatch).
struct WanRelay {
  SiteId dest = 0;
  WanBatch batch;
};
// A batch of another site that this site carries on to the peer (bulk
// lane, sent like its own batches) for the relay call `waiter` answers.
struct WanForward {
  WanBatch batch;
  std::shared_ptr<ForwardWaiter> waiter;
};

using WanMessage = std::variant<WanBatch, WanClockReport, WanNotice, WanRelay, WanForward>;

// The batch a message carries on the wire as a pushBatch (a batch or a
// forwarded one), else null.
const WanBatch* PushedBatch(const WanMessage& m);

struct LaneSenderOptions {
  int64_t retry_backoff_ms = 10;  // first back-off after a failed send, ms
  int64_t max_backoff_ms = 250;   // back-off cap, ms: a restarted peer is reached within it
  int64_t heartbeat_ms = 0;       // idle heartbeat period, ms; 0 = none
  // Batches sent ahead of their acknowledgements (where the channel can
  // pipeline, PeerChannel::max_in_flight): enough to keep a long link busy
  // during a round trip. 1 = one batch per round trip.
  int64_t max_in_flight_batches = 8;
  // Whether a heartbeat sent now would reach the peer (null: always). An
  // emulated link answers false while it is in an outage, so that a peer
  // behind one goes silent as it would over a real WAN (its lease runs
  // out) instead of hearing heartbeats that skip the link model. Called on
  // the sender thread; must be thread-safe.
  std::function<bool()> link_up;
  // Whether a message still needs sending (null: always): asked before
  // every try on the one-at-a-time path (clock reports, notices, relays).
  // A relay whose batch the destination acknowledged meanwhile is dropped.
  std::function<bool(const WanMessage&)> wanted;
  // Called (sender thread) for a message the peer refused, before it is
  // dropped: a forwarded batch's waiter learns of it at once.
  std::function<void(const WanMessage&, const Status&)> on_refused;
  // A batch passed on for another site (WanForward) or to another site
  // (WanRelay) that fails for any reason, "later" included, is dropped at
  // once instead of being retried in place: a forwarded one would hold
  // back the lane's own batches (on_refused tells its waiter), and a relay
  // goes again only when the transport picks a relay anew, not every
  // back-off while the destination is down.
  bool try_passed_on_once = false;
};

class LaneSender {
 public:
  // After the peer accepted `message`; `ack` is its answer for a batch
  // (default for other messages).
  using SentCallback = std::function<void(const WanMessage& message, const BatchAck& ack)>;

  LaneSender(SiteId peer, Lane lane, PeerChannelFactory factory, LaneSenderOptions options, SentCallback on_sent);
  // Stops the thread; queued messages are dropped.
  ~LaneSender();
  LaneSender(const LaneSender&) = delete;
  LaneSender& operator=(const LaneSender&) = delete;

  void Push(WanMessage message);
  void Stop();

  // Nothing queued and nothing being sent.
  bool Idle() const;
  int64_t wire_bytes() const { return wire_bytes_.load(std::memory_order_relaxed); }
  int64_t retries() const { return retries_.load(std::memory_order_relaxed); }
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  // Sends one message; a batch's acknowledgement goes into *ack.
  Status SendOne(const WanMessage& m, BatchAck* ack);
  // Sends the batches at the head of the queue (own or forwarded), up to
  // Window() of them unacknowledged at once, until the head is not one.
  void SendBatchRun();
  size_t Window() const;
  // Backs off after a failed send; false when stopping.
  bool BackOff(int64_t* backoff_ms);
  void Refused(const WanMessage& m, const Status& s, const char* lane);
  static bool PassedOn(const WanMessage& m);
  void DropPassedOn(const WanMessage& m, const Status& s);

  const SiteId peer_;
  const Lane lane_;
  const PeerChannelFactory factory_;
  const LaneSenderOptions options_;
  const SentCallback on_sent_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WanMessage> queue_;  // GUARDED_BY(mu_)
  bool busy_ = false;             // GUARDED_BY(mu_): a message is being sent
  bool stop_ = false;             // GUARDED_BY(mu_)

  std::unique_ptr<PeerChannel> channel_;  // sender thread only
  std::atomic<int64_t> wire_bytes_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> refused_{0};
  std::thread thread_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_LANE_SENDER_H_
