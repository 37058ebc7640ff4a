#include "wan/codec/float_scan.h"

#include <bit>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace geops::wan {
namespace {

constexpr uint32_t kGroup = 64;  // selection: one 64-bit mask per group

inline float Abs(float f) { return std::fabs(f); }
inline float Max(float a, float b) { return a > b ? a : b; }

// Takes the elements of acc[begin, end) that beat `lim_of(i)`, branch-free.
template <typename LimitFn>
inline uint32_t Extract(float* __restrict acc, uint32_t begin, uint32_t end, LimitFn lim_of,
                        uint32_t* __restrict idx, float* __restrict val, uint32_t m,
                        uint32_t* left) {
  for (uint32_t i = begin; i < end; ++i) {
    float a = acc[i];
    uint32_t take = Abs(a) > lim_of(i);
    idx[m] = i;
    val[m] = a;
    m += take;
    float keep = take ? 0.0f : a;
    acc[i] = keep;
    *left |= (keep != 0.0f);
  }
  return m;
}

// Bit j of *take: element base + j is to be taken; bit j of the return value:
// it is non-zero. Over one group of kGroup elements.
#if defined(__SSE2__)
inline uint64_t GroupMask(const float* acc, const float* w, float t, float eps, float limit,
                          uint64_t* take) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 zero = _mm_setzero_ps();
  const __m128 vt = _mm_set1_ps(t);
  const __m128 veps = _mm_set1_ps(eps);
  const __m128 vlimit = _mm_set1_ps(limit);
  uint64_t tk = 0;
  uint64_t nz = 0;
  for (uint32_t j = 0; j < kGroup; j += 4) {
    __m128 a = _mm_loadu_ps(acc + j);
    __m128 lim = vlimit;
    if (w != nullptr) {
      lim = _mm_mul_ps(vt, _mm_max_ps(_mm_and_ps(_mm_loadu_ps(w + j), abs_mask), veps));
    }
    tk |= static_cast<uint64_t>(_mm_movemask_ps(_mm_cmpgt_ps(_mm_and_ps(a, abs_mask), lim))) << j;
    nz |= static_cast<uint64_t>(_mm_movemask_ps(_mm_cmpneq_ps(a, zero))) << j;
  }
  *take = tk;
  return nz;
}
#else
inline uint64_t GroupMask(const float* acc, const float* w, float t, float eps, float limit,
                          uint64_t* take) {
  uint64_t tk = 0;
  uint64_t nz = 0;
  for (uint32_t j = 0; j < kGroup; ++j) {
    float lim = w != nullptr ? t * Max(Abs(w[j]), eps) : limit;
    tk |= static_cast<uint64_t>(Abs(acc[j]) > lim) << j;
    nz |= static_cast<uint64_t>(acc[j] != 0.0f) << j;
  }
  *take = tk;
  return nz;
}
#endif

// The selection over whole groups; returns where the tail starts.
inline uint32_t SelectGroups(float* __restrict acc, const float* __restrict w, uint32_t n, float t,
                             float eps, float limit, uint32_t* __restrict idx,
                             float* __restrict val, uint32_t* m_io, uint32_t* left) {
  uint32_t m = *m_io;
  uint32_t i = 0;
  for (; i + kGroup <= n; i += kGroup) {
    uint64_t take;
    uint64_t nz = GroupMask(acc + i, w != nullptr ? w + i : nullptr, t, eps, limit, &take);
    *left |= (nz & ~take) != 0;
    while (take != 0) {
      uint32_t j = i + static_cast<uint32_t>(std::countr_zero(take));
      idx[m] = j;
      val[m] = acc[j];
      acc[j] = 0.0f;
      ++m;
      take &= take - 1;
    }
  }
  *m_io = m;
  return i;
}

}  // namespace

ScanResult SelectRelative(float* __restrict acc, const float* __restrict w, uint32_t n, float t,
                          float eps, uint32_t* __restrict idx, float* __restrict val) {
  uint32_t m = 0;
  uint32_t left = 0;
  uint32_t i = SelectGroups(acc, w, n, t, eps, 0.0f, idx, val, &m, &left);
  auto lim_of = [w, t, eps](uint32_t k) { return t * Max(Abs(w[k]), eps); };
  m = Extract(acc, i, n, lim_of, idx, val, m, &left);
  return ScanResult{m, left != 0};
}

ScanResult SelectAbsolute(float* __restrict acc, uint32_t n, float limit, uint32_t* __restrict idx,
                          float* __restrict val) {
  uint32_t m = 0;
  uint32_t left = 0;
  uint32_t i = SelectGroups(acc, nullptr, n, 0.0f, 0.0f, limit, idx, val, &m, &left);
  auto lim_of = [limit](uint32_t) { return limit; };
  m = Extract(acc, i, n, lim_of, idx, val, m, &left);
  return ScanResult{m, left != 0};
}

}  // namespace geops::wan
