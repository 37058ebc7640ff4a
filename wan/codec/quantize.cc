#include "wan/codec/quantize.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "wan/codec/batch_format.h"

// GCC only: Clang 14's __builtin_cpu_supports does not know "f16c" (Clang
// builds, such as the fuzz targets, take the portable path: same rounding).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define GEOPS_WAN_F16C 1
#endif

namespace geops::wan {
namespace {

inline uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The neighbours of v - d, for the rare case where v - d is inexact.
[[gnu::noinline]] bool NeighbourResidual(float v, float d, float* r) {
  const float x = v - d;
  const float inf = std::numeric_limits<float>::infinity();
  for (float y : {std::nextafter(x, inf), std::nextafter(x, -inf)}) {
    if (d + y == v) {
      *r = y;
      return true;
    }
  }
  *r = v;
  return false;
}

// Sets *r so that d + *r == v exactly and returns true, or returns false
// when no such float exists. v - d is exact for nearly every codec output
// (Sterbenz), so the loop bodies below stay branch-free in practice.
inline bool Residual(float v, float d, float* r) {
  float x = v - d;
  *r = x;
  if (d + x == v) [[likely]]
    return true;
  return NeighbourResidual(v, d, r);
}

// Keeps candidate j when its decoded value d[j] (stored in residual[j] on
// entry) is non-zero and has an exact residual; moves codes[j] to
// codes[shipped] and leaves the residual in residual[j]. Returns the count.
template <typename Code>
inline uint32_t Compact(const float* v, uint32_t m, uint32_t* kept, Code* codes, float* residual) {
  uint32_t s = 0;
  for (uint32_t j = 0; j < m; ++j) {
    const float x = v[j];
    const float d = residual[j];
    float r;
    const bool ship = Residual(x, d, &r) & (d != 0.0f);
    kept[s] = j;
    codes[s] = codes[j];
    residual[j] = ship ? r : x;
    s += ship;
  }
  return s;
}

// f rounded to `bits` significant bits (nearest, ties away from zero).
inline float RoundMantissa(float f, int bits) {
  const int drop = 24 - bits;
  uint32_t u = Bits(f);
  u = (u + (1u << (drop - 1))) & ~((1u << drop) - 1u);
  return FromBits(u);
}

// The decoded value of an int8 or int4 code; the decoders use it too, so
// both sides compute the same float.
inline float LinearValue(int8_t q, float scale) { return static_cast<float>(q) * scale; }

constexpr float kHalfMax = 65504.0f;
// Adding and subtracting 1.5 * 2^23 rounds a float below 2^22 in magnitude to
// the nearest integer (ties to even) in the default rounding mode.
constexpr float kRoundMagic = 12582912.0f;

inline uint16_t ToHalf(float f) {
  // Round-to-nearest-even conversion (after F. Giesen's float_to_half_fast3_rtne).
  constexpr uint32_t kF32Inf = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = Bits(f);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t o;
  if (x >= kF16Max) {
    o = x > kF32Inf ? 0x7e00u : 0x7c00u;
  } else if (x < (113u << 23)) {
    o = Bits(FromBits(x) + FromBits(kDenormMagic)) - kDenormMagic;
  } else {
    uint32_t mant_odd = (x >> 13) & 1u;
    x += ((15u - 127u) << 23) + 0xfffu;
    x += mant_odd;
    o = x >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline float FromHalf(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 0x1p-24f;  // zero or subnormal, exact
    return sign ? -v : v;
  }
  if (exp == 31) return FromBits(sign | 0x7f800000u | (mant << 13));
  return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Linear quantiser with codes in [-kMax, kMax] and scale = max |v| / kMax:
// writes codes[0, shipped) (one int8 each) and the residuals. The scale
// makes the largest value land on +-kMax; rounding q = v / scale to
// nearest keeps |v - d| <= scale / 2, and Compact() keeps back the codes
// that decode to 0 or have no exact residual.
template <int kMax>
QuantizeOutput QuantizeLinear(const float* v, uint32_t m, uint32_t* kept, int8_t* codes,
                              float* residual) {
  float max_abs = 0.0f;
  for (uint32_t j = 0; j < m; ++j) {
    float a = std::fabs(v[j]);
    max_abs = a > max_abs ? a : max_abs;
  }
  constexpr float kMaxF = static_cast<float>(kMax);
  const float scale = max_abs / kMaxF;
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    for (uint32_t j = 0; j < m; ++j) residual[j] = v[j];
    return QuantizeOutput{0, 0.0f};
  }
  for (uint32_t j = 0; j < m; ++j) {
    float qf = v[j] / scale;  // |qf| <= ~kMax
    qf = qf > kMaxF ? kMaxF : (qf < -kMaxF ? -kMaxF : qf);
    qf = (qf + kRoundMagic) - kRoundMagic;  // round to nearest even
    codes[j] = static_cast<int8_t>(qf);
    residual[j] = LinearValue(codes[j], scale);
  }
  uint32_t s = Compact(v, m, kept, codes, residual);
  return QuantizeOutput{s, s > 0 ? scale : 0.0f};
}

#if defined(GEOPS_WAN_F16C)
__attribute__((target("f16c"))) void HalfRoundTripF16c(const float* v, uint32_t m, uint16_t* h,
                                                       float* d) {
  const __m128 hi = _mm_set1_ps(kHalfMax);
  const __m128 lo = _mm_set1_ps(-kHalfMax);
  uint32_t j = 0;
  for (; j + 4 <= m; j += 4) {
    __m128 x = _mm_min_ps(_mm_max_ps(_mm_loadu_ps(v + j), lo), hi);
    __m128i hh = _mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(h + j), hh);
    _mm_storeu_ps(d + j, _mm_cvtph_ps(hh));
  }
  for (; j < m; ++j) {
    float x = v[j] > kHalfMax ? kHalfMax : (v[j] < -kHalfMax ? -kHalfMax : v[j]);
    h[j] = ToHalf(x);
    d[j] = FromHalf(h[j]);
  }
}
#endif

// h[j] = half(clamp(v[j])), d[j] = float(h[j]): hardware F16C conversions
// where the CPU has them (same rounding), else the portable ones.
void HalfRoundTrip(const float* v, uint32_t m, uint16_t* h, float* d) {
#if defined(GEOPS_WAN_F16C)
  if (__builtin_cpu_supports("f16c")) return HalfRoundTripF16c(v, m, h, d);
#endif
  for (uint32_t j = 0; j < m; ++j) {
    float x = v[j] > kHalfMax ? kHalfMax : (v[j] < -kHalfMax ? -kHalfMax : v[j]);
    h[j] = ToHalf(x);
    d[j] = FromHalf(h[j]);
  }
}

}  // namespace

uint16_t FloatToHalf(float f) { return ToHalf(f); }
float HalfToFloat(uint16_t h) { return FromHalf(h); }

QuantizeOutput QuantizeFp32(const float* v, uint32_t m, uint32_t* kept, float* codes,
                            float* residual) {
  uint32_t s = 0;
  for (uint32_t j = 0; j < m; ++j) {
    bool ship = v[j] != 0.0f;
    kept[s] = j;
    codes[s] = v[j];
    residual[j] = ship ? 0.0f : v[j];
    s += ship;
  }
  return QuantizeOutput{s, 0.0f};
}

QuantizeOutput QuantizeFp16(const float* v, uint32_t m, uint32_t* kept, uint16_t* codes,
                            float* residual) {
  HalfRoundTrip(v, m, codes, residual);
  return QuantizeOutput{Compact(v, m, kept, codes, residual), 0.0f};
}

QuantizeOutput QuantizeInt8(const float* v, uint32_t m, uint32_t* kept, int8_t* codes,
                            float* residual) {
  return QuantizeLinear<batch_format::kInt8MaxCode>(v, m, kept, codes, residual);
}

QuantizeOutput QuantizeInt4(const float* v, uint32_t m, uint32_t* kept, uint8_t* codes,
                            float* residual) {
  int8_t* q = reinterpret_cast<int8_t*>(codes);
  QuantizeOutput out = QuantizeLinear<batch_format::kInt4MaxCode>(v, m, kept, q, residual);
  // Pack in place: byte b is built from codes 2b and 2b + 1, which are at
  // or after b, so nothing is overwritten before it is read.
  const uint32_t pairs = out.shipped / 2;
  for (uint32_t b = 0; b < pairs; ++b) {
    codes[b] = static_cast<uint8_t>((static_cast<uint8_t>(q[2 * b]) & 0x0fu) |
                                    (static_cast<uint8_t>(q[2 * b + 1]) << 4));
  }
  if (out.shipped % 2 != 0) {
    codes[pairs] = static_cast<uint8_t>(q[out.shipped - 1]) & 0x0fu;
  }
  return out;
}

QuantizeOutput QuantizeSign(const float* v, uint32_t m, uint32_t* kept, uint8_t* codes,
                            float* residual) {
  // Four partial sums keep the additions from waiting on each other.
  double sum[4] = {0, 0, 0, 0};
  uint32_t j = 0;
  for (; j + 4 <= m; j += 4) {
    for (int k = 0; k < 4; ++k) sum[k] += std::fabs(v[j + k]);
  }
  for (; j < m; ++j) sum[0] += std::fabs(v[j]);
  const double cut = m > 0 ? 0.5 * (sum[0] + sum[1] + sum[2] + sum[3]) / m : 0.0;
  // The scale is the mean |v| of the values of at least half the mean |v|.
  double member[4] = {0, 0, 0, 0};
  uint32_t count[4] = {0, 0, 0, 0};
  for (j = 0; j + 4 <= m; j += 4) {
    for (int k = 0; k < 4; ++k) {
      double a = std::fabs(v[j + k]);
      bool in = (a >= cut) & (a > 0);
      member[k] += in ? a : 0.0;
      count[k] += in;
    }
  }
  for (; j < m; ++j) {
    double a = std::fabs(v[j]);
    bool in = (a >= cut) & (a > 0);
    member[0] += in ? a : 0.0;
    count[0] += in;
  }
  const uint32_t members = count[0] + count[1] + count[2] + count[3];
  const double mean = members > 0 ? (member[0] + member[1] + member[2] + member[3]) / members : 0;
  // 8 significant bits: v - scale is then exact for nearly every v.
  const float scale = RoundMantissa(static_cast<float>(mean), 8);
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    for (j = 0; j < m; ++j) residual[j] = v[j];
    return QuantizeOutput{0, 0.0f};
  }
  // +-scale approximates a value below scale / 2 worse than 0 does: keep it.
  const float half = scale * 0.5f;
  std::memset(codes, 0, (static_cast<size_t>(m) + 7) / 8);
  uint32_t s = 0;
  for (j = 0; j < m; ++j) {
    const float x = v[j];
    const bool neg = x < 0;
    const float d = neg ? -scale : scale;
    const bool in = std::fabs(x) >= half;
    float r = x - d;
    bool exact = d + r == x;
    if (in & !exact) [[unlikely]]
      exact = NeighbourResidual(x, d, &r);
    const bool ship = in & exact;
    kept[s] = j;
    codes[s >> 3] |= static_cast<uint8_t>((ship & neg) << (s & 7));
    residual[j] = ship ? r : x;
    s += ship;
  }
  return QuantizeOutput{s, s > 0 ? scale : 0.0f};
}

