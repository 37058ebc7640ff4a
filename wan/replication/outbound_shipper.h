// OutboundShipper: everything one shard sends to its peers, behind the
// Replicator's tick loop. It owns the per-peer outboxes (seq numbering,
// batches in flight, backlogs) and the encoder, and decides per peer
// whether a selection goes on the wire or into that peer's backlog.
//
// A selection is encoded once: the body is prepared (and LZ4-compressed)
// once and each peer's batch is sealed under its own header (its own seq,
// SealPrepared); a peer whose link falls behind gets in its backlog exactly
// what a receiver would decode (the encoder's `shipped` output), never a
// decode of this site's own batch. Backlogs are cut into batches when the
// window opens (most significant first); asp announces a batch its link
// needs long for with a selective-barrier notice. avg and diloco send one
// contribution per outer step, whose seq is the step, to every peer in
// step order.
//
// Nothing leaves at once: messages collect in an outgoing list that the
// tick loop hands to the transport (Flush) only after the round's changes
// are durable, or drops (DropOutgoing) when they are not. Every change to a
// backlog, seq or batch in flight is reported to the OutboundJournal.
//
// Batches go to a peer only once its incarnation is known (the inbox has
// heard from it): a batch names the incarnation it is for. Until then its
// updates wait in its backlog (contributions in order in a queue).
//
// Thread-safety: not thread-safe; owned and used by the Replicator's tick
// thread (and by Create/Start before it runs). The transport is only ever
// called from Flush and ResendRestored.
#ifndef GEOPS_WAN_REPLICATION_OUTBOUND_SHIPPER_H_
#define GEOPS_WAN_REPLICATION_OUTBOUND_SHIPPER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time_source.h"
#include "wan/codec/codec.h"
#include "wan/replication/outbound_journal.h"
#include "wan/replication/peer_outbox.h"
#include "wan/replication/remote_inbox.h"
#include "wan/wan_options.h"
#include "wan/wan_transport.h"

namespace geops::wan {

struct ShipperConfig {
  SiteId site = 0;
  ShardId shard = 0;                       // for logs
  const WanOptions* options = nullptr;
  WanTransport* transport = nullptr;       // estimates and, from Flush, sends
  const RemoteInbox* inbox = nullptr;      // each peer's incarnation
  OutboundJournal* journal = nullptr;      // told of every outbound change
  const TimeSource* time = nullptr;        // times acknowledgements and clocks; null: the steady clock
};

class OutboundShipper {
 public:
  // One outbox per peer. REQUIRES: every pointer of `config` set; the
  // pointees outlive the shipper (the journal is only used once Ship and
  // the like are called, so it may be constructed after the shipper).
  OutboundShipper(ShipperConfig config, std::vector<PeerOutbox> outboxes);

  // This store's incarnation, named by every message sent (set once known).
  void set_incarnation(uint64_t incarnation) { incarnation_ = incarnation; }

  // asp, bsp, all-async: encodes `selected` once (the mode's codec; fp32
  // when finishing) and, per peer, seals a batch for it when its link keeps
  // up, or adds the batch's content to its backlog. *residuals receives the
  // codec's error feedback (for the accumulator). On an error nothing was
  // sent or backlogged: the caller still owns all of `selected`. `since`:
  // the first clock whose updates `selected` may hold (a backlog notes it,
  // PeerOutbox::NotePending).
  Result<EncodeStats> Ship(Clock k, Clock since, bool finishing, std::span<const SparseChunkUpdate> selected,
                           std::vector<SparseChunkUpdate>* residuals);
  // Cuts batches from the backlogs whose window is open; `threshold` < 0
  // takes everything (otherwise asp's significance cut-off). `elements`
  // may be null (BacklogCut). Called every round, it also times the
  // shard's clocks (k). A link whose acknowledgements come back within a
  // clock opens its window several times a clock, and each opening asks
  // for a cut: its whole looks are then also spaced by backlog_revisit
  // clocks (BacklogCut::revisit_clocks, PeerOutbox::AcknowledgesWithinAClock).
  void ServeBacklogs(Clock k, bool finishing, float threshold, const ChunkValueLookup* lookup,
                     const ChunkElementLookup* elements);
  // asp, not finishing: every peer is addressable and none can take a
  // batch now (window full, link behind or backlog waiting), so a slice
  // selected now would only move into the backlogs; and one of them will
  // open by itself (an acknowledgement opens a window, a cut takes the
  // updates waiting in a backlog). A backlog that a whole cut found
  // nothing significant in (PeerOutbox::HasPending false) behind an open
  // window opens by nothing: were every link full only that way, a hold
  // would keep the tick's updates in the accumulator until the final
  // drain, so they are selected and join the backlogs instead.
  bool AllLinksFull(bool finishing) const;

