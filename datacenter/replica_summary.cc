#include "datacenter/replica_summary.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace geops::datacenter {

Result<ReplicaSummary> SummarizeReplica(const Shard& shard) {
  const ModelSpec& spec = shard.spec();
  const ShardId shard_id = shard.options().shard_id;
  const int num_shards = shard.options().num_shards;
  ReplicaSummary out;
  out.shard_id = shard_id;
  out.shard_clock = shard.ShardClock();
  std::vector<float> buf;
  TableSummary* current = nullptr;
  bool any_finite = false;
  for (ChunkKey key : spec.ChunksOfShard(shard_id, num_shards)) {  // in key order: table by table
    if (current == nullptr || current->table != key.table) {
      out.tables.push_back(TableSummary{key.table});
      current = &out.tables.back();
      any_finite = false;
    }
    const int64_t n = spec.ChunkElements(key);
    buf.resize(static_cast<size_t>(n));
    GEOPS_RETURN_IF_ERROR(shard.ReadChunkValue(key, buf.data()));
    current->elements += n;
    for (float v : buf) {
      if (!std::isfinite(v)) {
        ++current->nonfinite;
        continue;
      }
      const double d = v;
      current->min = any_finite ? std::min(current->min, d) : d;
      current->max = any_finite ? std::max(current->max, d) : d;
      current->sum += d;
      any_finite = true;
    }
  }
  return out;
}

}  // namespace geops::datacenter
