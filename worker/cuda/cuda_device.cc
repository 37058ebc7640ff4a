// The device queries of cuda_worker.h, in a build with CUDA.
#include <cuda_runtime_api.h>

#include <string>

#include "worker/cuda/cuda_worker.h"

namespace geops::worker::cuda {

Status CudaDeviceStatus() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return FailedPreconditionError(std::string("no CUDA device: cudaGetDeviceCount: ") +
                                   cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
  if (count == 0) return FailedPreconditionError("no CUDA device: cudaGetDeviceCount found none");
  return Status::Ok();
}

bool CudaDeviceAvailable() { return CudaDeviceStatus().ok(); }

Result<std::string> CudaDeviceName(int device) {
  GEOPS_RETURN_IF_ERROR(CudaDeviceStatus());
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return FailedPreconditionError("CUDA device " + std::to_string(device) + ": " +
                                   cudaGetErrorString(err));
  }
  return std::string(prop.name);
}

}  // namespace geops::worker::cuda
