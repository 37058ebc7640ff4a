// OutboundJournal: the part of a Replicator's state that must survive a
// crash of its site, as records for the shard's store
// (common/replication.h: OutboundParticipant), and the bookkeeping of which
// records changed since the last commit.
//
// A site's outbound state is everything it acknowledged locally but has not
// yet had applied by every peer:
//   accumulator   local mass not yet selected (SignificanceFilter), one
//                 float row per chunk;
//   backlog       per peer: selected mass waiting for the link (PeerOutbox),
//                 one float row per chunk;
//   batches       per peer: encoded batches handed to the link and not yet
//                 acknowledged, by seq;
//   last seq      per peer: the last seq assigned.
// The shard commits these records in the same WriteBatch as the chunk
// values they go with (the tap runs inside the update's persistence scope,
// the Replicator's tick inside ReplicaTarget::RunDurable), and a batch goes
// on the wire only once the commit holding it is durable. So after a crash,
// for every peer P and element: local updates == (applied at P) + (batches
// > P's last applied seq) + backlog(P) + accumulator, and the restarted
// site resends those batches (P drops the ones it has) and ships the rest.
//
// Record layout (keys sort by kind, then big-endian ids; values
// little-endian), in the store's `outbox` column family:
//   'a' table:u32be chunk:u32be            -> f32[num_elements] accumulator row
//   'b' peer:u32be table:u32be chunk:u32be -> f32[num_elements] backlog row
//   'o' peer:u32be seq:u64be               -> the batch as on the wire
//   's' peer:u32be                         -> u64 last seq assigned
//   'i'                                    -> u64 this store's incarnation
//   'k' peer:u32be                         -> u64 the peer's incarnation last heard
// A row that becomes all zeros is deleted; so is a batch once acknowledged.
// avg and diloco add their outer state's records (outer_records.h) and
// journal a contribution's batch to each peer as soon as it is encoded,
// also while it waits for that peer's link (its seq is the step, assigned
// when it leaves).
//
// Accumulator and backlog rows are not copied at the capture: Collect()
// marks them (CapturedRows, copy-on-write) and hands them to the commit as
// DeferredRecords, which the store reads from the live filters as it writes
// them; Release() ends that once the commit is written (or failed).
//
// Thread-safety: the change marks take an internal mutex (a leaf lock), so
// they may be called from any thread. Collect() must not run concurrently
// with changes to the rows it reads (the caller's persistence scope ensures
// that); the DeferredRecords methods and Release() run in the committer
// while the filters' owner goes on (CapturedRows).
#ifndef GEOPS_WAN_REPLICATION_OUTBOUND_JOURNAL_H_
#define GEOPS_WAN_REPLICATION_OUTBOUND_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "wan/replication/captured_rows.h"
#include "wan/replication/outer_records.h"
#include "wan/replication/significance_filter.h"
#include "wan/codec/sparse_update.h"
#include "wan/wan_transport.h"

namespace geops::wan {

// The outbound state decoded from a store's records.
struct RecoveredOutbound {
  std::vector<SparseChunkUpdate> accumulator;                   // non-zero entries per chunk
  std::map<SiteId, std::vector<SparseChunkUpdate>> backlogs;    // per peer
  std::map<SiteId, std::vector<WanBatch>> batches;              // per peer, seq order
  std::map<SiteId, uint64_t> last_seq;                          // per peer
  uint64_t incarnation = 0;                                     // 0: none recorded
  std::map<SiteId, uint64_t> peer_incarnations;                 // per peer
  RecoveredOuter outer;                                         // avg, diloco (outer_records.h)
  // No outbound state (incarnations are not state to restore).
  bool empty() const {
    return accumulator.empty() && backlogs.empty() && batches.empty() && last_seq.empty() && !outer.present;
  }
};

// What the outbound records of a store hold, per peer; for `geops inspect`
// (needs no model).
struct OutboundSummary {
  struct Peer {
    int64_t backlog_rows = 0;     // chunks with mass waiting for the link
    int64_t batches = 0;          // unacknowledged batches
    int64_t batch_bytes = 0;
    uint64_t first_seq = 0;       // of the unacknowledged batches; 0: none
    uint64_t last_assigned = 0;   // last seq assigned towards the peer
    uint64_t incarnation = 0;     // of the peer, last heard; 0: none recorded
  };
  uint64_t incarnation = 0;       // of the store; 0: none recorded
  int64_t accumulator_rows = 0;   // chunks with local mass not yet selected
  int64_t outer_records = 0;      // avg, diloco: the outer step's state (outer_records.h)
  int64_t unknown = 0;            // records of no known kind
  std::map<SiteId, Peer> peers;

