#include "worker/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "worker/cuda/cuda_status.h"
#include "worker/cuda/gpu_param_cache.h"
#include "worker/cuda/mlp_kernels.h"
#include "worker/cuda/staging.h"

namespace geops::worker::cuda {

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const MlpShape& shape,
                                                         const CudaBackendOptions& options) {
  GEOPS_RETURN_IF_ERROR(ValidateMlpShape(shape));
  GEOPS_RETURN_IF_ERROR(CudaDeviceStatus());
  int count = 0;
  GEOPS_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (options.device < 0 || options.device >= count) {
    return InvalidArgumentError("CUDA device " + std::to_string(options.device) +
                                " does not exist; this machine has " + std::to_string(count));
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(shape, options));
  GEOPS_RETURN_IF_ERROR(backend->Init().WithContext("CUDA backend"));
  // Explicit: nvcc's front end does not apply C++20's implicit move here.
  return Result<std::unique_ptr<CudaBackend>>(std::move(backend));
}

Result<std::unique_ptr<ComputeBackend>> NewCudaBackend(const MlpShape& shape,
                                                       const CudaBackendOptions& options) {
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::Create(shape, options));
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}

CudaBackend::CudaBackend(MlpShape shape, const CudaBackendOptions& options)
    : shape_(std::move(shape)), options_(options) {
  for (int i = 1; i < shape_.num_layers(); ++i) {
    hidden_width_ = std::max(hidden_width_, shape_.sizes[i]);
  }
}

CudaBackend::~CudaBackend() {
  if (stream_.get() != nullptr) {
    (void)cudaSetDevice(options_.device);
    (void)cudaStreamSynchronize(stream_.get());
  }
  host_cache_.reset();  // before the stream its work was ordered against
}

Status CudaBackend::Init() {
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  cudaDeviceProp prop;
  GEOPS_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options_.device));
  device_name_ = prop.name;
  GEOPS_ASSIGN_OR_RETURN(stream_, CudaStream::Create());
  GEOPS_ASSIGN_OR_RETURN(blas_, CublasHandle::Create(stream_.get(), options_.allow_tf32));
  GEOPS_ASSIGN_OR_RETURN(counters_, DeviceBuffer::Allocate(sizeof(StepCounters), "step counters"));
  GEOPS_ASSIGN_OR_RETURN(counters_host_,
                         PinnedBuffer::Allocate(sizeof(StepCounters), "step counters"));
  for (CudaEvent& e : stage_free_) {
    GEOPS_ASSIGN_OR_RETURN(e, CudaEvent::Create());
  }
  acts_.resize(shape_.num_layers());
  return Status::Ok();
}

std::string CudaBackend::name() const {
  return "cuda(" + device_name_ + ", " + (options_.allow_tf32 ? "tf32" : "fp32") + ")";
}

int64_t CudaBackend::scratch_bytes() const {
  int64_t total = grad_a_.bytes() + grad_b_.bytes() + x_.bytes() + y_.bytes() + row_loss_.bytes() +
                  row_correct_.bytes();
  for (const DeviceBuffer& a : acts_) total += a.bytes();
  return total;
}

