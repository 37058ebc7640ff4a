// Shard: one parameter-server partition inside a site.
//
// Holds the chunks of the model that ModelSpec::ShardOf assigns to it (filled
// with ModelSpec::InitChunk at creation, so every replica starts identical),
// applies workers' update batches, tracks the site's clock under stale
// synchronous parallel (SSP) rules, and gates reads on it:
//   * A worker's clock is the number of iterations it has completed; its
//     updates for iteration c carry clock c, and AdvanceClock(c + 1) ends it.
//   * The shard clock is the minimum clock over the site's counting workers
//     (ids 0..num_workers-1): those live (heard within worker_lease_ms, or
//     with a read waiting) and those finished. Workers not yet registered
//     count at clock 0 until their lease, measured from shard start, runs out.
//     If no worker counts, the shard clock is the largest clock it holds for
//     any worker. It can go down when a dropped worker comes back.
//   * Read(clock c, staleness s) returns once shard clock >= c - s, so the
//     values include every counting worker's updates for clocks <= c - s - 1.
//     s = 0 is BSP; s = kAsync never waits.
//   * A worker silent for worker_lease_ms leaves the minimum, so one dead
//     worker cannot freeze the site. Every call from a registered worker
//     renews its lease (one refused as malformed may not); a dropped worker
//     that calls again, or re-registers, rejoins at the clock the shard holds
//     for it. A finished worker is exempt from
//     the lease and counts at its final clock; it may not push or advance
//     again until it re-registers.
//   * Update batches are tagged (worker, clock) and applied exactly once: a
//     retried batch whose clock the shard has already applied is acknowledged
//     as a duplicate and changes nothing.
// Every request is validated in full before any state changes: unknown table
// or chunk, chunk owned by another shard, a chunk repeated in one batch,
// wrong payload size, NaN/Inf values, oversized batch (ResourceExhausted), a
// clock that jumps or is negative (all InvalidArgument unless noted). A
// refused request leaves the shard's values and clocks exactly as they were
// and counts in ShardStatus::requests_rejected (every error reply does).
// Common errors of every per-worker call: InvalidArgument for a worker id
// outside 0..num_workers-1; Aborted ("worker N is not registered with shard
// S; register again") for a worker that has not registered with this shard
// instance (e.g. after a shard restart).
//
// Persistence (optional): a shard created over a ShardStore first loads the
// stored chunk values and per-worker records (clock, last applied batch,
// finished); a store never written gets every chunk and worker record in one
// first commit. From then on every applied batch and clock advance is
// committed through a ShardPersister (group commit: concurrent calls share
// one commit). With durability sync or async, Update and AdvanceClock answer
// only once their commit is written (sync: fsynced), so an acknowledged
// change survives a crash and a retried batch stays a duplicate across
// restarts. With off they answer at once and commits run at every clock
// advance; a crash loses what the last finished commit did not hold.
// Registrations are not persisted: after a restart each worker gets Aborted
// until it registers again, then resumes at its persisted clock (workers
// that have not registered yet count at their persisted clocks meanwhile).
//
// Thread-safety: all methods may be called concurrently from many threads.
// Updates of different chunks do not serialise, and readers copy under
// per-chunk shared locks, not under the clock lock.
#ifndef GEOPS_DATACENTER_SHARD_H_
#define GEOPS_DATACENTER_SHARD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/ids.h"
#include "common/model_spec.h"
#include "common/options.h"
#include "common/ps_types.h"
#include "common/replication.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "datacenter/memory_budget.h"

namespace geops::datacenter {

// WAN replication (see common/replication.h): a Shard is the ReplicaTarget
// of its site's WAN layer; with a tap and a gate attached it reports every
// applied local batch and clock advance to the tap and holds reads at the
// gate after its own clock wait (the gate's wait shares the read deadline).
class Shard : public ReplicaTarget {
 public:
  virtual ~Shard() = default;

