// Replicator: one shard's WAN replication engine. It is the shard's
// ReplicationTap (local updates and clock ticks come in); it owns the
// RemoteInbox, which receives its peers' messages directly (receiver()),
// the MirrorGate that holds local reads, and the OutboundShipper through
// which everything leaves.
//
// Outbound, at every shard clock tick k (on its own thread, so workers'
// clock calls never wait for encoding):
//   1. select from the SignificanceFilter that accumulates local updates,
//      per mode: asp takes what exceeds t(k); bsp and all-async take
//      everything; avg and diloco take everything at multiples of H and
//      nothing else, as this site's contribution to the outer step (its
//      own file, replicator_outer.cc; docs/wan_replication.md);
//   2. encode once with the mode's codec; the residuals go back into the
//      filter (error feedback); steps 1-3 run slice by slice (at most
//      WanOptions::slice_elements values each), so nothing a tick holds
//      grows with the shard;
//   3. per peer: send the batch (sealed under that peer's next seq) when
//      the link keeps up, else add its content to that peer's backlog,
//      where updates coalesce per chunk and leave most significant first
//      when the window opens (PeerOutbox); asp announces a batch the link
//      needs longer than notice_min_seconds for with a selective-barrier
//      notice (steps 2-3 and the backlogs: OutboundShipper);
//   4. report the clock to every peer: in bsp, avg and diloco with the last seq
//      sent, so that the peer takes the clock only once those batches have
//      landed (the barrier covers the updates); in asp and all-async
//      untied, so the mirror clock tracks progress without waiting behind
//      queued batches (ASP bounds drift, not content).
// When every local worker has finished, everything left (filter and
// backlogs) is shipped losslessly (fp32), and the clock report carries the
// drained marker: the peers then know they hold this site's final updates.
// A site's model is final once every peer has drained (WaitFinal).
//
// Disk loss (with stores; asp, bsp, all-async): each store has an
// incarnation (wan_transport.h).
// When a peer comes back as a new incarnation, every site takes its old
// contributions back out and restarts its own stream to it from a snapshot
// of its selected mass (StreamResets, stream_reset.h). The new
// incarnation's workers start over at clock 0, so every update counts
// exactly once; the other sites do not wait for it until it is back within
// DS (MirrorGate).
//
// Crash safety (with a store under the shard): the accumulator, the
// backlogs, the unacknowledged batches and the seqs are journalled
// (OutboundJournal) into the shard's commits, and so is the outer step of
// avg and diloco (OuterJournal); each tick's changes run inside
// ReplicaTarget::RunDurable and its batches go on the wire only after that
// commit is durable. A replicator created over a shard that recovered such
// records restores them and, at Start, resends the unacknowledged batches
// (peers drop what they already applied).
//
// Thread-safety: all public methods may be called from any thread. Lock
// discipline: mu_ guards the filter, the clock and finish marks, pending
// acknowledgements and the stop flag; the tick thread holds it only to
// select from the filter (reading chunk values from the shard under chunk
// locks), to put residuals back and, in a stream reset, to read the
// accumulator while the peer's outbox starts over; never while calling the
// transport (but for Start's resend of restored batches, before the tick
// thread runs). The shipper (outboxes, encoder) and the scratch belong to
// the tick thread. The transport
// must not call back (delivery callback, WanReceiver) while holding a lock
// that its Send* methods take. Order: shard persistence scope -> mu_ ->
// shard chunk locks -> journal; mu_ is never held while opening a
// persistence scope (RunDurable).
#ifndef GEOPS_WAN_REPLICATION_REPLICATOR_H_
#define GEOPS_WAN_REPLICATION_REPLICATOR_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "common/model_spec.h"
#include "common/replication.h"
#include "common/status.h"
#include "wan/codec/codec.h"
#include "wan/replication/bandwidth_controller.h"
#include "wan/replication/clock_reporter.h"
#include "wan/replication/drift_allowance.h"
#include "wan/replication/mirror_gate.h"
#include "wan/replication/outbound_shipper.h"
#include "wan/replication/outer_records.h"
#include "wan/replication/outer_step.h"
#include "wan/replication/outbound_journal.h"
#include "wan/replication/peer_outbox.h"
#include "wan/replication/remote_inbox.h"
#include "wan/replication/significance_filter.h"
#include "wan/replication/stream_reset.h"
#include "wan/replication/threshold_schedule.h"
#include "wan/wan_options.h"
#include "wan/wan_transport.h"

