// Sparse index codecs of the WAN batch format: which elements of a chunk an
// update touches, as a bitmap or as delta-varints (or nothing, when every
// element is present). The encoder picks whichever is smaller.
//
// Decoders validate their input completely: they never read outside the
// given span and reject indices that are out of range, repeated or out of
// order, varints that overflow 32 bits, and stray bitmap bits.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WAN_SPARSE_INDEX_H_
#define GEOPS_WAN_SPARSE_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "wan/batch_format.h"

namespace geops::wan {

// Bytes of a bitmap over n elements.
inline size_t BitmapBytes(uint32_t n) { return (static_cast<size_t>(n) + 7) / 8; }

// Bytes of the delta-varint encoding of `indices`.
// REQUIRES: indices strictly increasing.
size_t DeltaVarintBytes(std::span<const uint32_t> indices);

// The smallest encoding of `indices` within a chunk of n elements, and its
// size in *bytes. Dense when every element is present; bitmap on a tie.
// REQUIRES: indices strictly increasing and < n.
IndexEncoding ChooseIndexEncoding(std::span<const uint32_t> indices, uint32_t n, size_t* bytes);

// Writes the encoding into out[0, bytes) where bytes is what
// ChooseIndexEncoding returned for it. REQUIRES as above.
void EncodeIndex(IndexEncoding encoding, std::span<const uint32_t> indices, uint32_t n,
                 uint8_t* out);

// Decodes exactly out.size() indices of a chunk of n elements from `in`,
// which must be consumed exactly. Returns InvalidArgument describing the
// first problem; *out is then unspecified.
Status DecodeIndex(IndexEncoding encoding, std::span<const uint8_t> in, uint32_t n,
                   std::span<uint32_t> out);

}  // namespace geops::wan

#endif  // GEOPS_WAN_SPARSE_INDEX_H_
