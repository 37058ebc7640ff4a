// Owners of CUDA resources: device memory, pinned host memory, streams,
// events and the cuBLAS handle. Each is created by a factory returning a
// Result (out of memory is ResourceExhausted naming the bytes asked for and
// what they were for), released in its destructor, movable and not copyable.
// An empty (default-constructed or moved-from) owner holds nothing.
//
// Destructors do not synchronise: whoever owns a buffer must make sure no
// enqueued work still uses it (the classes that hold them synchronise their
// streams first). Release errors in destructors are ignored; there is no one
// to report them to, and they only happen when the device is already lost.
//
// Thread-safety: an owner is used by one thread at a time; the CUDA handles
// it exposes follow CUDA's own rules.
#ifndef GEOPS_WORKER_CUDA_DEVICE_MEMORY_H_
#define GEOPS_WORKER_CUDA_DEVICE_MEMORY_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace geops::worker::cuda {

// Where a CudaBuffer lives: on the current device (cudaMalloc), or in
// page-locked host memory (cudaMallocHost), so that copies to and from the
// device run as DMA, asynchronously to the host.
enum class MemoryKind { kDevice, kPinnedHost };

template <MemoryKind kKind>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  // `bytes` == 0 gives an empty buffer. ResourceExhausted "cudaMalloc of N
  // bytes for <what> failed: out of memory (F of T bytes free)" (cudaMallocHost
  // for pinned memory); other CUDA errors as in cuda_status.h.
  // InvalidArgument for bytes < 0.
  static Result<CudaBuffer> Allocate(int64_t bytes, std::string_view what);
  ~CudaBuffer();
  CudaBuffer(CudaBuffer&& other) noexcept;
  CudaBuffer& operator=(CudaBuffer&& other) noexcept;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  void* data() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }
  int64_t bytes() const { return bytes_; }

 private:
  void Release();

  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

// Defined (and instantiated for both kinds) in device_memory.cc.
extern template class CudaBuffer<MemoryKind::kDevice>;
extern template class CudaBuffer<MemoryKind::kPinnedHost>;

using DeviceBuffer = CudaBuffer<MemoryKind::kDevice>;
using PinnedBuffer = CudaBuffer<MemoryKind::kPinnedHost>;

// A non-blocking stream (does not synchronise with the legacy default stream).
class CudaStream {
 public:
  CudaStream() = default;
  static Result<CudaStream> Create();
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing, used only for ordering between streams and the host.
class CudaEvent {
 public:
  CudaEvent() = default;
  static Result<CudaEvent> Create();
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A cuBLAS handle bound to one stream.
class CublasHandle {
 public:
  CublasHandle() = default;
  // `allow_tf32`: let sgemm use TF32 tensor cores (faster, ~1e-3 relative
  // error); otherwise products are computed in full FP32.
  static Result<CublasHandle> Create(cudaStream_t stream, bool allow_tf32);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_DEVICE_MEMORY_H_