  // avg, diloco: encodes this site's contribution to outer step `step`
  // (maybe empty) and queues it for every peer. *shipped receives what the
  // peers will decode (this site adds the same to the step), *residuals the
  // error feedback. On an error nothing was queued. Each peer's copy is
  // journalled at once (its seq, the step, is assigned when it leaves), so
  // a contribution waiting for a peer's link survives a crash.
  // `covered`: the contribution's mark (ContributionMark::covered), or
  // null for none.
  Result<EncodeStats> EncodeContribution(int64_t step, Clock k, bool finishing,
                                         std::span<const SparseChunkUpdate> selected,
                                         std::vector<SparseChunkUpdate>* residuals,
                                         std::vector<SparseChunkUpdate>* shipped,
                                         const std::vector<std::pair<Clock, int32_t>>* covered = nullptr);
  // A contribution as a batch again, for a peer that rejoined after losing
  // its store: `chunks` are what the peers decoded the first time, sealed
  // in fp32 so that they decode to the same bits. Not queued.
  Result<WanBatch> EncodeAgain(int64_t step, Clock k, bool final, std::span<const SparseChunkUpdate> chunks,
                               const std::vector<std::pair<Clock, int32_t>>* covered);
  // avg, diloco: `peer` came back as a new incarnation and holds this
  // site's contributions through step `held`: whatever was in flight or
  // queued for it goes, its stream goes on after seq `held`, and `again`
  // (this site's later contributions, from EncodeAgain) queue for it.
  void RestartContributions(SiteId peer, uint64_t held, std::vector<WanBatch> again);
  // Sends queued contributions, in step order, to every addressable peer.
  void SendContributions(bool finishing);
  // A restored contribution (journalled, beyond the last seq assigned to
  // `peer`) queues again behind the ones restored before it.
  void RestoreContribution(SiteId peer, WanBatch batch) { deferred_[peer].push_back(std::move(batch)); }

  void OnAcked(SiteId peer, uint64_t seq);
  // Restored batches, never acknowledged before a restart, go again at once
  // (not through the outgoing list: they were durable already). Returns how
  // many were sent.
  int64_t ResendRestored(std::vector<std::pair<SiteId, std::vector<WanBatch>>> batches);

  // Hands the outgoing messages to the transport, notices first (they
  // announce batches behind them).
  void Flush();
  // The round was not durable: none of its messages may leave.
  void DropOutgoing() { outgoing_.clear(); }
  // A tied clock report for `peer` made in this round rides with the batch
  // it names (WanBatch::report), when that batch is the last one waiting in
  // the outgoing list for `peer`, for the same incarnations. Returns whether
  // it does; if not, the caller sends it on its own. Call before Flush.
  bool AttachReport(SiteId peer, const WanClockReport& report);

  // Something waits to be sent: a backlog or a queued contribution.
  bool Waiting() const;
  // Nothing waits for `out`'s peer: its backlog and contribution queue are
  // empty.
  bool NothingWaitsFor(const PeerOutbox& out) const;
  // `out` may take a tick's batch directly as far as its window and
  // backlog go (WanOptions::fresh_first); the link's own pace aside.
  bool TakesDirect(const PeerOutbox& out, int64_t window, bool finishing) const;
  bool InFlight() const;
  // Payload bytes of the batches the final drain sent (every peer), since
  // this process started.
  int64_t drain_bytes() const { return drain_bytes_; }
  bool Addressable(const PeerOutbox& out) const { return config_.inbox->Incarnation(out.peer()) != 0; }

  std::vector<PeerOutbox>& outboxes() { return outboxes_; }
  const std::vector<PeerOutbox>& outboxes() const { return outboxes_; }
  PeerOutbox* OutboxFor(SiteId peer);

 private:
  // Batches in flight per peer; 0 = no limit (finishing, bsp, avg, diloco).
  int64_t Window(bool finishing) const;
  int64_t BudgetBytes(SiteId peer, bool finishing) const;
  // The link to out.peer() would deliver `bytes` more within
  // max_queue_seconds, or has nothing in flight (so a long delay alone
  // never stalls it); always true when finishing, or in bsp, avg and diloco.
  bool LinkKeepsUp(const PeerOutbox& out, int64_t bytes, bool finishing) const;
  void MaybeNotice(PeerOutbox& out, uint64_t seq, const std::vector<ChunkKey>& keys, int64_t bytes,
                   bool finishing);
  // A batch leaves: named with both incarnations, journalled, queued;
  // counted in drain_bytes() when `finishing`.
  void Emit(SiteId peer, WanBatch batch, bool finishing);
  // The shard reached clock k now: keeps clock_seconds_.
  void NoteClock(Clock k);

  ShipperConfig config_;
  const WanOptions& options_;
  uint64_t incarnation_ = 0;
  int64_t drain_bytes_ = 0;
  std::vector<PeerOutbox> outboxes_;
  BatchEncoder encoder_;
  PreparedBody body_;
  std::vector<SparseChunkUpdate> shipped_;
  std::vector<ChunkKey> keys_;
  struct Outgoing {
    SiteId peer;
    std::variant<WanBatch, WanNotice> message;
  };
  std::vector<Outgoing> outgoing_;
  // The recent time a clock (an average; 0 until two clocks were seen),
  // and the last clock seen and when.
  double clock_seconds_ = 0;
  Clock last_clock_ = -1;
  SteadyClock::time_point last_clock_at_{};
  // avg, diloco: contributions not sent yet (peer not addressable), in order.
  std::map<SiteId, std::deque<WanBatch>> deferred_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_OUTBOUND_SHIPPER_H_
