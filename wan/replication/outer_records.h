// OuterJournal: the outer step's state (avg, diloco) as records of the
// shard's store, beside the OutboundJournal's in the `outbox` column family,
// and the bookkeeping of which of them changed since the last commit.
//
// What a site must find again after a crash to go on with the same outer
// steps as its peers: theta and m of every chunk (as of the last step
// applied), the contributions given to steps not applied yet (its own and
// its peers'), which step each site gave last and which was its final one,
// the next step to apply, the clock of its last contribution and the
// digests of the steps applied. The progress since its last contribution is
// the OutboundJournal's accumulator; its contributions on their way to each
// peer are that journal's batches.
//
// The Replicator marks every change while it holds its mutex and inside a
// persistence scope of the shard (its tick, or ReplicaTarget::RunDurable
// around a peer's contribution), so the commit that holds a step's new
// chunk values holds the step's theta and m, and the commit that holds a
// peer's consumed seq holds its contribution.
//
// Record layout (keys: kind, then big-endian ids; values little-endian):
//   't' table:u32be chunk:u32be  -> f32[num_elements] theta
//   'm' table:u32be chunk:u32be  -> f32[num_elements] momentum
//   'c' step:u64be site:u32be    -> a contribution: u32 chunks, then per
//                                   chunk u32 table, u32 chunk,
//                                   u32 num_elements, u32 n, u32[n]
//                                   indices, f32[n] values; then, when
//                                   the contribution came with one, its
//                                   mark: i64 cut clock, u32 n, then n
//                                   times i64 clock, i32 part (each
//                                   worker's last batch it holds)
//   'u'                          -> u32 version (2; 1 is read too),
//                                   i64 next step,
//                                   i64 last contribution clock, u32 sites,
//                                   per site i32 id, i64 last step given,
//                                   u8 ended (its last step was its final
//                                   one), and (version 2) the mark of its
//                                   last given contribution (cut clock -1
//                                   when none is known), then u32 digests,
//                                   u64 each
// A contribution's record is deleted in the commit that applies its step.
//
// Thread-compatible: the Replicator calls it under its mutex.
#ifndef GEOPS_WAN_REPLICATION_OUTER_RECORDS_H_
#define GEOPS_WAN_REPLICATION_OUTER_RECORDS_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "wan/replication/outer_step.h"

namespace geops::wan {

// The outer state decoded from a store's records.
struct RecoveredOuter {
  bool present = false;  // the store holds an outer state ('u' record)
  Clock last_sync = 0;   // the clock of this site's last contribution
  OuterStep::State state;
};

// A row record's value: the chunk's floats (f32[num_elements]). DataLoss
// naming `where` for a chunk the model does not have, another size, or a
// value that is not finite. Also the outbound journal's rows.
Status DecodeChunkRow(const ModelSpec& spec, ChunkKey key, const std::string& value, const std::string& where,
                      std::vector<float>* out);

// True for the record kinds above.
bool IsOuterRecord(const std::string& key);

// The records of a whole outer state, as the store holds them (what a peer
// fetches when a site lost its store); DecodeOuterRecord reads them back.
std::vector<OutboundRecord> EncodeOuterState(const OuterStep::State& state, Clock last_sync);

// Decodes one record of those kinds into *out. DataLoss naming the record
// for a key or value that does not parse, or a chunk the model does not have
// or of another size.
Status DecodeOuterRecord(const OutboundRecord& record, const ModelSpec& spec, RecoveredOuter* out);

class OuterJournal {
 public:
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  // Everything is to be written (a new store's first outer state).
  void MarkAll();
  // The store holds the contributions of `state` (a restart).
  void Restored(const OuterStep::State& state);
  void ContributionAdded(int64_t step, SiteId site);
  // Step `step` is applied: theta and m change, its contributions go.
  void StepApplied(int64_t step);
  // The last contribution clock changed.
  void MetaChanged() { meta_ = true; }

  // Appends the records changed since the last call, read from `outer`.
  void Collect(const OuterStep& outer, Clock last_sync, std::vector<OutboundRecord>* puts,
               std::vector<std::string>* deletes);

 private:
  bool enabled_ = false;
  bool rows_ = false;
  bool meta_ = false;
  std::set<std::pair<int64_t, SiteId>> added_;   // to put
  std::set<std::pair<int64_t, SiteId>> stored_;  // in the store
  std::vector<std::string> deletes_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_OUTER_RECORDS_H_
