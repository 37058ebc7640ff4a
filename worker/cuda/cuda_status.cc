#include "worker/cuda/cuda_status.h"

#include <string>
#include <string_view>

namespace geops::worker::cuda {
namespace {

// "cudaMemcpyAsync(dst, ...)" -> "cudaMemcpyAsync".
std::string_view CallName(const char* call) {
  std::string_view s(call);
  const size_t paren = s.find('(');
  return paren == std::string_view::npos ? s : s.substr(0, paren);
}

// The last two components of a source path: "cuda/cuda_backend.cu".
std::string_view ShortFile(const char* file) {
  std::string_view s(file);
  const size_t last = s.rfind('/');
  if (last == std::string_view::npos || last == 0) return s;
  const size_t prev = s.rfind('/', last - 1);
  return prev == std::string_view::npos ? s : s.substr(prev + 1);
}

std::string Where(const char* call, const char* file, int line) {
  std::string out(CallName(call));
  out += " failed at ";
  out += ShortFile(file);
  out += ":" + std::to_string(line) + ": ";
  return out;
}

}  // namespace

Status CudaError(cudaError_t err, const char* call, const char* file, int line) {
  // Clears a non-sticky error so a later cudaGetLastError does not report it
  // again; a sticky one (a kernel fault) stays, as it must.
  (void)cudaGetLastError();
  std::string msg =
      Where(call, file, line) + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  switch (err) {
    case cudaErrorMemoryAllocation:
      return ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return FailedPreconditionError(msg);
    default:
      return InternalError(msg);
  }
}

Status CublasError(cublasStatus_t st, const char* call, const char* file, int line) {
  std::string msg =
      Where(call, file, line) + cublasGetStatusName(st) + " (" + cublasGetStatusString(st) + ")";
  switch (st) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return ResourceExhaustedError(msg);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return FailedPreconditionError(msg);
    default:
      return InternalError(msg);
  }
}

}  // namespace geops::worker::cuda
