// Float kernels of the hot paths: adding an update into a chunk, checking a
// payload for NaN/Inf before anything is applied (shards, WAN codec,
// workers, clients), and the magnitude bounds that let a shard skip a pass
// over its stored values (datacenter/chunk_store.h).
//
// Each kernel is a loop over contiguous floats in GCC vector types, compiled
// for AVX2 and for the baseline on x86-64 (the CPU picks at load time), at
// the project's default -O2 without per-file flags. A NaN/Inf check is a
// maximum of magnitude bits (NaN and +-Inf are the largest); the First*
// kernels check blocks of 4096 floats that way and look for the index only
// inside a block that failed. No virtual calls, no allocation.
//
// Thread-safety: pure functions; the caller guards the memory they touch.
#ifndef GEOPS_COMMON_FLOAT_KERNELS_H_
#define GEOPS_COMMON_FLOAT_KERNELS_H_

#include <cstdint>

namespace geops {

// dst[i] += src[i] for i in [0, n). REQUIRES: the ranges do not overlap.
void AddInto(float* __restrict dst, const float* __restrict src, int64_t n);

// True iff none of v[0..n) is NaN or +-Inf.
bool AllFinite(const float* v, int64_t n);

// Index of the first NaN or +-Inf in v[0..n), or -1 when all are finite.
int64_t FirstNonFinite(const float* v, int64_t n);

// True iff every a[i] + b[i] (i < n), rounded to float as AddInto rounds it,
// is finite: catches NaN/Inf in either input and an overflow of the sum.
bool SumAllFinite(const float* a, const float* b, int64_t n);

// Index of the first i with a[i] + b[i] not finite, or -1.
int64_t FirstNonFiniteSum(const float* a, const float* b, int64_t n);

// The largest |v[i]| (i < n), exact; +Inf when some v[i] is NaN or +-Inf;
// 0 when n == 0.
float MaxAbs(const float* v, int64_t n);

// AddInto in the same pass as MaxAbs of the results: returns the largest
// |dst[i]| after the add (+Inf when some result is not finite).
float AddIntoMaxAbs(float* __restrict dst, const float* __restrict src, int64_t n);

}  // namespace geops

#endif  // GEOPS_COMMON_FLOAT_KERNELS_H_
