// cuda_worker.h and cuda_trainer_path.h in a build without CUDA: no device,
// no CUDA backend, no GPU path; every answer says why.
#include "worker/cuda/cuda_trainer_path.h"
#include "worker/cuda/cuda_worker.h"

namespace geops::worker::cuda {
namespace {

constexpr const char* kNoCuda =
    "built without CUDA (rebuild with a CUDA toolkit to use a GPU, or use backend 'cpu')";

}  // namespace

Status CudaDeviceStatus() { return FailedPreconditionError(kNoCuda); }

bool CudaDeviceAvailable() { return false; }

Result<std::string> CudaDeviceName(int device) { return FailedPreconditionError(kNoCuda); }

Result<std::unique_ptr<ComputeBackend>> NewCudaBackend(const MlpShape& shape,
                                                       const CudaBackendOptions& options) {
  return FailedPreconditionError(kNoCuda);
}

struct CudaTrainerPath::Impl {};

CudaTrainerPath::CudaTrainerPath(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaTrainerPath::~CudaTrainerPath() = default;

Result<std::unique_ptr<CudaTrainerPath>> CudaTrainerPath::ForBackend(
    ComputeBackend* backend, PsClient* client, const GpuParamCacheOptions& options) {
  return std::unique_ptr<CudaTrainerPath>();
}

Result<StepStats> CudaTrainerPath::TrainStep(const Batch& batch, float lr) {
  return FailedPreconditionError(kNoCuda);
}

Result<EvalStats> CudaTrainerPath::Evaluate(const Batch& batch) {
  return FailedPreconditionError(kNoCuda);
}

GpuParamCacheStats CudaTrainerPath::cache_stats() const { return {}; }

}  // namespace geops::worker::cuda
