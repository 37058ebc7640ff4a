#include "worker/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "common/float_kernels.h"
#include "worker/blas_core.h"

namespace geops::worker {

Result<std::unique_ptr<CpuBackend>> CpuBackend::Create(const MlpShape& shape, int threads) {
  GEOPS_RETURN_IF_ERROR(ValidateMlpShape(shape));
  if (threads < 1 || threads > kMaxCpuThreads) {
    return InvalidArgumentError("CPU backend threads must be in [1, " +
                                std::to_string(kMaxCpuThreads) + "], got " +
                                std::to_string(threads));
  }
  return std::unique_ptr<CpuBackend>(new CpuBackend(shape, threads));
}

Result<std::unique_ptr<ComputeBackend>> NewCpuBackend(const MlpShape& shape, int threads) {
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(shape, threads));
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}

CpuBackend::CpuBackend(MlpShape shape, int threads)
    : shape_(std::move(shape)), threads_(threads) {
  for (int i = 1; i < shape_.num_layers(); ++i) hidden_width_ = std::max(hidden_width_, shape_.sizes[i]);
  acts_.resize(shape_.num_layers());
  EnsureThreads();
}

std::string CpuBackend::name() const {
  return "cpu(openblas " + LoadedBlasCore() + ", " + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

int64_t CpuBackend::scratch_floats() const {
  int64_t total = static_cast<int64_t>(grad_a_.size() + grad_b_.size());
  for (const auto& a : acts_) total += static_cast<int64_t>(a.size());
  return total;
}

void CpuBackend::EnsureThreads() const {
  if (openblas_get_num_threads() != threads_) openblas_set_num_threads(threads_);
}

void CpuBackend::EnsureScratch(int rows) {
  if (rows <= capacity_) return;
  capacity_ = rows;
  for (int i = 0; i < shape_.num_layers(); ++i) {
    acts_[i].resize(static_cast<size_t>(capacity_) * shape_.sizes[i + 1]);
  }
  grad_a_.resize(static_cast<size_t>(capacity_) * hidden_width_);
  grad_b_.resize(static_cast<size_t>(capacity_) * hidden_width_);
}

void CpuBackend::Forward(std::span<const float* const> params, const float* x, int n) {
  const int layers = shape_.num_layers();
  for (int i = 0; i < layers; ++i) {
    const int in = shape_.sizes[i];
    const int out = shape_.sizes[i + 1];
    const float* a_prev = i == 0 ? x : acts_[i - 1].data();
    const float* w = params[2 * i];
    const float* b = params[2 * i + 1];
    float* z = acts_[i].data();
    for (int r = 0; r < n; ++r) std::memcpy(z + static_cast<size_t>(r) * out, b, sizeof(float) * out);
    // z = a_prev (n x in) * w (in x out) + z
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, out, in, 1.0f, a_prev, in, w, out,
                1.0f, z, out);
    if (i + 1 < layers) {
      const size_t count = static_cast<size_t>(n) * out;
      for (size_t k = 0; k < count; ++k) z[k] = std::max(z[k], 0.0f);
    }
  }
}

void CpuBackend::SoftmaxXent(const int32_t* y, int n, bool want_grad, double* loss_sum,
                             int64_t* correct) {
  const int classes = shape_.classes();
  float* logits = acts_.back().data();
  double loss = 0.0;
  int64_t right = 0;
  for (int r = 0; r < n; ++r) {
    float* row = logits + static_cast<size_t>(r) * classes;
    int best = 0;
    for (int j = 1; j < classes; ++j) {
      if (row[j] > row[best]) best = j;
    }
    const float m = row[best];
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j] - m));
    // log-sum-exp shifted by the max: no overflow, and sum >= 1.
    loss += static_cast<double>(m) + std::log(sum) - static_cast<double>(row[y[r]]);
    if (best == y[r]) ++right;
    if (want_grad) {
      const double inv = 1.0 / sum;
      for (int j = 0; j < classes; ++j) {
        row[j] = static_cast<float>(std::exp(static_cast<double>(row[j] - m)) * inv);
      }
      row[y[r]] -= 1.0f;
    }
  }
  *loss_sum += loss;
  *correct += right;
}

