// GpuParamCache: a GPU worker's copy of the parameter tables in device
// memory (GeePS-style), fed from the worker's host cache (PsClient), and the
// way its updates travel back to the op-log.
//
// Versions. The host cache is identified by a version that changes whenever
// its contents change (PsClient::cache_version()). Each device table
// remembers the version it holds, and a step at version v uploads a table
// only if it holds another one: the device never serves values other than
// the host's at v, so it is exactly as stale as the host cache, which SSP
// bounds. When the host changed only by adding the last step's own updates
// (PsClient::Clock folding its op-log into the cache, no read in between),
// FoldLastDeltas adds the same updates on the device -- the same float adds,
// so the device copy stays bit-identical to the host's -- and nothing is
// uploaded. Under SSP with s >= 1 most clocks are such cache hits: the steady
// state uploads nothing and moves only the updates down.
//
// Streams and overlap. Uploads, update downloads and folds run on the
// cache's own copy stream; the backend computes on its compute stream;
// events order the two in both directions. Within a step:
//  * uploads are lazy and per table: a table is staged into pinned memory
//    and uploaded when the backend first asks for it (Acquire), so layer
//    i+1's staging and upload run while layer i's product computes;
//  * each update is downloaded as soon as its product is enqueued
//    (DeltaDone), so it crosses PCIe during the backward products of the
//    layers below, and CollectDeltas copies each into the op-log as it lands
//    while the GPU still computes.
// The next clock's tables are not prefetched during this step: they are read
// after Clock() ships this step's updates, so they do not exist yet; the
// fold is what takes the upload out of the steady state.
//
// Memory. Every table has a pinned host mirror (upload staging, and the home
// of a streamed table) and a pinned update buffer. A resident table holds
// its values and its update on the device. With a memory budget smaller than
// that, the largest tables that still fit stay resident (greedy, largest
// first) and the others stream through `stream_slots` shared device slots,
// uploaded at every Acquire (a weight read in forward and backward crosses
// twice a step): GeePS's trade of PCIe bandwidth for device memory.
//
// Layout and indexes. A table is dense row-major in the host cache (the
// PsClient scatters shard chunks into it as they are read), in the pinned
// mirror and on the device, and a chunk is a range of whole rows, so every
// transfer is one contiguous copy per table: no gather/scatter index is
// needed. One would be for row-sparse access (a step touching some rows of
// a table, e.g. embeddings: a prebuilt index of those rows, gathered into a
// dense block on the device) or a device layout other than the table's.
//
// Thread-safety: one thread drives a cache and its one backend.
#ifndef GEOPS_WORKER_CUDA_GPU_PARAM_CACHE_H_
#define GEOPS_WORKER_CUDA_GPU_PARAM_CACHE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/model_spec.h"
#include "common/status.h"
#include "worker/cuda/cuda_worker.h"
#include "worker/cuda/device_memory.h"
#include "worker/cuda/device_tables.h"

namespace geops::worker::cuda {

class GpuParamCache final : public DeviceTableSource {
 public:
  // A cache of `tables` (in table-id order, e.g. MlpTables(shape)) on
  // `device`. InvalidArgument for bad options, no tables or more than
  // kMaxMlpTables; ResourceExhausted when the budget cannot hold even the
  // stream slots (naming the table and the bytes), or device or pinned
  // memory runs out (naming the bytes asked for).
  static Result<std::unique_ptr<GpuParamCache>> Create(std::vector<TableSpec> tables, int device,
                                                       const GpuParamCacheOptions& options = {});
  ~GpuParamCache() override;  // waits for the copy stream
  GpuParamCache(const GpuParamCache&) = delete;
  GpuParamCache& operator=(const GpuParamCache&) = delete;

  // Starts a step on host tables `host` (one dense table per id) whose
  // contents are `version`. Nothing moves yet: tables move as the backend
  // acquires them. InvalidArgument for a wrong count or a null table.
  // REQUIRES: no work of an earlier step still runs on the backend's stream
  // (its FinishTrainStep returned, or its enqueue failed); `host` stays valid
  // and unchanged until the step's deltas are collected.
  Status BeginStep(std::span<const float* const> host, uint64_t version);

