// ChunkStore: the float values of the chunks one shard owns.
//
// At creation it allocates every chunk that ModelSpec::ShardOf assigns to the
// shard and fills it with ModelSpec::InitChunk, so every replica of the shard,
// in every site, starts byte-for-byte identical. Chunks are addressed by a
// dense local index (0..num_chunks()-1, in key order); LocalIndex() maps a
// key to it. Each chunk is a contiguous, 64-byte aligned run of floats with
// its own reader/writer lock, so updates of different chunks never contend
// and readers of one chunk share it.
//
// Thread-safety: all methods may be called concurrently. The layout (keys,
// offsets, ownership) is immutable after Create(); chunk values are guarded
// by the chunk's lock. A method takes at most one chunk lock at a time and
// never calls out while holding it; a BatchGuard holds the locks of a whole
// batch, taken in local-index order (so two guards never deadlock).
#ifndef GEOPS_DATACENTER_CHUNK_STORE_H_
#define GEOPS_DATACENTER_CHUNK_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/status.h"

namespace geops::datacenter {

class ChunkStore {
 public:
  // Allocates and initialises the chunks of `shard` among `num_shards`.
  // `spec` must outlive the store. ResourceExhausted when the memory cannot
  // be had. REQUIRES: 0 <= shard < num_shards.
  static Result<std::unique_ptr<ChunkStore>> Create(const ModelSpec* spec, ShardId shard,
                                                    int num_shards);
  ~ChunkStore();
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  int64_t num_chunks() const { return static_cast<int64_t>(keys_.size()); }
  int64_t num_elements() const { return num_elements_; }

  // The local index of `key`, or -1 when another shard owns it.
  // REQUIRES: spec.HasChunk(key).
  int64_t LocalIndex(ChunkKey key) const {
    return local_of_[table_first_[key.table] + key.chunk];
  }
  // REQUIRES: 0 <= local < num_chunks().
  ChunkKey key(int64_t local) const { return keys_[local]; }
  int64_t elements(int64_t local) const { return offsets_[local + 1] - offsets_[local] - pad_[local]; }

  // Copies chunk `local` (elements(local) floats) to `out` under its shared lock.
  void Read(int64_t local, float* out) const;
  // Calls fn(values) with chunk `local`'s values under its shared lock, so
  // that no write (and no WriteHook call for it) overlaps the call.
  template <typename Fn>
  void Inspect(int64_t local, Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(locks_[local]);
    fn(std::span<const float>(data_ + offsets_[local], static_cast<size_t>(elements(local))));
  }

  // Told of every write before it changes a chunk: BeforeWrite runs under
  // the chunk's exclusive lock with the values the chunk holds then. It
  // must not call into the store and may take only leaf locks. A
  // copy-on-write capture uses it to keep the values it has not yet read.
  class WriteHook {
   public:
    virtual void BeforeWrite(int64_t local, std::span<const float> current) = 0;

   protected:
    ~WriteHook() = default;
  };
  // nullptr: none. Set while no write is in flight (a write started before
  // may or may not see the new hook).
  void set_write_hook(WriteHook* hook) { hook_.store(hook, std::memory_order_release); }
  // Adds `delta` (elements(local) floats) into chunk `local` under its
  // exclusive lock. REQUIRES: delta does not alias the store.
  void Add(int64_t local, const float* delta);

  // The chunks of one batch, exclusively locked together for an add that
  // is all or nothing: check every result first, add only when all are
  // finite, so no update can make a stored value NaN or infinite, and a
  // refused batch changes nothing. Release it before calling out.
  //
  // The check rarely reads the stored values: each chunk keeps a bound on
  // the magnitude of its values (exact after every dense add, which
  // computes it in the same pass), and while bound and the delta's largest
  // magnitude are both at most FLT_MAX / 2 no sum can overflow, so one
  // read of the delta decides. Only a chunk near the float range (or one
  // whose bound a sparse add loosened past it) is checked sum by sum.
  class BatchGuard {
   public:
    // `locals`: the batch's chunks in batch order, each once. `writer`: the
    // change-tracking slot whose own copy already has what Add adds (its
    // chunks are not marked for it), or -1.
    BatchGuard(ChunkStore* store, std::span<const int64_t> locals, int writer = -1);
    ~BatchGuard();
    BatchGuard(const BatchGuard&) = delete;
    BatchGuard& operator=(const BatchGuard&) = delete;

    struct NonFinite {
      size_t chunk = 0;     // position in `locals`
      int64_t element = 0;  // in the chunk
      float stored = 0;
      float delta = 0;
    };
    // Where adding `deltas` (the chunks' floats back to back, in batch
    // order) would first give NaN or +-Inf, or nullopt.
    std::optional<NonFinite> CheckSum(const float* deltas) const;
    // Adds `deltas`. REQUIRES: CheckSum(deltas) found nothing.
    void Add(const float* deltas);
    // The same for a sparse delta of the chunk at position `chunk` in
    // `locals`: values[i] adds to element indices[i]. REQUIRES: indices
    // below the chunk's elements, as many as values; for AddSparse,
    // CheckSparseSum found nothing.
    std::optional<NonFinite> CheckSparseSum(size_t chunk, std::span<const uint32_t> indices,
                                            std::span<const float> values) const;
    void AddSparse(size_t chunk, std::span<const uint32_t> indices, std::span<const float> values);

