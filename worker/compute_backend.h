// ComputeBackend: the training math of a worker, whatever device runs it.
//
// A backend computes, for one MLP shape (see mlp_model.h), the update of one
// SGD step and the loss/accuracy of a set of examples. Parameters and deltas
// are passed as host pointers, one per table in ModelSpec order (fc1.weight,
// fc1.bias, fc2.weight, ...), each laid out as the full dense row-major
// table. The loss is the mean softmax cross-entropy over the batch; hidden
// layers use ReLU. A backend keeps no pointer it was given after a call
// returns. Implementations: the CPU backend (cpu_backend.h, OpenBLAS) and,
// in builds with CUDA, the GPU backend (cuda/cuda_backend.h, cuBLAS).
//
// Thread-safety: a backend owns scratch memory and is used by one thread at
// a time; distinct backends may run on distinct threads.
#ifndef GEOPS_WORKER_COMPUTE_BACKEND_H_
#define GEOPS_WORKER_COMPUTE_BACKEND_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "worker/dataset.h"
#include "worker/mlp_model.h"

namespace geops::worker {

// Largest batch TrainStep accepts; larger sets go through Evaluate, which
// works in slices.
inline constexpr int kMaxTrainBatch = 1 << 16;

struct StepStats {
  double loss = 0.0;     // mean cross-entropy over the batch, before the step
  int64_t correct = 0;   // examples whose arg-max logit equals the label
  int n = 0;             // batch size
};

struct EvalStats {
  double loss = 0.0;      // mean cross-entropy
  double accuracy = 0.0;  // correct / n
  int64_t correct = 0;
  int64_t n = 0;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // One SGD step's update. Writes deltas[t] = -lr * (mean over the batch of
  // d loss / d params[t]) for every table t; the caller applies or pushes it.
  // Returns the batch's loss and correct count at `params` (before the step).
  // REQUIRES: batch.x holds batch.n * shape.inputs() floats; deltas[t] has
  // room for table t and does not overlap params or the batch.
  // Errors, all before any delta is written (deltas untouched):
  //   InvalidArgument  params/deltas count differs from the shape's tables, a
  //                    pointer is null, n is outside [1, kMaxTrainBatch], lr
  //                    is negative or not finite, a label is out of range
  //                    (the message names its index), or a parameter or
  //                    input is NaN/Inf (the message names table and element).
  // Error after deltas were written (their contents then unspecified):
  //   FailedPrecondition  the loss or gradient overflowed (training diverged,
  //                       e.g. lr too large); do not push these deltas.
  virtual Result<StepStats> TrainStep(std::span<const float* const> params, const Batch& batch,
                                      float lr, std::span<float* const> deltas) = 0;

  // Mean loss and accuracy of `params` on `batch`, which may be large (the
  // backend works through it in slices of bounded memory). Errors as for
  // TrainStep's validation, except n may be any value >= 1.
  virtual Result<EvalStats> Evaluate(std::span<const float* const> params, const Batch& batch) = 0;

  // Short human-readable name, e.g. "cpu(openblas, 1 thread)".
  virtual std::string name() const = 0;

  virtual const MlpShape& shape() const = 0;
};

// Which backend a worker asks for.
enum class BackendKind {
  kCpu,
  kCuda,
  kAuto,  // CUDA when built with it and a device is present, else CPU
};

// True when this build has the CUDA backend compiled in.
bool CudaBackendBuilt();

// "cpu", "cuda" or "auto" (case-sensitive). InvalidArgument naming the text
// and the choices for anything else; FailedPrecondition for "cuda" when this
// build has no CUDA backend (rebuild with a CUDA toolkit, or use "cpu").
Result<BackendKind> ParseBackendKind(std::string_view name);

std::string_view BackendKindName(BackendKind kind);

// Input checks every backend performs, shared so all report alike. Each
// returns InvalidArgument with the message described at TrainStep.
// `params` must hold shape.num_tables() non-null, finite tables.
Status ValidateParams(const MlpShape& shape, std::span<const float* const> params);
// `batch` must have n in [1, max_n], non-null x and y, finite inputs and
// labels in [0, shape.classes()).
Status ValidateBatch(const MlpShape& shape, const Batch& batch, int64_t max_n);

}  // namespace geops::worker

#endif  // GEOPS_WORKER_COMPUTE_BACKEND_H_
