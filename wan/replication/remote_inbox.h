// RemoteInbox: the receiving side of one shard's WAN replication, and the
// WanReceiver the shard's mirror service hands messages to directly. It
// takes the messages of every peer (batches, clock reports, notices,
// heartbeats, boots),
// applies batches to the shard exactly once and in seq order per origin,
// and keeps the MirrorGate's view of the peers up to date.
//
//   batch    checked against its header (origin and seq must match the
//            message), decoded in full (wan/codec/codec.h: every count, index and
//            value checked), then applied through ReplicaTarget::ApplyRemote
//            when it is the origin's next seq, or buffered when it arrived
//            early (up to max_reorder per origin, then ResourceExhausted:
//            the sender retries). An early batch is answered Unavailable
//            (not acknowledged) until it is applied: the sender forgets
//            what is acknowledged, and a buffered batch dies with the
//            process. A batch already applied is acknowledged and ignored.
//   clock    taken by the gate once the batches through its last_seq are
//            applied; held back until then (reports can overtake batches).
//   notice   passed to the gate (it ignores notices of applied batches).
//   boot     a peer process heard for the first time: passed to the boot
//            listener (the Replicator sends it its last clock report again).
//
// Incarnations (wan_transport.h): the inbox remembers each origin's
// incarnation. A message from an earlier one, or a batch cut for an earlier
// incarnation of this site, is refused with FailedPrecondition (the sender
// drops it). The first message of a newer one (the origin lost its store)
// asks the listener for a reset of that origin and is answered Unavailable,
// as is everything of that incarnation but heartbeats, until the reset is
// done (ResetOrigin): then the origin's buffers are dropped, its stream
// starts at seq 1 (or, in avg and diloco, goes on after the contributions
// the reset took in), and the gate takes it as rejoining. Once a newer
// incarnation is heard, messages of the older one are refused too: it is
// gone, and what it still had on the way counts nowhere.
//
// Thread-safety: all methods may be called concurrently. mu_ guards the
// reorder buffers and held reports and serialises applies (per shard);
// decoding happens before it is taken. Order: mu_ -> (shard locks inside
// ApplyRemote | gate mutex).
#ifndef GEOPS_WAN_REPLICATION_REMOTE_INBOX_H_
#define GEOPS_WAN_REPLICATION_REMOTE_INBOX_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/model_spec.h"
#include "common/replication.h"
#include "common/status.h"
#include "wan/codec/codec.h"
#include "wan/replication/mirror_gate.h"
#include "wan/wan_transport.h"

namespace geops::wan {

struct InboxStats {
  int64_t batches_applied = 0;
  int64_t batches_duplicate = 0;
  int64_t batches_refused = 0;   // malformed or invalid
  int64_t batches_quarantined = 0;  // valid, but a sum would not be finite: skipped whole
  int64_t batches_buffered = 0;  // arrived ahead of their turn
  int64_t elements_applied = 0;
  int64_t bytes_received = 0;    // batch payload bytes accepted
  int64_t stale_refused = 0;     // messages of an earlier incarnation (either side)
  int64_t origin_resets = 0;     // peers whose streams were reset (they lost their store)
};

class RemoteInbox final : public WanReceiver {
 public:
  // `target` and `gate` must outlive the inbox. `self` is this site's id:
  // messages claiming to come from it are refused.
  RemoteInbox(ReplicaTarget* target, MirrorGate* gate, SiteId self, int64_t max_reorder,
              DecodeLimits limits = {});

  // WanReceiver.
  Status OnBatch(const WanBatch& batch) override;
  Status OnClock(const WanClockReport& report) override;
  Status OnNotice(const WanNotice& notice) override;
  Status OnHeartbeat(SiteId origin, uint64_t incarnation) override;
  void OnPeerBoot(SiteId origin, uint64_t boot) override {
    if (boot_listener_) boot_listener_(origin, boot);
  }
  // Why batch `seq` of `origin` was quarantined by this process; empty when
  // it was not, or is older than the kRememberedQuarantines latest of that
  // origin (the shard's store keeps every one).
  std::string QuarantineOf(SiteId origin, uint64_t seq) const override;
  // Passed to the outer state source (the Replicator), after the origin is
  // checked and its incarnation admitted as a heartbeat's (a newer one
  // cuts the older off: its messages are refused from then on), with mu_
  // held (no batch is applied meanwhile); the base class's answer without
  // a source.
  Result<OuterStatePage> OnOuterState(SiteId origin, uint64_t incarnation, uint64_t snapshot,
                                      int32_t page) override;
  using OuterStateSource = std::function<Result<OuterStatePage>(SiteId, uint64_t, uint64_t, int32_t)>;
  void SetOuterStateSource(OuterStateSource source) { outer_source_ = std::move(source); }
  static constexpr size_t kRememberedQuarantines = 64;