namespace geops::wan {

struct ReplicatorConfig {
  SiteId site = 0;               // this site's id
  ShardId shard = 0;             // for logs
  std::vector<SiteId> peers;     // the other sites (their shard of the same index)
  WanOptions options;
  // The tick loop's idle rounds (and drain retries), the clock period the
  // drift allowance measures, and the gate's peer leases, notices and waits
  // read this time; null: the steady clock (a ManualTime in tests). Must
  // outlive the replicator.
  const TimeSource* time = nullptr;
};

struct PeerReplicationStats {
  SiteId peer = 0;
  uint64_t last_seq = 0;
  OutboxStats out;
  int64_t quarantined_by_peer = 0;  // batches of this site the peer quarantined (it said so in its ack)
};

// What a replicator that restarted from its shard's store did.
struct RecoveryStats {
  bool recovered = false;            // it restored outbound state from the store
  double process_start_unix = 0;     // this process started (seconds since the epoch)
  double state_loaded_unix = 0;      // the shard's state was loaded and the replicator built
  double caught_up_unix = 0;         // own clock back within DS of every live peer's; 0: not yet
  int64_t catch_up_bytes = 0;        // batch bytes received from peers until then
  int64_t batches_resent = 0;        // unacknowledged batches sent again at start
  bool fresh_store = false;          // the store was new: this is a first start or a disk loss
  bool rejoined = false;             // avg, diloco: the store was new and peers held this site's work (Rejoin)
  double rejoined_unix = 0;          // when the merged state was durable; 0: no rejoin
  int64_t rejoin_bytes = 0;          // bytes of the peers' states fetched for it
};

struct ReplicatorStats {
  Clock ticked_clock = 0;
  int64_t ticks = 0;
  int64_t batches_encoded = 0;
  int64_t outer_steps_applied = 0;  // avg, diloco
  int64_t elements_pushed = 0;    // local update values tapped
  int64_t elements_selected = 0;  // values taken out of the filter
  int64_t select_holds = 0;       // ticks (or their later slices) left in the accumulator: every link full
  int64_t reports_sent = 0;       // clock reports the tick loop sent, all peers (a restarted peer's repeat not counted)
  int64_t reports_held = 0;       // reports held back for a later one (WanOptions::report_every_clocks)
  int64_t reports_riding = 0;     // of reports_sent, those that rode with a batch instead of a message of their own
  double threshold_multiplier = 1;  // asp: the steering's factor on the cut-off (WanOptions::target_utilization)
  double select_seconds = 0;
  double encode_seconds = 0;      // encoding selections and sealing or backlogging them per peer
  bool drained = false;           // the final marker has been sent
  int64_t drain_bytes = 0;        // payload bytes the final drain sent, every peer (this process)
  double residual_norm = 0;       // SignificanceFilter::ResidualNorm, when the stats were taken
  int64_t dirty_chunks = 0;       // chunks holding unshipped mass then
  // Copy-on-write of the outbound journal (OutboundJournal::CaptureStats):
  // rows a change reached while their commit was being written.
  int64_t journal_rows_saved = 0;
  int64_t journal_peak_saved_bytes = 0;
  std::vector<PeerReplicationStats> peers;
  InboxStats inbox;
  GateStats gate;
  RecoveryStats recovery;
  uint64_t incarnation = 0;
  std::vector<StreamResetEvent> stream_resets;
};

class Replicator final : public ReplicationTap, public OutboundParticipant {
 public:
  // InvalidArgument for bad options, a peer equal to `site` or repeated, or
  // null target/transport; DataLoss when the shard recovered outbound
  // records that do not decode. `spec`, `target` and `transport` must
  // outlive the replicator. Nothing runs until Start().
  static Result<std::unique_ptr<Replicator>> Create(const ModelSpec* spec, ReplicatorConfig config,
                                                    ReplicaTarget* target, WanTransport* transport);
  // Stops the tick thread.
  ~Replicator() override;
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Registers the delivery callback and starts the tick thread.
  void Start();
  // Stops the tick thread (idempotent). Queued work is dropped.
  void Stop();

