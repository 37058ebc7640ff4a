#include "datacenter/captured_chunks.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace geops::datacenter {

CapturedChunks::CapturedChunks(ChunkStore* chunks)
    : chunks_(chunks),
      state_(new std::atomic<uint8_t>[std::max<int64_t>(chunks->num_chunks(), 1)]),
      saved_(static_cast<size_t>(chunks->num_chunks())) {
  for (int64_t i = 0; i < chunks->num_chunks(); ++i) state_[i].store(kFree, std::memory_order_relaxed);
  chunks_->set_write_hook(this);
}

CapturedChunks::~CapturedChunks() { chunks_->set_write_hook(nullptr); }

void CapturedChunks::Capture(std::vector<int64_t> locals) {
  locals_ = std::move(locals);
  for (int64_t local : locals_) {
    chunks_->Inspect(local, [&](std::span<const float>) { state_[local].store(kCaptured, std::memory_order_relaxed); });
  }
}

void CapturedChunks::Read(size_t i, float* out) {
  const int64_t local = locals_[i];
  chunks_->Inspect(local, [&](std::span<const float> live) {
    const uint8_t state = state_[local].load(std::memory_order_relaxed);
    if (state == kSaved) {
      std::memcpy(out, saved_[local].get(), live.size_bytes());
      saved_[local].reset();
      saved_bytes_.fetch_sub(static_cast<int64_t>(live.size_bytes()), std::memory_order_relaxed);
    } else {
      std::memcpy(out, live.data(), live.size_bytes());
    }
    state_[local].store(kFree, std::memory_order_relaxed);
  });
}

void CapturedChunks::Release() {
  for (int64_t local : locals_) {
    if (state_[local].load(std::memory_order_relaxed) == kFree) continue;  // read (only the committer frees)
    chunks_->Inspect(local, [&](std::span<const float> live) {
      if (saved_[local] != nullptr) {
        saved_[local].reset();
        saved_bytes_.fetch_sub(static_cast<int64_t>(live.size_bytes()), std::memory_order_relaxed);
      }
      state_[local].store(kFree, std::memory_order_relaxed);
    });
  }
  locals_.clear();
}

void CapturedChunks::BeforeWrite(int64_t local, std::span<const float> current) {
  if (state_[local].load(std::memory_order_relaxed) != kCaptured) return;
  saved_[local].reset(new float[current.size()]);
  std::memcpy(saved_[local].get(), current.data(), current.size_bytes());
  state_[local].store(kSaved, std::memory_order_relaxed);
  chunks_saved_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now =
      saved_bytes_.fetch_add(static_cast<int64_t>(current.size_bytes()), std::memory_order_relaxed) +
      static_cast<int64_t>(current.size_bytes());
  int64_t peak = peak_saved_bytes_.load(std::memory_order_relaxed);
  while (now > peak && !peak_saved_bytes_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

CaptureStats CapturedChunks::stats() const {
  return CaptureStats{chunks_saved_.load(std::memory_order_relaxed), peak_saved_bytes_.load(std::memory_order_relaxed)};
}

}  // namespace geops::datacenter
