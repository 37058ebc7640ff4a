// ShardPersister: writes one shard's state to its ShardStore, grouping the
// changes of many concurrent calls into one commit (group commit).
//
// Every change to persistent state (an applied update batch, a clock
// advance, an applied WAN batch) runs inside a Mutation scope and marks what
// it changed: chunks by local index, workers by id, origin sequence numbers. Finishing the scope hands back a ticket. A
// background committer takes a commit when one is asked for: it waits until
// no Mutation is open (new ones wait to begin), captures the marked chunks
// (copy-on-write: CapturedChunks) and copies the worker records, lets
// mutations go on, and writes the capture to the store as one atomic commit. So a commit holds exactly the mutations whose tickets
// are <= its own, and a worker's "already applied" mark travels in the same
// commit as the chunk values it covers. AwaitDurable(ticket) blocks until a
// commit holding the ticket is written; callers that arrive while a commit is
// being written share the next one, so many updates share one fsync.
//
// A failed commit is sticky: the persister stops committing, and failure()
// and every later wait return Unavailable naming the store's error. What was
// acknowledged before stays durable; the process should be restarted.
//
// Thread-safety: all methods may be called concurrently. Lock discipline:
//   barrier_mu_  guards active_, copying_, seq_ (the Mutation barrier); held
//                only briefly, never while copying or writing.
//   state_mu_    guards requested_, durable_, stop_, failure_ and stats_;
//                never held while calling the store.
//   origin_mu_   guards origin_marks_ and the pending ledger changes; a
//                leaf lock.
//   participant_mu_ guards the outbound participant and which one the
//                commit in flight reads; a leaf lock.
// The committer marks chunks under their own locks while copying_ keeps
// mutations out, and reads them under their own locks while it writes; it calls the ClockTracker (its own mutex) with no lock held.
// Order: a caller's locks (the shard's per-worker mutex) -> barrier_mu_ |
// state_mu_; barrier_mu_ and state_mu_ are never held together.
#ifndef GEOPS_DATACENTER_SHARD_PERSISTER_H_
#define GEOPS_DATACENTER_SHARD_PERSISTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "common/deadline.h"
#include "common/histogram.h"
#include "common/ids.h"
#include "common/replication.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "datacenter/captured_chunks.h"
#include "datacenter/chunk_store.h"
#include "datacenter/clock_tracker.h"

namespace geops::datacenter {

struct PersisterStats {
  int64_t commits = 0;        // commits written by this process
  int64_t bytes = 0;          // chunk payload bytes committed
  double seconds = 0;         // time spent in ShardStore::Commit
  double max_seconds = 0;     // the slowest commit
  int64_t chunks_saved = 0;      // chunks changed while their commit was written (copied first)
  int64_t peak_saved_bytes = 0;  // most bytes of such copies held at once
  HistogramSnapshot commit_latency;  // per commit
};

class ShardPersister {
 public:
  // `store`, `chunks` and `tracker` must outlive the persister.
  ShardPersister(ShardStore* store, ChunkStore* chunks, ClockTracker* tracker, ShardId shard,
                 int num_workers);
  // Commits what is still marked (unless failed), then stops the committer.
  // REQUIRES: no Mutation open and no call in progress.
  ~ShardPersister();
  ShardPersister(const ShardPersister&) = delete;
  ShardPersister& operator=(const ShardPersister&) = delete;

  void Start();

  // A scope in which a caller changes persistent state. Move-only.
  class Mutation {
   public:
    Mutation(Mutation&& other) noexcept : p_(other.p_), marked_(other.marked_) { other.p_ = nullptr; }
    Mutation& operator=(Mutation&&) = delete;
    ~Mutation() { Finish(); }
    void MarkChunk(int64_t local);
    void MarkWorker(WorkerId worker);
    // Records that the WAN batch `seq` from site `origin` is applied; the
    // commit holding this scope's chunks holds the seq too.
    void MarkOrigin(SiteId origin, uint64_t seq);
    // Sets the last applied seq of `origin` back to 0 (a new incarnation
    // of that site starts its stream again).
    void ForgetOrigin(SiteId origin);
    // Adds a WAN delta to the ledger of its origin in the commit holding
    // this scope (after any clear of that origin made earlier).
    void AddLedger(LedgerAdd add);
    // Removes the whole ledger of `origin` in the commit holding this scope.
    void ClearLedger(SiteId origin);
    // Keeps a quarantined WAN batch in the commit holding this scope.
    void Quarantine(QuarantineRecord record);
    // The outbound participant changed its state in this scope: the scope
    // gets a ticket, and the commit holding it collects the participant's
    // records.
    void MarkOutbound() { marked_ = true; }
    // Ends the scope. Returns the ticket of its changes, 0 when nothing was
    // marked (or when already finished).
    uint64_t Finish();

