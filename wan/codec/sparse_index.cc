#include "wan/codec/sparse_index.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>

namespace geops::wan {
namespace bf = batch_format;
namespace {

Status DecodeDeltaVarint(std::span<const uint8_t> in, uint32_t n, std::span<uint32_t> out) {
  const uint8_t* p = in.data();
  const uint8_t* end = p + in.size();
  uint64_t next = 0;  // smallest index allowed next
  for (size_t k = 0; k < out.size(); ++k) {
    uint32_t v = 0;
    VarintResult r = ReadVarint(&p, end, &v);
    if (r != VarintResult::kOk) {
      return InvalidArgumentError("delta-varint index: varint " + std::to_string(k) + " of " +
                                  std::to_string(out.size()) + " " + VarintProblem(r));
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

// --- Rice ---

// Bits of value x with parameter k: unary quotient, its terminating 0 and
// k low bits, or the escape (a full run of 1s and x raw) when the quotient
// reaches the run limit.
inline uint64_t RiceCodeBits(uint32_t x, uint32_t k) {
  const uint32_t q = x >> k;
  return q < bf::kRiceEscapeRun ? uint64_t{q} + 1 + k : bf::kRiceEscapeRun + bf::kRiceEscapeBits;
}

uint64_t RiceBits(std::span<const uint32_t> indices, uint32_t k) {
  uint64_t bits = 0;
  uint32_t next = 0;
  for (uint32_t i : indices) {
    bits += RiceCodeBits(i - next, k);
    next = i + 1;
  }
  return bits;
}

inline size_t RiceBytesFromBits(uint64_t bits) { return 1 + static_cast<size_t>((bits + 7) / 8); }

// Exact Rice costs of three consecutive parameters k0, k0 + 1, k0 + 2 in
// one pass. REQUIRES: k0 + 2 <= kRiceMaxParameter.
void RiceBits3(std::span<const uint32_t> indices, uint32_t k0, uint64_t bits[3]) {
  uint64_t b0 = 0, b1 = 0, b2 = 0;
  uint32_t next = 0;
  for (uint32_t i : indices) {
    const uint32_t x = i - next;
    next = i + 1;
    b0 += RiceCodeBits(x, k0);
    b1 += RiceCodeBits(x, k0 + 1);
    b2 += RiceCodeBits(x, k0 + 2);
  }
  bits[0] = b0;
  bits[1] = b1;
  bits[2] = b2;
}

// The values (first index, then gap - 1) by bit width: how many, and their
// sum. One pass gives the exact delta-varint size and a close estimate of
// the Rice size for every k.
struct GapHistogram {
  uint32_t count[33];
  uint64_t sum[33];
  uint32_t max_width = 0;
  uint64_t total = 0;

  explicit GapHistogram(std::span<const uint32_t> indices) {
    // Neighbouring values mostly share a width: two tables, one for even
    // and one for odd positions, keep each increment from waiting on the
    // previous one's store.
    uint32_t c[2][33] = {};
    uint64_t s[2][33] = {};
    const uint32_t* v = indices.data();
    const size_t m = indices.size();
    uint32_t next = 0;
    size_t j = 0;
    for (; j + 2 <= m; j += 2) {
      const uint32_t x0 = v[j] - next;
      const uint32_t x1 = v[j + 1] - v[j] - 1;
      next = v[j + 1] + 1;
      const int b0 = std::bit_width(x0);
      const int b1 = std::bit_width(x1);
      ++c[0][b0];
      s[0][b0] += x0;
      ++c[1][b1];
      s[1][b1] += x1;
    }
    if (j < m) {
      const uint32_t x = v[j] - next;
      ++c[0][std::bit_width(x)];
      s[0][std::bit_width(x)] += x;
    }
    for (uint32_t b = 0; b <= 32; ++b) {
      count[b] = c[0][b] + c[1][b];
      sum[b] = s[0][b] + s[1][b];
      if (count[b] != 0) max_width = b;
    }
    total = m;
  }

  // Exactly DeltaVarintBytes: a value of width b takes max(1, ceil(b / 7)) bytes.
  size_t VarintBytes() const {
    size_t bytes = count[0];
    for (uint32_t b = 1; b <= max_width; ++b) bytes += size_t{count[b]} * ((b + 6) / 7);
    return bytes;
  }

  // The k with the smallest estimated Rice size. Exact for values below
  // 2^k (k + 1 bits) and for escaped ones (width >= k + 6, since then
  // x >> k >= 32: 64 bits); widths in (k, k + 5] contribute their quotient
  // sum, estimated as (sum >> k) less half a unit per value for the floor,
  // so the estimate is off by about half a bit per such value. A k above
  // the widest value only adds bits.
  uint32_t EstimateRiceParameter() const {
    const uint32_t top = std::min(max_width, bf::kRiceMaxParameter);
    uint64_t below = 0;  // values of width <= k
    uint32_t best_k = 0;
    uint64_t best = UINT64_MAX;
    for (uint32_t k = 0; k <= top; ++k) {
      below += count[k];
      uint64_t band = 0;
      uint64_t bits = below * (k + 1);
      const uint32_t band_top = std::min(k + 5, max_width);
      for (uint32_t b = k + 1; b <= band_top; ++b) {
        band += count[b];
        bits += (sum[b] >> k) + uint64_t{count[b]} * (k + 1) - count[b] / 2;
      }
      bits += (total - below - band) * (bf::kRiceEscapeRun + bf::kRiceEscapeBits);
      if (bits < best) {
        best = bits;
        best_k = k;
      }
    }
    return best_k;
  }
};

// Settles the estimated k with exact sizes: k - 1, k and k + 1 in one
// pass, then on in the downhill direction while strictly smaller. Ties
// keep the estimate, then the smaller k.
uint32_t RefineRiceParameter(std::span<const uint32_t> indices, uint32_t k, size_t* bytes) {
  const uint32_t k0 = std::min(k == 0 ? 0 : k - 1, bf::kRiceMaxParameter - 2);
  uint64_t bits[3];
  RiceBits3(indices, k0, bits);
  uint32_t best_k = k;
  uint64_t best = bits[k - k0];
  for (uint32_t j = 0; j < 3; ++j) {
    if (bits[j] < best) {
      best = bits[j];
      best_k = k0 + j;
    }
  }
  // Continue past the window's edge only when the minimum sits on it.
  const int dir = best_k == k0 && k0 > 0 ? -1 : (best_k == k0 + 2 ? 1 : 0);
  while (dir != 0) {
    const int64_t cand = static_cast<int64_t>(best_k) + dir;
    if (cand < 0 || cand > static_cast<int64_t>(bf::kRiceMaxParameter)) break;
    const uint64_t b = RiceBits(indices, static_cast<uint32_t>(cand));
    if (b >= best) break;
    best = b;
    best_k = static_cast<uint32_t>(cand);
  }
  *bytes = RiceBytesFromBits(best);
  return best_k;
}

// LSB-first bit writer into a field of exactly the encoded size. Each Put
// stores a whole 8-byte word while at least 8 bytes of the field remain
// (bytes past the committed ones are rewritten by the next store), and
// byte by byte near the end, so it never writes past the field.
class BitWriter {
 public:
  BitWriter(uint8_t* out, size_t size) : p_(out), end_(out + size) {}
  // REQUIRES: len <= kMaxPut, bits < 2^len.
  static constexpr uint32_t kMaxPut = 56;
  void Put(uint64_t bits, uint32_t len) {
    acc_ |= bits << fill_;  // fill_ < 8, so fill_ + len < 64
    fill_ += len;
    const uint32_t whole = fill_ >> 3;
    if (end_ - p_ >= 8) [[likely]] {
      std::memcpy(p_, &acc_, 8);
    } else {
      for (uint32_t b = 0; b < whole; ++b) p_[b] = static_cast<uint8_t>(acc_ >> (8 * b));
    }
    p_ += whole;
    acc_ >>= 8 * whole;  // whole <= 7
    fill_ &= 7;
  }
  // Stores the last partial byte, padded with 0 bits.
  void Finish() {
    if (fill_ > 0) *p_ = static_cast<uint8_t>(acc_);
  }

 private:
  uint8_t* p_;
  uint8_t* const end_;
  uint64_t acc_ = 0;
  uint32_t fill_ = 0;  // pending bits in acc_, < 8 between calls
};

void EncodeRice(std::span<const uint32_t> indices, uint32_t k, size_t bytes, uint8_t* out) {
  out[0] = static_cast<uint8_t>(k);
  BitWriter w(out + 1, bytes - 1);
  const uint64_t mask = (uint64_t{1} << k) - 1;
  uint32_t next = 0;
  for (uint32_t i : indices) {
    const uint32_t x = i - next;
    next = i + 1;
    const uint32_t q = x >> k;
    if (q < bf::kRiceEscapeRun) {
      const uint64_t unary = (uint64_t{1} << q) - 1;  // q ones, then the 0
      const uint32_t len = q + 1 + k;
      if (len <= BitWriter::kMaxPut) [[likely]] {
        w.Put(((x & mask) << (q + 1)) | unary, len);
      } else {
        w.Put(unary, q + 1);
        w.Put(x & mask, k);
      }
    } else {
      w.Put((uint64_t{1} << bf::kRiceEscapeRun) - 1, bf::kRiceEscapeRun);
      w.Put(x, bf::kRiceEscapeBits);
    }
  }
  w.Finish();
}

// The 64 bits of data starting at bit `pos` (LSB-first), 0 beyond the end.
// At least 57 of them are data bits when pos is inside the span: a whole
// unaligned word less the bit offset within its first byte.
inline uint64_t PeekBits(const uint8_t* data, size_t size, uint64_t pos) {
  const uint64_t byte = pos >> 3;
  uint64_t w = 0;
  if (byte + 8 <= size) {
    std::memcpy(&w, data + byte, 8);
  } else if (byte < size) {
    std::memcpy(&w, data + byte, size - byte);
  }
  return w >> (pos & 7);
}
constexpr uint32_t kPeekBits = 57;

// Reads one Rice value at bit *pos (any position, any code length, the
// field's end included) and advances *pos. Bits beyond the field read as
// 0, so nothing outside it is touched; the caller checks *pos against the
// field size. Sets *escaped when the value came as an escape.
inline uint64_t ReadRiceSlow(const uint8_t* data, size_t size, uint32_t k, uint64_t* pos,
                             bool* escaped) {
  const uint64_t w = PeekBits(data, size, *pos);
  const uint32_t ones = static_cast<uint32_t>(std::countr_one(w));
  if (ones < bf::kRiceEscapeRun) {
    const uint32_t head = ones + 1;
    const uint64_t low = head + k <= kPeekBits ? w >> head : PeekBits(data, size, *pos + head);
    *pos += head + k;
    *escaped = false;
    return (uint64_t{ones} << k) | (low & ((uint64_t{1} << k) - 1));
  }
  *pos += bf::kRiceEscapeRun + bf::kRiceEscapeBits;
  *escaped = true;
  return PeekBits(data, size, *pos - bf::kRiceEscapeBits) & 0xffffffffu;
}

Status DecodeRice(std::span<const uint8_t> in, uint32_t n, std::span<uint32_t> out) {
  if (in.empty()) {
    return InvalidArgumentError("rice index: empty field, expected the parameter byte k");
  }
  const uint32_t k = in[0];
  if (k > bf::kRiceMaxParameter) {
    return InvalidArgumentError("rice index: parameter k " + std::to_string(k) + " > " +
                                std::to_string(bf::kRiceMaxParameter));
  }
  const uint8_t* const data = in.data() + 1;
  const size_t size = in.size() - 1;
  const uint64_t total = uint64_t{size} * 8;
  const uint64_t mask = (uint64_t{1} << k) - 1;
  // Bit buffer: the next `avail` bits of the stream in the low end of
  // `buf` (and more data, or 0s past the end, above them). It is topped up
  // only when the next code does not fit, so the refill's load stays off
  // the per-value dependency chain: while 8 bytes remain, one unaligned
  // load brings it to at least 56 bits.
  const uint8_t* p = data;
  const uint8_t* const end = data + size;
  uint64_t buf = 0;
  uint32_t avail = 0;
  uint64_t next = 0;  // smallest index allowed next
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t ones = static_cast<uint32_t>(std::countr_one(buf));
    uint32_t len = ones + 1 + k;
    if (ones >= bf::kRiceEscapeRun || len > avail) [[unlikely]] {
      if (end - p >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        buf |= w << avail;
        p += (63 - avail) >> 3;
        avail |= 56;
      } else {
        for (; avail <= 56 && p < end; avail += 8) buf |= uint64_t{*p++} << avail;
      }
      ones = static_cast<uint32_t>(std::countr_one(buf));
      len = ones + 1 + k;
    }
    uint64_t x;
    if (ones < bf::kRiceEscapeRun && len <= avail) [[likely]] {
      x = (uint64_t{ones} << k) | ((buf >> (ones + 1)) & mask);
      buf >>= len;  // len <= avail < 64
      avail -= len;
    } else {
      // Escapes, codes longer than the buffer holds, and the field's end:
      // decode from the bit position, then restart the buffer there.
      uint64_t pos = static_cast<uint64_t>(p - data) * 8 - avail;
      bool escaped = false;
      x = ReadRiceSlow(data, size, k, &pos, &escaped);
      if (pos > total) {
        return InvalidArgumentError("rice index: input ends inside value " + std::to_string(i) +
                                    " of " + std::to_string(out.size()) +
                                    " (unterminated code)");
      }
      if (escaped && (x >> k) < bf::kRiceEscapeRun) {
        return InvalidArgumentError("rice index: value " + std::to_string(i) +
                                    " is escaped but fits the unary code (overlong)");
      }
      p = data + (pos >> 3);
      buf = 0;
      avail = 0;
      if (pos % 8 != 0) {
        buf = uint64_t{*p++} >> (pos % 8);
        avail = 8 - static_cast<uint32_t>(pos % 8);
      }
    }
    const uint64_t index = next + x;
    if (index >= n) [[unlikely]] {
      if (x > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgumentError("rice index: value " + std::to_string(i) +
                                    " overflows 32 bits");
      }
      return InvalidArgumentError("rice index: index " + std::to_string(index) + " (entry " +
                                  std::to_string(i) + ") >= chunk size " + std::to_string(n));
    }
    out[i] = static_cast<uint32_t>(index);
    next = index + 1;
  }
  // Everything after the last value, to the end of its byte, is padding.
  const uint64_t pos = static_cast<uint64_t>(p - data) * 8 - avail;
  const uint64_t used = (pos + 7) / 8;
  if (used != size) {
    return InvalidArgumentError("rice index: " + std::to_string(size - used) +
                                " trailing bytes after " + std::to_string(out.size()) + " values");
  }
  if (pos % 8 != 0 && (data[size - 1] >> (pos % 8)) != 0) {
    return InvalidArgumentError("rice index: nonzero padding bits after the last value");
  }
  return Status::Ok();
}

}  // namespace

const char* VarintProblem(VarintResult r) {
  switch (r) {
    case VarintResult::kOk:
      return "is fine";
    case VarintResult::kTruncated:
      return "is truncated (input ends inside it)";
    case VarintResult::kOverflow:
      return "overflows 32 bits";
    case VarintResult::kOverlong:
      return "is overlong (not the shortest encoding)";
  }
  return "is invalid";
}

size_t DeltaVarintBytes(std::span<const uint32_t> indices) {
  size_t bytes = 0;
  uint32_t next = 0;
  for (uint32_t i : indices) {
    bytes += VarintBytes(i - next);
    next = i + 1;
  }
  return bytes;
}

size_t RiceBytes(std::span<const uint32_t> indices, uint32_t k) {
  return RiceBytesFromBits(RiceBits(indices, k));
}

uint32_t ChooseRiceParameter(std::span<const uint32_t> indices, size_t* bytes) {
  if (indices.empty()) {
    *bytes = RiceBytesFromBits(0);
    return 0;
  }
  // A mean-gap guess alone goes wrong when an escaped outlier dominates
  // the mean (a dense run plus one far index): estimate every k instead.
  const GapHistogram h(indices);
  return RefineRiceParameter(indices, h.EstimateRiceParameter(), bytes);
}

IndexPlan ChooseIndexEncoding(std::span<const uint32_t> indices, uint32_t n) {
  if (indices.size() == n) return IndexPlan{IndexEncoding::kDense, 0, 0};
  IndexPlan best{IndexEncoding::kBitmap, BitmapBytes(n), 0};
  // Every varint takes at least one byte, every Rice code one bit plus the
  // k byte: skip the exact sizes when neither can win.
  const bool varint_may_win = indices.size() < best.bytes;
  if (!varint_may_win && RiceBytesFromBits(indices.size()) >= best.bytes) return best;
  const GapHistogram h(indices);
  if (varint_may_win) {
    const size_t varint = h.VarintBytes();
    if (varint < best.bytes) best = IndexPlan{IndexEncoding::kDeltaVarint, varint, 0};
  }
  // Rice needs at least one bit per value plus the k byte.
  if (RiceBytesFromBits(indices.size()) < best.bytes) {
    size_t rice = 0;
    const uint32_t k = RefineRiceParameter(indices, h.EstimateRiceParameter(), &rice);
    if (rice < best.bytes) best = IndexPlan{IndexEncoding::kRice, rice, k};
  }
  return best;
}

void EncodeIndex(const IndexPlan& plan, std::span<const uint32_t> indices, uint32_t n,
                 uint8_t* out) {
  switch (plan.encoding) {
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
    case IndexEncoding::kRice:
      EncodeRice(indices, plan.rice_k, plan.bytes, out);
      return;
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
    case IndexEncoding::kRice:
      return DecodeRice(in, n, out);
  }
  return InvalidArgumentError("index: unknown encoding " +
                              std::to_string(static_cast<int>(encoding)));
}

}  // namespace geops::wan