  // ReplicationTap.
  void OnLocalUpdate(WorkerId worker, Clock clock, int32_t part, std::span<const ChunkKey> keys,
                     std::span<const float> values) override;
  void OnShardClock(Clock shard_clock, bool all_finished) override;

  // OutboundParticipant: called by the shard's committer.
  DeferredRecords* CollectOutbound(std::vector<OutboundRecord>* puts, std::vector<std::string>* deletes) override;
  void ReleaseOutbound() override;

  // Where the peers' messages go (the mirror service, or a test's network):
  // the inbox itself.
  WanReceiver* receiver() { return &inbox_; }

  // This shard store's incarnation (a new one for a new store).
  uint64_t incarnation() const { return incarnation_; }

  // The shard's read gate.
  MirrorGate* gate() { return &gate_; }

  // Whether every worker of this shard has finished (the drain is under
  // way or done). Before that there is no drain to wait for.
  bool Finished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }
  // Blocks until this site's drain has been sent and every batch is
  // acknowledged by its peer, or the deadline (false).
  bool WaitDrainAcknowledged(Deadline deadline);
  // Blocks until every peer's final updates are applied here, or the
  // deadline (false).
  bool WaitFinal(Deadline deadline) const { return gate_.WaitAllPeersDrained(deadline); }

  ReplicatorStats stats() const;

  // avg, diloco: the synchronised model of `key` after the last outer step
  // applied (identical at every site). FailedPrecondition in other modes,
  // InvalidArgument for a chunk this shard does not hold.
  Result<std::vector<float>> SyncedValue(ChunkKey key) const;
  // avg, diloco: OuterStep::digests(), one per step applied (empty in other
  // modes).
  std::vector<uint64_t> OuterDigests() const;

  // avg, diloco with a new store: blocks until Rejoin (run by Start) is
  // done and the workers' registrations are released, and returns its
  // outcome; OK at once in other cases. For tests and tools: workers need
  // not call it (their registrations wait).
  Status WaitRejoined(Deadline deadline) const;

  // How long a new store's Rejoin asks peers that do not answer.
  static constexpr int64_t kRejoinWaitMs = 30 * 60 * 1000;

  // For tests: the mass not yet delivered to `peer` for chunk `key` (filter
  // plus that peer's backlog), added into *out (resized to the chunk size).
  // REQUIRES: the replicator is stopped.
  void PendingFor(SiteId peer, ChunkKey key, std::vector<double>* out) const;

 private:
  Replicator(const ModelSpec* spec, ReplicatorConfig config, ReplicaTarget* target, WanTransport* transport,
             SignificanceFilter filter, ThresholdSchedule schedule, std::vector<PeerOutbox> outboxes);

  // The inbox's boot listener: a peer process heard for the first time (a
  // start or a restart) gets the last clock report this shard sent it once
  // more: a restarted peer knows no clock of this site (its gate starts
  // every peer at 0), and this site may be waiting for it at the drift
  // bound, or done and drained, and so send no new report by itself.
  // Repeating a report is harmless (clocks only rise; a drained report
  // names the final batch).
  void OnPeerBoot(SiteId origin, uint64_t boot);

