#include "worker/cuda/gpu_param_cache.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "worker/cuda/cuda_status.h"
#include "worker/cuda/mlp_kernels.h"
#include "worker/cuda/staging.h"

namespace geops::worker::cuda {
namespace {

int64_t Bytes(int64_t elems) { return elems * static_cast<int64_t>(sizeof(float)); }

}  // namespace

Result<std::unique_ptr<GpuParamCache>> GpuParamCache::Create(std::vector<TableSpec> tables,
                                                             int device,
                                                             const GpuParamCacheOptions& options) {
  if (options.memory_budget_bytes < 0) {
    return InvalidArgumentError("GPU cache memory_budget_bytes must be >= 0, got " +
                                std::to_string(options.memory_budget_bytes));
  }
  if (options.stream_slots < 2) {
    return InvalidArgumentError("GPU cache stream_slots must be >= 2, got " +
                                std::to_string(options.stream_slots));
  }
  if (tables.empty() || static_cast<int>(tables.size()) > kMaxMlpTables) {
    return InvalidArgumentError("GPU cache needs 1.." + std::to_string(kMaxMlpTables) +
                                " tables, got " + std::to_string(tables.size()));
  }
  for (const TableSpec& t : tables) {
    if (t.rows < 1 || t.cols < 1) {
      return InvalidArgumentError("table '" + t.name + "' has an empty shape");
    }
  }
  std::unique_ptr<GpuParamCache> cache(new GpuParamCache(device, options));
  GEOPS_RETURN_IF_ERROR(cache->Init(std::move(tables)).WithContext("GPU parameter cache"));
  // Explicit: nvcc's front end does not apply C++20's implicit move here.
  return Result<std::unique_ptr<GpuParamCache>>(std::move(cache));
}

GpuParamCache::GpuParamCache(int device, const GpuParamCacheOptions& options)
    : device_(device), options_(options) {}

GpuParamCache::~GpuParamCache() {
  if (copy_.get() != nullptr) {
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(copy_.get());
  }
}

Status GpuParamCache::Init(std::vector<TableSpec> tables) {
  tables_.resize(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    tables_[t].elems = tables[t].rows * tables[t].cols;
    tables_[t].spec = std::move(tables[t]);
  }
  GEOPS_RETURN_IF_ERROR(PlanResidency());
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // Device memory first: it is the scarce kind, and fails fast.
  int64_t slot_elems = 0;
  for (Table& tb : tables_) {
    if (!tb.resident) {
      slot_elems = std::max(slot_elems, tb.elems);
      continue;
    }
    GEOPS_ASSIGN_OR_RETURN(tb.param,
                           DeviceBuffer::Allocate(Bytes(tb.elems), "table '" + tb.spec.name + "'"));
    GEOPS_ASSIGN_OR_RETURN(
        tb.delta, DeviceBuffer::Allocate(Bytes(tb.elems), "the update of '" + tb.spec.name + "'"));
    device_bytes_ += 2 * Bytes(tb.elems);
  }
  if (slot_elems > 0) {
    slots_.resize(options_.stream_slots);
    for (Slot& s : slots_) {
      GEOPS_ASSIGN_OR_RETURN(s.buf, DeviceBuffer::Allocate(Bytes(slot_elems), "a stream slot"));
      GEOPS_ASSIGN_OR_RETURN(s.free, CudaEvent::Create());
      GEOPS_ASSIGN_OR_RETURN(s.ready, CudaEvent::Create());
      device_bytes_ += Bytes(slot_elems);
    }
  }
  for (Table& tb : tables_) {
    GEOPS_ASSIGN_OR_RETURN(
        tb.mirror,
        PinnedBuffer::Allocate(Bytes(tb.elems), "the host mirror of '" + tb.spec.name + "'"));
    GEOPS_ASSIGN_OR_RETURN(
        tb.delta_host,
        PinnedBuffer::Allocate(Bytes(tb.elems), "the host update of '" + tb.spec.name + "'"));
    for (CudaEvent* e : {&tb.param_ready, &tb.param_released, &tb.mirror_free, &tb.delta_done,
                         &tb.delta_landed, &tb.delta_free}) {
      GEOPS_ASSIGN_OR_RETURN(*e, CudaEvent::Create());
    }
  }
  GEOPS_ASSIGN_OR_RETURN(copy_, CudaStream::Create());
  return Status::Ok();
}

Status GpuParamCache::PlanResidency() {
  const int64_t budget = options_.memory_budget_bytes;
  if (budget == 0) {
    for (Table& tb : tables_) tb.resident = true;
    return Status::Ok();
  }
  // A resident table costs its values and its update; the streamed ones
  // share the slots, each as large as the largest streamed table.
  auto cost = [&]() {
    int64_t resident = 0, largest_streamed = 0;
    for (const Table& tb : tables_) {
      if (tb.resident) {
        resident += 2 * Bytes(tb.elems);
      } else {
        largest_streamed = std::max(largest_streamed, Bytes(tb.elems));
      }
    }
    return resident + options_.stream_slots * largest_streamed;
  };
  std::vector<int> order(tables_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return tables_[a].elems > tables_[b].elems; });
  for (int t : order) {
    tables_[t].resident = true;
    if (cost() > budget) tables_[t].resident = false;
  }
  if (cost() > budget) {
    const Table* largest = nullptr;  // the largest streamed table sizes the slots
    for (int t : order) {
      if (!tables_[t].resident) {
        largest = &tables_[t];
        break;
      }
    }
    return ResourceExhaustedError(
        "a memory budget of " + std::to_string(budget) + " bytes cannot hold " +
        std::to_string(options_.stream_slots) + " stream slots of " +
        std::to_string(Bytes(largest->elems)) + " bytes for table '" + largest->spec.name + "' (" +
        std::to_string(options_.stream_slots * Bytes(largest->elems)) + " bytes)");
  }
  return Status::Ok();
}

