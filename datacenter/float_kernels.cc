#include "datacenter/float_kernels.h"

#include <cmath>
#include <cstring>

namespace geops::datacenter {
namespace {

// Floats per block. A fixed inner trip count lets GCC's cheap -O2 vectoriser
// turn each block into a few SIMD instructions; the tail runs scalar.
constexpr int64_t kBlock = 16;
constexpr uint32_t kExponentMask = 0x7f800000u;

// 1 when the float with bits `b` is NaN or +-Inf (all exponent bits set).
inline uint32_t NonFiniteBit(uint32_t b) { return (~b & kExponentMask) == 0 ? 1u : 0u; }

inline uint32_t Bits(const float* p) {
  uint32_t b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

}  // namespace

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

}  // namespace geops::datacenter
