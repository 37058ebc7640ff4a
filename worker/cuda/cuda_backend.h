// CudaBackend: the ComputeBackend on an NVIDIA GPU. Matrix products run in
// cuBLAS (sgemm), the rest in the kernels of mlp_kernels.h, all on the
// backend's compute stream.
//
// Two ways in:
//  * Host tables (ComputeBackend::TrainStep / Evaluate): interchangeable with
//    the CPU backend, same validation and errors. Every call uploads the
//    tables (through an internal GpuParamCache holding all of them) and
//    downloads the deltas into the caller's buffers.
//  * Device tables (EnqueueTrainStep + FinishTrainStep, EvaluateTables): the
//    tables come from a DeviceTableSource such as the GPU parameter cache,
//    so steady-state steps move only what changed (see gpu_param_cache.h).
//
// Row-major products use the transpose identity: a row-major r x c matrix is
// the column-major c x r matrix of its transpose, so the row-major product
// C = A * B is computed as C^T = B^T * A^T in cuBLAS's column-major terms,
// with no copies. The SGD scale -lr/n is folded into the alpha of the weight
// gradient products and into the bias-gradient reduction.
//
// Scratch memory (activations, two gradient buffers, the batch on device and
// in pinned staging) grows to the largest batch seen and is then reused.
// Evaluate works in slices of kCudaEvalSliceRows examples, staging slice k+1
// on the host while the GPU runs slice k.
//
// Thread-safety: one thread at a time (see ComputeBackend). Each public call
// makes the backend's device current on the calling thread.
#ifndef GEOPS_WORKER_CUDA_CUDA_BACKEND_H_
#define GEOPS_WORKER_CUDA_CUDA_BACKEND_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/compute_backend.h"
#include "worker/cuda/cuda_worker.h"
#include "worker/cuda/device_memory.h"
#include "worker/cuda/device_tables.h"
#include "worker/mlp_model.h"

namespace geops::worker::cuda {

class GpuParamCache;

// Examples per slice in Evaluate; bounds its scratch memory.
inline constexpr int kCudaEvalSliceRows = 4096;

class CudaBackend final : public ComputeBackend {
 public:
  // InvalidArgument for a bad shape or device index; FailedPrecondition when
  // no device is usable; ResourceExhausted when the stream, cuBLAS handle or
  // small buffers cannot be allocated.
  static Result<std::unique_ptr<CudaBackend>> Create(const MlpShape& shape,
                                                     const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // ComputeBackend, host tables. Errors as documented there, plus
  // ResourceExhausted (naming the bytes) when device memory runs out and
  // Internal for other CUDA failures; on those the deltas are unspecified.
  Result<StepStats> TrainStep(std::span<const float* const> params, const Batch& batch, float lr,
                              std::span<float* const> deltas) override;
  Result<EvalStats> Evaluate(std::span<const float* const> params, const Batch& batch) override;
  std::string name() const override;
  const MlpShape& shape() const override { return shape_; }

  // Enqueues one SGD step on the compute stream: tables from `source`,
  // deltas (= -lr * mean gradient) into the source's delta buffers, each
  // handed back with DeltaDone as soon as its product is enqueued. Checks
  // lr and the batch on the host (InvalidArgument as TrainStep) while
  // staging the batch; the source checks the tables. Returns once the work
  // is enqueued; the host may then collect deltas from the source while the
  // GPU still runs. On error nothing is left running (the stream is drained).
  // FailedPrecondition if the previous step was not finished.
  // REQUIRES: `source` serves this backend's shape and outlives the step.
  Status EnqueueTrainStep(DeviceTableSource* source, const Batch& batch, float lr);
  // Waits for the enqueued step; its loss and hits. FailedPrecondition
  // "training diverged" when the loss or an update is not finite (naming the
  // table), or when no step is enqueued.
  Result<StepStats> FinishTrainStep();

  // Mean loss and accuracy with tables from `source`. Errors as Evaluate.
  Result<EvalStats> EvaluateTables(DeviceTableSource* source, const Batch& batch);

  cudaStream_t compute_stream() const { return stream_.get(); }
  int device() const { return options_.device; }
  // Device bytes of scratch held now (grows only when a larger batch comes).
  int64_t scratch_bytes() const;

 private:
  CudaBackend(MlpShape shape, const CudaBackendOptions& options);
  Status Init();
  // Grows scratch to `rows` examples; on failure the old scratch stays.
  Status EnsureScratch(int rows);
  // Checks the batch (as ValidateBatch) while copying it into pinned staging
  // buffer `slot`, then enqueues its upload.
  Status StageBatch(const float* x, const int32_t* y, int rows, int slot, bool check);
  Status Gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
              const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  // Forward pass of `n` staged examples: acts_[i] = layer i's output.
  Status Forward(DeviceTableSource* source, int n);
  // Backward pass from the logit gradient in acts_.back().
  Status Backward(DeviceTableSource* source, int n, float scale);
  Status EnqueueImpl(DeviceTableSource* source, const Batch& batch, float lr);
  Result<EvalStats> EvaluateImpl(DeviceTableSource* source, const Batch& batch);
  // Waits for all work on the compute stream, ignoring its errors (used on
  // error paths, which already have an error to report).
  void Drain();
  // The cache behind the host-table calls, made on first use.
  Status EnsureHostCache();

  const MlpShape shape_;
  const CudaBackendOptions options_;
  std::string device_name_;
  int hidden_width_ = 0;  // widest hidden layer (0 for a single layer)
  CudaStream stream_;
  CublasHandle blas_;

  int capacity_ = 0;                // examples the scratch holds
  std::vector<DeviceBuffer> acts_;  // per layer: capacity_ x sizes[i+1]
  DeviceBuffer grad_a_, grad_b_;    // capacity_ x hidden_width_
  DeviceBuffer x_, y_;              // the staged batch on the device
  DeviceBuffer row_loss_, row_correct_;
  PinnedBuffer stage_x_[2], stage_y_[2];  // pinned staging, alternating
  CudaEvent stage_free_[2];               // upload from stage k done
  DeviceBuffer counters_;                 // StepCounters on the device
  PinnedBuffer counters_host_;            // and its copy on the host

  bool in_flight_ = false;  // a step enqueued and not finished
  int pending_n_ = 0;       // its batch size

  std::unique_ptr<GpuParamCache> host_cache_;
  uint64_t host_version_ = 0;  // every host-table call is a new version
};

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_CUDA_BACKEND_H_
