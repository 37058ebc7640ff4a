// CpuBackend: the ComputeBackend on the host CPU, matrix products by OpenBLAS.
//
// Forward and backward passes run as sgemm calls plus small loops for bias,
// ReLU and softmax cross-entropy. Scratch buffers (activations and two
// gradient buffers) grow to the largest batch seen and are then reused, so a
// steady stream of equal batches allocates nothing after the first step.
// Evaluate works in slices of kCpuEvalSliceRows examples.
//
// The OpenBLAS thread count is a process-wide setting of the library: each
// call sets it to this backend's `threads` if something else changed it.
// Default 1, since several workers usually share a machine.
//
// Thread-safety: one thread at a time per backend (see ComputeBackend).
#ifndef GEOPS_WORKER_CPU_BACKEND_H_
#define GEOPS_WORKER_CPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/compute_backend.h"
#include "worker/mlp_model.h"

namespace geops::worker {

// Examples per slice in Evaluate; bounds its scratch memory.
inline constexpr int kCpuEvalSliceRows = 1024;
// Most OpenBLAS threads one backend asks for.
inline constexpr int kMaxCpuThreads = 256;

class CpuBackend final : public ComputeBackend {
 public:
  // InvalidArgument for a bad shape or threads outside [1, kMaxCpuThreads].
  static Result<std::unique_ptr<CpuBackend>> Create(const MlpShape& shape, int threads = 1);

  Result<StepStats> TrainStep(std::span<const float* const> params, const Batch& batch, float lr,
                              std::span<float* const> deltas) override;
  Result<EvalStats> Evaluate(std::span<const float* const> params, const Batch& batch) override;
  std::string name() const override;
  const MlpShape& shape() const override { return shape_; }

  // Floats of scratch memory held now (grows only when a larger batch comes).
  int64_t scratch_floats() const;

 private:
  CpuBackend(MlpShape shape, int threads);
  void EnsureThreads() const;
  // Grows the scratch buffers to hold `rows` examples.
  void EnsureScratch(int rows);
  // Forward pass of `n` examples: acts_[i] = layer i's output (ReLU applied on
  // hidden layers; raw logits on the last).
  void Forward(std::span<const float* const> params, const float* x, int n);
  // Softmax cross-entropy on the logits in acts_.back(). Adds the summed loss
  // and the correct count. With `want_grad` the logits are replaced by
  // softmax - onehot (the gradient of the summed loss w.r.t. the logits).
  void SoftmaxXent(const int32_t* y, int n, bool want_grad, double* loss_sum, int64_t* correct);
  // Backward pass from the logit gradient left by SoftmaxXent; writes
  // deltas = scale * gradient of the summed loss.
  void Backward(std::span<const float* const> params, const float* x, int n, float scale,
                std::span<float* const> deltas);

  MlpShape shape_;
  int threads_;
  int hidden_width_ = 0;  // widest hidden layer (0 for a single layer)
  int capacity_ = 0;      // examples the scratch buffers hold
  std::vector<std::vector<float>> acts_;  // per layer: capacity_ x sizes[i+1]
  std::vector<float> grad_a_;             // capacity_ x hidden_width_
  std::vector<float> grad_b_;             // capacity_ x hidden_width_
};

// The CPU backend as a ComputeBackend; see CpuBackend::Create.
Result<std::unique_ptr<ComputeBackend>> NewCpuBackend(const MlpShape& shape, int threads = 1);

}  // namespace geops::worker

#endif  // GEOPS_WORKER_CPU_BACKEND_H_
