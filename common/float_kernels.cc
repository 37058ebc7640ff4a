#include "common/float_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace geops {
namespace {

constexpr uint32_t kExponentMask = 0x7f800000u;
constexpr uint32_t kMagnitudeMask = 0x7fffffffu;  // all but the sign

inline uint32_t Bits(const float* p) {
  uint32_t b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

// Every kernel works on GCC vector types of 8 floats, two at a time,
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

// The largest magnitude bits of v[0..n) (0 when n == 0): >= kExponentMask
// exactly when some v[i] is NaN or +-Inf.
GEOPS_VECTOR_CLONES int32_t MaxMagnitude(const float* v, int64_t n) {
  V8i m0 = {}, m1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = Larger(m0, Magnitudes(Load8(v + i)));
    m1 = Larger(m1, Magnitudes(Load8(v + i + 8)));
  }
  int32_t most = LargestLane(Larger(m0, m1));
  for (; i < n; ++i) most = std::max(most, Magnitude(v[i]));
  return most;
}

// The same for a[i] + b[i], each sum rounded to float as AddInto rounds it.
GEOPS_VECTOR_CLONES int32_t MaxSumMagnitude(const float* a, const float* b, int64_t n) {
  V8i m0 = {}, m1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = Larger(m0, Magnitudes(Load8(a + i) + Load8(b + i)));
    m1 = Larger(m1, Magnitudes(Load8(a + i + 8) + Load8(b + i + 8)));
  }
  int32_t most = LargestLane(Larger(m0, m1));
  for (; i < n; ++i) most = std::max(most, Magnitude(a[i] + b[i]));
  return most;
}

// The First* kernels check blocks of this many floats with the vector
// kernels above and look for the index only inside a block that failed:
// `block_max(start, len)` is the block's largest magnitude bits, `bad(i)`
// whether element i fails.
constexpr int64_t kScanBlock = 4096;

template <typename BlockMax, typename Bad>
int64_t FirstFailing(int64_t n, BlockMax block_max, Bad bad) {
  for (int64_t start = 0; start < n; start += kScanBlock) {
    const int64_t len = std::min(kScanBlock, n - start);
    if (block_max(start, len) < static_cast<int32_t>(kExponentMask)) continue;
    for (int64_t i = start; i < start + len; ++i) {
      if (bad(i)) return i;
    }
  }
  return -1;
}

}  // namespace

float MaxAbs(const float* v, int64_t n) { return FromMagnitude(MaxMagnitude(v, n)); }

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

GEOPS_VECTOR_CLONES void AddInto(float* __restrict dst, const float* __restrict src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Store8(dst + i, Load8(dst + i) + Load8(src + i));
    Store8(dst + i + 8, Load8(dst + i + 8) + Load8(src + i + 8));
  }
  for (; i < n; ++i) dst[i] += src[i];
}

bool AllFinite(const float* v, int64_t n) {
  return MaxMagnitude(v, n) < static_cast<int32_t>(kExponentMask);
}

bool SumAllFinite(const float* a, const float* b, int64_t n) {
  return MaxSumMagnitude(a, b, n) < static_cast<int32_t>(kExponentMask);
}

int64_t FirstNonFiniteSum(const float* a, const float* b, int64_t n) {
  return FirstFailing(
      n, [&](int64_t start, int64_t len) { return MaxSumMagnitude(a + start, b + start, len); },
      [&](int64_t i) { return !std::isfinite(a[i] + b[i]); });
}

int64_t FirstNonFinite(const float* v, int64_t n) {
  return FirstFailing(
      n, [&](int64_t start, int64_t len) { return MaxMagnitude(v + start, len); },
      [&](int64_t i) { return !std::isfinite(v[i]); });
}

}  // namespace geops
