// How a quarantined WAN batch (QuarantineRecord, common/shard_store.h) lies
// in the "meta" column family. docs/on_disk_format.md says the same in
// prose. Readers of format version 2 that predate these records skip them
// (they read only the meta keys they know), so adding them needs no new
// format version.
//
// Key: "quarantine/", u32 BE origin, u64 BE seq, i64 BE unix microseconds
// (a later quarantine of the same seq, after the origin's stream was reset,
// gets a key of its own).
// Value:
//    0  u32 value version (kQuarantineValueVersion)
//    4  u32 reason bytes R, then R bytes of text
//       u32 chunks C, then per chunk:
//         u32 table, u32 chunk, u32 num_elements, u32 pairs N,
//         N x u32 index, N x f32 value
// Integers little-endian unless marked BE. Pure functions; thread-safe.
#ifndef GEOPS_STORAGE_QUARANTINE_FORMAT_H_
#define GEOPS_STORAGE_QUARANTINE_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/shard_store.h"
#include "common/status.h"

namespace geops::storage::format {

inline constexpr std::string_view kQuarantinePrefix = "quarantine/";
inline constexpr size_t kQuarantineKeySize = kQuarantinePrefix.size() + 4 + 8 + 8;
inline constexpr uint32_t kQuarantineValueVersion = 1;

// REQUIRES: record.origin >= 0.
std::string QuarantineKey(const QuarantineRecord& record);
std::string EncodeQuarantine(const QuarantineRecord& record);
// The encoded size, without encoding (to size a write batch).
size_t QuarantineBytes(const QuarantineRecord& record);
// DataLoss naming the problem for a key or value that does not decode.
Status DecodeQuarantine(std::string_view key, std::string_view value, QuarantineRecord* record);

}  // namespace geops::storage::format

#endif  // GEOPS_STORAGE_QUARANTINE_FORMAT_H_