  // Called for every OnPeerBoot. Set before messages arrive.
  using BootListener = std::function<void(SiteId origin, uint64_t boot)>;
  void SetBootListener(BootListener listener) { boot_listener_ = std::move(listener); }
  // Applies what waits of `origin` and takes its held reports, after its
  // seqs moved on outside the inbox (ReplicaTarget::ApplyRemote).
  void Recheck(SiteId origin);
  // Called, with mu_ held, when a batch of `origin` waits for earlier seqs
  // (it came early), or a clock report for batches not applied yet. Set
  // before use; may be empty.
  using GapListener = std::function<void(SiteId origin, uint64_t seq)>;
  void SetGapListener(GapListener listener) { gap_listener_ = std::move(listener); }

  // This site's incarnation (batches cut for another are refused); 0: none.
  void SetOwnIncarnation(uint64_t incarnation);
  // An origin's incarnation as recorded before a restart.
  void RestoreIncarnation(SiteId origin, uint64_t incarnation);
  // Called, with no inbox lock held, when an origin's incarnation is first
  // heard (reset = false: record it) or a newer one is (reset = true: call
  // ResetOrigin). Set before messages arrive.
  using IncarnationListener = std::function<void(SiteId origin, uint64_t incarnation, bool reset)>;
  void SetIncarnationListener(IncarnationListener listener);
  // The first-heard incarnation of `origin` is durably recorded: its
  // batches are taken from now on (until then they are answered
  // Unavailable, so that no batch is applied from a site whose incarnation
  // a restart of this one could forget).
  void ConfirmIncarnation(SiteId origin, uint64_t incarnation);
  // Known incarnation of `origin` (0: none yet).
  uint64_t Incarnation(SiteId origin) const;
  // Resets `origin` to `incarnation`: runs `reset` (which resets the
  // shard's side, ReplicaTarget::ResetOrigin) with no batch being applied,
  // and, when it succeeds, drops the origin's buffered batches and reports,
  // records the incarnation and tells the gate. Nothing changes here when
  // `reset` fails (the listener's caller retries).
  Status ResetOrigin(SiteId origin, uint64_t incarnation, const std::function<Status()>& reset);

  // avg, diloco: a batch goes to `sink` (the outer step) instead of being
  // added to the replica; its seq is consumed once `sink` returns OK (an
  // error refuses the batch, which stays unapplied). Called in seq order
  // per origin, with the inbox lock held; the same (origin, seq) comes again
  // when consuming its seq failed, and must then be taken as a duplicate.
  // Set before messages arrive.
  using BatchSink = std::function<Status(SiteId origin, uint64_t seq, const DecodedBatch& batch)>;
  void SetBatchSink(BatchSink sink) { sink_ = std::move(sink); }

  InboxStats stats() const;

 private:
  struct Origin {
    std::map<uint64_t, DecodedBatch> early;     // seq -> decoded, not yet applicable
    std::vector<WanClockReport> held_reports;   // waiting for their last_seq
    std::map<uint64_t, std::string> quarantined;  // seq -> why; the latest few, for the sender's ack
  };
  Status CheckOrigin(SiteId origin) const;
  // Checks a message's sender incarnation against the known one (see the
  // class comment); heartbeat: a newer one asks for a reset but is OK.
  // Refuses a message made for another incarnation of this site.
  Status CheckDestination(SiteId origin, uint64_t dest_incarnation, const std::string& what);
  // Refuses a message admitted for an incarnation the origin has been
  // reset away from since. REQUIRES: mu_ held.
  Status StillCurrent(SiteId origin, uint64_t incarnation);
  enum class Kind { kBatch, kReport, kHeartbeat };
  Status AdmitIncarnation(SiteId origin, uint64_t incarnation, Kind kind);
  // The answer to a batch that is buffered but not applied yet.
  Status NotYetApplied(const WanBatch& batch, uint64_t last) const;
  // Applies buffered batches of `origin` while the next one is there, then
  // passes due clock reports to the gate. REQUIRES: mu_ held.
  Status DrainLocked(SiteId origin, Origin& o);
  Status ApplyLocked(SiteId origin, uint64_t seq, const DecodedBatch& batch);

  ReplicaTarget* const target_;
  MirrorGate* const gate_;
  const SiteId self_;
  const int64_t max_reorder_;
  const DecodeLimits limits_;

  BatchSink sink_;  // set before use, then read only
  BootListener boot_listener_;  // set before use, then read only
  GapListener gap_listener_;    // set before use, then read only
  OuterStateSource outer_source_;  // set before use, then read only

  mutable std::mutex mu_;
  std::map<SiteId, Origin> origins_;  // GUARDED_BY(mu_)
  IncarnationListener listener_;      // set before use
  std::atomic<int64_t> stale_refused_{0};
  mutable std::mutex incarnation_mu_;  // a leaf lock
  uint64_t own_incarnation_ = 0;                 // GUARDED_BY(incarnation_mu_)
  std::map<SiteId, uint64_t> incarnations_;      // GUARDED_BY(incarnation_mu_): known per origin
  std::map<SiteId, uint64_t> pending_resets_;    // GUARDED_BY(incarnation_mu_): newer ones heard
  std::map<SiteId, uint64_t> unconfirmed_;       // GUARDED_BY(incarnation_mu_): first heard, not yet durable
  std::vector<RemoteChunkDelta> views_;  // GUARDED_BY(mu_)
  InboxStats stats_;                  // GUARDED_BY(mu_)
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_REMOTE_INBOX_H_