Status CudaBackend::EnsureScratch(int rows) {
  if (rows <= capacity_) return Status::Ok();
  // Allocate the new set first: on failure the old scratch stays usable.
  const int64_t r = rows;
  std::vector<DeviceBuffer> acts(shape_.num_layers());
  for (int i = 0; i < shape_.num_layers(); ++i) {
    GEOPS_ASSIGN_OR_RETURN(acts[i],
                           DeviceBuffer::Allocate(r * shape_.sizes[i + 1] * sizeof(float),
                                                  "activations of layer " + std::to_string(i + 1)));
  }
  const int64_t grad_bytes = r * hidden_width_ * static_cast<int64_t>(sizeof(float));
  GEOPS_ASSIGN_OR_RETURN(DeviceBuffer grad_a,
                         DeviceBuffer::Allocate(grad_bytes, "gradient scratch"));
  GEOPS_ASSIGN_OR_RETURN(DeviceBuffer grad_b,
                         DeviceBuffer::Allocate(grad_bytes, "gradient scratch"));
  const int64_t x_bytes = r * shape_.inputs() * static_cast<int64_t>(sizeof(float));
  GEOPS_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(x_bytes, "batch inputs"));
  GEOPS_ASSIGN_OR_RETURN(DeviceBuffer y,
                         DeviceBuffer::Allocate(r * sizeof(int32_t), "batch labels"));
  GEOPS_ASSIGN_OR_RETURN(DeviceBuffer row_loss,
                         DeviceBuffer::Allocate(r * sizeof(double), "row losses"));
  GEOPS_ASSIGN_OR_RETURN(DeviceBuffer row_correct,
                         DeviceBuffer::Allocate(r * sizeof(int32_t), "row hits"));
  PinnedBuffer sx[2], sy[2];
  for (int k = 0; k < 2; ++k) {
    GEOPS_ASSIGN_OR_RETURN(sx[k], PinnedBuffer::Allocate(x_bytes, "batch staging"));
    GEOPS_ASSIGN_OR_RETURN(sy[k], PinnedBuffer::Allocate(r * sizeof(int32_t), "label staging"));
  }
  // Nothing may still use the old buffers when they are freed.
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  acts_ = std::move(acts);
  grad_a_ = std::move(grad_a);
  grad_b_ = std::move(grad_b);
  x_ = std::move(x);
  y_ = std::move(y);
  row_loss_ = std::move(row_loss);
  row_correct_ = std::move(row_correct);
  for (int k = 0; k < 2; ++k) {
    stage_x_[k] = std::move(sx[k]);
    stage_y_[k] = std::move(sy[k]);
  }
  capacity_ = rows;
  return Status::Ok();
}

Status CudaBackend::StageBatch(const float* x, const int32_t* y, int rows, int slot, bool check) {
  const int64_t count = int64_t{rows} * shape_.inputs();
  const size_t x_bytes = static_cast<size_t>(count) * sizeof(float);
  const size_t y_bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  // The previous upload from this staging buffer must be done.
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stage_free_[slot].get()));
  float* sx = stage_x_[slot].floats();
  int32_t* sy = static_cast<int32_t*>(stage_y_[slot].data());
  if (check) {
    const Batch batch{x, y, rows};
    for (int i = 0; i < rows; ++i) {
      if (y[i] < 0 || y[i] >= shape_.classes()) return ValidateBatch(shape_, batch, kMaxTrainBatch);
    }
    if (CopyAndFindNonFinite(sx, x, count) >= 0) {
      Status st = ValidateBatch(shape_, batch, kMaxTrainBatch);
      return st.ok() ? InternalError("batch check disagrees with ValidateBatch") : st;
    }
  } else {
    std::memcpy(sx, x, x_bytes);
  }
  std::memcpy(sy, y, y_bytes);
  const cudaStream_t s = stream_.get();
  GEOPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x_.data(), sx, x_bytes, cudaMemcpyHostToDevice, s));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y_.data(), sy, y_bytes, cudaMemcpyHostToDevice, s));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(stage_free_[slot].get(), s));
  return Status::Ok();
}

Status CudaBackend::Gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                         float* c, int ldc) {
  GEOPS_CUBLAS_RETURN_IF_ERROR(
      cublasSgemm(blas_.get(), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));
  return Status::Ok();
}

