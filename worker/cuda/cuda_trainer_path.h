// CudaTrainerPath: the MLP training step of a GPU worker, through the GPU
// parameter cache. No CUDA types: the trainer includes it in every build.
//
// With a CUDA backend the trainer calls TrainStep here instead of
// ComputeBackend::TrainStep: the tables come from the PsClient's host cache
// through a GpuParamCache (gpu_param_cache.h), uploaded only when the host
// cache changed, and the updates land in the client's op-log with every
// chunk marked dirty, ready for Clock(). The results are those of the
// host-table path; only the PCIe traffic differs.
//
// Per clock the trainer runs Refresh(); TrainStep(); Clock(). At the next
// step the path compares the client's cache version and clock with those of
// its last step: moved by exactly one each means the only change was that
// Clock() adding this path's own updates, which the cache then folds on the
// device; any read from the shards moves the version further and the tables
// are uploaded again.
//
// Thread-safety: used by the thread that drives the PsClient.
#ifndef GEOPS_WORKER_CUDA_CUDA_TRAINER_PATH_H_
#define GEOPS_WORKER_CUDA_CUDA_TRAINER_PATH_H_

#include <memory>

#include "common/status.h"
#include "worker/compute_backend.h"
#include "worker/cuda/cuda_worker.h"
#include "worker/dataset.h"
#include "worker/ps_client.h"

namespace geops::worker::cuda {

class CudaTrainerPath {
 public:
  // The path when `backend` is a CUDA backend; nullptr (and OK) for any
  // other backend, and always in a build without CUDA. InvalidArgument when
  // the client's model is not the backend's MLP; errors of
  // GpuParamCache::Create. REQUIRES: backend and client outlive the path.
  static Result<std::unique_ptr<CudaTrainerPath>> ForBackend(
      ComputeBackend* backend, PsClient* client, const GpuParamCacheOptions& options = {});
  ~CudaTrainerPath();
  CudaTrainerPath(const CudaTrainerPath&) = delete;
  CudaTrainerPath& operator=(const CudaTrainerPath&) = delete;

  // One SGD step on `batch` with the client's cached tables; the deltas go
  // to the client's op-log, all chunks marked dirty. Errors as
  // ComputeBackend::TrainStep, except that on any error the op-log is
  // unspecified: do not Clock() it. REQUIRES: nothing else writes the op-log
  // between this call and the Clock() that ships it.
  Result<StepStats> TrainStep(const Batch& batch, float lr);

  // Loss and accuracy of the client's cached tables, through the GPU cache.
  Result<EvalStats> Evaluate(const Batch& batch);

  GpuParamCacheStats cache_stats() const;

 private:
  struct Impl;
  explicit CudaTrainerPath(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_CUDA_TRAINER_PATH_H_
