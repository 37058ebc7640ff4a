// The small CUDA kernels of the MLP step, around the cuBLAS products: bias
// and ReLU, softmax cross-entropy with its loss and accuracy reductions, the
// bias gradient, the finiteness check of updates, and the in-place add that
// folds an update into a table.
//
// Each launcher enqueues on `stream` and returns at once: the Status reports
// a failed launch; faults inside a kernel surface at the next synchronisation
// of the stream. All matrices are dense row-major float32, as on the host.
// Sums that feed the loss and the bias gradient run in a fixed order, so the
// same inputs give bit-identical results on every run.
//
// Thread-safety: launchers are pure functions of their arguments.
#ifndef GEOPS_WORKER_CUDA_MLP_KERNELS_H_
#define GEOPS_WORKER_CUDA_MLP_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "worker/mlp_model.h"

namespace geops::worker::cuda {

// Most tables of an MLP (two per layer).
inline constexpr int kMaxMlpTables = 2 * (kMaxLayerSizes - 1);
// first_bad value of a table whose values are all finite.
inline constexpr unsigned long long kAllFinite = ~0ull;

// What a step or an evaluation accumulates on the device, read back once at
// its end.
struct StepCounters {
  double loss_sum;                              // summed cross-entropy
  unsigned long long correct;                   // arg-max hits
  unsigned long long first_bad[kMaxMlpTables];  // per table: first non-finite element
};

// &counters->first_bad[t] of a device-side StepCounters, computed without
// forming a reference to device memory on the host.
inline unsigned long long* FirstBadSlot(StepCounters* counters, int t) {
  return reinterpret_cast<unsigned long long*>(reinterpret_cast<char*>(counters) +
                                               offsetof(StepCounters, first_bad)) +
         t;
}

// Zero loss and hits; every first_bad = kAllFinite.
Status ResetCounters(StepCounters* counters, cudaStream_t stream);

// z (rows x cols) += b on every row, then z = max(z, 0) when `relu`.
Status AddBiasActivate(float* z, const float* b, int rows, int cols, bool relu,
                       cudaStream_t stream);

// grad[k] = 0 wherever !(act[k] > 0): the derivative of ReLU, applied in place.
Status ReluBackward(float* grad, const float* act, int64_t count, cudaStream_t stream);

// Softmax cross-entropy of each row of `logits` (rows x classes) against its
// label y[r] in [0, classes): row_loss[r] = logsumexp(row) - row[y[r]]
// (stable: shifted by the row's max, summed in double), row_correct[r] = 1
// when the first maximum is at y[r]. With `want_grad` each row is replaced by
// softmax(row) - onehot(y[r]), the gradient of the summed loss.
Status SoftmaxXent(float* logits, const int32_t* y, int rows, int classes, bool want_grad,
                   double* row_loss, int32_t* row_correct, cudaStream_t stream);

// counters->loss_sum += sum of row_loss; counters->correct += sum of row_correct.
Status AccumulateStats(const double* row_loss, const int32_t* row_correct, int rows,
                       StepCounters* counters, cudaStream_t stream);

// db[j] = scale * sum over rows of dz[r][j]  (dz is rows x cols).
Status BiasGradient(const float* dz, int rows, int cols, float scale, float* db,
                    cudaStream_t stream);

// dst[i] += src[i] for i < n, rounded exactly as the host's float add, so a
// device copy folded this way stays bit-identical to a host copy.
Status AddInPlace(float* dst, const float* src, int64_t n, cudaStream_t stream);

// *first = min(*first, index of the first NaN or infinite value in p[0..n)).
Status FindNonFinite(const float* p, int64_t n, unsigned long long* first, cudaStream_t stream);

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_MLP_KERNELS_H_
