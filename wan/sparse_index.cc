#include "wan/sparse_index.h"

#include <bit>
#include <cstring>
#include <string>

namespace geops::wan {
namespace {

inline size_t VarintSize(uint32_t v) {
  // 1 + floor(bits / 7) for v > 0: 1..5 bytes.
  return 1 + (static_cast<size_t>(31 - std::countl_zero(v | 1u)) / 7);
}

inline uint8_t* PutVarint(uint8_t* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

Status DecodeDeltaVarint(std::span<const uint8_t> in, uint32_t n, std::span<uint32_t> out) {
  const uint8_t* p = in.data();
  const uint8_t* end = p + in.size();
  uint64_t next = 0;  // smallest index allowed next
  for (size_t k = 0; k < out.size(); ++k) {
    uint32_t v = 0;
    int shift = 0;
    while (true) {
      if (p == end) {
        return InvalidArgumentError("delta-varint index: input ends inside index " +
                                    std::to_string(k) + " of " + std::to_string(out.size()));
      }
      uint8_t b = *p++;
      if (shift == 28 && b > 0x0f) {
        return InvalidArgumentError("delta-varint index: varint " + std::to_string(k) +
                                    " overflows 32 bits");
      }
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
      shift += 7;
    }
    uint64_t index = next + v;
    if (index >= n) {
      return InvalidArgumentError("delta-varint index: index " + std::to_string(index) +
                                  " (entry " + std::to_string(k) + ") >= chunk size " +
                                  std::to_string(n));
    }
    out[k] = static_cast<uint32_t>(index);
    next = index + 1;
  }
  if (p != end) {
    return InvalidArgumentError("delta-varint index: " + std::to_string(end - p) +
                                " trailing bytes after " + std::to_string(out.size()) + " indices");
  }
  return Status::Ok();
}

Status DecodeBitmap(std::span<const uint8_t> in, uint32_t n, std::span<uint32_t> out) {
  if (in.size() != BitmapBytes(n)) {
    return InvalidArgumentError("bitmap index: " + std::to_string(in.size()) + " bytes, expected " +
                                std::to_string(BitmapBytes(n)) + " for " + std::to_string(n) +
                                " elements");
  }
  if (n % 8 != 0 && (in.back() >> (n % 8)) != 0) {
    return InvalidArgumentError("bitmap index: bits set beyond chunk size " + std::to_string(n));
  }
  size_t k = 0;
  const size_t cap = out.size();
  size_t byte = 0;
  for (; byte + 8 <= in.size(); byte += 8) {
    uint64_t word;
    std::memcpy(&word, in.data() + byte, 8);
    if (static_cast<size_t>(std::popcount(word)) > cap - k) {
      return InvalidArgumentError("bitmap index: more than " + std::to_string(cap) + " bits set");
    }
    while (word != 0) {
      out[k++] = static_cast<uint32_t>(byte * 8 + std::countr_zero(word));
      word &= word - 1;
    }
  }
  for (; byte < in.size(); ++byte) {
    uint32_t bits = in[byte];
    if (static_cast<size_t>(std::popcount(bits)) > cap - k) {
      return InvalidArgumentError("bitmap index: more than " + std::to_string(cap) + " bits set");
    }
    while (bits != 0) {
      out[k++] = static_cast<uint32_t>(byte * 8 + std::countr_zero(bits));
      bits &= bits - 1;
    }
  }
  if (k != cap) {
    return InvalidArgumentError("bitmap index: " + std::to_string(k) + " bits set, expected " +
                                std::to_string(cap));
  }
  return Status::Ok();
}

}  // namespace

size_t DeltaVarintBytes(std::span<const uint32_t> indices) {
  size_t bytes = 0;
  uint32_t next = 0;
  for (uint32_t i : indices) {
    bytes += VarintSize(i - next);
    next = i + 1;
  }
  return bytes;
}

IndexEncoding ChooseIndexEncoding(std::span<const uint32_t> indices, uint32_t n, size_t* bytes) {
  if (indices.size() == n) {
    *bytes = 0;
    return IndexEncoding::kDense;
  }
  size_t bitmap = BitmapBytes(n);
  // Every varint takes at least one byte: skip the exact count when it
  // cannot win.
  if (indices.size() >= bitmap) {
    *bytes = bitmap;
    return IndexEncoding::kBitmap;
  }
  size_t varint = DeltaVarintBytes(indices);
  if (varint < bitmap) {
    *bytes = varint;
    return IndexEncoding::kDeltaVarint;
  }
  *bytes = bitmap;
  return IndexEncoding::kBitmap;
}

void EncodeIndex(IndexEncoding encoding, std::span<const uint32_t> indices, uint32_t n,
                 uint8_t* out) {
  switch (encoding) {
    case IndexEncoding::kDense:
      return;
    case IndexEncoding::kBitmap: {
      std::memset(out, 0, BitmapBytes(n));
      for (uint32_t i : indices) out[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      return;
    }
    case IndexEncoding::kDeltaVarint: {
      uint32_t next = 0;
      for (uint32_t i : indices) {
        out = PutVarint(out, i - next);
        next = i + 1;
      }
      return;
    }
  }
}

Status DecodeIndex(IndexEncoding encoding, std::span<const uint8_t> in, uint32_t n,
                   std::span<uint32_t> out) {
  if (out.size() > n) {
    return InvalidArgumentError("index: " + std::to_string(out.size()) +
                                " entries exceed chunk size " + std::to_string(n));
  }
  switch (encoding) {
    case IndexEncoding::kDense:
      if (!in.empty()) {
        return InvalidArgumentError("dense index: " + std::to_string(in.size()) +
                                    " index bytes, expected 0");
      }
      if (out.size() != n) {
        return InvalidArgumentError("dense index: " + std::to_string(out.size()) +
                                    " entries for a chunk of " + std::to_string(n));
      }
      for (uint32_t i = 0; i < n; ++i) out[i] = i;
      return Status::Ok();
    case IndexEncoding::kBitmap:
      return DecodeBitmap(in, n, out);
    case IndexEncoding::kDeltaVarint:
      return DecodeDeltaVarint(in, n, out);
  }
  return InvalidArgumentError("index: unknown encoding " +
                              std::to_string(static_cast<int>(encoding)));
}

}  // namespace geops::wan