Status CudaBackend::Forward(DeviceTableSource* source, int n) {
  const cudaStream_t s = stream_.get();
  const int layers = shape_.num_layers();
  for (int i = 0; i < layers; ++i) {
    const int in = shape_.sizes[i];
    const int out = shape_.sizes[i + 1];
    const float* a_prev = i == 0 ? x_.floats() : acts_[i - 1].floats();
    float* z = acts_[i].floats();
    GEOPS_ASSIGN_OR_RETURN(const float* w, source->Acquire(2 * i, s));
    GEOPS_ASSIGN_OR_RETURN(const float* b, source->Acquire(2 * i + 1, s));
    // Row-major z (n x out) = a_prev (n x in) * w (in x out), as column-major
    // z^T (out x n) = w^T (out x in) * a_prev^T (in x n).
    GEOPS_RETURN_IF_ERROR(
        Gemm(CUBLAS_OP_N, CUBLAS_OP_N, out, n, in, 1.0f, w, out, a_prev, in, 0.0f, z, out));
    GEOPS_RETURN_IF_ERROR(AddBiasActivate(z, b, n, out, /*relu=*/i + 1 < layers, s));
    GEOPS_RETURN_IF_ERROR(source->Release(2 * i, s));
    GEOPS_RETURN_IF_ERROR(source->Release(2 * i + 1, s));
  }
  return Status::Ok();
}

Status CudaBackend::Backward(DeviceTableSource* source, int n, float scale) {
  const cudaStream_t s = stream_.get();
  auto* counters = static_cast<StepCounters*>(counters_.data());
  float* dz = acts_.back().floats();  // gradient w.r.t. the current layer's pre-activation
  float* spare = grad_a_.floats();
  for (int i = shape_.num_layers() - 1; i >= 0; --i) {
    const int in = shape_.sizes[i];
    const int out = shape_.sizes[i + 1];
    const float* a_prev = i == 0 ? x_.floats() : acts_[i - 1].floats();
    // delta_w (in x out) = scale * a_prev^T (in x n) * dz (n x out); column-major:
    // delta_w^T (out x in) = scale * dz^T (out x n) * a_prev (n x in).
    GEOPS_ASSIGN_OR_RETURN(float* dw, source->DeltaBuffer(2 * i, s));
    GEOPS_RETURN_IF_ERROR(
        Gemm(CUBLAS_OP_N, CUBLAS_OP_T, out, in, n, scale, dz, out, a_prev, in, 0.0f, dw, out));
    GEOPS_RETURN_IF_ERROR(FindNonFinite(dw, int64_t{in} * out, FirstBadSlot(counters, 2 * i), s));
    GEOPS_RETURN_IF_ERROR(source->DeltaDone(2 * i, s));
    GEOPS_ASSIGN_OR_RETURN(float* db, source->DeltaBuffer(2 * i + 1, s));
    GEOPS_RETURN_IF_ERROR(BiasGradient(dz, n, out, scale, db, s));
    GEOPS_RETURN_IF_ERROR(FindNonFinite(db, out, FirstBadSlot(counters, 2 * i + 1), s));
    GEOPS_RETURN_IF_ERROR(source->DeltaDone(2 * i + 1, s));
    if (i == 0) break;
    // d a_prev (n x in) = dz (n x out) * w^T (out x in); column-major:
    // d a_prev^T (in x n) = w (in x out, stored as w^T: transpose it) * dz^T.
    GEOPS_ASSIGN_OR_RETURN(const float* w, source->Acquire(2 * i, s));
    GEOPS_RETURN_IF_ERROR(
        Gemm(CUBLAS_OP_T, CUBLAS_OP_N, in, n, out, 1.0f, w, out, dz, out, 0.0f, spare, in));
    GEOPS_RETURN_IF_ERROR(source->Release(2 * i, s));
    GEOPS_RETURN_IF_ERROR(ReluBackward(spare, a_prev, int64_t{n} * in, s));
    dz = spare;
    spare = spare == grad_a_.floats() ? grad_b_.floats() : grad_a_.floats();
  }
  return Status::Ok();
}

void CudaBackend::Drain() {
  if (cudaStreamSynchronize(stream_.get()) != cudaSuccess) (void)cudaGetLastError();
}

Status CudaBackend::EnqueueTrainStep(DeviceTableSource* source, const Batch& batch, float lr) {
  if (source == nullptr) return InvalidArgumentError("no device table source");
  if (!std::isfinite(lr) || lr < 0.0f) {
    return InvalidArgumentError("learning rate " + std::to_string(lr) + " must be finite and >= 0");
  }
  return EnqueueImpl(source, batch, lr);
}

