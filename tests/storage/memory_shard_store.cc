#include "tests/storage/memory_shard_store.h"

namespace geops::storage::testing {

void MemoryImage::Apply(const ShardCommit& commit) {
  for (size_t i = 0; i < commit.chunks.size(); ++i) {
    const std::span<const float> v = commit.chunks.values(i);
    chunks[commit.chunks.key(i)].assign(v.begin(), v.end());
  }
  for (const WorkerRecord& r : commit.workers) workers[r.worker] = r;
  for (const OriginRecord& r : commit.origins) origins[r.origin] = r.seq;
  for (const std::string& k : commit.outbound_deletes) outbound.erase(k);
  for (const OutboundRecord& r : commit.outbound_puts) outbound[r.key] = r.value;
  shard_clock = commit.shard_clock;
  ++commits;
}

ShardState MemoryImage::ToState() const {
  ShardState state;
  state.fingerprint = fingerprint;
  state.format_version = 1;
  state.commits = commits;
  state.shard_clock = shard_clock;
  for (const auto& [key, values] : chunks) state.chunks.Add(key, values);
  for (const auto& [id, record] : workers) state.workers.push_back(record);
  for (const auto& [origin, seq] : origins) state.origins.push_back({origin, seq});
  for (const auto& [key, value] : outbound) state.outbound.push_back({key, value});
  return state;
}

MemoryShardStore::MemoryShardStore(StoreFingerprint fingerprint, Durability durability)
    : durability_(durability) {
  image_.fingerprint = std::move(fingerprint);
}

Result<ShardState> MemoryShardStore::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  return image_.ToState();
}

Status MemoryShardStore::Commit(const ShardCommit& commit) {
  std::lock_guard<std::mutex> lock(mu_);
  image_.Apply(commit);
  return Status::Ok();
}

MemoryImage MemoryShardStore::image() const {
  std::lock_guard<std::mutex> lock(mu_);
  return image_;
}

void MemoryShardStore::set_image(MemoryImage image) {
  std::lock_guard<std::mutex> lock(mu_);
  image_ = std::move(image);
}

}  // namespace geops::storage::testing