  // avg, diloco: the outer step, from the store's state or (a new store)
  // the shard's initial values; called once by Create.
  Status InitOuter(RecoveredOuter outer, bool new_store);
  // Restores outbound state the shard recovered; called once by Create.
  Status Restore(RecoveredOutbound recovered);
  // One round of the tick thread's changes (acks, selection, shipping,
  // backlogs), run inside a persistence scope; messages go to outgoing_.
  void TickChanges(const std::vector<std::pair<SiteId, uint64_t>>& acks, Clock k, bool tick, bool finishing,
                   bool reselect);
  // Resets the streams of peers heard as a new incarnation (tick thread).
  void RunResets();
  // Records the time and bytes when the site is back within DS of its peers.
  void CheckCaughtUp();
  void Loop();
  // Selects this tick's next slice of updates into selected_ per mode,
  // after *slice, and moves *slice past it; true when more of the tick
  // remains (avg and diloco select the whole contribution at once).
  // REQUIRES: mu_ held.
  bool SelectLocked(Clock k, bool finishing, SelectSlice* slice);
  // asp, not finishing: every link is full (OutboundShipper::AllLinksFull),
  // so a slice selected now would only move into the backlogs: it is left
  // in the accumulator instead. Tick thread.
  bool HoldInAccumulator(bool finishing) const { return shipper_.AllLinksFull(finishing); }
  // Ships selected_ (OutboundShipper::Ship); the residuals go back into
  // the filter.
  void ShipSelected(Clock k, bool finishing);
  // avg, diloco: encodes this site's next contribution (selected_, maybe
  // empty), adds it to the outer step and sends it to every peer as the
  // batch whose seq is the step.
  void ShipContribution(Clock k, bool finishing);
  // avg, diloco: a peer's contribution, from the inbox (in seq order).
  Status OnContribution(SiteId origin, uint64_t seq, const DecodedBatch& batch);
  // avg, diloco: a site whose store is new first asks every peer what it
  // holds of this site (docs/wan_replication.md, "A diloco site that lost
  // its disk"). Where no peer ever heard of this site it is a first start
  // and nothing changes. Otherwise this site lost its store: it merges
  // every peer's outer-step state (the furthest synchronised model, and
  // every contribution any of them holds, its own included), goes on with
  // its own contributions after the last one a peer holds, and sets its
  // workers' clocks where that contribution leaves them
  // (ReplicaTarget::ResumeWorkers). Start runs it on the tick thread, with
  // the shard's worker registrations held meanwhile (it answers the peers'
  // questions all along). A peer that does not answer is asked again until
  // `deadline`, then DeadlineExceeded naming it; DataLoss when the peers'
  // states cannot be merged or do not say where the workers resume;
  // FailedPrecondition for a streaming run (outer_fragments > 1), whose
  // contributions leave no single resume point; Cancelled on Stop.
  Status Rejoin(Deadline deadline);
  // avg, diloco, a site that lost its store (replicator_rejoin.cc): a page
  // of this shard's outer state for `origin` (WanReceiver::OnOuterState).
  Result<OuterStatePage> ServeOuterState(SiteId origin, uint64_t incarnation, uint64_t snapshot, int32_t page);
  // Every page of `peer`'s outer state, as one snapshot.
  struct PeerOuter {
    uint64_t heard = 0;  // this site's incarnation the peer last recorded
    bool has_state = false;
    bool joining = false;
    int64_t bytes = 0;   // of the records fetched
    RecoveredOuter outer;
  };
  Result<PeerOuter> FetchPeerOuter(SiteId peer, Deadline deadline);
  // A copy of this shard's outer step, to merge peers' states into (a
  // refusal then changes nothing). REQUIRES: mu_ held.
  Result<std::unique_ptr<OuterStep>> CopyOuterLocked() const;
  // Peers heard as a new incarnation in avg or diloco (tick thread): each
  // is asked for its merged state, which this shard takes in, and this
  // shard's stream to it goes on after what it holds.
  void RunOuterResets();
  // Takes in the state of `peer`, rejoined as `incarnation`. REQUIRES:
  // mu_ held, inside a persistence scope, on the tick thread.
  Status TakeRejoinedLocked(SiteId peer, uint64_t incarnation, const OuterStep::State& state,
                            int64_t* resent);
  // Merges `state` (a peer's) into this shard's outer step: steps it
  // applied are taken applied (the replica follows), contributions it
  // holds are added. REQUIRES: as TakeRejoinedLocked.
  Status TakeStateLocked(const OuterStep::State& state, const std::string& whose);
  // A peer's stream that jumped past contributions it applied (it took
  // this site in after a disk loss, and steps it gave to were applied
  // meanwhile): this shard takes that peer's state to cover the gap (tick
  // thread).
  void RunOuterCatchUps();
  // Some gap is due to be looked at. REQUIRES: mu_ held.
  bool GapDueLocked() const {
    const auto now = time_->Now();
    for (const auto& [peer, gap] : outer_gaps_) {
      if (now >= gap.second) return true;
    }
    return false;
  }
  // Consumes the seqs of `peer`'s stream up to its last contribution
  // given, so that its stream goes on after it (the seq of a contribution
  // is its step).
  void CatchUpSeqs(SiteId peer);
  // The contribution's mark chosen with its selection. REQUIRES: mu_ held.
  void MarkCutLocked(Clock k);
  // Applies every outer step that is complete: the shard's chunks become
  // theta plus this site's unshipped progress. REQUIRES: mu_ held, inside a
  // persistence scope (the tick's, or OnContribution's RunDurable), so that
  // the chunk values and the step's records commit together.
  void ApplyReadyLocked();
  // Tells the gate where the outer steps stand. REQUIRES: mu_ held.
  void PublishOuterLocked();
  // avg, diloco: clocks between two contributions, H / outer_fragments.
  int64_t SyncPeriod() const { return options_.averaging_period / options_.outer_fragments; }
  // Cuts batches from backlogs whose window is open.
  void ServeBacklogs(Clock k, bool finishing);
  const float* LookupValue(ChunkKey key);
  // target_utilization: once a steering interval has passed, feeds the
  // busiest link's bytes to the controller and sets the cut-off's
  // multiplier (tick thread, mu_ not held).
  void Steer(SteadyClock::time_point now);