   private:
    friend class ShardPersister;
    explicit Mutation(ShardPersister* p) : p_(p) {}
    ShardPersister* p_;
    bool marked_ = false;
  };
  // Opens a Mutation; waits while a commit captures state (marks the
  // chunks, copies the small records).
  Mutation Begin();

  // Asks for a commit holding `ticket`, without waiting.
  void RequestCommit(uint64_t ticket);
  // Asks for a commit holding `ticket` and waits for it to be written. OK at
  // once for ticket 0 or an already durable ticket. Unavailable when the
  // deadline passes first, or once a commit has failed.
  Status AwaitDurable(uint64_t ticket, Deadline deadline);
  // Commits everything marked so far and waits for it (as AwaitDurable).
  Status Flush(Deadline deadline);
  // Marks every chunk and worker, for a store's first commit.
  void MarkEverything();

  // Every later capture asks `participant` for its changed records (see
  // common/replication.h); nullptr: none. Waits while a commit still reads
  // records of the participant before (so that, once this returns, the
  // old participant is never called again).
  void SetOutboundParticipant(OutboundParticipant* participant);

  // OK, or the sticky failure of a commit.
  Status failure() const;
  PersisterStats stats() const;

 private:
  void CommitterLoop();
  // Takes one commit of what is marked and writes it; records the outcome.
  void CommitOnce();
  // Copies the marked state into commit_; returns the last ticket it holds.
  uint64_t Capture();

  ShardStore* const store_;
  ChunkStore* const chunks_;
  CapturedChunks captured_;  // the chunks of the commit being written
  ClockTracker* const tracker_;
  const ShardId shard_;
  const int num_workers_;

  // Marks, set by mutations and cleared by the capture (which runs while no
  // mutation is open).
  std::unique_ptr<std::atomic<uint8_t>[]> chunk_marked_;
  std::unique_ptr<std::atomic<uint8_t>[]> worker_marked_;
  std::mutex origin_mu_;
  std::map<SiteId, uint64_t> origin_marks_;  // GUARDED_BY(origin_mu_)
  std::vector<SiteId> ledger_clears_;        // GUARDED_BY(origin_mu_)
  std::vector<LedgerAdd> ledger_adds_;       // GUARDED_BY(origin_mu_)
  std::vector<QuarantineRecord> quarantined_;  // GUARDED_BY(origin_mu_)
  std::mutex participant_mu_;
  std::condition_variable participant_cv_;
  OutboundParticipant* participant_ = nullptr;  // GUARDED_BY(participant_mu_)
  OutboundParticipant* collected_ = nullptr;    // GUARDED_BY(participant_mu_): read by the commit in flight

  std::mutex barrier_mu_;
  std::condition_variable barrier_cv_;
  int active_ = 0;        // GUARDED_BY(barrier_mu_): open mutations
  bool copying_ = false;  // GUARDED_BY(barrier_mu_): a capture keeps mutations out
  uint64_t seq_ = 0;      // GUARDED_BY(barrier_mu_): last ticket handed out

  mutable std::mutex state_mu_;
  std::condition_variable work_cv_;     // the committer waits for requests
  std::condition_variable durable_cv_;  // callers wait for durable_
  uint64_t requested_ = 0;  // GUARDED_BY(state_mu_): highest ticket asked for
  uint64_t durable_ = 0;    // GUARDED_BY(state_mu_): every ticket <= durable_ is written
  bool stop_ = false;       // GUARDED_BY(state_mu_)
  Status failure_;          // GUARDED_BY(state_mu_)
  PersisterStats stats_;    // GUARDED_BY(state_mu_)
  Histogram commit_hist_;   // lock-free

  ShardCommit commit_;  // committer thread only
  std::thread committer_;
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_SHARD_PERSISTER_H_
