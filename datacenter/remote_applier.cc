#include "datacenter/remote_applier.h"

#include <algorithm>
#include <optional>
#include <string>

#include "common/float_kernels.h"

namespace geops::datacenter {
namespace {

std::string ChunkName(const ModelSpec& spec, ChunkKey key) {
  if (!spec.HasTable(key.table)) return "chunk (" + std::to_string(key.table) + ", " + std::to_string(key.chunk) + ")";
  return "chunk " + std::to_string(key.chunk) + " of table '" + spec.table(key.table).name + "'";
}

}  // namespace

RemoteApplier::RemoteApplier(const ModelSpec* spec, ChunkStore* store, ShardId shard, int num_shards)
    : spec_(spec), store_(store), shard_(shard), num_shards_(num_shards) {}

Status RemoteApplier::Validate(std::span<const RemoteChunkDelta> deltas) const {
  std::vector<ChunkKey> keys;
  keys.reserve(deltas.size());
  for (size_t i = 0; i < deltas.size(); ++i) {
    const RemoteChunkDelta& d = deltas[i];
    // Built only for an error: a batch carries hundreds of chunks.
    const auto where = [&] { return "remote batch: delta " + std::to_string(i) + " (" + ChunkName(*spec_, d.key) + ")"; };
    if (!spec_->HasChunk(d.key)) return InvalidArgumentError(where() + ": unknown chunk");
    if (store_->LocalIndex(d.key) < 0) {
      return InvalidArgumentError(where() + ": belongs to shard " +
                                  std::to_string(spec_->ShardOf(d.key, num_shards_)) + ", not shard " +
                                  std::to_string(shard_));
    }
    const int64_t n = spec_->ChunkElements(d.key);
    if (int64_t{d.num_elements} != n) {
      return InvalidArgumentError(where() + ": says the chunk has " + std::to_string(d.num_elements) +
                                  " elements, it has " + std::to_string(n));
    }
    if (d.indices.size() != d.values.size()) {
      return InvalidArgumentError(where() + ": " + std::to_string(d.indices.size()) + " indices but " +
                                  std::to_string(d.values.size()) + " values");
    }
    for (size_t j = 0; j < d.indices.size(); ++j) {
      if (d.indices[j] >= d.num_elements || (j > 0 && d.indices[j] <= d.indices[j - 1])) {
        return InvalidArgumentError(where() + ": index " + std::to_string(j) + " (" + std::to_string(d.indices[j]) +
                                    ") is out of range or not increasing");
      }
    }
    const int64_t bad = FirstNonFinite(d.values.data(), static_cast<int64_t>(d.values.size()));
    if (bad >= 0) {
      return InvalidArgumentError(where() + ": value " + std::to_string(bad) + " is NaN or Inf; nothing was applied");
    }
    keys.push_back(d.key);
  }
  std::sort(keys.begin(), keys.end());
  auto repeat = std::adjacent_find(keys.begin(), keys.end());
  if (repeat != keys.end()) {
    return InvalidArgumentError("remote batch: " + ChunkName(*spec_, *repeat) + " appears more than once");
  }
  return Status::Ok();
}

Result<RemoteApplyResult> RemoteApplier::Apply(SiteId origin, uint64_t seq,
                                               std::span<const RemoteChunkDelta> deltas,
                                               const std::function<void()>& begin_apply,
                                               const std::function<void(int64_t local)>& mark) {
  if (seq == 0) return InvalidArgumentError("remote batch from site " + std::to_string(origin) + ": seq 0 is not valid");
  GEOPS_RETURN_IF_ERROR(Validate(deltas));
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& last = last_seq_[origin];
  RemoteApplyResult result;
  if (seq <= last) {
    ++duplicate_;
    return result;
  }
  if (seq != last + 1) {
    return FailedPreconditionError("remote batch from site " + std::to_string(origin) + ": seq " +
                                   std::to_string(seq) + " arrives before seq " + std::to_string(last + 1) +
                                   "; batches of an origin apply in order");
  }
  if (begin_apply) begin_apply();
  // The batch's chunks, locked together: every sum is checked before any
  // is stored, and only the shipped elements are touched.
  locals_.clear();
  touched_.clear();
  for (size_t i = 0; i < deltas.size(); ++i) {
    if (deltas[i].indices.empty()) continue;
    locals_.push_back(store_->LocalIndex(deltas[i].key));
    touched_.push_back(i);
  }
  {
    ChunkStore::BatchGuard guard(store_, locals_);
    for (size_t c = 0; c < touched_.size(); ++c) {
      const RemoteChunkDelta& d = deltas[touched_[c]];
      std::optional<ChunkStore::BatchGuard::NonFinite> bad = guard.CheckSparseSum(c, d.indices, d.values);
      if (!bad) continue;
      result.quarantined = true;
      result.quarantine = "batch " + std::to_string(seq) + " from site " + std::to_string(origin) + ": " +
                          ChunkName(*spec_, d.key) + " element " + std::to_string(bad->element) + ": stored " +
                          std::to_string(bad->stored) + " + delta " + std::to_string(bad->delta) +
                          " is not finite; nothing of the batch was applied";
      last = seq;
      ++quarantined_;
      return result;
    }
    for (size_t c = 0; c < touched_.size(); ++c) {
      const RemoteChunkDelta& d = deltas[touched_[c]];
      guard.AddSparse(c, d.indices, d.values);
      result.elements += static_cast<int64_t>(d.values.size());
    }
  }
  if (mark) {
    for (int64_t local : locals_) mark(local);
  }
  last = seq;
  ++applied_;
  result.applied = true;
  return result;
}

int64_t RemoteApplier::batches_quarantined() const {
  std::lock_guard<std::mutex> lock(mu_);
  return quarantined_;
}

uint64_t RemoteApplier::LastSeq(SiteId origin) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = last_seq_.find(origin);
  return it == last_seq_.end() ? 0 : it->second;
}

void RemoteApplier::Restore(SiteId origin, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  last_seq_[origin] = seq;
}

std::vector<SiteId> RemoteApplier::Origins() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SiteId> out;
  for (const auto& [origin, seq] : last_seq_) out.push_back(origin);
  return out;
}

int64_t RemoteApplier::batches_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return applied_;
}

int64_t RemoteApplier::batches_duplicate() const {
  std::lock_guard<std::mutex> lock(mu_);
  return duplicate_;
}

}  // namespace geops::datacenter
