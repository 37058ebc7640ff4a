// PeerOutbox: the outbound state of one shard towards one peer (the same
// shard of another site): its seq numbering, the batches handed to the link
// and not yet acknowledged, and a backlog for when the link falls behind.
//
// While the link keeps up (no backlog, fewer than the window's batches in
// flight) the Replicator sends each tick's shared batch as is. Otherwise the
// tick's shipped content goes into the backlog instead, a per-peer
// SignificanceFilter in which queued updates of the same chunk coalesce, so
// memory stays bounded by one copy of the shard's chunks however slow the
// link (plus one bit per element: which ones came since their chunk was
// last looked at whole). When the window opens, CutFromBacklog() takes what
// is significant among those (among everything in a chunk every
// BacklogCut::revisit cuts; or everything), puts the least significant
// chunks back when the batch
// would exceed its byte budget (most significant first), encodes it, and
// puts the codec's residuals back into the backlog (error feedback). For
// every element: (decoded values sent) + (backlog) == (content given).
//
// Thread-safety: not thread-safe; owned and used by the Replicator's tick
// thread.
#ifndef GEOPS_WAN_REPLICATION_PEER_OUTBOX_H_
#define GEOPS_WAN_REPLICATION_PEER_OUTBOX_H_

#include <cstdint>
#include <optional>
#include <map>
#include <span>
#include <vector>

#include "common/deadline.h"
#include "common/ids.h"
#include "common/status.h"
#include "wan/codec/codec.h"
#include "wan/replication/significance_filter.h"
#include "wan/wan_transport.h"

namespace geops::wan {

struct OutboxStats {
  int64_t batches_sent = 0;
  int64_t bytes_sent = 0;          // encoded batch bytes handed to the link
  int64_t elements_sent = 0;       // values carried
  int64_t batches_acked = 0;
  int64_t backlog_batches = 0;     // batches cut from the backlog
  int64_t backlog_scans = 0;       // significance scans of the backlog made for cuts
  int64_t backlog_elements_scanned = 0;  // floats those scans visited
  int64_t backlog_scans_clock_spaced = 0;  // of those, scans whose whole looks were spaced in clocks
  double ack_seconds = 0;          // PeerOutbox::ack_seconds() at the last acknowledgement
  int64_t backlog_trimmed = 0;     // cuts that left less significant chunks behind
  int64_t notices_sent = 0;
  int64_t max_backlog_chunks = 0;  // largest number of chunks waiting at once
};

struct BacklogCut {
  SiteId origin = 0;
  Clock clock = 0;
  ValueCodec codec = ValueCodec::kFp32;
  bool compress = true;
  // Significance cut-off against the chunk values; < 0 takes everything.
  float threshold = -1.0f;
  int64_t budget_bytes = 0;  // rough size bound of the batch; 0 = none
  const ChunkValueLookup* lookup = nullptr;  // may be null: |w| taken as 0
  // The values of single elements, for looks at part of a chunk; may be
  // null (lookup is used then).
  const ChunkElementLookup* elements = nullptr;
  // Most values taken out of the backlog for one cut before the trim to
  // the budget (0: no limit). Successive cuts move on through the chunks
  // (in key order, wrapping around), so that what a cut holds stays bounded
  // however large the backlog.
  int64_t max_elements = 0;
  // A cut looks, in each chunk, only at what was added to the backlog since
  // the chunk was last looked at whole, and at each chunk whole every
  // `revisit` cuts (SignificanceFilter::SelectFresh): what was not
  // significant at the last whole look and has not come again (the codec's
  // residuals, say) is looked at again within that many cuts (or
  // revisit_clocks clocks, if longer). <= 1: every cut looks at everything.
  int64_t revisit = 1;
  // > 0: no chunk is looked at whole twice within this many clocks either
  // (a link whose window opens several times a clock).
  int64_t revisit_clocks = 0;
};

class PeerOutbox {
 public:
  // InvalidArgument for bad filter options.
  static Result<PeerOutbox> Create(SiteId peer, SignificanceFilterOptions options);

  SiteId peer() const { return peer_; }
  uint64_t last_seq() const { return last_seq_; }
  uint64_t AssignSeq() { return ++last_seq_; }
  // After a restart: the last seq assigned before it.
  void RestoreSeq(uint64_t seq) { last_seq_ = seq; }
  int64_t inflight() const { return static_cast<int64_t>(inflight_.size()); }
  bool backlogged() const { return backlog_.dirty_chunks() > 0; }
  // No backlog and fewer than `window` batches in flight (window <= 0: no limit).
  bool CanSendDirect(int64_t window) const { return !backlogged() && (window <= 0 || inflight() < window); }
  bool WindowOpen(int64_t window) const { return window <= 0 || inflight() < window; }