Status GpuParamCache::BeginStep(std::span<const float* const> host, uint64_t version) {
  if (static_cast<int>(host.size()) != num_tables()) {
    return InvalidArgumentError("got " + std::to_string(host.size()) +
                                " host tables, the cache has " + std::to_string(num_tables()));
  }
  for (size_t t = 0; t < host.size(); ++t) {
    if (host[t] == nullptr) {
      return InvalidArgumentError("host table '" + tables_[t].spec.name + "' is null");
    }
  }
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // After a step that did not end normally, copies it issued may still run.
  if (!step_clean_) {
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_.get()));
  }
  for (Table& tb : tables_) {
    tb.slot = tb.delta_slot = -1;
    tb.acquired = tb.delta_open = tb.delta_ready = false;
  }
  for (Slot& s : slots_) s.user = -1;
  host_.assign(host.begin(), host.end());
  step_version_ = version;
  done_order_.clear();
  collected_version_.reset();
  in_step_ = true;
  step_clean_ = false;
  stats_.steps++;
  return Status::Ok();
}

Status GpuParamCache::FoldLastDeltas(uint64_t new_version) {
  if (!collected_version_) {
    return FailedPreconditionError("no collected step to fold into the GPU cache");
  }
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const cudaStream_t copy = copy_.get();
  for (Table& tb : tables_) {
    if (!tb.resident || !tb.delta_ready || tb.device_version != collected_version_) continue;
    // The download of the update already precedes this on the copy stream.
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, tb.param_released.get(), 0));
    GEOPS_RETURN_IF_ERROR(AddInPlace(tb.param.floats(), tb.delta.floats(), tb.elems, copy));
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.param_ready.get(), copy));
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.delta_free.get(), copy));
    tb.device_version = new_version;
    stats_.folds++;
  }
  collected_version_.reset();
  return Status::Ok();
}

Status GpuParamCache::CheckTable(int t) const {
  if (!in_step_) return FailedPreconditionError("GPU cache used outside a step");
  if (t < 0 || t >= num_tables()) {
    return InvalidArgumentError("GPU cache has no table " + std::to_string(t));
  }
  return Status::Ok();
}

Status GpuParamCache::StageMirror(int t) {
  Table& tb = tables_[t];
  if (tb.mirror_version == step_version_) return Status::Ok();
  // The last upload from the mirror must be done before it is overwritten.
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(tb.mirror_free.get()));
  tb.mirror_version.reset();
  const int64_t bad = CopyAndFindNonFinite(tb.mirror.floats(), host_[t], tb.elems);
  if (bad >= 0) {
    return InvalidArgumentError(
        NonFiniteParamMessage(tb.spec.name, tb.spec.cols, bad, host_[t][bad]));
  }
  tb.mirror_version = step_version_;
  return Status::Ok();
}

Result<int> GpuParamCache::TakeSlot(int t) {
  const int n = static_cast<int>(slots_.size());
  for (int i = 0; i < n; ++i) {
    const int k = (next_slot_ + i) % n;
    if (slots_[k].user < 0) {
      next_slot_ = (k + 1) % n;
      slots_[k].user = t;
      return k;
    }
  }
  return InternalError("all " + std::to_string(n) + " GPU cache stream slots are in use");
}

Result<const float*> GpuParamCache::Acquire(int t, cudaStream_t stream) {
  GEOPS_RETURN_IF_ERROR(CheckTable(t));
  Table& tb = tables_[t];
  if (tb.acquired) return FailedPreconditionError("table '" + tb.spec.name + "' acquired twice");
  const cudaStream_t copy = copy_.get();
  const int64_t bytes = Bytes(tb.elems);
  if (tb.resident) {
    if (tb.device_version != step_version_) {
      GEOPS_RETURN_IF_ERROR(StageMirror(t));
      GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, tb.param_released.get(), 0));
      GEOPS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(tb.param.data(), tb.mirror.data(), bytes, cudaMemcpyHostToDevice, copy));
      GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.mirror_free.get(), copy));
      GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.param_ready.get(), copy));
      tb.device_version = step_version_;
      stats_.table_uploads++;
      stats_.bytes_uploaded += bytes;
    }
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, tb.param_ready.get(), 0));
    tb.acquired = true;
    return static_cast<const float*>(tb.param.floats());
  }
  GEOPS_RETURN_IF_ERROR(StageMirror(t));
  GEOPS_ASSIGN_OR_RETURN(const int k, TakeSlot(t));
  Slot& s = slots_[k];
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, s.free.get(), 0));
  GEOPS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(s.buf.data(), tb.mirror.data(), bytes, cudaMemcpyHostToDevice, copy));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.mirror_free.get(), copy));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.ready.get(), copy));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, s.ready.get(), 0));
  tb.slot = k;
  tb.acquired = true;
  stats_.stream_uploads++;
  stats_.bytes_streamed += bytes;
  return static_cast<const float*>(s.buf.floats());
}

