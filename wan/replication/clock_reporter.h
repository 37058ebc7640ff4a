// ClockReporter: the clock reports one shard's replicator sends its peers.
//
// A report tells a peer "this site's shard has reached clock C" (and, when
// tied, "count it once batch last_seq has landed"); the peer's mirror gate
// holds its own workers to DS clocks past the slowest such clock. Each round
// of the replicator's tick loop asks Report() which peers hear a new clock:
//
//  - a tick reports clock k to every peer; a drain reports too, and says
//    "drained" once nothing more waits for that peer;
//  - tie_backlog (asp, all-async, over the configured last clocks): the
//    clock reported is the one through which this shard's updates have
//    left for that peer (PeerView::sent_through), never past a tick whose
//    selection a hold left in the accumulator, never more than
//    tie_backlog_clocks behind k, never below the last report; a round
//    without a tick reports only when that clock moved;
//  - report_every_clocks > 1: a report that would move the peer's view
//    fewer clocks than that is held, and goes out once it does, or after
//    kFlushMs at the latest (the flush), so a peer waiting at its bound
//    for this site is never left waiting on a held report for long.
//
// The last report per peer is kept: a peer that restarts is sent it again
// (SendAgain), "drained" included, so that it still knows nothing more
// will come.
//
// Thread-safety: not thread-safe; used by the replicator's tick thread only.
#ifndef GEOPS_WAN_REPLICATION_CLOCK_REPORTER_H_
#define GEOPS_WAN_REPLICATION_CLOCK_REPORTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/deadline.h"
#include "common/ids.h"
#include "wan/wan_options.h"
#include "wan/wan_transport.h"

namespace geops::wan {

class ClockReporter {
 public:
  // A report held back by report_every_clocks goes out after this long.
  static constexpr int64_t kFlushMs = 100;

  // What a round needs to know of one peer's outbox.
  struct PeerView {
    SiteId peer = 0;
    Clock sent_through = 0;       // the clock through which its updates have left (PeerOutbox::SentThrough)
    uint64_t last_seq = 0;        // the last batch sent it
    bool nothing_waits = false;   // no backlog and nothing deferred for it
    uint64_t peer_incarnation = 0;  // its store's incarnation, as this site knows it
  };

  // The round of the tick loop.
  struct Round {
    Clock k = 0;                  // the shard clock this round stands at
    bool tick = false;            // k is new
    bool finishing = false;       // the drain: every worker has finished
    bool was_drained = false;     // the drain completed in an earlier round
    bool backlog_tied = false;    // tie_backlog is in force at k
    std::optional<Clock> held_since;  // the first clock a hold left in the accumulator
    uint64_t incarnation = 0;     // this site's store's
    SteadyClock::time_point now;
  };

  struct Outcome {
    int64_t sent = 0;             // reports sent this round (riding included)
    int64_t riding = 0;           // of them, reports that rode with a batch
    int64_t held = 0;             // reports held back (report_every_clocks)
    bool all_drained = true;      // every report sent this round said "drained"
  };

  // For `peers` outboxes. `options` and `transport` must outlive this.
  ClockReporter(const WanOptions& options, SiteId site, WanTransport* transport, size_t peers);

  // Whether `round` can send or hold any report: a tick, the drain,
  // tie_backlog, or a held report due for its flush. The tick loop builds
  // the peers' views only then; Report() on another round does nothing.
  bool Due(const Round& round) const;

  // Offered each report first: true when it rides with a batch of this
  // round (OutboundShipper::AttachReport), so it is not sent on its own.
  using Ride = std::function<bool(SiteId peer, const WanClockReport& report)>;

  // Sends this round's reports; `peers` are the outboxes in a fixed order.
  Outcome Report(const Round& round, const std::vector<PeerView>& peers, const Ride& ride = nullptr);

  // Sends `peer` (outbox `i`) its last report again, if it was sent one,
  // and returns it.
  std::optional<WanClockReport> SendAgain(size_t i, SiteId peer);

 private:
  bool FlushDue(size_t i, SteadyClock::time_point now) const;

  const WanOptions& options_;
  const SiteId site_;
  WanTransport* const transport_;
  std::vector<std::optional<WanClockReport>> last_;             // per outbox, the last sent
  std::vector<std::optional<SteadyClock::time_point>> held_since_;  // per outbox, a report held since
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_CLOCK_REPORTER_H_