   private:
    ChunkStore* store_;
    std::span<const int64_t> locals_;
    int writer_;
    std::vector<int64_t> order_;  // locals_ sorted: the lock order
  };

  // Replaces chunk `local` with `values` (elements(local) floats) under its
  // exclusive lock; used to load persisted values. REQUIRES: no aliasing.
  void Overwrite(int64_t local, const float* values);

  // Change tracking for incremental reads (Shard::ReadChanged). A reader
  // that keeps a copy of the chunks, and adds its own updates to that copy
  // with the same float additions the store makes, needs from the store
  // only what anything else changed since it last looked. Each of `readers`
  // slots keeps, per chunk, a flag "changed whole" and one bit per element
  // (1 bit per element per slot): a dense write (Add, BatchGuard::Add,
  // Overwrite) marks its chunks whole for every slot but the writer's, a
  // sparse one (AddSparse) marks its elements for every slot. Every write
  // goes through those methods, so nothing changes a chunk unmarked.
  // REQUIRES: called once, before the store is shared; readers >= 1.
  void EnableChangeTracking(int readers);
  // Marks every chunk changed whole for `slot` (a reader whose copy is not
  // known to match: it gets everything at its next look).
  void MarkAllChanged(int slot);
  // Reader `slot`'s look at chunk `local`, under the chunk's shared lock:
  // appends what changed for it since its last look as (start, length)
  // runs of elements, offset by `base`, to *runs, and their values to
  // *values (the whole chunk when it changed whole), and clears the marks.
  // REQUIRES: one look per slot at a time (the caller serialises a slot).
  void ReadChanged(int64_t local, int slot, uint32_t base, std::vector<uint32_t>* runs,
                   std::vector<float>* values);

  // Replaces `out` with a copy of every chunk, in key order. Each chunk is
  // copied under its lock; chunks are not copied at one instant together.
  void Snapshot(std::vector<std::pair<ChunkKey, std::vector<float>>>* out) const;

 private:
  ChunkStore() = default;

  std::vector<int64_t> table_first_;  // per table: index of its chunk 0 in local_of_
  std::vector<int32_t> local_of_;     // per model chunk: local index, or -1
  std::vector<ChunkKey> keys_;        // per local chunk
  std::vector<int64_t> offsets_;      // per local chunk, and one past the end: float offset in data_
  std::vector<int32_t> pad_;          // per local chunk: floats of padding after its values
  int64_t num_elements_ = 0;
  // Under chunk `local`'s exclusive lock, before it changes.
  void WillWrite(int64_t local) const {
    if (WriteHook* hook = hook_.load(std::memory_order_acquire); hook != nullptr) {
      hook->BeforeWrite(local, std::span<const float>(data_ + offsets_[local], static_cast<size_t>(elements(local))));
    }
  }

  // Change tracking: slot `slot`'s flag and first word of bits for chunk `local`.
  uint8_t& Whole(int slot, int64_t local) { return whole_[static_cast<size_t>(slot) * keys_.size() + local]; }
  uint64_t* Bits(int slot, int64_t local) {
    return bits_.data() + static_cast<size_t>(slot) * words_.back() + words_[local];
  }
  // Under chunk `local`'s exclusive lock (a write).
  void MarkWhole(int64_t local, int except_slot) {
    for (int r = 0; r < readers_; ++r) {
      if (r != except_slot) Whole(r, local) = 1;
    }
  }
  void MarkElements(int64_t local, std::span<const uint32_t> indices);

  float* data_ = nullptr;  // owned, 64-byte aligned; chunk i guarded by locks_[i]
  // Change tracking (EnableChangeTracking): per slot and chunk, GUARDED_BY
  // the chunk's lock (written by writers under the exclusive lock, and by
  // the slot's one reader under the shared lock, which no writer holds
  // then; readers of other slots touch other bytes).
  int readers_ = 0;
  std::vector<uint8_t> whole_;       // [slot * num_chunks + local]: changed whole
  std::vector<uint64_t> bits_;       // [slot * words_.back() + words_[local] + e / 64]: element e changed
  std::vector<int64_t> words_;       // per chunk, and one past the end: its first word of bits
  // Per chunk, GUARDED_BY(locks_[i]): no value of chunk i exceeds this in
  // magnitude (+Inf: not known).
  std::unique_ptr<float[]> bound_;
  std::unique_ptr<std::shared_mutex[]> locks_;
  std::atomic<WriteHook*> hook_{nullptr};
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_CHUNK_STORE_H_