  // How long a tick (or a peer's contribution) waits for its changes to be
  // durable; a store that slow is treated as failed (nothing of that tick
  // is sent; the contribution is not acknowledged).
  static constexpr int64_t kDurableWaitMs = 30000;
  // How long a gap in a peer's contributions may last before this shard
  // asks that peer for its state (RunOuterCatchUps).
  static constexpr int64_t kGapGraceMs = 2000;

  const ModelSpec* const spec_;
  const ReplicatorConfig config_;
  const WanOptions& options_;
  ReplicaTarget* const target_;
  WanTransport* const transport_;
  const TimeSource* const time_;
  MirrorGate gate_;
  RemoteInbox inbox_;

  mutable std::mutex mu_;
  std::condition_variable cv_;            // tick thread: work arrived
  std::condition_variable drained_cv_;    // drain sent / acknowledged
  SignificanceFilter filter_;             // GUARDED_BY(mu_)
  ThresholdSchedule schedule_;            // GUARDED_BY(mu_)
  DriftAllowance allowance_;              // GUARDED_BY(mu_): asp, the clocks a report spends in delivery
  Clock target_clock_ = 0;                // GUARDED_BY(mu_): largest shard clock heard
  Clock ticked_ = 0;                      // GUARDED_BY(mu_): last clock processed
  Clock last_sync_ = 0;                   // GUARDED_BY(mu_): avg, diloco: last clock shipped at
  bool finished_ = false;                 // GUARDED_BY(mu_)
  bool drained_ = false;                  // GUARDED_BY(mu_)
  bool drain_retry_wait_ = false;         // GUARDED_BY(mu_): the last drain round could not complete
  bool stop_ = false;                     // GUARDED_BY(mu_)
  std::vector<std::pair<SiteId, uint64_t>> acks_;  // GUARDED_BY(mu_)
  std::map<SiteId, int64_t> quarantined_by_peer_;   // GUARDED_BY(mu_)
  std::map<SiteId, uint64_t> boots_;      // GUARDED_BY(mu_): each peer's process, as last heard
  std::vector<SiteId> report_again_;      // GUARDED_BY(mu_): peers to send the last report again
  // target_utilization (tick thread): the controller, when the interval
  // began and each outbox's bytes_sent then.
  std::optional<BandwidthController> steer_;
  std::optional<SteadyClock::time_point> steer_since_;
  std::vector<int64_t> steer_bytes_;
  std::optional<Clock> held_since_;       // tick thread: the first clock whose selection a hold left behind
  Clock selection_since_ = 1;             // tick thread: the first clock the round's selection holds updates of
  bool drain_acked_ = false;              // GUARDED_BY(mu_): drained and nothing in flight
  ReplicatorStats stats_;                 // GUARDED_BY(mu_) (peers, inbox, gate filled on read)
  std::vector<OutboxStats> outbox_stats_; // GUARDED_BY(mu_): copies published by the tick thread
  std::vector<uint64_t> outbox_seq_;      // GUARDED_BY(mu_)
  RecoveryStats recovery_;                // GUARDED_BY(mu_)
  uint64_t incarnation_ = 0;              // set by Create
  bool incarnation_new_ = false;          // set by Create: journalled at Start
  std::vector<std::pair<SiteId, uint64_t>> records_;      // GUARDED_BY(mu_): first-heard incarnations
  StreamResets resets_;                   // thread-safe itself; run by the tick thread
  std::vector<std::pair<SiteId, std::vector<WanBatch>>> resend_;  // restored batches, sent by Start()
  std::unique_ptr<OuterStep> outer_;      // GUARDED_BY(mu_): avg and diloco only
  int64_t own_steps_ = 0;                 // GUARDED_BY(mu_): contributions this site made
  bool own_final_given_ = false;          // GUARDED_BY(mu_)
  bool step_due_ = false;                 // GUARDED_BY(mu_): SelectLocked chose a contribution
  OuterJournal outer_journal_;            // GUARDED_BY(mu_): outer_'s records for the shard's store
  std::vector<float> outer_scratch_;      // GUARDED_BY(mu_): one chunk
  // avg, diloco: per worker, the last batch accumulated (ContributionMark),
  // and the mark of the contribution selected, for ShipContribution.
  std::vector<CoveredBatch> covered_;     // GUARDED_BY(mu_)
  std::optional<ContributionMark> cut_mark_;  // GUARDED_BY(mu_)
  // A new store in avg or diloco: Rejoin has not asked the peers yet.
  bool joining_ = false;                  // GUARDED_BY(mu_)
  bool rejoin_started_ = false;           // GUARDED_BY(mu_): Start runs Rejoin first
  std::optional<Status> rejoined_;        // GUARDED_BY(mu_): Rejoin's outcome, once it ran
  mutable std::condition_variable rejoined_cv_;
  // Snapshots of the outer state being fetched, per asking site.
  struct OuterSnapshot {
    uint64_t id = 0;
    std::vector<std::pair<std::string, std::string>> records;
    std::vector<size_t> page_starts;  // index of each page's first record
  };
  std::map<SiteId, OuterSnapshot> outer_snapshots_;  // GUARDED_BY(mu_)
  uint64_t outer_snapshot_ids_ = 0;                  // GUARDED_BY(mu_)
  // Peers heard as a new incarnation (avg, diloco), waiting for their state,
  // and those whose state was taken in (reported as stream_resets: the
  // heard time, when it was taken, the contributions resent to it).
  std::map<SiteId, uint64_t> outer_resets_;          // GUARDED_BY(mu_)
  std::map<SiteId, double> outer_reset_heard_;       // GUARDED_BY(mu_)
  // Peers whose contribution came early (seq, and when its gap is looked
  // at: after kGapGraceMs, since reordering closes most gaps by itself).
  std::map<SiteId, std::pair<uint64_t, SteadyClock::time_point>> outer_gaps_;  // GUARDED_BY(mu_)
  std::vector<StreamResetEvent> outer_reset_events_; // GUARDED_BY(mu_)
  SteadyClock::time_point outer_reset_retry_{};      // GUARDED_BY(mu_): not asked again before

  // Tick thread only.
  bool resume_pending_ = false;  // a tick held selection after resume_after_: the next starts there
  ChunkKey resume_after_{};
  OutboundShipper shipper_;  // the outboxes, the encoder, what leaves
  ClockReporter reporter_;   // tick thread: the clock reports to each outbox's peer
  // Its own lock; enabled when the shard persists. Declared after the
  // filters it hooks (filter_, the outboxes' backlogs), so it goes first.
  OutboundJournal journal_;
  std::vector<SparseChunkUpdate> selected_;
  std::vector<SparseChunkUpdate> residuals_;
  std::vector<SparseChunkUpdate> shipped_;  // avg, diloco: this site's contribution as peers decode it
  std::vector<float> value_scratch_;  // one chunk, for significance lookups
  ChunkValueLookup lookup_;
  ChunkElementLookup element_lookup_;  // the same, element by element (backlog cuts)

  std::thread thread_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_REPLICATOR_H_
