// SummarizeReplica: what a shard holds, table by table (min, max, sum,
// non-finite count), read chunk by chunk as the values are now: no clock
// wait, no WAN gate, no worker registered. For an operator's check of a
// site's replica (`geops worker --check`) and for tests.
//
// Each chunk is read atomically; the set of chunks is not (a shard still
// training moves on while it is summarised). Memory: one chunk.
#ifndef GEOPS_DATACENTER_REPLICA_SUMMARY_H_
#define GEOPS_DATACENTER_REPLICA_SUMMARY_H_

#include "common/ps_types.h"
#include "common/status.h"
#include "datacenter/shard.h"

namespace geops::datacenter {

// Errors: those of Shard::ReadChunkValue (none for a healthy shard).
Result<ReplicaSummary> SummarizeReplica(const Shard& shard);

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_REPLICA_SUMMARY_H_
