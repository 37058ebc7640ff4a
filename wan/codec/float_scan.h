// The significance selection scan behind the significance filter (adding
// deltas and checking for NaN/Inf are common/float_kernels.h).
//
// Where the CPU has AVX-512 (checked at run time), the selection scan takes
// sixteen elements per step: a compare gives the take mask and compress
// instructions pack the taken values and indices, with no branch per taken
// element. Elsewhere it computes one 64-bit "take" mask per group of 64
// elements (SSE2 compares where available, a plain loop elsewhere) and
// visits the set bits. Either way its cost is a streaming read of acc and w
// plus a little per selected element, and both select the same elements in
// the same order. No allocation.
//
// Thread-safety: pure functions; the caller guards the memory they touch.
#ifndef GEOPS_WAN_CODEC_FLOAT_SCAN_H_
#define GEOPS_WAN_CODEC_FLOAT_SCAN_H_

#include <cstdint>

namespace geops::wan {

struct ScanResult {
  uint32_t taken = 0;     // elements written to idx/val
  bool any_left = false;  // some acc[i] != 0 after the scan
};

// For each i in [0, n) with |acc[i]| > t * max(|w[i]|, eps): appends i to idx
// and acc[i] to val, and sets acc[i] = 0 (a NaN w[i] counts as eps; a NaN
// acc[i] is never taken). REQUIRES: idx and val hold n entries; t >= 0;
// eps > 0.
ScanResult SelectRelative(float* __restrict acc, const float* __restrict w, uint32_t n, float t,
                          float eps, uint32_t* __restrict idx, float* __restrict val);

// Same with a constant limit: takes every i with |acc[i]| > limit (limit 0
// takes every non-zero element).
ScanResult SelectAbsolute(float* __restrict acc, uint32_t n, float limit, uint32_t* __restrict idx,
                          float* __restrict val);

// The rule of SelectRelative (w_at == nullptr: SelectAbsolute's with
// limit t * eps) over the listed elements only: for k in [0, count),
// element at[k] (each < the chunk's length, each listed once) against the
// value w_at[k], in the order listed. Returns the number written to
// idx/val. REQUIRES: idx and val hold count entries.
uint32_t SelectListed(float* __restrict acc, const float* __restrict w_at, const uint32_t* __restrict at,
                      uint32_t count, float t, float eps, uint32_t* __restrict idx,
                      float* __restrict val);

// The same without AVX-512 (what CPUs without it run; tests compare the two).
ScanResult SelectRelativePortable(float* __restrict acc, const float* __restrict w, uint32_t n,
                                  float t, float eps, uint32_t* __restrict idx,
                                  float* __restrict val);
ScanResult SelectAbsolutePortable(float* __restrict acc, uint32_t n, float limit,
                                  uint32_t* __restrict idx, float* __restrict val);

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_FLOAT_SCAN_H_
