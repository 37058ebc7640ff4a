// Identifiers shared by every part of geops: tables, chunks, shards, workers,
// clocks. Plain values; no thread-safety concerns.
#ifndef GEOPS_COMMON_IDS_H_
#define GEOPS_COMMON_IDS_H_

#include <compare>
#include <cstdint>
#include <functional>

namespace geops {

using TableId = uint32_t;
using ChunkId = uint32_t;
using ShardId = int32_t;
using WorkerId = int32_t;
using SiteId = int32_t;
// A worker's clock: the number of iterations it has completed. A worker at
// clock c is computing iteration c; its updates for that iteration carry c.
using Clock = int64_t;

// The unit of sharding, versioning, persistence and WAN shipping.
struct ChunkKey {
  TableId table = 0;
  ChunkId chunk = 0;
  auto operator<=>(const ChunkKey&) const = default;
  // Packs (table, chunk) into one integer that sorts like the pair.
  uint64_t Packed() const { return (uint64_t{table} << 32) | chunk; }
  static ChunkKey FromPacked(uint64_t p) {
    return ChunkKey{static_cast<TableId>(p >> 32), static_cast<ChunkId>(p & 0xffffffffu)};
  }
};

struct ChunkKeyHash {
  size_t operator()(const ChunkKey& k) const { return std::hash<uint64_t>()(k.Packed()); }
};

}  // namespace geops

#endif  // GEOPS_COMMON_IDS_H_
