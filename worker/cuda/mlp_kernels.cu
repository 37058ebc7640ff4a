#include "worker/cuda/mlp_kernels.h"

#include <climits>
#include <cstddef>

#include "worker/cuda/cuda_status.h"

namespace geops::worker::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // grid-stride loops cover the rest
constexpr unsigned kFullMask = 0xffffffffu;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? (b < 1 ? 1 : b) : kMaxBlocks);
}

__device__ __forceinline__ bool NonFinite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}

__global__ void AddBiasActivateKernel(float* z, const float* b, int64_t total, int cols,
                                      bool relu) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const float v = z[i] + b[i % cols];
    z[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void ReluBackwardKernel(float* grad, const float* act, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (!(act[i] > 0.0f)) grad[i] = 0.0f;
  }
}

// One warp per row. The arg-max keeps the first maximum, as the CPU backend.
__global__ void SoftmaxXentKernel(float* logits, const int32_t* y, int rows, int classes,
                                  bool want_grad, double* row_loss, int32_t* row_correct) {
  const int row_id = static_cast<int>((int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32);
  const int lane = threadIdx.x % 32;
  if (row_id >= rows) return;  // uniform per warp
  float* row = logits + static_cast<int64_t>(row_id) * classes;

  float best = 0.0f;  // meaningless while best_j == INT_MAX
  int best_j = INT_MAX;
  for (int j = lane; j < classes; j += 32) {
    const float v = row[j];
    if (best_j == INT_MAX || v > best) {
      best = v;
      best_j = j;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(kFullMask, best, offset);
    const int oj = __shfl_xor_sync(kFullMask, best_j, offset);
    if (oj != INT_MAX && (best_j == INT_MAX || ov > best || (ov == best && oj < best_j))) {
      best = ov;
      best_j = oj;
    }
  }
  const float m = best;
  const int label = y[row_id];
  const float label_logit = row[label];

  double sum = 0.0;
  for (int j = lane; j < classes; j += 32) sum += exp(static_cast<double>(row[j] - m));
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFullMask, sum, offset);
  sum = __shfl_sync(kFullMask, sum, 0);  // lanes may differ in the last bit: use lane 0's

  if (lane == 0) {
    row_loss[row_id] = static_cast<double>(m) + log(sum) - static_cast<double>(label_logit);
    row_correct[row_id] = best_j == label ? 1 : 0;
  }
  if (!want_grad) return;
  __syncwarp();  // every lane has read the row before any lane overwrites it
  const double inv = 1.0 / sum;
  for (int j = lane; j < classes; j += 32) {
    float g = static_cast<float>(exp(static_cast<double>(row[j] - m)) * inv);
    if (j == label) g -= 1.0f;
    row[j] = g;
  }
}

// A single block: fixed-order tree reduction, so the result is deterministic.
__global__ void AccumulateStatsKernel(const double* row_loss, const int32_t* row_correct, int rows,
                                      StepCounters* counters) {
  __shared__ double loss[kThreads];
  __shared__ unsigned long long hits[kThreads];
  const int t = threadIdx.x;
  double l = 0.0;
  unsigned long long h = 0;
  for (int r = t; r < rows; r += kThreads) {
    l += row_loss[r];
    h += static_cast<unsigned long long>(row_correct[r]);
  }
  loss[t] = l;
  hits[t] = h;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) {
      loss[t] += loss[t + s];
      hits[t] += hits[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    counters->loss_sum += loss[0];
    counters->correct += hits[0];
  }
}

constexpr int kBiasCols = 32;
constexpr int kBiasRowGroups = 16;

// Block (kBiasCols, kBiasRowGroups): each column's rows are split over the
// row groups, then the partial sums are added in group order.
__global__ void BiasGradientKernel(const float* dz, int rows, int cols, float scale, float* db) {
  __shared__ float part[kBiasRowGroups][kBiasCols + 1];
  const int col = blockIdx.x * kBiasCols + threadIdx.x;
  float s = 0.0f;
  if (col < cols) {
    for (int r = threadIdx.y; r < rows; r += kBiasRowGroups) {
      s += dz[static_cast<int64_t>(r) * cols + col];
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.0f;
    for (int g = 0; g < kBiasRowGroups; ++g) total += part[g][threadIdx.x];
    db[col] = scale * total;
  }
}

__global__ void AddInPlaceKernel(float* dst, const float* src, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = __fadd_rn(dst[i], src[i]);
  }
}

// Each thread walks its grid-stride indices upwards, so the first non-finite
// value it meets is its smallest; the minimum over threads is the answer.
__global__ void FindNonFiniteKernel(const float* p, int64_t n, unsigned long long* first) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (NonFinite(p[i])) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;
    }
  }
}

}  // namespace

Status ResetCounters(StepCounters* counters, cudaStream_t stream) {
  GEOPS_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(counters, 0, offsetof(StepCounters, first_bad), stream));
  GEOPS_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(FirstBadSlot(counters, 0), 0xff, sizeof(StepCounters::first_bad), stream));
  return Status::Ok();
}

Status AddBiasActivate(float* z, const float* b, int rows, int cols, bool relu,
                       cudaStream_t stream) {
  const int64_t total = int64_t{rows} * cols;
  if (total == 0) return Status::Ok();
  AddBiasActivateKernel<<<Blocks(total), kThreads, 0, stream>>>(z, b, total, cols, relu);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("AddBiasActivateKernel");
  return Status::Ok();
}

Status ReluBackward(float* grad, const float* act, int64_t count, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  ReluBackwardKernel<<<Blocks(count), kThreads, 0, stream>>>(grad, act, count);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("ReluBackwardKernel");
  return Status::Ok();
}

Status SoftmaxXent(float* logits, const int32_t* y, int rows, int classes, bool want_grad,
                   double* row_loss, int32_t* row_correct, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  constexpr int kRowsPerBlock = kThreads / 32;
  const int blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  SoftmaxXentKernel<<<blocks, kThreads, 0, stream>>>(logits, y, rows, classes, want_grad, row_loss,
                                                     row_correct);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("SoftmaxXentKernel");
  return Status::Ok();
}

Status AccumulateStats(const double* row_loss, const int32_t* row_correct, int rows,
                       StepCounters* counters, cudaStream_t stream) {
  AccumulateStatsKernel<<<1, kThreads, 0, stream>>>(row_loss, row_correct, rows, counters);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("AccumulateStatsKernel");
  return Status::Ok();
}

Status BiasGradient(const float* dz, int rows, int cols, float scale, float* db,
                    cudaStream_t stream) {
  if (cols == 0) return Status::Ok();
  const dim3 block(kBiasCols, kBiasRowGroups);
  const int blocks = (cols + kBiasCols - 1) / kBiasCols;
  BiasGradientKernel<<<blocks, block, 0, stream>>>(dz, rows, cols, scale, db);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("BiasGradientKernel");
  return Status::Ok();
}

Status AddInPlace(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, stream>>>(dst, src, n);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("AddInPlaceKernel");
  return Status::Ok();
}

Status FindNonFinite(const float* p, int64_t n, unsigned long long* first, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  FindNonFiniteKernel<<<Blocks(n), kThreads, 0, stream>>>(p, n, first);
  GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED("FindNonFiniteKernel");
  return Status::Ok();
}

}  // namespace geops::worker::cuda
