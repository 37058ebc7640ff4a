// Host-side staging helpers of the GPU worker: copies into pinned buffers
// that check the values on the way, so validation costs no extra pass over
// memory, and the messages that name a bad value.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WORKER_CUDA_STAGING_H_
#define GEOPS_WORKER_CUDA_STAGING_H_

#include <cstdint>
#include <string>

namespace geops::worker::cuda {

// Copies n floats from src to dst and returns the index of the first NaN or
// infinite value among them, or -1 when all are finite. dst is fully written
// either way. REQUIRES: the ranges do not overlap.
int64_t CopyAndFindNonFinite(float* dst, const float* src, int64_t n);

// "parameter table 'fc1.weight' element 7 (row 0, col 7) is NaN": the
// message ValidateParams gives for the same value.
std::string NonFiniteParamMessage(const std::string& table, int64_t cols, int64_t index,
                                  float value);

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_STAGING_H_
