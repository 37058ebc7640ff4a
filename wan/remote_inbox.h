// RemoteInbox: the receiving side of one shard's WAN replication. It takes
// the messages of every peer (batches, clock reports, notices, heartbeats),
// applies batches to the shard exactly once and in seq order per origin,
// and keeps the MirrorGate's view of the peers up to date.
//
//   batch    checked against its header (origin and seq must match the
//            message), decoded in full (wan/codec.h: every count, index and
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
//
// Thread-safety: all methods may be called concurrently. mu_ guards the
// reorder buffers and held reports and serialises applies (per shard);
// decoding happens before it is taken. Order: mu_ -> (shard locks inside
// ApplyRemote | gate mutex).
#ifndef GEOPS_WAN_REMOTE_INBOX_H_
#define GEOPS_WAN_REMOTE_INBOX_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "common/model_spec.h"
#include "common/replication.h"
#include "common/status.h"
#include "wan/codec.h"
#include "wan/mirror_gate.h"
#include "wan/wan_transport.h"

namespace geops::wan {

struct InboxStats {
  int64_t batches_applied = 0;
  int64_t batches_duplicate = 0;
  int64_t batches_refused = 0;   // malformed or invalid
  int64_t batches_buffered = 0;  // arrived ahead of their turn
  int64_t elements_applied = 0;
  int64_t bytes_received = 0;    // batch payload bytes accepted
};

class RemoteInbox {
 public:
  // `target` and `gate` must outlive the inbox. `self` is this site's id:
  // messages claiming to come from it are refused.
  RemoteInbox(ReplicaTarget* target, MirrorGate* gate, SiteId self, int64_t max_reorder,
              DecodeLimits limits = {});

  Status OnBatch(const WanBatch& batch);
  Status OnClock(const WanClockReport& report);
  Status OnNotice(const WanNotice& notice);
  Status OnHeartbeat(SiteId origin);

  InboxStats stats() const;

 private:
  struct Origin {
    std::map<uint64_t, DecodedBatch> early;     // seq -> decoded, not yet applicable
    std::vector<WanClockReport> held_reports;   // waiting for their last_seq
  };
  Status CheckOrigin(SiteId origin) const;
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

  mutable std::mutex mu_;
  std::map<SiteId, Origin> origins_;  // GUARDED_BY(mu_)
  std::vector<RemoteChunkDelta> views_;  // GUARDED_BY(mu_)
  InboxStats stats_;                  // GUARDED_BY(mu_)
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REMOTE_INBOX_H_
