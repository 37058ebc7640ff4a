// The seam between a shard (datacenter/) and the WAN layer (wan/), so that
// neither includes the other; the site process wires them together.
//
//   ReplicationTap   the shard tells the WAN layer what happened locally:
//                    each applied local update batch (never a duplicate,
//                    never a remote delta, so nothing echoes back) and each
//                    advance of its clock.
//   ReadGate         the WAN layer may hold local reads back: while the
//                    site runs too far ahead of its slowest mirror, while a
//                    requested chunk is under a selective-barrier notice,
//                    and, once every local worker finished, until every
//                    peer's final updates have landed.
//   ReplicaTarget    what the WAN layer needs from a shard: apply a remote
//                    batch exactly once per (origin, seq), in order per
//                    origin; read a chunk's current value.
//   RemoteChunkDelta a sparse delta to one chunk, as views (no ownership).
//   OutboundParticipant  the WAN layer's outbound state (accumulated local
//                    mass, per-peer backlogs, unacknowledged batches) rides
//                    in the shard's commits, so a site that restarts from
//                    its store has lost nothing it acknowledged and repeats
//                    nothing a peer applied.
//
// Thread-safety: implementations of all three interfaces must accept calls
// from many threads at once. A tap is called from the shard's request
// threads with no shard lock held except the calling worker's own update
// lock (so a tap must never call back into the shard's Update or
// AdvanceClock). A gate is called from reader threads with no shard lock
// held.
#ifndef GEOPS_COMMON_REPLICATION_H_
#define GEOPS_COMMON_REPLICATION_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/ids.h"
#include "common/shard_store.h"
#include "common/status.h"

namespace geops {

struct RemoteChunkDelta {
  ChunkKey key;
  uint32_t num_elements = 0;            // floats in the whole chunk
  std::span<const uint32_t> indices;    // strictly increasing, each < num_elements
  std::span<const float> values;        // values[i] adds to element indices[i]
};

class ReplicationTap {
 public:
  virtual ~ReplicationTap() = default;

  // A local update batch of worker `worker` at its clock `clock` (part
  // `part` of that clock's update; WorkerRecord) was
  // applied: `values` holds the chunks `keys` back to back,
  // ModelSpec::ChunkElements floats each, all finite. Called once per
  // applied batch, after it is in the shard, before the Update returns,
  // inside the shard's persistence scope for the batch: what the tap
  // records commits with the batch (see OutboundParticipant).
  virtual void OnLocalUpdate(WorkerId worker, Clock clock, int32_t part, std::span<const ChunkKey> keys,
                             std::span<const float> values) = 0;

  // The shard clock is now `shard_clock`; `all_finished` is true once every
  // worker of the site has finished. Calls may race: a later call can carry
  // a smaller clock than an earlier one (the tap keeps the largest). When it
  // is called for clock k, every local update of clocks < k has already
  // been passed to OnLocalUpdate.
  virtual void OnShardClock(Clock shard_clock, bool all_finished) = 0;
};

class ReadGate {
 public:
  virtual ~ReadGate() = default;

  // Blocks until a local read of `keys` may be served, or `deadline`, then
  // DeadlineExceeded naming what held it. `shard_clock` is the shard clock
  // the read was admitted at and `site_finished` whether every worker of
  // the site had finished then (the gate takes both as news, so it never
  // lags the shard). Adds the time waited to *waited (also on failure). OK
  // at once when nothing holds the chunks.
  virtual Status WaitReadable(std::span<const ChunkKey> keys, Clock shard_clock, bool site_finished,
                              Deadline deadline, double* waited) = 0;
  // Blocks a worker's advance to `new_clock` (the end of its iteration
  // new_clock - 1) until it may happen, or `deadline`, then
  // DeadlineExceeded naming what held it (the worker retries). Adds the
  // time waited to *waited. The default holds nothing.
  virtual Status WaitAdvance(Clock /*new_clock*/, Deadline /*deadline*/, double* /*waited*/) {
    return Status::Ok();
  }
  // Ends every wait, now and later, with Unavailable(why) (the shard stops).
  virtual void Interrupt(const std::string& why) = 0;
};

// One chunk of a site's own cumulative mass (ReplicaTarget::ResetOrigin).
struct ChunkMass {
  ChunkKey key;
  std::vector<float> values;  // ChunkElements floats
};

// Outcome of one ApplyRemote.
struct RemoteApplyResult {
  bool applied = false;  // false: (origin, seq) was applied before, or quarantined; nothing changed
  int64_t elements = 0;  // values added
  // The batch was valid but adding it would have made a stored value NaN or
  // infinite: nothing was applied, its seq is consumed (the stream goes on
  // with seq + 1) and `quarantine` says where and why.
  bool quarantined = false;
  std::string quarantine;
};

class OutboundParticipant {
 public:
  virtual ~OutboundParticipant() = default;

  // Called by the shard's committer while no change to persistent state is
  // in progress (no OnLocalUpdate and no ReplicaTarget::RunDurable body
  // runs): appends the records that changed since the last call, so that
  // the commit holds the outbound state as of exactly the changes it holds.
  // Records too large to copy there come back as DeferredRecords, read by
  // the store as it writes them (nullptr: none); they stay valid until
  // ReleaseOutbound(), which the committer calls once the commit has been
  // written or has failed.
  virtual DeferredRecords* CollectOutbound(std::vector<OutboundRecord>* puts, std::vector<std::string>* deletes) = 0;
  virtual void ReleaseOutbound() {}
};

class ReplicaTarget {
 public:
  virtual ~ReplicaTarget() = default;

