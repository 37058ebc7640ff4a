#include "worker/cuda/device_memory.h"

#include <string>
#include <utility>

#include "worker/cuda/cuda_status.h"

namespace geops::worker::cuda {
namespace {

// The error of a failed allocation of `bytes` for `what` by `fn`.
Status AllocationError(cudaError_t err, const char* fn, int64_t bytes, std::string_view what) {
  (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
  std::string msg = std::string(fn) + " of " + std::to_string(bytes) + " bytes for " +
                    std::string(what) + " failed: ";
  if (err == cudaErrorMemoryAllocation) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      msg += "out of memory (" + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
             " device bytes free)";
    } else {
      (void)cudaGetLastError();
      msg += "out of memory";
    }
    return ResourceExhaustedError(msg);
  }
  return CudaError(err, fn, __FILE__, __LINE__).WithContext(msg);
}

}  // namespace

template <MemoryKind kKind>
Result<CudaBuffer<kKind>> CudaBuffer<kKind>::Allocate(int64_t bytes, std::string_view what) {
  if (bytes < 0) return InvalidArgumentError("negative allocation for " + std::string(what));
  CudaBuffer buf;
  if (bytes == 0) return buf;
  constexpr bool kDevice = kKind == MemoryKind::kDevice;
  const cudaError_t err = kDevice ? cudaMalloc(&buf.ptr_, static_cast<size_t>(bytes))
                                  : cudaMallocHost(&buf.ptr_, static_cast<size_t>(bytes));
  if (err != cudaSuccess) {
    buf.ptr_ = nullptr;
    return AllocationError(err, kDevice ? "cudaMalloc" : "cudaMallocHost", bytes, what);
  }
  buf.bytes_ = bytes;
  return buf;
}

template <MemoryKind kKind>
void CudaBuffer<kKind>::Release() {
  if (ptr_ == nullptr) return;
  if constexpr (kKind == MemoryKind::kDevice) {
    (void)cudaFree(ptr_);
  } else {
    (void)cudaFreeHost(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

template <MemoryKind kKind>
CudaBuffer<kKind>::~CudaBuffer() {
  Release();
}

template <MemoryKind kKind>
CudaBuffer<kKind>::CudaBuffer(CudaBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

template <MemoryKind kKind>
CudaBuffer<kKind>& CudaBuffer<kKind>::operator=(CudaBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

template class CudaBuffer<MemoryKind::kDevice>;
template class CudaBuffer<MemoryKind::kPinnedHost>;

Result<CudaStream> CudaStream::Create() {
  CudaStream s;
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  return s;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Result<CudaEvent> CudaEvent::Create() {
  CudaEvent e;
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming));
  return e;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Result<CublasHandle> CublasHandle::Create(cudaStream_t stream, bool allow_tf32) {
  CublasHandle h;
  GEOPS_CUBLAS_RETURN_IF_ERROR(cublasCreate(&h.handle_));
  GEOPS_CUBLAS_RETURN_IF_ERROR(cublasSetStream(h.handle_, stream));
  GEOPS_CUBLAS_RETURN_IF_ERROR(
      cublasSetMathMode(h.handle_, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return h;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

}  // namespace geops::worker::cuda