  static OutboundSummary Of(std::span<const OutboundRecord> records);
};

class OutboundJournal final : public DeferredRecords {
 public:
  // Disabled until enabled: a site without a store records nothing.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  void AccumulatorChanged(ChunkKey key);
  void BacklogChanged(SiteId peer, ChunkKey key);
  // `batch` (with its seq) is handed to the link: kept until acknowledged.
  void BatchSent(SiteId peer, const WanBatch& batch);
  void BatchAcked(SiteId peer, uint64_t seq);
  void LastSeqChanged(SiteId peer, uint64_t last_seq);
  void IncarnationChanged(uint64_t incarnation);
  void PeerIncarnationChanged(SiteId peer, uint64_t incarnation);

  // Appends the small records changed since the last call, and captures
  // the changed rows of `accumulator` and `backlog(peer)` (nullptr: the
  // peer's rows are gone: deleted). Returns the captured rows, to be read
  // as the store writes them (this journal; nullptr when none), valid until
  // Release(). The filters must outlive the journal.
  DeferredRecords* Collect(SignificanceFilter* accumulator,
                           const std::function<SignificanceFilter*(SiteId)>& backlog,
                           std::vector<OutboundRecord>* puts, std::vector<std::string>* deletes);
  // The commit that Collect() fed is written or failed: forgets its rows.
  void Release();

  // Rows a change reached before the store read them (copied first, so the
  // commit still holds them as captured), since the start; and the sum over
  // the filters of the most bytes of such copies each held at once (an
  // upper bound on what the journal held at once).
  struct CaptureStats {
    int64_t rows_saved = 0;
    int64_t peak_saved_bytes = 0;
  };
  CaptureStats capture_stats() const;

  // DeferredRecords: the rows of the last Collect().
  size_t size() const override { return rows_.size(); }
  const std::string& key(size_t i) const override { return rows_[i].record; }
  bool Read(size_t i, std::string* value) override { return rows_[i].from->Read(rows_[i].key, value); }


  // Decodes the records of a store. DataLoss naming the record for a key
  // or value that does not parse, a chunk the model does not have, a row of
  // the wrong size or holding NaN/Inf, or a batch whose header disagrees
  // with its key (origin `self`, seq).
  static Result<RecoveredOutbound> Decode(std::span<const OutboundRecord> records, const ModelSpec& spec,
                                          SiteId self);

 private:
  bool enabled_ = false;
  mutable std::mutex mu_;
  std::set<ChunkKey> accumulator_;                     // GUARDED_BY(mu_)
  std::set<std::pair<SiteId, ChunkKey>> backlog_;      // GUARDED_BY(mu_)
  std::map<std::pair<SiteId, uint64_t>, std::vector<uint8_t>> sent_;  // GUARDED_BY(mu_)
  std::set<std::pair<SiteId, uint64_t>> acked_;        // GUARDED_BY(mu_)
  std::map<SiteId, uint64_t> seqs_;                    // GUARDED_BY(mu_)
  uint64_t incarnation_ = 0;                           // GUARDED_BY(mu_): 0: unchanged
  std::map<SiteId, uint64_t> peer_incarnations_;       // GUARDED_BY(mu_)

  // Committer only (Collect .. Release).
  struct CapturedRow {
    std::string record;   // the record's key
    CapturedRows* from;
    ChunkKey key;
  };
  std::vector<CapturedRow> rows_;
  // Made under mu_ (Collect), so capture_stats() may read them under it.
  std::unique_ptr<CapturedRows> accumulator_rows_;                  // hooked at the first Collect
  std::map<SiteId, std::unique_ptr<CapturedRows>> backlog_rows_;   // per peer, likewise
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_OUTBOUND_JOURNAL_H_
