// WanOptions: how one site replicates its shards to the other sites (the
// `[wan]` section of a topology). Plain values with in-class defaults,
// checked once by Validate() when a Replicator is built.
//
// Modes (one code path, different knobs):
//   kBsp       every update is shipped at every shard clock, losslessly
//              (fp32), and reads wait for every peer's clock: a global
//              barrier (DS = 0).
//   kAllAsync  every update is shipped at every shard clock, losslessly;
//              no drift bound (sites never wait for each other).
//   kAsp       Approximate Synchronous Parallel: only significant updates
//              (|acc| / |w| > t(k)) are shipped, in `codec`, under the drift
//              bound DS, with selective-barrier notices for slow batches.
//   kDiloco    DiLoCo: every `averaging_period` (H) clocks each site
//              contributes its progress since the last synchronised model
//              (quantised in `codec`, with error feedback) and every site
//              applies the same outer step (OuterStep: the average of the
//              contributions, Nesterov momentum with outer_lr and
//              outer_momentum), so the synchronised model is bit-identical
//              everywhere. One outer step may be in flight while the next H
//              clocks run: reads at shard clock c wait until step
//              floor(c / H) - 1 is applied (outer_overlap = false: step
//              floor(c / H), the paper's synchronous step). With
//              outer_fragments F > 1 (streaming DiLoCo) the shard's
//              chunks form F fragments and every H / F clocks one of
//              them, in turn, takes its outer step: each fragment still
//              synchronises every H clocks, and the WAN carries 1/F of
//              the contribution at a time.
//   kAvg       the same with outer lr 1 and no momentum, losslessly (fp32):
//              the sites' models averaged every H clocks (local SGD).
// The end of a run is lossless in every mode: once every local worker
// finished, everything still accumulated is shipped in fp32.
#ifndef GEOPS_WAN_WAN_OPTIONS_H_
#define GEOPS_WAN_WAN_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "wan/codec/batch_format.h"
#include "wan/replication/outer_step.h"
#include "wan/replication/threshold_schedule.h"

