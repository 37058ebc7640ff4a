// The on-disk layout of a geops shard store: column family names, meta keys,
// and the encodings of keys and values. docs/on_disk_format.md describes the
// same layout in prose; change both together, and bump kFormatVersion when a
// reader of the old layout could misread the new one.
//
// Integers are fixed-width little-endian unless a key says big-endian (keys
// are big-endian so that byte order is numeric order). Floats are IEEE-754
// binary32, little-endian. Pure functions and constants; thread-safe.
#ifndef GEOPS_STORAGE_STORE_FORMAT_H_
#define GEOPS_STORAGE_STORE_FORMAT_H_

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/shard_store.h"
#include "common/status.h"

namespace geops::storage::format {

static_assert(std::endian::native == std::endian::little,
              "the store writes float32 values as they lie in memory, which must be little-endian");

inline constexpr int32_t kFormatVersion = 1;

// A small text file that marks a directory as a geops shard store, so that a
// damaged store (DataLoss) is told apart from a directory that never was one.
inline constexpr char kMarkerFile[] = "GEOPS_STORE";
inline constexpr std::string_view kMarkerText = "geops shard store\n";

// Column families. RocksDB's "default" exists too and stays empty.
inline constexpr char kChunksFamily[] = "chunks";
inline constexpr char kMetaFamily[] = "meta";
inline constexpr char kOutboxFamily[] = "outbox";  // reserved for the WAN layer
inline constexpr char kDefaultFamily[] = "default";

// Meta keys (ASCII) and the sizes of their values.
inline constexpr std::string_view kFormatVersionKey = "format_version";          // i32
inline constexpr std::string_view kModelKey = "fingerprint/model";               // u64
inline constexpr std::string_view kModelSummaryKey = "fingerprint/model_summary";  // text
inline constexpr std::string_view kShardIdKey = "fingerprint/shard_id";          // i32
inline constexpr std::string_view kNumShardsKey = "fingerprint/num_shards";      // i32
inline constexpr std::string_view kNumWorkersKey = "fingerprint/num_workers";    // i32
inline constexpr std::string_view kCommitsKey = "commits";                       // u64
inline constexpr std::string_view kShardClockKey = "shard_clock";                // i64
inline constexpr std::string_view kWorkerPrefix = "worker/";  // + u32 BE id -> WorkerValue
inline constexpr std::string_view kOriginPrefix = "origin/";  // + u32 BE site -> u64 seq

// Chunk key: u32 BE table id, u32 BE chunk id.
inline constexpr size_t kChunkKeySize = 8;
// Chunk value: header, then `elements` float32.
//   0  u32 value version (kChunkValueVersion)
//   4  u32 elements
//   8  u32 CRC-32 (zlib polynomial) of the float bytes
//  12  u32 reserved, 0
inline constexpr size_t kChunkHeaderSize = 16;
inline constexpr uint32_t kChunkValueVersion = 1;
// Worker value: i64 clock, i64 last update clock (-1: none), u8 finished (0/1).
inline constexpr size_t kWorkerValueSize = 17;

using ChunkKeyBytes = std::array<char, kChunkKeySize>;
using ChunkHeader = std::array<char, kChunkHeaderSize>;

ChunkKeyBytes EncodeChunkKey(ChunkKey key);
// False when `bytes` is not kChunkKeySize long.
bool DecodeChunkKey(std::string_view bytes, ChunkKey* key);

ChunkHeader EncodeChunkHeader(std::span<const float> values);
// Checks header, size and checksum of a stored chunk value and appends its
// floats to `out`. DataLoss naming the chunk and the problem; `out` may then
// end with the bad chunk (callers drop the whole state on error).
Status DecodeChunkValue(ChunkKey key, std::string_view value, ChunkBatch* out);

std::string WorkerKey(WorkerId worker);
std::string EncodeWorker(const WorkerRecord& record);
// `key_suffix` is the key after kWorkerPrefix. DataLoss when malformed.
Status DecodeWorker(std::string_view key_suffix, std::string_view value, WorkerRecord* record);

std::string OriginKey(SiteId origin);
Status DecodeOrigin(std::string_view key_suffix, std::string_view value, OriginRecord* record);

std::string EncodeI32(int32_t v);
std::string EncodeU64(uint64_t v);
std::string EncodeI64(int64_t v);
// DataLoss "meta key '<key>' has N bytes, expected M" on a size mismatch.
Status DecodeI32(std::string_view key, std::string_view value, int32_t* v);
Status DecodeU64(std::string_view key, std::string_view value, uint64_t* v);
Status DecodeI64(std::string_view key, std::string_view value, int64_t* v);

uint32_t Checksum(std::span<const float> values);

}  // namespace geops::storage::format

#endif  // GEOPS_STORAGE_STORE_FORMAT_H_
