// ReadSessions: the shard's side of incremental reads (Shard::ReadChanged,
// docs/wire_format.md "Incremental reads"). For each worker whose reads the
// ChunkStore tracks, it keeps the id of its last reply and serialises its
// reads; it answers a read with the runs of what changed since that reply,
// or, for a `since` that is not the last reply's id, with everything. An
// untracked worker gets every chunk whole and id 0.
//
// Thread-safety: Serve may be called from any thread; a tracked worker's
// calls run one at a time (its mutex), under the chunk locks the store
// takes.
#ifndef GEOPS_DATACENTER_READ_SESSIONS_H_
#define GEOPS_DATACENTER_READ_SESSIONS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/ids.h"
#include "common/ps_types.h"
#include "datacenter/chunk_store.h"

namespace geops::datacenter {

class ReadSessions {
 public:
  // Tracks workers 0..readers-1 (readers >= 0); enables the store's change
  // tracking for them. REQUIRES: `store` outlives this, and is not shared yet.
  ReadSessions(ChunkStore* store, int readers);

  // The writer slot for `worker`'s own dense updates (ChunkStore::BatchGuard),
  // or -1 when it is not tracked.
  int WriterSlot(WorkerId worker) const { return worker >= 0 && worker < readers_ ? worker : -1; }

  // Worker `worker`'s read of `keys` (checked, owned here) into *out.
  void Serve(WorkerId worker, uint64_t since, std::span<const ChunkKey> keys, ChangedValues* out);

 private:
  ChunkStore* store_;
  int readers_;
  std::unique_ptr<std::mutex[]> mu_;  // per tracked worker
  std::vector<uint64_t> last_id_;     // GUARDED_BY(mu_[w]): the id of w's last reply
  std::vector<uint64_t> next_id_;     // GUARDED_BY(mu_[w])
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_READ_SESSIONS_H_