  // InvalidArgument if options do not validate (or num_workers > 65536);
  // ResourceExhausted if the chunks cannot be allocated. With a `store`
  // (which must outlive the shard; nullptr keeps everything in memory) it
  // also loads the store: FailedPrecondition when the store belongs to
  // another configuration (model, shard id or count, worker count); DataLoss
  // when its chunks do not fit the model (unknown, missing, wrong size) or a
  // worker record is out of range; the store's error when it cannot be read
  // or the first commit of a fresh store fails.
  static Result<std::unique_ptr<Shard>> Create(const ModelSpec& spec, const ShardOptions& options,
                                               ShardStore* store = nullptr);

  const ModelSpec& spec() const { return spec_; }
  const ShardOptions& options() const { return options_; }

  // Registers a worker (or re-registers one that restarted, was dropped or
  // finished: it rejoins, live and unfinished, at the clock the shard holds
  // for it, and keeps its exactly-once record). Idempotent. InvalidArgument
  // for an id outside 0..num_workers-1; FailedPrecondition "authentication
  // failed" when options.auth_token is set and `auth_token` differs (the
  // token is never echoed); FailedPrecondition naming both values for a
  // model fingerprint mismatch (0 skips the check).
  // With a named `session` (ps_types.h), AlreadyExists naming the holder
  // when another live session holds the worker id.
  virtual Result<RegisterReply> RegisterWorker(WorkerId worker, uint64_t model_fingerprint,
                                               const std::string& auth_token, const WorkerSession& session) = 0;
  Result<RegisterReply> RegisterWorker(WorkerId worker, uint64_t model_fingerprint, const std::string& auth_token) {
    return RegisterWorker(worker, model_fingerprint, auth_token, WorkerSession{});
  }

  // Copies the chunks `keys` (all owned by this shard, each named once) into
  // `out`, in order, back to back (ChunkElements floats each). Blocks until
  // the shard clock is >= clock - staleness, or until `deadline` (capped by
  // max_read_wait_ms), then DeadlineExceeded naming the reader's clock, the
  // clock it needs, the shard clock and the workers holding it back. While
  // waiting, the reader counts as heard (it is never dropped for waiting).
  // InvalidArgument for clock < 0 or staleness < kAsync; ResourceExhausted
  // when the reply would exceed max_batch_bytes. On error `out` is
  // unspecified. REQUIRES: out has room for the sum of ChunkElements(keys).
  virtual Result<ReadReply> Read(WorkerId worker, Clock clock, int64_t staleness,
                                 std::span<const ChunkKey> keys, float* out,
                                 Deadline deadline) = 0;
  // An incremental read: waits as Read does, then puts into *out what
  // changed in the chunks `keys` since this worker's last incremental read
  // of this shard, as long as `since` is the read_id that read returned;
  // with any other `since` (0 at first, or after a reply the worker did
  // not get) everything in `keys` counts as changed. A worker that adds
  // its own updates to its copy (as PsClient's cache does, with the same
  // float additions) keeps that copy equal to the shard's values bit for
  // bit by applying the runs over it: the shard leaves its own dense
  // updates unmarked for it (ChunkStore::EnableChangeTracking). A worker
  // that is not tracked (ShardOptions::change_readers) gets every chunk
  // whole and read_id 0. Errors as Read's.
  virtual Result<ReadReply> ReadChanged(WorkerId worker, Clock clock, int64_t staleness,
                                        std::span<const ChunkKey> keys, uint64_t since,
                                        ChangedValues* out, Deadline deadline) = 0;
  // The key checks of Read (BatchValidator::CheckRead) alone, for a caller
  // that sizes the reply's buffer first (the Thrift handler): every key
  // exists, is owned here and named once, and the reply fits in
  // max_batch_bytes; *elements is then its float count. Read checks again.
  virtual Status CheckReadKeys(std::span<const ChunkKey> keys, int64_t* elements) const = 0;

