#include "worker/cuda/cuda_trainer_path.h"

#include <utility>

#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/gpu_param_cache.h"
#include "worker/mlp_model.h"

namespace geops::worker::cuda {

struct CudaTrainerPath::Impl {
  CudaBackend* backend = nullptr;
  PsClient* client = nullptr;
  std::unique_ptr<GpuParamCache> cache;
  // The last training step: the host version and clock it ran at, and
  // whether its updates were handed to the op-log (so Clock() may fold them).
  bool pending_fold = false;
  uint64_t step_version = 0;
  geops::Clock step_clock = 0;

  // Brings the cache to the client's current version and starts a step.
  Status BeginStep() {
    const uint64_t version = client->cache_version();
    if (pending_fold && version == step_version + 1 && client->clock() == step_clock + 1) {
      // Exactly one Clock() since the step, and no read: the host added the
      // step's own updates, and so does the device.
      GEOPS_RETURN_IF_ERROR(cache->FoldLastDeltas(version));
    }
    pending_fold = false;
    return cache->BeginStep(client->tables(), version);
  }
};

CudaTrainerPath::CudaTrainerPath(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaTrainerPath::~CudaTrainerPath() = default;

Result<std::unique_ptr<CudaTrainerPath>> CudaTrainerPath::ForBackend(
    ComputeBackend* backend, PsClient* client, const GpuParamCacheOptions& options) {
  auto* cuda = dynamic_cast<CudaBackend*>(backend);
  if (cuda == nullptr) return std::unique_ptr<CudaTrainerPath>();
  if (client == nullptr) return InvalidArgumentError("the GPU trainer path needs a client");
  GEOPS_ASSIGN_OR_RETURN(MlpShape shape, MlpShapeFromSpec(client->spec()));
  if (!(shape == cuda->shape())) {
    return InvalidArgumentError("the client's model is MLP " + shape.ToString() +
                                ", the CUDA backend's is " + cuda->shape().ToString());
  }
  auto impl = std::make_unique<Impl>();
  impl->backend = cuda;
  impl->client = client;
  GEOPS_ASSIGN_OR_RETURN(impl->cache,
                         GpuParamCache::Create(client->spec().tables(), cuda->device(), options));
  return std::unique_ptr<CudaTrainerPath>(new CudaTrainerPath(std::move(impl)));
}

Result<StepStats> CudaTrainerPath::TrainStep(const Batch& batch, float lr) {
  Impl& p = *impl_;
  GEOPS_RETURN_IF_ERROR(p.BeginStep());
  GEOPS_RETURN_IF_ERROR(p.backend->EnqueueTrainStep(p.cache.get(), batch, lr));
  // Each update is copied into the op-log as it lands, while the GPU still
  // computes the layers below it.
  const Status collected = p.cache->CollectDeltas(p.client->deltas());
  Result<StepStats> stats = p.backend->FinishTrainStep();
  if (!collected.ok()) return collected;
  if (!stats.ok()) return stats.status();
  p.client->MarkAllDirty();
  p.pending_fold = true;
  p.step_version = p.client->cache_version();
  p.step_clock = p.client->clock();
  return stats;
}

Result<EvalStats> CudaTrainerPath::Evaluate(const Batch& batch) {
  GEOPS_RETURN_IF_ERROR(impl_->BeginStep());
  return impl_->backend->EvaluateTables(impl_->cache.get(), batch);
}

GpuParamCacheStats CudaTrainerPath::cache_stats() const { return impl_->cache->stats(); }

}  // namespace geops::worker::cuda
