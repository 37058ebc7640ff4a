// Constants of the WAN batch wire format: the layout of a batch of sparse
// chunk updates shipped from one site to another. docs/wan_batch_format.md
// describes the layout in prose; this header is the one place the numbers
// live. All multi-byte fields are little-endian.
//
// Constants and constexpr helpers only; no thread-safety concerns.
#ifndef GEOPS_WAN_CODEC_BATCH_FORMAT_H_
#define GEOPS_WAN_CODEC_BATCH_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace geops::wan {

// How the values of a batch are stored. The numbers are on the wire.
enum class ValueCodec : uint8_t {
  kFp32 = 0,  // 4 bytes per value, exact
  kFp16 = 1,  // IEEE binary16, round to nearest even, clamped to +-65504
  kInt8 = 2,  // q in [-127, 127]; value = q * scale, scale = max |v| / 127 per chunk
  kSign = 3,  // 1 bit; value = +-scale per chunk, scale ~ mean |v| of the larger values
  kInt4 = 4,  // q in [-7, 7], two per byte; value = q * scale, scale = max |v| / 7 per chunk
};
inline constexpr uint8_t kNumValueCodecs = 5;

// How a chunk names which of its elements are present. On the wire.
enum class IndexEncoding : uint8_t {
  kDense = 0,        // every element present; no index bytes
  kBitmap = 1,       // ceil(num_elements / 8) bytes, bit i (LSB first) = element i present
  kDeltaVarint = 2,  // LEB128 varints: first index, then each gap minus one
  kRice = 3,         // the same gaps, Golomb-Rice coded: u8 k, then a bit stream
};
inline constexpr uint8_t kNumIndexEncodings = 4;

namespace batch_format {

inline constexpr uint32_t kMagic = 0x31425747;  // bytes "GWB1"
// 2: varint chunk records, the int4 codec and the Rice index. A reader
// accepts exactly its own version.
inline constexpr uint16_t kVersion = 2;

// Batch header, 48 bytes, at offset 0.
inline constexpr size_t kHeaderSize = 48;
inline constexpr size_t kMagicOffset = 0;        // u32 kMagic
inline constexpr size_t kVersionOffset = 4;      // u16 kVersion
inline constexpr size_t kCodecOffset = 6;        // u8 ValueCodec
inline constexpr size_t kFlagsOffset = 7;        // u8 flags, see kFlag*
inline constexpr size_t kOriginOffset = 8;       // i32 origin site id
inline constexpr size_t kChunkCountOffset = 12;  // u32 chunk records in the body
inline constexpr size_t kSeqOffset = 16;         // u64 per-(origin, destination) sequence number
inline constexpr size_t kClockOffset = 24;       // i64 origin shard clock
inline constexpr size_t kBodySizeOffset = 32;    // u32 body size before compression
inline constexpr size_t kStoredSizeOffset = 36;  // u32 body bytes following the header
inline constexpr size_t kReservedOffset = 40;    // u32, must be 0
inline constexpr size_t kChecksumOffset = 44;    // u32 CRC-32C of header[0, 44) + stored body

inline constexpr uint8_t kFlagLz4 = 0x01;    // stored body is one LZ4 block
inline constexpr uint8_t kFlagFinal = 0x02;  // the origin's last batch to this destination (BatchHeader::final)
// The body ends with a mark after its chunk records (an outer step's
// contribution, BatchHeader::marked): u32 n, then n times (i64 clock, i32
// part): the last update batch of each of the origin's workers that the
// batch holds (clock -1: none).
inline constexpr uint8_t kFlagMarked = 0x04;
inline constexpr uint8_t kKnownFlags = kFlagLz4 | kFlagFinal | kFlagMarked;
// Most workers a mark may name.
inline constexpr uint32_t kMaxMarkedWorkers = 1u << 16;

// Longest LEB128 encoding of a u32 (7 bits per byte).
inline constexpr size_t kMaxVarintBytes = 5;

// Chunk record inside the body: the record head (varint table, varint
// chunk delta, varint num_elements, varint count, u8 IndexEncoding, varint
// index_bytes), then the scale (codecs with HasScale only), then index
// bytes, then value bytes. The chunk delta is the chunk id minus the
// previous record's chunk id when both have the same table (so >= 1), else
// the chunk id itself.
inline constexpr size_t kChunkVarintFields = 5;
inline constexpr size_t kMinChunkHeadSize = kChunkVarintFields + 1;  // every varint one byte
inline constexpr size_t kMaxChunkHeadSize = kChunkVarintFields * kMaxVarintBytes + 1;
inline constexpr size_t kScaleSize = 4;  // f32

// Quantiser ranges: int8 codes are in [-kInt8MaxCode, kInt8MaxCode] (-128
// refused), int4 codes in [-kInt4MaxCode, kInt4MaxCode] (nibble 0x8, i.e.
// -8, refused).
inline constexpr int kInt8MaxCode = 127;
inline constexpr int kInt4MaxCode = 7;

// Rice index: the field starts with one byte k in [0, kRiceMaxParameter].
// Each value x (the first index, then gap - 1) is x >> k in unary (that
// many 1 bits, then a 0 bit) followed by the low k bits of x, when
// x >> k < kRiceEscapeRun. Otherwise it is kRiceEscapeRun 1 bits (no 0)
// followed by x in kRiceEscapeBits raw bits. Bits are LSB-first within
// each byte; the last byte is padded with 0 bits. So no code exceeds 64
// bits and a unary run never exceeds kRiceEscapeRun.
inline constexpr uint32_t kRiceMaxParameter = 31;
inline constexpr uint32_t kRiceEscapeRun = 32;
inline constexpr uint32_t kRiceEscapeBits = 32;

// Largest uncompressed body; below LZ4's own input limit.
inline constexpr uint32_t kMaxBodyBytes = uint32_t{1} << 30;

// Whether a record of `codec` carries the f32 scale.
constexpr bool HasScale(ValueCodec codec) {
  return codec == ValueCodec::kInt8 || codec == ValueCodec::kSign || codec == ValueCodec::kInt4;
}

// Bytes the values of a record with `count` values take.
constexpr uint64_t ValueBytes(ValueCodec codec, uint64_t count) {
  switch (codec) {
    case ValueCodec::kFp32:
      return count * 4;
    case ValueCodec::kFp16:
      return count * 2;
    case ValueCodec::kInt8:
      return count;
    case ValueCodec::kSign:
      return (count + 7) / 8;
    case ValueCodec::kInt4:
      return (count + 1) / 2;
  }
  return 0;
}

// The smallest possible chunk record of `codec`: one-byte varints, no
// index bytes (dense), one value. Bounds how many records a body can hold.
constexpr size_t MinChunkRecordSize(ValueCodec codec) {
  return kMinChunkHeadSize + (HasScale(codec) ? kScaleSize : 0) +
         static_cast<size_t>(ValueBytes(codec, 1));
}

}  // namespace batch_format
}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_BATCH_FORMAT_H_