  // The peer lost its store: its stream starts over at seq 1. Forgets the
  // batches in flight and the seq, and moves the backlog out into *old.
  void ResetStream(std::vector<SparseChunkUpdate>* old);
  std::vector<uint64_t> InflightSeqs() const;

  void OnSent(uint64_t seq, int64_t bytes, int64_t elements);
  // The batch `seq` left at `at` (it was handed to the link); its
  // acknowledgement then times the round trip (ack_seconds).
  void StampSent(uint64_t seq, SteadyClock::time_point at);
  // `at`: when the acknowledgement came; none for an untimed one.
  void OnAcked(uint64_t seq, std::optional<SteadyClock::time_point> at = std::nullopt);
  // A moving average of the time from a batch leaving to its
  // acknowledgement (the receiver's apply included); 0 before the first.
  double ack_seconds() const { return ack_seconds_; }
  // A fast link: acknowledgements come back within a clock of
  // `clock_seconds`, so a window of `window` batches opens `window` times a
  // clock or more, and each opening asks for a cut. False while either is
  // unknown (0) or without a window. (A link whose round trip spans
  // clocks, even a few, is not fast: while its site waits at the drift
  // bound its window may open several times within one clock, and the
  // whole looks those openings make are what they should be.)
  bool AcknowledgesWithinAClock(int64_t window, double clock_seconds) const {
    return window > 0 && clock_seconds > 0 && ack_seconds_ > 0 && ack_seconds_ < clock_seconds;
  }
  void CountNotice() { ++stats_.notices_sent; }

  // Adds `updates` to the backlog. InvalidArgument (nothing added for that
  // chunk) for a chunk whose size differs from before or a bad value.
  Status AddToBacklog(std::span<const SparseChunkUpdate> updates);
  // The updates just added to the backlog were given to the shard from
  // clock `k` on (WanOptions::tie_backlog). Until a cut takes everything
  // significant again, SentThrough() stays below k.
  void NotePending(Clock k);
  // The clock through which every update this outbox was given at a tick
  // has left for the peer (sent, or left behind as not significant), at
  // shard clock `k`: k when nothing waits in the backlog, otherwise one
  // less than the first clock NotePending named for what waits. What
  // a restart or a stream reset puts back in the backlog is not counted.
  Clock SentThrough(Clock k) const;
  // Updates given at a tick wait in the backlog (not only the codec's
  // residuals of what was cut): NotePending was called since the last cut
  // that took everything significant.
  bool HasPending() const { return backlogged() && pending_since_.has_value(); }

  // Cuts one batch from the backlog (see the class comment) and assigns it
  // the next seq; nullopt when nothing qualifies. `keys` receives the
  // batch's chunks. On an encoding error everything taken goes back.
  Result<std::optional<WanBatch>> CutFromBacklog(const BacklogCut& cut, std::vector<ChunkKey>* keys);

  const SignificanceFilter& backlog() const { return backlog_; }
  // For the outbound journal's copy-on-write capture (CapturedRows).
  SignificanceFilter* mutable_backlog() { return &backlog_; }
  const OutboxStats& stats() const { return stats_; }

 private:
  PeerOutbox(SiteId peer, SignificanceFilter backlog, float value_floor)
      : peer_(peer), backlog_(std::move(backlog)), value_floor_(value_floor) {}
  // Puts the least significant chunks of *taken back until the rest fits.
  void TrimToBudget(const BacklogCut& cut, std::vector<SparseChunkUpdate>* taken);

  SiteId peer_;
  SignificanceFilter backlog_;
  float value_floor_;  // the significance's floor on |w| (SignificanceFilterOptions::value_epsilon)
  BatchEncoder encoder_;
  uint64_t last_seq_ = 0;
  // Batches in flight and when each left (StampSent; unset: not timed).
  std::map<uint64_t, std::optional<SteadyClock::time_point>> inflight_;
  double ack_seconds_ = 0;
  std::vector<SparseChunkUpdate> taken_;
  SelectSlice next_;  // where the next limited cut starts
  std::optional<Clock> pending_since_;  // NotePending's first clock since the last whole cut
  std::vector<SparseChunkUpdate> residuals_;
  OutboxStats stats_;
};

// Rough encoded size of updates in `codec` (values + one index byte each +
// the chunk record), for budgets; no LZ4 gain assumed.
int64_t EstimateEncodedBytes(std::span<const SparseChunkUpdate> updates, ValueCodec codec);

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_PEER_OUTBOX_H_
