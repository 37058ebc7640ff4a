// RemoteApplier: applies batches of remote (WAN) deltas to one shard's
// chunks, exactly once per (origin site, seq) and in seq order per origin.
//
// It validates a whole batch before touching anything (see
// ReplicaTarget::ApplyRemote in common/replication.h for the list), then
// locks the batch's chunks together (ChunkStore::BatchGuard), checks every
// sum and adds only the shipped elements: a batch that would make a stored
// value NaN or infinite is quarantined whole (nothing added, seq consumed).
// Local updates of other chunks go on meanwhile. Remote deltas never reach
// the ReplicationTap.
//
// Thread-safety: all methods may be called concurrently. mu_ serialises
// batches (from every origin) and guards the per-origin seq marks; it is
// taken before any chunk lock (inside ChunkStore) and before the shard's
// persister barrier (inside `mark`), and never while the caller holds a
// shard lock.
#ifndef GEOPS_DATACENTER_REMOTE_APPLIER_H_
#define GEOPS_DATACENTER_REMOTE_APPLIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/replication.h"
#include "common/status.h"
#include "datacenter/chunk_store.h"

namespace geops::datacenter {

class RemoteApplier {
 public:
  // `spec` and `store` must outlive the applier.
  RemoteApplier(const ModelSpec* spec, ChunkStore* store, ShardId shard, int num_shards);

  // Validates and applies one batch (contract: ReplicaTarget::ApplyRemote).
  // `begin_apply` runs once, under mu_, after validation and the seq check
  // and before the first chunk changes, for a batch that will be applied;
  // `mark(local)` runs after each chunk changed (the shard opens a
  // persistence scope and marks chunks there). Either may be empty.
  Result<RemoteApplyResult> Apply(SiteId origin, uint64_t seq, std::span<const RemoteChunkDelta> deltas,
                                  const std::function<void()>& begin_apply,
                                  const std::function<void(int64_t local)>& mark);

  uint64_t LastSeq(SiteId origin) const;
  // Sets the last applied seq of `origin` (from a store), before serving.
  void Restore(SiteId origin, uint64_t seq);
  // Every origin with a seq record (applied from, restored or reset).
  std::vector<SiteId> Origins() const;

  int64_t batches_applied() const;
  int64_t batches_duplicate() const;
  // Valid batches refused whole because a sum would not be finite.
  int64_t batches_quarantined() const;

 private:
  Status Validate(std::span<const RemoteChunkDelta> deltas) const;

  const ModelSpec* spec_;
  ChunkStore* store_;
  const ShardId shard_;
  const int num_shards_;

  mutable std::mutex mu_;
  std::map<SiteId, uint64_t> last_seq_;  // GUARDED_BY(mu_)
  std::vector<int64_t> locals_;          // GUARDED_BY(mu_): their local indices
  std::vector<size_t> touched_;          // GUARDED_BY(mu_): their positions in the batch
  int64_t applied_ = 0;                  // GUARDED_BY(mu_)
  int64_t duplicate_ = 0;                // GUARDED_BY(mu_)
  int64_t quarantined_ = 0;              // GUARDED_BY(mu_)
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_REMOTE_APPLIER_H_