namespace geops::wan {

enum class WanMode : int32_t { kBsp = 0, kAllAsync = 1, kAsp = 2, kAvg = 3, kDiloco = 4 };

// Modes that synchronise through an outer step (OuterStep).
inline bool UsesOuterStep(WanMode mode) { return mode == WanMode::kAvg || mode == WanMode::kDiloco; }

// "bsp", "all-async", "asp", "avg", "diloco".
std::string_view WanModeName(WanMode mode);
// InvalidArgument naming the accepted values.
Result<WanMode> ParseWanMode(std::string_view text);
// "fp32", "fp16", "int8", "int4", "sign".
std::string_view ValueCodecName(ValueCodec codec);
Result<ValueCodec> ParseValueCodec(std::string_view text);

struct WanOptions {
  WanMode mode = WanMode::kAsp;
  // asp: the drift bound DS in clocks (>= 0), or -1 for none. bsp uses 0,
  // all-async, avg and diloco none (the outer step bounds the last two),
  // whatever is set here.
  int64_t staleness_ds = 2;
  // asp: the drift bound also allows the clocks a clock report spends on
  // its way to the peers: DS + ceil(report delivery / clock period), where
  // delivery is the transport's estimate for the slowest peer now (its
  // delay, and the rest of an outage) and the clock period is this shard's
  // recent typical one. At most this many clocks beyond DS (>= 0); 0 keeps
  // the bound at DS. Transports that model no link estimate 0.
  int64_t max_drift_allowance = 24;
  ThresholdOptions threshold;           // asp: t(k) = max(floor, t0 / sqrt(k + 1))
  // asp: an element is significant when |acc| > t(k) * max(|w|, value_floor):
  // a value nearer 0 than this counts as this large, so that the weights
  // sitting near 0 do not ship every small change while the larger ones
  // wait. > 0 and finite; the default (1e-6) only keeps 0 from dividing.
  float value_floor = 1e-6f;
  ValueCodec codec = ValueCodec::kFp16;  // asp: value codec; other modes use fp32
  bool compress = true;                 // LZ4 over each batch body
  int64_t averaging_period = 10;        // avg, diloco: H in clocks, >= 1
  // avg, diloco: fragments of the shard's chunks that take their outer
  // steps in turn, one every H / F clocks (streaming DiLoCo). >= 1 and
  // dividing H; 1: the whole shard every H clocks.
  int64_t outer_fragments = 1;
  // avg, diloco: true lets one outer step be in flight while the next H
  // clocks run (the WAN exchange hides behind them; each site's progress
  // then starts from a model one step old). false is the DiLoCo paper's
  // synchronous step: a read at clock c waits for step floor(c / H)
  // itself, so each round starts from the synchronised model, and the
  // sites wait out every exchange. false needs outer_fragments = 1.
  bool outer_overlap = true;
  // diloco: the outer optimiser (defaults of the DiLoCo paper).
  double outer_lr = 0.7;                // > 0
  double outer_momentum = 0.9;          // in [0, 1)
  bool outer_nesterov = true;
  bool outer_average_last = true;       // the last step averages the sites' models (OuterOptions)
  // A peer link keeps up while fewer than max_inflight_batches (>= 1) are
  // unacknowledged and the link model would deliver a new batch within
  // max_queue_seconds (> 0). Otherwise asp and all-async keep further
  // updates coalesced per chunk in that peer's backlog until it does. bsp
  // avg and diloco ignore both (they ship everything at once). A small window
  // saves bytes: updates that wait coalesce into fewer, denser batches,
  // whose indexes and values compress better.
  int64_t max_inflight_batches = 2;
  double max_queue_seconds = 0.5;
  // A backlog cut looks at what was added to that peer's backlog since the
  // chunk's last whole look, and at each chunk whole every backlog_revisit
  // cuts (for codec residuals, say); over a link that acknowledges within
  // a clock, not twice within backlog_revisit clocks either
  // (PeerOutbox::AcknowledgesWithinAClock). >= 1, 1 = every cut looks at
  // everything (BacklogCut::revisit).
  int64_t backlog_revisit = 8;
  // When the link's bandwidth is known, a batch is cut to about this much
  // link time; the most significant chunks go first. Seconds, > 0.
  double max_batch_seconds = 0.5;
  int64_t min_batch_bytes = 64 << 10;   // lower bound of that cut, bytes, >= 1024
  // A tick selects, encodes and ships its updates in slices of about this
  // many values (asp, bsp, all-async and the final drain; one batch each),
  // so that the selection, its encodings and the peers' decodings stay
  // bounded however large the shard: 2^21 values hold 16 MiB as indices and
  // values. >= 1024.
  int64_t slice_elements = int64_t{1} << 21;
  // asp: a batch the link needs longer than this to deliver is announced by
  // a selective-barrier notice on the priority lane. Seconds, >= 0.
  double notice_min_seconds = 0.05;
  // asp: false sends no notices at all: a receiver never holds reads for a
  // batch on its way (on links where batches spend hundreds of ms on the
  // wire the holds cost more clocks' time than the fresher values gain).
  bool selective_barrier = true;
  // asp, all-async: a clock report names the last batch sent to that peer,
  // and the peer takes the clock only once that batch is applied (as bsp
  // and the outer-step modes always do). The drift bound then also bounds
  // how old a peer's applied updates may get, not only its reported clock;
  // false (the default): a report counts at once.
  bool tie_reports = false;
  // asp, all-async: a peer is sent a clock report once the shard clock has
  // moved this many clocks past the last one it was sent (1: every clock).
  // On links where a report is one of hundreds of messages a second, each
  // costing a send, a receive and a reply with their thread switches, a
  // report every few clocks spares most of them; the peer's view of this
  // site lags up to this many clocks - 1 more. A report held back goes out
  // anyway once it has waited 100 ms (a site waiting at the drift bound
  // still says where it is). >= 1, at most staleness_ds.
  int64_t report_every_clocks = 1;
  // asp: steer the significance cut-off by the measured links (the design's
  // "optionally steered by measured WAN bandwidth"): every second the link
  // that shipped the most against its bandwidth is compared with this share
  // of it, and a BandwidthController multiplies the cut-off up when that
  // link ships more, down when it ships less. 0 (the default): no steering.
  // In [0, 1]; > 0 needs asp.
  double target_utilization = 0;
  // asp, all-async: a clock report gives the clock through which this
  // shard's selected updates have all left for that peer, not the shard's
  // clock: while updates wait in the peer's backlog (the link fell behind),
  // the report stays at the clock before the oldest of them, and moves on
  // (a report is sent then, tick or not) once a cut has taken everything
  // significant. With tie_reports, the drift bound then bounds the age of
  // every update of a peer a site has applied, backlog included; what sits
  // under the significance cut-off is still not counted. Needs fresh_first.
  bool tie_backlog = false;
  // tie_backlog: waiting updates keep a report back at most this many
  // clocks behind the shard clock; 0 = as long as they wait. Updates that
  // have waited longer no longer count, so that a backlog behind a slow
  // stretch of one link holds the peers at the drift bound for a bounded
  // number of clocks, not for as long as the stretch lasts. >= 0; > 0
  // needs tie_backlog.
  int64_t tie_backlog_clocks = 0;
  // tie_backlog holds only over the training's last this many clocks
  // (threshold.last_clock): before, a report gives the shard clock as with
  // tie_reports alone. Counting what waits costs seconds at every clock it
  // holds, and what it buys is the final model. 0 (the default): the whole
  // run. >= 0; > 0 needs tie_backlog and at most threshold.last_clock.
  int64_t tie_backlog_last_clocks = 0;
  // Whether tie_backlog holds at shard clock k (tie_backlog_last_clocks).
  bool TiesBacklogAt(Clock k) const {
    return tie_backlog && (tie_backlog_last_clocks <= 0 || k > threshold.last_clock - tie_backlog_last_clocks);
  }
  // asp, all-async: a link whose window is open takes a tick's batch
  // directly even while its backlog holds something, as long as that is
  // only the codec's residuals of earlier cuts (PeerOutbox::HasPending),
  // not updates that could not leave. false (the default): any backlog
  // makes the tick's updates wait behind it, and while every link has one
  // the tick holds them in the accumulator. With int4 values nearly every
  // cut leaves residuals behind, so that a link that once fell behind
  // holds every later tick's updates back until the next selection some
  // other link takes.
  bool fresh_first = false;
  // A notice blocks reads of its chunks at most this long, ms, >= 1.
  int64_t notice_timeout_ms = 10000;
  // A peer not heard from for this long leaves the mirror-clock minimum, ms.
  int64_t peer_lease_ms = 30000;
  // asp: a chunk holding unshipped mass for this many clocks is shipped
  // whole at the next tick; 0 = no bound.
  int64_t max_hold_clocks = 0;
  // Out-of-order batches buffered per origin before refusing more (>= 1).
  int64_t max_reorder_batches = 64;

  // The outer optimiser of avg and diloco.
  OuterOptions EffectiveOuter() const;
  // The drift bound the mode implies: -1 for none.
  int64_t EffectiveDs() const;
  // The value codec of regular (non-drain) batches.
  ValueCodec EffectiveCodec() const {
    return mode == WanMode::kAsp || mode == WanMode::kDiloco ? codec : ValueCodec::kFp32;
  }

  Status Validate() const;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_WAN_OPTIONS_H_
