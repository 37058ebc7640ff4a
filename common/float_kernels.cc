#include "common/float_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace geops {
namespace {

// Floats per block. A fixed inner trip count lets GCC's cheap -O2 vectoriser
// turn each block into a few SIMD instructions; the tail runs scalar.
constexpr int64_t kBlock = 16;
constexpr uint32_t kExponentMask = 0x7f800000u;
constexpr uint32_t kMagnitudeMask = 0x7fffffffu;  // all but the sign

// 1 when the float with bits `b` is NaN or +-Inf (all exponent bits set).
inline uint32_t NonFiniteBit(uint32_t b) { return (~b & kExponentMask) == 0 ? 1u : 0u; }

inline uint32_t Bits(const float* p) {
  uint32_t b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

// The magnitude kernels work on GCC vector types of 8 floats, two at a time,
// keeping their running maximum in vector registers to the end (a reduction
// per block of 16 would cost a horizontal step every 16 floats). On x86-64
// each is compiled twice (target_clones): for x86-64-v3 (AVX2), picked at
// load time where the CPU has it, and for the baseline (SSE2, each vector
// op as two). They reduce magnitude bits: the float's bits without its
// sign, as a non-negative int32; among non-negative floats integer order is
// value order, and NaN and +-Inf are the patterns from 0x7f800000 up.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // 32-byte vectors in inline helpers, never across an ABI boundary
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GEOPS_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GEOPS_VECTOR_CLONES
#endif

using V8f = float __attribute__((vector_size(32)));
using V8i = int32_t __attribute__((vector_size(32)));

inline V8f Load8(const float* p) {
  V8f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store8(float* p, V8f v) { std::memcpy(p, &v, sizeof(v)); }
inline V8i Magnitudes(V8f v) {
  V8i bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits & static_cast<int32_t>(kMagnitudeMask);
}
inline V8i Larger(V8i a, V8i b) { return a > b ? a : b; }
inline int32_t Magnitude(float f) { return static_cast<int32_t>(Bits(&f) & kMagnitudeMask); }

inline int32_t LargestLane(V8i m) {
  int32_t most = 0;
  for (int k = 0; k < 8; ++k) most = std::max(most, static_cast<int32_t>(m[k]));
  return most;
}

inline float FromMagnitude(int32_t m) {
  if (m >= static_cast<int32_t>(kExponentMask)) return std::numeric_limits<float>::infinity();
  float f;
  std::memcpy(&f, &m, sizeof(f));
  return f;
}

}  // namespace

GEOPS_VECTOR_CLONES float MaxAbs(const float* v, int64_t n) {
  V8i m0 = {}, m1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = Larger(m0, Magnitudes(Load8(v + i)));
    m1 = Larger(m1, Magnitudes(Load8(v + i + 8)));
  }
  int32_t most = LargestLane(Larger(m0, m1));
  for (; i < n; ++i) most = std::max(most, Magnitude(v[i]));
  return FromMagnitude(most);
}

GEOPS_VECTOR_CLONES float AddIntoMaxAbs(float* __restrict dst, const float* __restrict src, int64_t n) {
  V8i m0 = {}, m1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const V8f s0 = Load8(dst + i) + Load8(src + i);
    const V8f s1 = Load8(dst + i + 8) + Load8(src + i + 8);
    Store8(dst + i, s0);
    Store8(dst + i + 8, s1);
    m0 = Larger(m0, Magnitudes(s0));
    m1 = Larger(m1, Magnitudes(s1));
  }
  int32_t most = LargestLane(Larger(m0, m1));
  for (; i < n; ++i) {
    const float s = dst[i] + src[i];
    dst[i] = s;
    most = std::max(most, Magnitude(s));
  }
  return FromMagnitude(most);
}

void AddInto(float* __restrict dst, const float* __restrict src, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int64_t j = 0; j < kBlock; ++j) dst[i + j] += src[i + j];
  }
  for (; i < n; ++i) dst[i] += src[i];
}

bool AllFinite(const float* v, int64_t n) {
  uint32_t bad = 0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t block = 0;
    for (int64_t j = 0; j < kBlock; ++j) block |= NonFiniteBit(Bits(v + i + j));
    bad |= block;
  }
  for (; i < n; ++i) bad |= NonFiniteBit(Bits(v + i));
  return bad == 0;
}

bool SumAllFinite(const float* a, const float* b, int64_t n) {
  uint32_t bad = 0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t block = 0;
    for (int64_t j = 0; j < kBlock; ++j) {
      const float s = a[i + j] + b[i + j];
      block |= NonFiniteBit(Bits(&s));
    }
    bad |= block;
  }
  for (; i < n; ++i) {
    const float s = a[i] + b[i];
    bad |= NonFiniteBit(Bits(&s));
  }
  return bad == 0;
}

int64_t FirstNonFiniteSum(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i] + b[i])) return i;
  }
  return -1;
}

int64_t FirstNonFinite(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return i;
  }
  return -1;
}

}  // namespace geops
