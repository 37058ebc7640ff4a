// StreamResets: what a shard does when a peer comes back having lost its
// store (a new incarnation; wan_transport.h, docs/wan_replication.md
// "Disk loss").
//
// The peer's old contributions here cannot be matched against what the
// other sites got from it (each held a different prefix of its stream, and
// the rest died with its disk). So every site takes them back out
// (ReplicaTarget::ResetOrigin retracts the peer's ledger, inside
// RemoteInbox::ResetOrigin so no batch of it is applied meanwhile) and
// restarts its own stream to it: seq 1 again, nothing in flight, and a
// backlog of this site's whole selected mass (its own mass minus what its
// accumulator still holds, which reaches every peer when selected), which
// bootstraps the new replica (RestartStream).
//
// The inbox reports each newer incarnation (Heard, any thread); the tick
// thread runs the pending resets (Run). A reset that cannot be done (a
// shard without a store, a failing store) stays pending and is tried again
// every round; its failure is logged once per incarnation.
//
// Thread-safety: Heard, Pending and events may be called from any thread
// (a leaf mutex); Run from one thread at a time (the tick thread).
#ifndef GEOPS_WAN_REPLICATION_STREAM_RESET_H_
#define GEOPS_WAN_REPLICATION_STREAM_RESET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/replication.h"
#include "wan/replication/outbound_journal.h"
#include "wan/replication/peer_outbox.h"
#include "wan/replication/remote_inbox.h"

namespace geops::wan {

// A peer that came back as a new incarnation, and when its stream was reset.
struct StreamResetEvent {
  SiteId peer = 0;
  uint64_t incarnation = 0;
  double heard_unix = 0;   // its new incarnation was first heard
  double reset_unix = 0;   // the reset was durable (0: failed)
  int64_t snapshot_elements = 0; // values put in its backlog (this site's selected mass)
};

class StreamResets {
 public:
  // How long a reset waits for the shard's store.
  static constexpr int64_t kDurableWaitMs = 30000;

  // `peer` was heard as `incarnation`, newer than the one known.
  void Heard(SiteId peer, uint64_t incarnation, double heard_unix);
  bool Pending() const;

  struct Hooks {
    // Inside the shard's ResetOrigin scope, once the peer's old
    // contributions are out: this site's stream to `peer` starts over
    // from `own` (this site's cumulative mass); fills the event's
    // snapshot_elements.
    std::function<void(SiteId peer, std::span<const ChunkMass> own, StreamResetEvent* event)> restart_stream;
    // After a reset succeeded (no lock held).
    std::function<void(const StreamResetEvent& event)> done;
  };
  // Runs every pending reset. `shard` names the shard in logs.
  void Run(RemoteInbox* inbox, ReplicaTarget* target, ShardId shard, const Hooks& hooks);

  std::vector<StreamResetEvent> events() const;

 private:
  mutable std::mutex mu_;
  std::map<SiteId, std::pair<uint64_t, double>> pending_;  // GUARDED_BY(mu_): peer -> (incarnation, heard)
  std::vector<StreamResetEvent> events_;                   // GUARDED_BY(mu_)
  std::set<std::pair<SiteId, uint64_t>> failures_;         // GUARDED_BY(mu_): (peer, incarnation) logged
};

// What the accumulator still holds of a chunk (empty: nothing).
using AccumulatedOf = std::function<std::span<const float>(ChunkKey key)>;

// Restarts this site's stream to out->peer(): forgets its batches in
// flight and its seq, and replaces its backlog by `own` minus
// `accumulated` (what this site selected so far); every change goes to the
// journal, with the peer's new incarnation. Returns the values put in the
// backlog.
int64_t RestartStream(PeerOutbox* out, std::span<const ChunkMass> own, const AccumulatedOf& accumulated,
                      uint64_t incarnation, OutboundJournal* journal, ShardId shard);

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_STREAM_RESET_H_
