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
#include <vector>

#include "common/ids.h"
#include "common/shard_store.h"
#include "common/status.h"

namespace geops::storage::format {

static_assert(std::endian::native == std::endian::little,
              "the store writes float32 values as they lie in memory, which must be little-endian");

// The layout this build writes. Version 2 added the "ledger" column family;
// version 3 writes chunk values and outbox records in two slots with the
// commit that wrote them (so that a large commit is written in bounded
// pieces, see "Commits in pieces" in docs/on_disk_format.md). A version 2
// store is read as it is (its records are slot 0 of commit 0) and becomes
// version 3 at its next commit; a version 1 store is refused (not converted).
inline constexpr int32_t kFormatVersion = 3;
inline constexpr int32_t kOldestReadableFormat = 2;

// A small text file that marks a directory as a geops shard store, so that a
// damaged store (DataLoss) is told apart from a directory that never was one.
inline constexpr char kMarkerFile[] = "GEOPS_STORE";
inline constexpr std::string_view kMarkerText = "geops shard store\n";

// Column families. RocksDB's "default" exists too and stays empty.
inline constexpr char kChunksFamily[] = "chunks";
inline constexpr char kMetaFamily[] = "meta";
inline constexpr char kOutboxFamily[] = "outbox";  // reserved for the WAN layer
inline constexpr char kLedgerFamily[] = "ledger";  // per-origin sums of applied WAN deltas
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

// Chunk key: u32 BE table id, u32 BE chunk id; that is slot 0 of the chunk.
// Slot 1 is the same 8 bytes followed by one byte 0x01.
inline constexpr size_t kChunkKeySize = 8;
// Chunk value: header, then `elements` float32.
//   0  u32 value version (kChunkValueVersion)
//   4  u32 elements
//   8  u32 CRC-32 (zlib polynomial) of the float bytes
//  12  u32 reserved, 0
//  16  u64 the commit that wrote it (version 2 only)
// Version 1 values (16-byte header, written by format 2) count as commit 0.
inline constexpr size_t kChunkHeaderSize = 24;
inline constexpr size_t kChunkHeaderSizeV1 = 16;
inline constexpr uint32_t kChunkValueVersion = 2;
// Outbox records are kept in two slots too: key 0xff, slot (0 or 1), then
// the record's own key; value u64 commit, then the record's bytes. A key
// that does not start with 0xff is a record written by format 2 (commit 0).
inline constexpr char kOutboxSlotPrefix = '\xff';
inline constexpr size_t kOutboxSlotHeaderSize = 8;
// Worker value: i64 clock, i64 last update clock (-1: none), u8 finished (0/1).
inline constexpr size_t kWorkerValueSize = 21;
// A worker record written before update parts existed (read as a whole clock).
inline constexpr size_t kWorkerValueSizeWhole = 17;

// Ledger key: u32 BE origin site, then the chunk key, so that one origin's
// rows are contiguous and in ChunkKey order.
inline constexpr size_t kLedgerKeySize = 4 + kChunkKeySize;
// A ledger record is one of three entries; its first byte says which.
//   Sparse add (written by Commit for an add of at most half its chunk):
//     0  u8  kLedgerAddTag
//     1  u32 num_elements of the chunk
//     5  u32 count
//     9  count x (u32 index, f32 value); indices strictly increasing and
//        below num_elements, values finite
//   Dense add (written by Commit for an add of more than half its chunk,
//   which is smaller so: 4 bytes per element instead of 8 per pair):
//     0  u8  kLedgerDenseAddTag
//     1  u32 num_elements
//     5  num_elements x f32 values, finite (0 where the add has none)
//   Dense row (what merging produces; what a read returns):
//     0  u8  kLedgerRowTag
//     1  u32 num_elements
//     5  num_elements x f64 sums
// RocksDB adds the entries of one key together with the ledger merge
// operator (storage/ledger_merge_operator.h).
inline constexpr uint8_t kLedgerAddTag = 1;
inline constexpr uint8_t kLedgerRowTag = 2;
inline constexpr uint8_t kLedgerDenseAddTag = 3;
inline constexpr size_t kLedgerAddHeaderSize = 9;
inline constexpr size_t kLedgerAddPairSize = 8;
inline constexpr size_t kLedgerRowHeaderSize = 5;
// The largest num_elements a ledger entry may carry (a 2 GiB dense row), so
// that a damaged size field cannot make a merge allocate without bound.
inline constexpr uint32_t kMaxLedgerElements = uint32_t{1} << 28;

using ChunkKeyBytes = std::array<char, kChunkKeySize>;
using ChunkHeader = std::array<char, kChunkHeaderSize>;

ChunkKeyBytes EncodeChunkKey(ChunkKey key);
// False when `bytes` is not kChunkKeySize long.
bool DecodeChunkKey(std::string_view bytes, ChunkKey* key);
// The key of `key`'s slot (0 or 1).
std::string ChunkSlotKey(ChunkKey key, int slot);
// False when `bytes` is neither a slot-0 nor a slot-1 chunk key.
bool DecodeChunkSlotKey(std::string_view bytes, ChunkKey* key, int* slot);

// The header of a value holding `values`, written by commit `commit`.
ChunkHeader EncodeChunkHeader(std::span<const float> values, uint64_t commit);
// The commit that wrote a stored chunk value (0 for a version 1 value).
// DataLoss naming the chunk when the header is short or of an unknown version.
Status PeekChunkCommit(ChunkKey key, std::string_view value, uint64_t* commit);
// Checks header, size and checksum of a stored chunk value and appends its
// floats to `out`. DataLoss naming the chunk and the problem; `out` may then
// end with the bad chunk (callers drop the whole state on error).
Status DecodeChunkValue(ChunkKey key, std::string_view value, ChunkBatch* out);

// The key of an outbox record's slot (0 or 1).
std::string OutboxSlotKey(std::string_view key, int slot);
// For a stored outbox key: its slot and the record's own key, or slot -1
// (and the key as it is) for a record written by format 2. False for an
// empty key or a slot key without a record key or with a slot above 1.
bool DecodeOutboxSlotKey(std::string_view stored, int* slot, std::string_view* key);
// The value of a slotted outbox record and back. DataLoss naming the record
// when it is shorter than its header.
std::string EncodeOutboxSlotValue(uint64_t commit, std::string_view value);
Status DecodeOutboxSlotValue(std::string_view stored, uint64_t* commit, std::string_view* value);

std::string WorkerKey(WorkerId worker);
std::string EncodeWorker(const WorkerRecord& record);
// `key_suffix` is the key after kWorkerPrefix. DataLoss when malformed.
Status DecodeWorker(std::string_view key_suffix, std::string_view value, WorkerRecord* record);

std::string OriginKey(SiteId origin);
Status DecodeOrigin(std::string_view key_suffix, std::string_view value, OriginRecord* record);

// OK for kOldestReadableFormat..kFormatVersion. FailedPrecondition for an older or a newer version
// (naming both), DataLoss for one below 1. `where` names the store.
Status CheckFormatVersion(int32_t version, std::string_view where);

// Ledger keys. REQUIRES: origin >= 0 (so that origin + 1 bounds its rows).
std::string LedgerKey(SiteId origin, ChunkKey key);
// The keys [begin, end) that hold every row of `origin`, and nothing else.
struct KeyRange {
  std::string begin;
  std::string end;
};
KeyRange LedgerOriginRange(SiteId origin);
// False when `bytes` is not kLedgerKeySize long.
bool DecodeLedgerKey(std::string_view bytes, SiteId* origin, ChunkKey* key);
// "ledger of origin 3, chunk (table 0, chunk 7)", for messages.
std::string DescribeLedgerRow(SiteId origin, ChunkKey key);
// "ledger add for origin 3, chunk (table 0, chunk 7)", for messages.
std::string DescribeLedgerAdd(const LedgerAdd& add);

// OK when `add` keeps LedgerAdd's contract: origin >= 0, num_elements at
// most kMaxLedgerElements, as many values as indices, indices strictly
// increasing and below num_elements, values finite. Otherwise InvalidArgument naming the add and the first problem.
Status CheckLedgerAdd(const LedgerAdd& add);
// Replaces `out` with the entry of `add`: sparse, or dense when more than
// half of the chunk's elements are in it.
// REQUIRES: CheckLedgerAdd(add).ok().
void EncodeLedgerAdd(const LedgerAdd& add, std::string* out);

// The tag and size of a ledger entry, read from its first kLedgerRowHeaderSize
// bytes (shared by both entries). False when `entry` is shorter than that.
struct LedgerEntryHeader {
  uint8_t tag = 0;
  uint32_t num_elements = 0;
};
bool PeekLedgerEntry(std::string_view entry, LedgerEntryHeader* header);

// The sums of one ledger row while its entries are added together.
struct LedgerSums {
  bool sized = false;          // set by the first entry, which sizes `values`
  std::vector<double> values;
};
// Adds one entry (a sparse add or a dense row) into `sums`. DataLoss naming
// the problem for an entry that is malformed (unknown tag, sizes that do not
// add up, an index out of order or range, a value that is not finite) or
// whose num_elements differs from the entries before it; `sums` may then
// hold part of the entry.
Status AddLedgerEntry(std::string_view entry, LedgerSums* sums);
// A dense row entry holding `sums`.
std::string EncodeLedgerRow(std::span<const double> sums);
// Decodes a dense row (what a read of the family returns) into `sums`.
// DataLoss naming the problem for anything else, a sparse add included.
Status DecodeLedgerRow(std::string_view value, std::vector<double>* sums);

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