Status GpuParamCache::Release(int t, cudaStream_t stream) {
  GEOPS_RETURN_IF_ERROR(CheckTable(t));
  Table& tb = tables_[t];
  if (!tb.acquired) {
    return FailedPreconditionError("table '" + tb.spec.name + "' released unacquired");
  }
  if (tb.resident) {
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.param_released.get(), stream));
  } else {
    Slot& s = slots_[tb.slot];
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.free.get(), stream));
    s.user = -1;
    tb.slot = -1;
  }
  tb.acquired = false;
  return Status::Ok();
}

Result<float*> GpuParamCache::DeltaBuffer(int t, cudaStream_t stream) {
  GEOPS_RETURN_IF_ERROR(CheckTable(t));
  Table& tb = tables_[t];
  if (tb.delta_open || tb.delta_ready) {
    return FailedPreconditionError("update of '" + tb.spec.name + "' requested twice in one step");
  }
  float* buf = nullptr;
  if (tb.resident) {
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, tb.delta_free.get(), 0));
    buf = tb.delta.floats();
  } else {
    GEOPS_ASSIGN_OR_RETURN(const int k, TakeSlot(t));
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, slots_[k].free.get(), 0));
    tb.delta_slot = k;
    buf = slots_[k].buf.floats();
  }
  tb.delta_open = true;
  return buf;
}

Status GpuParamCache::DeltaDone(int t, cudaStream_t stream) {
  GEOPS_RETURN_IF_ERROR(CheckTable(t));
  Table& tb = tables_[t];
  if (!tb.delta_open) {
    return FailedPreconditionError("update of '" + tb.spec.name + "' is not open");
  }
  const cudaStream_t copy = copy_.get();
  const float* src = tb.resident ? tb.delta.floats() : slots_[tb.delta_slot].buf.floats();
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.delta_done.get(), stream));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, tb.delta_done.get(), 0));
  GEOPS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(tb.delta_host.data(), src, Bytes(tb.elems), cudaMemcpyDeviceToHost, copy));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.delta_landed.get(), copy));
  if (tb.resident) {
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(tb.delta_free.get(), copy));
  } else {
    Slot& s = slots_[tb.delta_slot];
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.free.get(), copy));
    s.user = -1;
    tb.delta_slot = -1;
  }
  tb.delta_open = false;
  tb.delta_ready = true;
  done_order_.push_back(t);
  stats_.bytes_downloaded += Bytes(tb.elems);
  return Status::Ok();
}

Status GpuParamCache::CollectDeltas(std::span<float* const> host_deltas) {
  if (!in_step_) return FailedPreconditionError("GPU cache: no step to collect");
  if (static_cast<int>(host_deltas.size()) != num_tables()) {
    return InvalidArgumentError("got " + std::to_string(host_deltas.size()) +
                                " delta tables, the cache has " + std::to_string(num_tables()));
  }
  for (int t = 0; t < num_tables(); ++t) {
    if (host_deltas[t] == nullptr) {
      return InvalidArgumentError("delta table '" + tables_[t].spec.name + "' is null");
    }
    if (!tables_[t].delta_ready) {
      return FailedPreconditionError("the step produced no update of '" + tables_[t].spec.name +
                                     "'");
    }
  }
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // In download order: the host copies one update while later ones travel.
  for (int t : done_order_) {
    Table& tb = tables_[t];
    GEOPS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(tb.delta_landed.get()));
    std::memcpy(host_deltas[t], tb.delta_host.data(), static_cast<size_t>(Bytes(tb.elems)));
  }
  collected_version_ = step_version_;
  step_clean_ = true;
  return Status::Ok();
}

Result<std::optional<uint64_t>> GpuParamCache::ReadBack(int t, float* out) {
  if (t < 0 || t >= num_tables()) {
    return InvalidArgumentError("GPU cache has no table " + std::to_string(t));
  }
  Table& tb = tables_[t];
  GEOPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const cudaStream_t copy = copy_.get();
  if (!tb.resident) {
    if (!tb.mirror_version) return std::optional<uint64_t>();
    GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy));
    std::memcpy(out, tb.mirror.data(), static_cast<size_t>(Bytes(tb.elems)));
    return tb.mirror_version;
  }
  if (!tb.device_version) return std::optional<uint64_t>();
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, tb.param_released.get(), 0));
  GEOPS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out, tb.param.data(), Bytes(tb.elems), cudaMemcpyDeviceToHost, copy));
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy));
  return tb.device_version;
}

}  // namespace geops::worker::cuda
