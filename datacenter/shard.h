// Shard: one parameter-server partition inside a site.
//
// Holds the chunks of the model that ModelSpec::ShardOf assigns to it, applies
// workers' update batches, tracks the site's clock under stale synchronous
// parallel (SSP) rules, and gates reads on it:
//   * A worker's clock is the number of iterations it has completed; its
//     updates for iteration c carry clock c, and AdvanceClock(c + 1) ends it.
//   * The shard clock is the minimum clock over the site's live workers
//     (ids 0..num_workers-1). Workers not yet registered count at clock 0
//     until their lease, measured from shard start, runs out.
//   * Read(clock c, staleness s) returns once shard clock >= c - s, so the
//     values include every live worker's updates for clocks <= c - s - 1.
//     s = 0 is BSP; s = kAsync never waits.
//   * A worker silent for worker_lease_ms leaves the minimum, so one dead
//     worker cannot freeze the site. A finished worker stops holding it too.
//   * Update batches are tagged (worker, clock) and applied exactly once: a
//     retried batch whose clock the shard has already applied is acknowledged
//     as a duplicate and changes nothing.
// Every request is validated in full before any state changes: unknown table
// or chunk, chunk owned by another shard, wrong payload size, NaN/Inf values,
// oversized batch, a clock that jumps or runs backwards. A refused request
// leaves the shard exactly as it was.
//
// Thread-safety: all methods may be called concurrently from many threads.
#ifndef GEOPS_DATACENTER_SHARD_H_
#define GEOPS_DATACENTER_SHARD_H_

#include <cstdint>
#include <memory>
#include <span>

#include "common/deadline.h"
#include "common/ids.h"
#include "common/model_spec.h"
#include "common/options.h"
#include "common/ps_types.h"
#include "common/status.h"

namespace geops::datacenter {

class Shard {
 public:
  virtual ~Shard() = default;

  // InvalidArgument if options do not validate.
  static Result<std::unique_ptr<Shard>> Create(const ModelSpec& spec, const ShardOptions& options);

  const ModelSpec& spec() const { return spec_; }
  const ShardOptions& options() const { return options_; }

  // Registers a worker (or re-registers one that restarted or was dropped:
  // it rejoins at the clock the shard holds for it). InvalidArgument for an
  // id outside 0..num_workers-1; PermissionDenied-like FailedPrecondition for
  // a wrong auth token; FailedPrecondition for a model fingerprint mismatch
  // (0 skips the check).
  virtual Result<RegisterReply> RegisterWorker(WorkerId worker, uint64_t model_fingerprint,
                                               const std::string& auth_token) = 0;

  // Copies the chunks `keys` (all owned by this shard) into `out`, in order,
  // back to back (ChunkElements floats each). Blocks until the shard clock is
  // >= clock - staleness, or until `deadline` (capped by max_read_wait_ms),
  // then DeadlineExceeded naming the clocks. On error `out` is unspecified.
  // REQUIRES: out has room for the sum of ChunkElements(keys).
  virtual Result<ReadReply> Read(WorkerId worker, Clock clock, int64_t staleness,
                                 std::span<const ChunkKey> keys, float* out,
                                 Deadline deadline) = 0;

  // Adds `values` (the chunks `keys`, back to back) into the shard. `clock`
  // must equal the clock the shard holds for the worker, or be below it (a
  // retried batch: applied=false, nothing changes). At most one batch per
  // (worker, clock); the batch names each chunk at most once.
  virtual Result<UpdateReply> Update(WorkerId worker, Clock clock,
                                     std::span<const ChunkKey> keys,
                                     std::span<const float> values) = 0;

  // Ends the worker's iteration: its clock becomes `new_clock`, which must be
  // the held clock + 1 (or <= the held clock: a retry, no change). With
  // `finished`, the worker stops holding the shard clock. Returns the shard clock.
  virtual Result<Clock> AdvanceClock(WorkerId worker, Clock new_clock, bool finished) = 0;

  // Renews the worker's lease. NotFound-free: an unknown id is InvalidArgument.
  virtual Status Heartbeat(WorkerId worker) = 0;

  virtual ShardStatus GetStatus() const = 0;

  // Copies every chunk this shard owns into `out` (packed key -> values);
  // used by inspection and tests. Not gated by the clock.
  virtual void Snapshot(std::vector<std::pair<ChunkKey, std::vector<float>>>* out) const = 0;

 protected:
  Shard(const ModelSpec& spec, const ShardOptions& options) : spec_(spec), options_(options) {}

  const ModelSpec spec_;
  const ShardOptions options_;
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_SHARD_H_
