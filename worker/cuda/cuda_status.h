// CUDA runtime and cuBLAS results as geops::Status.
//
// Every CUDA or cuBLAS call in worker/cuda goes through one of the macros
// below, which return from the enclosing function with a Status naming the
// call, the source file and line, and the library's own error name and text:
//   "cudaMemcpyAsync failed at cuda/gpu_param_cache.cu:212: cudaErrorIllegalAddress
//    (an illegal memory access was encountered)"
// Codes: out of memory (cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED)
// is ResourceExhausted (the allocation wrappers in device_memory.h add the
// bytes asked for); no usable device, driver or kernel image for this GPU is
// FailedPrecondition; anything else is Internal. Errors are never thrown and
// never abort the process. A non-sticky error is cleared from the runtime's
// "last error" slot once reported, so it cannot resurface at a later check.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WORKER_CUDA_CUDA_STATUS_H_
#define GEOPS_WORKER_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/status.h"

namespace geops::worker::cuda {

// The Status for `err` returned by `call` (its source text; only the name
// before '(' is kept) at file:line. REQUIRES: err != cudaSuccess.
Status CudaError(cudaError_t err, const char* call, const char* file, int line);
// Same for a cuBLAS status. REQUIRES: st != CUBLAS_STATUS_SUCCESS.
Status CublasError(cublasStatus_t st, const char* call, const char* file, int line);

}  // namespace geops::worker::cuda

// Returns a Status from the enclosing function when `call` (a CUDA runtime
// call) does not return cudaSuccess.
#define GEOPS_CUDA_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                     \
    const cudaError_t geops_cuda_err_ = (call);                                            \
    if (geops_cuda_err_ != cudaSuccess) {                                                  \
      return ::geops::worker::cuda::CudaError(geops_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)

// Same for a cuBLAS call.
#define GEOPS_CUBLAS_RETURN_IF_ERROR(call)                                                    \
  do {                                                                                        \
    const cublasStatus_t geops_cublas_st_ = (call);                                           \
    if (geops_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                                          \
      return ::geops::worker::cuda::CublasError(geops_cublas_st_, #call, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)

// After a kernel launch: reports a bad launch configuration (the kernel's own
// faults show at the next synchronisation). `name` names the kernel.
#define GEOPS_CUDA_RETURN_IF_LAUNCH_FAILED(name)                                          \
  do {                                                                                    \
    const cudaError_t geops_cuda_err_ = cudaGetLastError();                               \
    if (geops_cuda_err_ != cudaSuccess) {                                                 \
      return ::geops::worker::cuda::CudaError(geops_cuda_err_, name, __FILE__, __LINE__); \
    }                                                                                     \
  } while (0)

#endif  // GEOPS_WORKER_CUDA_CUDA_STATUS_H_
