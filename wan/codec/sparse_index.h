// Sparse index codecs of the WAN batch format: which elements of a chunk an
// update touches, as a bitmap, as delta-varints or as Golomb-Rice coded
// gaps (or nothing, when every element is present). The encoder picks
// whichever is smallest. Also the LEB128 varint helpers the chunk records
// use for their own fields.
//
// Decoders validate their input completely: they never read outside the
// given span and reject indices that are out of range, repeated or out of
// order, varints that overflow 32 bits or are not in their shortest form,
// Rice codes that are unterminated or overlong, nonzero padding, stray
// bitmap bits and trailing bytes.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WAN_CODEC_SPARSE_INDEX_H_
#define GEOPS_WAN_CODEC_SPARSE_INDEX_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "wan/codec/batch_format.h"

namespace geops::wan {

// --- LEB128 varints (u32, 7 bits per byte, low group first) ---

// Bytes of the LEB128 encoding of v: 1..5.
inline size_t VarintBytes(uint32_t v) {
  return 1 + (static_cast<size_t>(31 - std::countl_zero(v | 1u)) / 7);
}

// Writes v at p and returns the byte after it.
inline uint8_t* PutVarint(uint8_t* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

enum class VarintResult : uint8_t {
  kOk,
  kTruncated,  // the input ends inside the varint
  kOverflow,   // the value does not fit 32 bits (or more than 5 bytes)
  kOverlong,   // a redundant final 0 group: not the shortest encoding
};

// Words for an error message: "is truncated", "overflows 32 bits", ...
const char* VarintProblem(VarintResult r);

// Reads one varint from [*p, end) into *v and advances *p past it. On
// failure *p and *v are unspecified. Only the shortest encoding of a value
// is accepted, so every value has exactly one encoding.
inline VarintResult ReadVarint(const uint8_t** p, const uint8_t* end, uint32_t* v) {
  const uint8_t* q = *p;
  uint32_t x = 0;
  for (int shift = 0;; shift += 7) {
    if (q == end) return VarintResult::kTruncated;
    const uint8_t b = *q++;
    if (shift == 28 && b > 0x0f) return VarintResult::kOverflow;
    x |= static_cast<uint32_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      if (b == 0 && shift > 0) return VarintResult::kOverlong;
      break;
    }
  }
  *p = q;
  *v = x;
  return VarintResult::kOk;
}

// --- Index encodings ---

// Bytes of a bitmap over n elements.
inline size_t BitmapBytes(uint32_t n) { return (static_cast<size_t>(n) + 7) / 8; }

// Bytes of the delta-varint encoding of `indices`.
// REQUIRES: indices strictly increasing.
size_t DeltaVarintBytes(std::span<const uint32_t> indices);

// Bytes of the Rice encoding of `indices` with parameter k, the k byte
// included. REQUIRES: indices strictly increasing, k <= kRiceMaxParameter.
size_t RiceBytes(std::span<const uint32_t> indices, uint32_t k);

// A good Rice parameter for `indices`, and RiceBytes for it in *bytes:
// the best k by an estimate of every k's cost from a histogram of the
// values' bit widths, then exact costs at k - 1 and k + 1, walking on
// while that is strictly smaller (a tie keeps the k already reached).
// Within a bit per value of the best k, and nearly always the best.
// REQUIRES: indices strictly increasing.
uint32_t ChooseRiceParameter(std::span<const uint32_t> indices, size_t* bytes);

// How one chunk's index is written: the encoding, the size of its field,
// and for kRice the parameter k.
struct IndexPlan {
  IndexEncoding encoding = IndexEncoding::kDense;
  size_t bytes = 0;
  uint32_t rice_k = 0;
};

// The smallest encoding of `indices` within a chunk of n elements. Dense
// when every element is present; otherwise the smallest of bitmap,
// delta-varint and Rice (with ChooseRiceParameter's k), earlier ones in
// that order winning ties (they decode faster).
// REQUIRES: indices strictly increasing and < n.
IndexPlan ChooseIndexEncoding(std::span<const uint32_t> indices, uint32_t n);

// Writes `plan` into out[0, plan.bytes). `plan` is what ChooseIndexEncoding
// returned, or any encoding valid for the indices with the matching size
// (BitmapBytes, DeltaVarintBytes, RiceBytes). REQUIRES as above.
void EncodeIndex(const IndexPlan& plan, std::span<const uint32_t> indices, uint32_t n,
                 uint8_t* out);

// Decodes exactly out.size() indices of a chunk of n elements from `in`,
// which must be consumed exactly. Returns InvalidArgument describing the
// first problem (naming the encoding); *out is then unspecified.
Status DecodeIndex(IndexEncoding encoding, std::span<const uint8_t> in, uint32_t n,
                   std::span<uint32_t> out);

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_SPARSE_INDEX_H_