Status CudaBackend::EnqueueImpl(DeviceTableSource* source, const Batch& batch, float lr) {
  if (in_flight_) return FailedPreconditionError("a training step is already enqueued");
  if (batch.n < 1 || batch.n > kMaxTrainBatch || batch.x == nullptr || batch.y == nullptr) {
    return ValidateBatch(shape_, batch, kMaxTrainBatch);
  }
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  GEOPS_RETURN_IF_ERROR(EnsureScratch(batch.n));
  const cudaStream_t s = stream_.get();
  auto* counters = static_cast<StepCounters*>(counters_.data());
  Status st = [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(StageBatch(batch.x, batch.y, batch.n, 0, /*check=*/true));
    GEOPS_RETURN_IF_ERROR(ResetCounters(counters, s));
    GEOPS_RETURN_IF_ERROR(Forward(source, batch.n));
    GEOPS_RETURN_IF_ERROR(SoftmaxXent(acts_.back().floats(), static_cast<const int32_t*>(y_.data()),
                                      batch.n, shape_.classes(), /*want_grad=*/true,
                                      static_cast<double*>(row_loss_.data()),
                                      static_cast<int32_t*>(row_correct_.data()), s));
    GEOPS_RETURN_IF_ERROR(AccumulateStats(static_cast<const double*>(row_loss_.data()),
                                          static_cast<const int32_t*>(row_correct_.data()), batch.n,
                                          counters, s));
    GEOPS_RETURN_IF_ERROR(Backward(source, batch.n, -lr / static_cast<float>(batch.n)));
    GEOPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counters_host_.data(), counters,
                                               sizeof(StepCounters), cudaMemcpyDeviceToHost, s));
    return Status::Ok();
  }();
  if (!st.ok()) {
    Drain();
    return st;
  }
  in_flight_ = true;
  pending_n_ = batch.n;
  return Status::Ok();
}

Result<StepStats> CudaBackend::FinishTrainStep() {
  if (!in_flight_) return FailedPreconditionError("no training step is enqueued");
  in_flight_ = false;
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  const auto* c = static_cast<const StepCounters*>(counters_host_.data());
  StepStats stats;
  stats.n = pending_n_;
  stats.loss = c->loss_sum / pending_n_;
  stats.correct = static_cast<int64_t>(c->correct);
  if (!std::isfinite(stats.loss)) {
    return FailedPreconditionError("training diverged: the loss is not finite (lr too large?)");
  }
  for (int layer = 0; layer < shape_.num_layers(); ++layer) {
    for (int k = 0; k < 2; ++k) {
      if (c->first_bad[2 * layer + k] != kAllFinite) {
        return FailedPreconditionError("training diverged: the update of '" +
                                       (k == 0 ? WeightTableName(layer) : BiasTableName(layer)) +
                                       "' is not finite (lr too large?)");
      }
    }
  }
  return stats;
}

Result<EvalStats> CudaBackend::EvaluateTables(DeviceTableSource* source, const Batch& batch) {
  if (source == nullptr) return InvalidArgumentError("no device table source");
  GEOPS_RETURN_IF_ERROR(ValidateBatch(shape_, batch, INT32_MAX));
  return EvaluateImpl(source, batch);
}

