#include "datacenter/read_sessions.h"

#include <random>

namespace geops::datacenter {

ReadSessions::ReadSessions(ChunkStore* store, int readers)
    : store_(store), readers_(readers), last_id_(readers, 0), next_id_(readers) {
  if (readers_ == 0) return;
  store_->EnableChangeTracking(readers_);
  mu_.reset(new std::mutex[readers_]);
  // Ids start at a random point per worker, so that a reader's id from
  // before this shard restarted does not match a new one.
  std::random_device random;
  for (uint64_t& id : next_id_) id = ((uint64_t{random()} << 32) | random()) >> 1;
}

void ReadSessions::Serve(WorkerId worker, uint64_t since, std::span<const ChunkKey> keys, ChangedValues* out) {
  out->runs.clear();
  out->values.clear();
  out->read_id = 0;
  uint32_t base = 0;
  if (WriterSlot(worker) < 0) {
    for (const ChunkKey key : keys) {
      const int64_t local = store_->LocalIndex(key);
      const int64_t n = store_->elements(local);
      out->runs.push_back(base);
      out->runs.push_back(static_cast<uint32_t>(n));
      out->values.resize(out->values.size() + static_cast<size_t>(n));
      store_->Read(local, out->values.data() + out->values.size() - n);
      base += static_cast<uint32_t>(n);
    }
    return;
  }
  std::lock_guard<std::mutex> lock(mu_[worker]);
  // A reader whose last reply was not this worker's last (or none) may have
  // missed changes that reply took off the marks: all count.
  if (since == 0 || since != last_id_[worker]) store_->MarkAllChanged(worker);
  for (const ChunkKey key : keys) {
    const int64_t local = store_->LocalIndex(key);
    store_->ReadChanged(local, worker, base, &out->runs, &out->values);
    base += static_cast<uint32_t>(store_->elements(local));
  }
  out->read_id = last_id_[worker] = ++next_id_[worker];
}

}  // namespace geops::datacenter
