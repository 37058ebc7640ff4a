// The CUDA worker parts as the rest of geops sees them, with no CUDA types:
// whether a GPU is usable, the CUDA backend behind ComputeBackend, and the
// options of the GPU parameter cache. Any file may include this header. In a
// build without CUDA the functions say so ("built without CUDA") and nothing
// else changes; in a build with CUDA but no device they say why no device is
// usable ("no CUDA device: ...").
//
// Thread-safety: the functions may be called from any thread.
#ifndef GEOPS_WORKER_CUDA_CUDA_WORKER_H_
#define GEOPS_WORKER_CUDA_CUDA_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker/compute_backend.h"
#include "worker/mlp_model.h"

namespace geops::worker::cuda {

struct CudaBackendOptions {
  int device = 0;           // CUDA device index, >= 0
  bool allow_tf32 = false;  // let cuBLAS use TF32 tensor cores (faster; ~1e-3 relative error)
};

struct GpuParamCacheOptions {
  // Device bytes the cache may use for tables, their updates and the stream
  // slots; 0 = no budget: every table resident. With a budget the largest
  // tables that fit stay resident and the rest stream from pinned host
  // memory each step.
  int64_t memory_budget_bytes = 0;
  // Device buffers that streamed tables rotate through, >= 2 (a layer's
  // weight and bias are in use at once); more lets uploads run further ahead.
  int stream_slots = 4;
};

// What a GPU parameter cache has moved since it was created.
struct GpuParamCacheStats {
  int64_t table_uploads = 0;     // resident tables copied host -> device
  int64_t bytes_uploaded = 0;    // by those uploads
  int64_t stream_uploads = 0;    // streamed tables copied into a slot
  int64_t bytes_streamed = 0;    // by those
  int64_t folds = 0;             // tables brought up to date on the device instead
  int64_t bytes_downloaded = 0;  // updates copied device -> host
  int64_t steps = 0;             // BeginStep calls
};

// OK when this build has CUDA and at least one device is usable. Otherwise
// FailedPrecondition: "built without CUDA", or "no CUDA device: <why>".
Status CudaDeviceStatus();
bool CudaDeviceAvailable();

// The marketing name of device `device` ("NVIDIA H100 80GB HBM3").
// FailedPrecondition as CudaDeviceStatus, or for a device index out of range.
Result<std::string> CudaDeviceName(int device = 0);

// A CUDA backend for `shape` (see cuda_backend.h). InvalidArgument for a bad
// shape; FailedPrecondition when no device is usable or built without CUDA.
Result<std::unique_ptr<ComputeBackend>> NewCudaBackend(const MlpShape& shape,
                                                       const CudaBackendOptions& options = {});

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_CUDA_WORKER_H_