int64_t DecodeFp32(const uint8_t* codes, uint32_t n, float* out) {
  std::memcpy(out, codes, static_cast<size_t>(n) * 4);
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n; ++i) bad |= (Bits(out[i]) & 0x7f800000u) == 0x7f800000u;
  if (!bad) return -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i])) return i;
  }
  return -1;
}

int64_t DecodeFp16(const uint8_t* codes, uint32_t n, float* out) {
  for (uint32_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, codes + 2 * static_cast<size_t>(i), 2);
    if ((h & 0x7c00u) == 0x7c00u) return i;
    out[i] = FromHalf(h);
  }
  return -1;
}

int64_t DecodeInt8(const uint8_t* codes, uint32_t n, float scale, float* out) {
  for (uint32_t i = 0; i < n; ++i) {
    int8_t q = static_cast<int8_t>(codes[i]);
    if (q == -128) return i;
    out[i] = LinearValue(q, scale);
    if (!std::isfinite(out[i])) return i;
  }
  return -1;
}

int64_t DecodeInt4(const uint8_t* codes, uint32_t n, float scale, float* out) {
  // Sixteen possible codes: decode through a table, and note which nibbles
  // occurred so that one test at the end finds invalid ones (-8, or a code
  // whose value overflows) without a branch per value.
  float value[16];
  uint32_t invalid = 0;  // bit c set: nibble c is not a valid code
  for (int c = 0; c < 16; ++c) {
    const int q = c < 8 ? c : c - 16;
    value[c] = LinearValue(static_cast<int8_t>(q), scale);
    if (q < -batch_format::kInt4MaxCode || !std::isfinite(value[c])) invalid |= 1u << c;
  }
  const uint32_t pairs = n / 2;
  uint32_t seen = 0;
  for (uint32_t b = 0; b < pairs; ++b) {
    const uint32_t lo = codes[b] & 0x0fu;
    const uint32_t hi = codes[b] >> 4;
    out[2 * b] = value[lo];
    out[2 * b + 1] = value[hi];
    seen |= (1u << lo) | (1u << hi);
  }
  if (n % 2 != 0) {
    const uint32_t lo = codes[pairs] & 0x0fu;
    out[n - 1] = value[lo];
    seen |= 1u << lo;
  }
  if ((seen & invalid) == 0) return -1;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t c = (codes[i / 2] >> (4 * (i % 2))) & 0x0fu;
    if ((invalid >> c) & 1u) return i;
  }
  return -1;
}

int64_t DecodeSign(const uint8_t* codes, uint32_t n, float scale, float* out) {
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = ((codes[i >> 3] >> (i & 7)) & 1u) ? -scale : scale;
  }
  return -1;
}

}  // namespace geops::wan