  // The host tables moved from the last step's version to `new_version` by
  // adding exactly the updates CollectDeltas delivered for that step. Adds
  // them on the device to every resident table still at the last step's
  // version; every other table is uploaded again when next acquired.
  // FailedPrecondition when the last step's updates were not collected.
  // REQUIRES: the claim above holds (else the device diverges from the host).
  Status FoldLastDeltas(uint64_t new_version);

  // DeviceTableSource. Errors also: FailedPrecondition outside a step, for a
  // table acquired twice or released unacquired, a delta done twice;
  // InvalidArgument for an unknown table; Internal if all slots are taken.
  Result<const float*> Acquire(int t, cudaStream_t stream) override;
  Status Release(int t, cudaStream_t stream) override;
  Result<float*> DeltaBuffer(int t, cudaStream_t stream) override;
  Status DeltaDone(int t, cudaStream_t stream) override;

  // Copies each table's update of this step, as its download lands, into
  // host_deltas[t] (dense, room for the table). Blocks until the last one
  // lands. FailedPrecondition, before writing anything, naming a table whose
  // update the step did not produce; InvalidArgument for a wrong count or a
  // null buffer. REQUIRES: the buffers do not overlap `host`.
  Status CollectDeltas(std::span<float* const> host_deltas);

  // The values the cache holds for table `t` (resident: its device copy,
  // after all work so far; streamed: its pinned mirror) into `out`, and the
  // host version they are. std::nullopt when it holds none yet.
  Result<std::optional<uint64_t>> ReadBack(int t, float* out);

  int num_tables() const { return static_cast<int>(tables_.size()); }
  bool resident(int t) const { return tables_[t].resident; }
  // Device bytes allocated for tables, updates and slots.
  int64_t device_bytes() const { return device_bytes_; }
  const GpuParamCacheStats& stats() const { return stats_; }
  cudaStream_t copy_stream() const { return copy_.get(); }

 private:
  struct Table {
    TableSpec spec;
    int64_t elems = 0;
    bool resident = false;
    DeviceBuffer param, delta;               // resident tables only
    PinnedBuffer mirror, delta_host;         // every table
    std::optional<uint64_t> device_version;  // of `param`
    std::optional<uint64_t> mirror_version;
    CudaEvent param_ready;     // copy stream: upload or fold into `param` done
    CudaEvent param_released;  // compute stream: last read of `param`
    CudaEvent mirror_free;     // copy stream: last upload from `mirror` done
    CudaEvent delta_done;      // compute stream: update written
    CudaEvent delta_landed;    // copy stream: update in `delta_host`
    CudaEvent delta_free;      // copy stream: done reading `delta` (download, fold)
    int slot = -1;             // streamed: slot holding the values while acquired
    int delta_slot = -1;       // streamed: slot holding the update while open
    bool acquired = false;
    bool delta_open = false;
    bool delta_ready = false;  // DeltaDone called this step
  };
  struct Slot {
    DeviceBuffer buf;
    CudaEvent free;   // its last user is done with it
    CudaEvent ready;  // upload into it done
    int user = -1;    // table using it, or -1
  };

  GpuParamCache(int device, const GpuParamCacheOptions& options);
  Status Init(std::vector<TableSpec> tables);
  // Marks which tables are resident under the budget.
  Status PlanResidency();
  Status CheckTable(int t) const;
  // Copies host table `t` into its pinned mirror unless it holds this step's version.
  Status StageMirror(int t);
  Result<int> TakeSlot(int t);

  const int device_;
  const GpuParamCacheOptions options_;
  std::vector<Table> tables_;
  std::vector<Slot> slots_;
  int next_slot_ = 0;
  CudaStream copy_;
  int64_t device_bytes_ = 0;

  bool in_step_ = false;
  bool step_clean_ = true;  // the last step's updates were collected
  uint64_t step_version_ = 0;
  std::vector<const float*> host_;
  std::vector<int> done_order_;                // tables in DeltaDone order this step
  std::optional<uint64_t> collected_version_;  // version of the last collected step
  GpuParamCacheStats stats_;
};

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_GPU_PARAM_CACHE_H_
