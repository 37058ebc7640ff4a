#include "worker/stream_copy.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace geops::worker {

void StreamCopy(float* __restrict dst, const float* __restrict src, int64_t n) {
#if defined(__SSE2__)
  int64_t i = 0;
  // Streaming stores need 16-byte aligned addresses: copy up to the first.
  while (i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0) {
    dst[i] = src[i];
    ++i;
  }
  // 64 bytes (one cache line when dst is line-aligned) per step.
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 4));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 8));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 12));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 4), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 8), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 12), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, static_cast<size_t>(n - i) * sizeof(float));
#else
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
#endif
}

void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace geops::worker
