// CapturedChunks: the chunk values of one commit, captured copy-on-write.
//
// A commit must write every chunk as it was at one instant (the capture,
// taken while no mutation is open), but writing takes far longer than the
// capture, and updates go on meanwhile. Rather than copy the marked chunks
// at the capture (a second copy of the model, for as long as the write
// lasts), the capture only marks them. The store then reads each chunk from
// the live values when it writes it; a write that reaches a marked chunk
// before the store has read it first saves the chunk's values as they were
// (ChunkStore::WriteHook), and the store reads that copy instead. A copy
// exists only for a chunk changed while its commit is being written, and
// only until the store has read it.
//
// Thread-safety: Capture(), Release() and the DeferredChunks methods are the
// committer's (one thread); BeforeWrite runs in any writer's thread under
// the chunk's exclusive lock. A chunk's state and saved copy are touched
// only under that chunk's lock (shared for the committer, exclusive for a
// writer), so the two never overlap on one chunk.
#ifndef GEOPS_DATACENTER_CAPTURED_CHUNKS_H_
#define GEOPS_DATACENTER_CAPTURED_CHUNKS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/shard_store.h"
#include "datacenter/chunk_store.h"

namespace geops::datacenter {

struct CaptureStats {
  int64_t chunks_saved = 0;     // chunks a write reached before the store read them
  int64_t peak_saved_bytes = 0; // most bytes of such copies held at once
};

class CapturedChunks final : public DeferredChunks, public ChunkStore::WriteHook {
 public:
  // Installs itself as `chunks`' write hook; `chunks` must outlive it.
  explicit CapturedChunks(ChunkStore* chunks);
  // Removes the hook. REQUIRES: no write in flight.
  ~CapturedChunks();
  CapturedChunks(const CapturedChunks&) = delete;
  CapturedChunks& operator=(const CapturedChunks&) = delete;

  // Marks `locals` (ascending) as the chunks of the next commit. REQUIRES:
  // no mutation open (the persister's barrier), and the previous capture
  // released.
  void Capture(std::vector<int64_t> locals);
  // After the store's commit returned (written or not): forgets the chunks
  // it did not read, and their copies.
  void Release();

  size_t size() const override { return locals_.size(); }
  ChunkKey key(size_t i) const override { return chunks_->key(locals_[i]); }
  int64_t elements(size_t i) const override { return chunks_->elements(locals_[i]); }
  void Read(size_t i, float* out) override;

  void BeforeWrite(int64_t local, std::span<const float> current) override;

  CaptureStats stats() const;

 private:
  enum : uint8_t { kFree = 0, kCaptured = 1, kSaved = 2 };

  ChunkStore* const chunks_;
  std::vector<int64_t> locals_;                      // committer only
  std::unique_ptr<std::atomic<uint8_t>[]> state_;    // per chunk, under its lock
  std::vector<std::unique_ptr<float[]>> saved_;      // per chunk, under its lock
  std::atomic<int64_t> saved_bytes_{0};
  std::atomic<int64_t> peak_saved_bytes_{0};
  std::atomic<int64_t> chunks_saved_{0};
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_CAPTURED_CHUNKS_H_
