// Constants of the WAN batch wire format: the layout of a batch of sparse
// chunk updates shipped from one site to another. docs/wan_batch_format.md
// describes the layout in prose; this header is the one place the numbers
// live. All multi-byte fields are little-endian.
//
// Constants only; no thread-safety concerns.
#ifndef GEOPS_WAN_BATCH_FORMAT_H_
#define GEOPS_WAN_BATCH_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace geops::wan {

// How the values of a batch are stored. The numbers are on the wire.
enum class ValueCodec : uint8_t {
  kFp32 = 0,  // 4 bytes per value, exact
  kFp16 = 1,  // IEEE binary16, round to nearest even, clamped to +-65504
  kInt8 = 2,  // q in [-127, 127]; value = q * scale, scale = max |v| / 127 per chunk
  kSign = 3,  // 1 bit; value = +-scale per chunk, scale ~ mean |v| of the larger values
};
inline constexpr uint8_t kNumValueCodecs = 4;

// How a chunk names which of its elements are present. On the wire.
enum class IndexEncoding : uint8_t {
  kDense = 0,        // every element present; no index bytes
  kBitmap = 1,       // ceil(num_elements / 8) bytes, bit i (LSB first) = element i present
  kDeltaVarint = 2,  // LEB128 varints: first index, then each gap minus one
};
inline constexpr uint8_t kNumIndexEncodings = 3;

namespace batch_format {

inline constexpr uint32_t kMagic = 0x31425747;  // bytes "GWB1"
inline constexpr uint16_t kVersion = 1;

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

inline constexpr uint8_t kFlagLz4 = 0x01;  // stored body is one LZ4 block
inline constexpr uint8_t kKnownFlags = kFlagLz4;

// Chunk record inside the body: fixed part, then the scale (int8 and sign
// codecs only), then index bytes, then value bytes.
inline constexpr size_t kChunkFixedSize = 21;  // u32 table, u32 chunk, u32 num_elements,
                                               // u32 count, u8 IndexEncoding, u32 index_bytes
inline constexpr size_t kScaleSize = 4;        // f32

// Largest uncompressed body; below LZ4's own input limit.
inline constexpr uint32_t kMaxBodyBytes = uint32_t{1} << 30;
// Longest LEB128 encoding of a u32.
inline constexpr size_t kMaxVarintBytes = 5;

}  // namespace batch_format
}  // namespace geops::wan

#endif  // GEOPS_WAN_BATCH_FORMAT_H_