Result<EvalStats> CudaBackend::EvaluateImpl(DeviceTableSource* source, const Batch& batch) {
  if (in_flight_) return FailedPreconditionError("a training step is enqueued; finish it first");
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  GEOPS_RETURN_IF_ERROR(EnsureScratch(std::min(batch.n, kCudaEvalSliceRows)));
  const cudaStream_t s = stream_.get();
  auto* counters = static_cast<StepCounters*>(counters_.data());
  const int64_t dims = shape_.inputs();
  Status st = [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(ResetCounters(counters, s));
    int slot = 0;
    for (int start = 0; start < batch.n; start += kCudaEvalSliceRows, slot ^= 1) {
      const int rows = std::min(kCudaEvalSliceRows, batch.n - start);
      // Staging slice k+1 on the host overlaps slice k on the GPU.
      GEOPS_RETURN_IF_ERROR(StageBatch(batch.x + start * dims, batch.y + start, rows, slot,
                                       /*check=*/false));
      GEOPS_RETURN_IF_ERROR(Forward(source, rows));
      GEOPS_RETURN_IF_ERROR(
          SoftmaxXent(acts_.back().floats(), static_cast<const int32_t*>(y_.data()), rows,
                      shape_.classes(), /*want_grad=*/false, static_cast<double*>(row_loss_.data()),
                      static_cast<int32_t*>(row_correct_.data()), s));
      GEOPS_RETURN_IF_ERROR(AccumulateStats(static_cast<const double*>(row_loss_.data()),
                                            static_cast<const int32_t*>(row_correct_.data()), rows,
                                            counters, s));
    }
    GEOPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counters_host_.data(), counters,
                                               sizeof(StepCounters), cudaMemcpyDeviceToHost, s));
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return Status::Ok();
  }();
  if (!st.ok()) {
    Drain();
    return st;
  }
  const auto* c = static_cast<const StepCounters*>(counters_host_.data());
  EvalStats stats;
  stats.n = batch.n;
  stats.correct = static_cast<int64_t>(c->correct);
  stats.loss = c->loss_sum / batch.n;
  stats.accuracy = static_cast<double>(stats.correct) / batch.n;
  return stats;
}

Status CudaBackend::EnsureHostCache() {
  if (host_cache_ != nullptr) return Status::Ok();
  GEOPS_ASSIGN_OR_RETURN(host_cache_, GpuParamCache::Create(MlpTables(shape_), options_.device));
  return Status::Ok();
}

Result<StepStats> CudaBackend::TrainStep(std::span<const float* const> params, const Batch& batch,
                                         float lr, std::span<float* const> deltas) {
  GEOPS_RETURN_IF_ERROR(ValidateParams(shape_, params));
  if (static_cast<int>(deltas.size()) != shape_.num_tables()) {
    return InvalidArgumentError("got " + std::to_string(deltas.size()) + " delta tables; MLP " +
                                shape_.ToString() + " has " + std::to_string(shape_.num_tables()));
  }
  for (size_t t = 0; t < deltas.size(); ++t) {
    if (deltas[t] == nullptr) {
      return InvalidArgumentError("delta table " + std::to_string(t) + " is null");
    }
  }
  if (!std::isfinite(lr) || lr < 0.0f) {
    return InvalidArgumentError("learning rate " + std::to_string(lr) + " must be finite and >= 0");
  }
  GEOPS_RETURN_IF_ERROR(ValidateBatch(shape_, batch, kMaxTrainBatch));
  GEOPS_RETURN_IF_ERROR(EnsureHostCache());
  GEOPS_RETURN_IF_ERROR(host_cache_->BeginStep(params, ++host_version_));
  GEOPS_RETURN_IF_ERROR(EnqueueImpl(host_cache_.get(), batch, lr));
  const Status collected = host_cache_->CollectDeltas(deltas);
  Result<StepStats> stats = FinishTrainStep();
  if (!collected.ok()) return collected;
  return stats;
}

Result<EvalStats> CudaBackend::Evaluate(std::span<const float* const> params, const Batch& batch) {
  GEOPS_RETURN_IF_ERROR(ValidateParams(shape_, params));
  GEOPS_RETURN_IF_ERROR(ValidateBatch(shape_, batch, INT32_MAX));
  GEOPS_RETURN_IF_ERROR(EnsureHostCache());
  GEOPS_RETURN_IF_ERROR(host_cache_->BeginStep(params, ++host_version_));
  return EvaluateImpl(host_cache_.get(), batch);
}

}  // namespace geops::worker::cuda