  // Makes `participant` part of every later commit. Returns true when the
  // shard persists (it has a store), false when there is nothing to persist
  // into (the participant is then never called). Call before Start.
  virtual bool SetOutboundParticipant(OutboundParticipant* participant) = 0;

  // Runs `change` as one change to persistent state (its outbound records
  // and any shard changes commit together) and waits until it is as durable
  // as the store's durability setting makes commits (sync: on stable
  // storage). Without a store, just runs it. Unavailable when the deadline
  // passes or the store failed; `change` has run in any case.
  virtual Status RunDurable(const std::function<void()>& change, Deadline deadline) = 0;

  // The outbound records the shard loaded from its store (empty for a new
  // or non-persistent shard); moved out by the first call.
  virtual std::vector<OutboundRecord> TakeRecoveredOutbound() = 0;

  // Adds `deltas` (the batch `seq` from site `origin`) to the replica,
  // exactly once: seq must be the last applied seq of `origin` + 1 (the
  // first batch of an origin has seq 1); seq <= last is a duplicate
  // (applied=false, nothing changes); a gap is FailedPrecondition. The whole
  // batch is validated before anything changes: InvalidArgument for an
  // unknown or foreign chunk, a chunk named twice, num_elements that differ
  // from the chunk's size, indices not strictly increasing or out of range,
  // indices and values of different lengths, or a NaN/Inf value. A valid
  // batch whose sum with the replica would not be finite is quarantined
  // whole (RemoteApplyResult::quarantined): nothing is added, its seq is
  // consumed and durable like an applied one, so the stream never waits on
  // it (docs/wan_replication.md). Remote
  // deltas are not passed to the ReplicationTap (no echo). With a store the
  // call returns once the batch and its seq are durable, so an acknowledged
  // batch is never lost in a crash.
  virtual Result<RemoteApplyResult> ApplyRemote(SiteId origin, uint64_t seq,
                                                std::span<const RemoteChunkDelta> deltas) = 0;

  // Site `origin` lost its store and returns as a new incarnation whose
  // stream starts again at seq 1. Takes everything ever applied from it
  // (its ledger, see ShardStore) back out of the replica, forgets its seq,
  // clears its ledger, and runs `change` with this site's own cumulative
  // mass per chunk: the replica minus the model's initial values minus
  // everything applied from any site (every chunk the shard holds; the
  // same before and after the retraction). All of it, and the outbound records `change` makes,
  // commits together, with no local update or remote apply in between; the
  // call returns once that commit is durable (as RunDurable).
  // FailedPrecondition without a store (there is no ledger); Unavailable
  // when the store fails or is too slow (then nothing changed unless the
  // commit was only late); DataLoss for a ledger that does not decode.
  virtual Status ResetOrigin(SiteId origin, const std::function<void(std::span<const ChunkMass>)>& change,
                             Deadline deadline) = 0;

  // The shard clock now.
  virtual Clock ShardClock() const = 0;

  // The persistent records of the site's workers (WorkerRecord), by id.
  virtual std::vector<WorkerRecord> WorkerRecords() const { return {}; }
  // Sets the records of the workers named (a site that lost its store
  // resumes its workers where its peers hold its work;
  // docs/wan_replication.md), before any of them registered. Called from
  // inside a RunDurable change on the same thread, it is part of that
  // change. InvalidArgument for a worker id out of range or clocks that do
  // not fit (0 <= clock, -1 <= last_update_clock <= clock);
  // FailedPrecondition once a worker has updated this shard; nothing
  // changes on error.
  virtual Status ResumeWorkers(std::span<const WorkerRecord> /*records*/) {
    return FailedPreconditionError("this replica cannot set its workers' clocks");
  }
  // Workers' registrations are answered Unavailable(why) (they retry) until
  // ReleaseWorkers; after a release with an error, FailedPrecondition
  // naming it. Workers registered before keep working.
  virtual void HoldWorkers(const std::string& /*why*/) {}
  virtual void ReleaseWorkers(const Status& /*outcome*/) {}

  // Last seq applied from `origin` (0: none).
  virtual uint64_t LastAppliedSeq(SiteId origin) const = 0;

  // Copies the current value of `key` (ChunkElements floats) to `out`.
  // InvalidArgument for a chunk this shard does not hold.
  virtual Status ReadChunkValue(ChunkKey key, float* out) const = 0;
  // Copies the current values of the elements `at` (each < ChunkElements)
  // of `key` to out[0..at.size()), as one read under the chunk's lock.
  // InvalidArgument for a chunk this shard does not hold or an index past
  // its end.
  virtual Status ReadChunkElements(ChunkKey key, std::span<const uint32_t> at, float* out) const = 0;

  // Replaces the value of `key` with `values` (ChunkElements floats) under
  // the chunk's lock, as one change to persistent state (the outer step of
  // avg and diloco sets the synchronised model this way). InvalidArgument
  // for a chunk this shard does not hold, another size, or a NaN/Inf value
  // (nothing changes); Unavailable once the store failed. Called from inside
  // a RunDurable change on the same thread, it is part of that change: the
  // values commit together with the change's outbound records.
  virtual Status SetChunkValue(ChunkKey key, std::span<const float> values) = 0;
};

}  // namespace geops

#endif  // GEOPS_COMMON_REPLICATION_H_