  // Adds `values` (the chunks `keys`, back to back) into the shard. `clock`
  // must equal the clock the shard holds for the worker, or be below it (a
  // retried batch: applied=false, nothing changes); above it is
  // InvalidArgument "clock jumps from X to Y". At most one batch per
  // (worker, clock): a second batch at the held clock is a duplicate too.
  // The batch names each chunk at most once. A concurrent retry waits for
  // the original and then reports applied=false. FailedPrecondition for a
  // new batch from a finished worker. With a store (durability sync/async):
  // blocks until the commit holding the batch is written, up to
  // max_commit_wait_ms, then Unavailable (the batch is applied in memory; a
  // retry answers applied=false once it is written). Unavailable as well
  // once a commit has failed; the shard then takes no more changes.
  //
  // One clock's update may come in parts (increasing `part` numbers, each
  // sent once the previous one was answered), so that no request grows
  // with the model: a part at or below the last one applied at that clock
  // is a retry.
  virtual Result<UpdateReply> Update(WorkerId worker, Clock clock,
                                     std::span<const ChunkKey> keys,
                                     std::span<const float> values, int32_t part) = 0;
  Result<UpdateReply> Update(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                             std::span<const float> values) {
    return Update(worker, clock, keys, values, 0);
  }

  // Ends the worker's iteration: its clock becomes `new_clock`, which must be
  // the held clock + 1 (or <= the held clock: a retry, no change); more is
  // InvalidArgument. With `finished`, the worker is done: it no longer needs
  // a lease and counts at this final clock (new_clock == held clock with
  // `finished` finishes it where it is). FailedPrecondition for advancing a
  // finished worker. Returns the shard clock. With a store it waits for its
  // commit as Update does (durability off: when the shard clock moves it
  // asks for a commit, the clock tick's, without waiting).
  virtual Result<Clock> AdvanceClock(WorkerId worker, Clock new_clock, bool finished) = 0;

  // Renews the worker's lease. InvalidArgument for an id out of range,
  // Aborted for a worker that has not registered.
  // With a session id (WorkerSession::id, 0: unchecked): FailedPrecondition
  // when another session holds the worker now (this process was replaced).
  virtual Status Heartbeat(WorkerId worker, uint64_t session) = 0;
  Status Heartbeat(WorkerId worker) { return Heartbeat(worker, 0); }

  // Counters and clocks; `workers` has one entry per id, where `live` means
  // heard within the lease or a read waiting (a finished worker may be not
  // live and still count). Never blocks on reads or updates.
  virtual ShardStatus GetStatus() const = 0;

  // Commits every change made so far and waits until it is written, or
  // Unavailable at `deadline` or after a failed commit. OK at once without a
  // store. Used at shutdown so that durability off loses nothing there.
  virtual Status Flush(Deadline deadline) = 0;

  // For a clean stop: every read waiting now (for the site clock or the WAN
  // gate), and every later one that would wait, ends at once with
  // Unavailable "shard S is stopping", which a worker retries until the
  // shard is back. Updates and clock advances are still taken (they do not
  // wait for other workers), so what a worker sends before the server
  // closes is kept. Irreversible.
  virtual void BeginStop() = 0;

  // Counts a request refused before it reached the shard (by the RPC layer:
  // a malformed frame, a payload of the wrong size) in requests_rejected,
  // with the shard's own refusals.
  virtual void CountRefused(StatusCode code) = 0;

  // Replaces `out` with a copy of every chunk this shard owns, in key order;
  // used by inspection and tests. Not gated by the clock; each chunk is
  // copied atomically, the set of chunks is not.
  virtual void Snapshot(std::vector<std::pair<ChunkKey, std::vector<float>>>* out) const = 0;

  // Attaches the WAN layer: `tap` hears every applied local batch and clock
  // advance, `gate` holds reads (either may be null). Call once, before
  // serving; both must outlive the shard's last call. The tap hears the
  // current clock (and whether every worker has finished) at once.
  virtual void AttachReplication(ReplicationTap* tap, ReadGate* gate) = 0;

  // Updates are refused (Unavailable) while `guard` says the process is
  // over its memory budget (see memory_budget.h); nullptr: no budget. Call
  // before serving; the guard must outlive the shard's last call.
  virtual void SetMemoryGuard(MemoryGuard* guard) = 0;

 protected:
  Shard(const ModelSpec& spec, const ShardOptions& options) : spec_(spec), options_(options) {}

  const ModelSpec spec_;
  const ShardOptions options_;
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_SHARD_H_