void CpuBackend::Backward(std::span<const float* const> params, const float* x, int n,
                          float scale, std::span<float* const> deltas) {
  const int layers = shape_.num_layers();
  float* dz = acts_.back().data();  // gradient w.r.t. the current layer's pre-activation
  float* spare = grad_a_.data();
  for (int i = layers - 1; i >= 0; --i) {
    const int in = shape_.sizes[i];
    const int out = shape_.sizes[i + 1];
    const float* a_prev = i == 0 ? x : acts_[i - 1].data();
    // delta_w = scale * a_prev^T (in x n) * dz (n x out)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, n, scale, a_prev, in, dz, out,
                0.0f, deltas[2 * i], out);
    float* db = deltas[2 * i + 1];
    std::fill(db, db + out, 0.0f);
    for (int r = 0; r < n; ++r) {
      const float* row = dz + static_cast<size_t>(r) * out;
      for (int j = 0; j < out; ++j) db[j] += row[j];
    }
    for (int j = 0; j < out; ++j) db[j] *= scale;
    if (i == 0) break;
    // d a_prev = dz (n x out) * w^T (out x in), then through the ReLU of layer i-1.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, in, out, 1.0f, dz, out, params[2 * i],
                out, 0.0f, spare, in);
    const size_t count = static_cast<size_t>(n) * in;
    for (size_t k = 0; k < count; ++k) {
      if (!(a_prev[k] > 0.0f)) spare[k] = 0.0f;
    }
    dz = spare;
    spare = spare == grad_a_.data() ? grad_b_.data() : grad_a_.data();
  }
}

Result<StepStats> CpuBackend::TrainStep(std::span<const float* const> params, const Batch& batch,
                                        float lr, std::span<float* const> deltas) {
  GEOPS_RETURN_IF_ERROR(ValidateParams(shape_, params));
  if (static_cast<int>(deltas.size()) != shape_.num_tables()) {
    return InvalidArgumentError("got " + std::to_string(deltas.size()) +
                                " delta tables; MLP " + shape_.ToString() + " has " +
                                std::to_string(shape_.num_tables()));
  }
  for (size_t t = 0; t < deltas.size(); ++t) {
    if (deltas[t] == nullptr) {
      return InvalidArgumentError("delta table " + std::to_string(t) + " is null");
    }
  }
  if (!std::isfinite(lr) || lr < 0.0f) {
    return InvalidArgumentError("learning rate " + std::to_string(lr) +
                                " must be finite and >= 0");
  }
  GEOPS_RETURN_IF_ERROR(ValidateBatch(shape_, batch, kMaxTrainBatch));

  EnsureThreads();
  EnsureScratch(batch.n);
  Forward(params, batch.x, batch.n);
  StepStats stats;
  stats.n = batch.n;
  double loss_sum = 0.0;
  SoftmaxXent(batch.y, batch.n, /*want_grad=*/true, &loss_sum, &stats.correct);
  stats.loss = loss_sum / batch.n;
  if (!std::isfinite(stats.loss)) {
    return FailedPreconditionError("training diverged: the loss is not finite (lr too large?)");
  }
  Backward(params, batch.x, batch.n, -lr / static_cast<float>(batch.n), deltas);
  for (int layer = 0; layer < shape_.num_layers(); ++layer) {
    const int64_t sizes[2] = {int64_t{shape_.sizes[layer]} * shape_.sizes[layer + 1],
                              shape_.sizes[layer + 1]};
    for (int k = 0; k < 2; ++k) {
      if (FirstNonFinite(deltas[2 * layer + k], sizes[k]) >= 0) {
        return FailedPreconditionError(
            "training diverged: the update of '" +
            (k == 0 ? WeightTableName(layer) : BiasTableName(layer)) +
            "' is not finite (lr too large?)");
      }
    }
  }
  return stats;
}

Result<EvalStats> CpuBackend::Evaluate(std::span<const float* const> params, const Batch& batch) {
  GEOPS_RETURN_IF_ERROR(ValidateParams(shape_, params));
  GEOPS_RETURN_IF_ERROR(ValidateBatch(shape_, batch, INT32_MAX));
  EnsureThreads();
  EnsureScratch(std::min(batch.n, kCpuEvalSliceRows));
  EvalStats stats;
  stats.n = batch.n;
  double loss_sum = 0.0;
  const size_t dims = static_cast<size_t>(shape_.inputs());
  for (int start = 0; start < batch.n; start += kCpuEvalSliceRows) {
    const int rows = std::min(kCpuEvalSliceRows, batch.n - start);
    Forward(params, batch.x + start * dims, rows);
    SoftmaxXent(batch.y + start, rows, /*want_grad=*/false, &loss_sum, &stats.correct);
  }
  stats.loss = loss_sum / batch.n;
  stats.accuracy = static_cast<double>(stats.correct) / batch.n;
  return stats;
}

}  // namespace geops::worker
