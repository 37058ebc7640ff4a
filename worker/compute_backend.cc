#include "worker/compute_backend.h"

#include <cmath>
#include <string>

#include "common/float_kernels.h"

namespace geops::worker {
namespace {

const char* KindOfNonFinite(float v) { return std::isnan(v) ? "NaN" : "infinite"; }

}  // namespace

bool CudaBackendBuilt() {
#if defined(GEOPS_HAVE_CUDA) && GEOPS_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Result<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "auto") return BackendKind::kAuto;
  if (name == "cuda") {
    if (!CudaBackendBuilt()) {
      return FailedPreconditionError(
          "backend 'cuda' is not available: this build has no CUDA support (build with a CUDA "
          "toolkit, or use 'cpu' or 'auto')");
    }
    return BackendKind::kCuda;
  }
  return InvalidArgumentError("unknown compute backend '" + std::string(name) +
                              "'; choose 'cpu', 'cuda' or 'auto'");
}

std::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
    case BackendKind::kAuto:
      return "auto";
  }
  return "unknown";
}

Status ValidateParams(const MlpShape& shape, std::span<const float* const> params) {
  if (static_cast<int>(params.size()) != shape.num_tables()) {
    return InvalidArgumentError("got " + std::to_string(params.size()) +
                                " parameter tables; MLP " + shape.ToString() + " has " +
                                std::to_string(shape.num_tables()));
  }
  for (int layer = 0; layer < shape.num_layers(); ++layer) {
    const int in = shape.sizes[layer];
    const int out = shape.sizes[layer + 1];
    for (int k = 0; k < 2; ++k) {
      const float* p = params[2 * layer + k];
      const std::string name = k == 0 ? WeightTableName(layer) : BiasTableName(layer);
      if (p == nullptr) return InvalidArgumentError("parameter table '" + name + "' is null");
      const int64_t n = k == 0 ? int64_t{in} * out : out;
      const int64_t bad = FirstNonFinite(p, n);
      if (bad >= 0) {
        return InvalidArgumentError("parameter table '" + name + "' element " +
                                    std::to_string(bad) + " (row " + std::to_string(bad / out) +
                                    ", col " + std::to_string(bad % out) + ") is " +
                                    KindOfNonFinite(p[bad]));
      }
    }
  }
  return Status::Ok();
}

Status ValidateBatch(const MlpShape& shape, const Batch& batch, int64_t max_n) {
  if (batch.n < 1 || batch.n > max_n) {
    return InvalidArgumentError("batch size " + std::to_string(batch.n) + " is outside [1, " +
                                std::to_string(max_n) + "]");
  }
  if (batch.x == nullptr || batch.y == nullptr) {
    return InvalidArgumentError("batch has a null input or label pointer");
  }
  const int classes = shape.classes();
  for (int i = 0; i < batch.n; ++i) {
    if (batch.y[i] < 0 || batch.y[i] >= classes) {
      return InvalidArgumentError("label at batch index " + std::to_string(i) + " is " +
                                  std::to_string(batch.y[i]) + "; must be in [0, " +
                                  std::to_string(classes) + ")");
    }
  }
  const int dims = shape.inputs();
  const int64_t bad = FirstNonFinite(batch.x, int64_t{batch.n} * dims);
  if (bad >= 0) {
    return InvalidArgumentError("input of example " + std::to_string(bad / dims) + " feature " +
                                std::to_string(bad % dims) + " is " +
                                KindOfNonFinite(batch.x[bad]));
  }
  return Status::Ok();
}

}  // namespace geops::worker
