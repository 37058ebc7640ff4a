#include "wan/codec/float_scan.h"

#include <bit>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// AVX-512 where the CPU has it (runtime check, GCC and Clang on x86-64).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GEOPS_WAN_SCAN_AVX512 1
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

#if defined(GEOPS_WAN_SCAN_AVX512)
// Sixteen elements per step, without a branch per selected element: the
// compare gives the take mask, vcompressps packs the taken values (and
// vpcompressd their indices) into a register that is stored whole at
// val + m / idx + m (the lanes past the taken ones are overwritten by the
// next step or lie past the result; m + 16 <= i + 16 <= n, so they stay
// inside the n entries), and a masked store zeroes the taken elements of
// acc (no store where nothing is taken). Compress into a register, not to
// memory: the memory form is microcoded and slow on some CPUs. The
// predicates are the SSE2 path's (|a| > lim ordered; a != 0 unordered), so
// both select the same elements.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// GCC 12 reports the _mm512_undefined_ps() inside _mm512_max_ps as maybe
// uninitialised (a known false positive of the intrinsic headers).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <bool kRelative>
__attribute__((target("avx512f"))) ScanResult SelectAvx512(float* __restrict acc,
                                                           const float* __restrict w, uint32_t n,
                                                           float t, float eps, float limit,
                                                           uint32_t* __restrict idx,
                                                           float* __restrict val) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 vt = _mm512_set1_ps(t);
  const __m512 veps = _mm512_set1_ps(eps);
  const __m512 vlimit = _mm512_set1_ps(limit);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  uint32_t m = 0;
  uint32_t left = 0;
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(acc + i);
    __m512 lim = vlimit;
    if constexpr (kRelative) {
      lim = _mm512_mul_ps(vt, _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(w + i)), veps));
    }
    const __mmask16 take = _mm512_cmp_ps_mask(_mm512_abs_ps(a), lim, _CMP_GT_OQ);
    const __mmask16 nz = _mm512_cmp_ps_mask(a, zero, _CMP_NEQ_UQ);
    left |= static_cast<uint32_t>(nz & static_cast<__mmask16>(~take));
    if (take == 0) continue;
    _mm512_storeu_ps(val + m, _mm512_maskz_compress_ps(take, a));
    const __m512i at = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
    _mm512_storeu_si512(idx + m, _mm512_maskz_compress_epi32(take, at));
    _mm512_mask_storeu_ps(acc + i, take, zero);
    m += static_cast<uint32_t>(std::popcount(static_cast<uint32_t>(take)));
  }
  if constexpr (kRelative) {
    auto lim_of = [w, t, eps](uint32_t k) { return t * Max(Abs(w[k]), eps); };
    m = Extract(acc, i, n, lim_of, idx, val, m, &left);
  } else {
    auto lim_of = [limit](uint32_t) { return limit; };
    m = Extract(acc, i, n, lim_of, idx, val, m, &left);
  }
  return ScanResult{m, left != 0};
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#endif

}  // namespace

ScanResult SelectRelative(float* __restrict acc, const float* __restrict w, uint32_t n, float t,
                          float eps, uint32_t* __restrict idx, float* __restrict val) {
#if defined(GEOPS_WAN_SCAN_AVX512)
  if (HasAvx512()) return SelectAvx512<true>(acc, w, n, t, eps, 0.0f, idx, val);
#endif
  return SelectRelativePortable(acc, w, n, t, eps, idx, val);
}

ScanResult SelectAbsolute(float* __restrict acc, uint32_t n, float limit, uint32_t* __restrict idx,
                          float* __restrict val) {
#if defined(GEOPS_WAN_SCAN_AVX512)
  if (HasAvx512()) return SelectAvx512<false>(acc, nullptr, n, 0.0f, 0.0f, limit, idx, val);
#endif
  return SelectAbsolutePortable(acc, n, limit, idx, val);
}

uint32_t SelectListed(float* __restrict acc, const float* __restrict w_at, const uint32_t* __restrict at,
                      uint32_t count, float t, float eps, uint32_t* __restrict idx,
                      float* __restrict val) {
  uint32_t m = 0;
  for (uint32_t k = 0; k < count; ++k) {
    const uint32_t i = at[k];
    const float a = acc[i];
    const float lim = w_at != nullptr ? t * Max(Abs(w_at[k]), eps) : t * eps;
    const uint32_t take = Abs(a) > lim;
    idx[m] = i;
    val[m] = a;
    m += take;
    acc[i] = take ? 0.0f : a;
  }
  return m;
}

ScanResult SelectRelativePortable(float* __restrict acc, const float* __restrict w, uint32_t n,
                                  float t, float eps, uint32_t* __restrict idx,
                                  float* __restrict val) {
  uint32_t m = 0;
  uint32_t left = 0;
  uint32_t i = SelectGroups(acc, w, n, t, eps, 0.0f, idx, val, &m, &left);
  auto lim_of = [w, t, eps](uint32_t k) { return t * Max(Abs(w[k]), eps); };
  m = Extract(acc, i, n, lim_of, idx, val, m, &left);
  return ScanResult{m, left != 0};
}

ScanResult SelectAbsolutePortable(float* __restrict acc, uint32_t n, float limit,
                                  uint32_t* __restrict idx, float* __restrict val) {
  uint32_t m = 0;
  uint32_t left = 0;
  uint32_t i = SelectGroups(acc, nullptr, n, 0.0f, 0.0f, limit, idx, val, &m, &left);
  auto lim_of = [limit](uint32_t) { return limit; };
  m = Extract(acc, i, n, lim_of, idx, val, m, &left);
  return ScanResult{m, left != 0};
}

}  // namespace geops::wan
