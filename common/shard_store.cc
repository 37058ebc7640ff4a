#include "common/shard_store.h"

#include <algorithm>
#include <cstring>

namespace geops {
namespace {

// Longest model summary kept in a fingerprint; long models are cut with "...".
constexpr size_t kMaxSummaryChars = 1024;

std::string Key(ChunkKey key) {
  return "table " + std::to_string(key.table) + " chunk " + std::to_string(key.chunk);
}

}  // namespace

StoreFingerprint StoreFingerprint::Of(const ModelSpec& spec, const ShardOptions& options) {
  StoreFingerprint fp;
  fp.model = spec.Fingerprint();
  std::string summary = "chunk_bytes=" + std::to_string(spec.chunk_bytes()) + " seed=" +
                        std::to_string(spec.seed()) + " tables=";
  for (int t = 0; t < spec.num_tables(); ++t) {
    const TableSpec& table = spec.table(static_cast<TableId>(t));
    summary += (t ? "," : "") + table.name + ":" + std::to_string(table.rows) + "x" + std::to_string(table.cols);
    if (summary.size() > kMaxSummaryChars) {
      summary.resize(kMaxSummaryChars - 3);
      summary += "...";
      break;
    }
  }
  fp.model_summary = std::move(summary);
  fp.shard_id = options.shard_id;
  fp.num_shards = options.num_shards;
  fp.num_workers = options.num_workers;
  return fp;
}

Status CheckFingerprint(const StoreFingerprint& stored, const StoreFingerprint& expected,
                        std::string_view where) {
  std::string diffs;
  auto differ = [&diffs](const std::string& part, const std::string& a, const std::string& b) {
    diffs += (diffs.empty() ? "" : "; ") + part + " differs (stored " + a + ", this process " + b + ")";
  };
  if (stored.model != expected.model) {
    const std::string same = stored.model_summary == expected.model_summary
                                 ? " (same tables and shapes; initialisation differs)"
                                 : "";
    differ("model", FingerprintText(stored.model) + " [" + stored.model_summary + "]",
           FingerprintText(expected.model) + " [" + expected.model_summary + "]" + same);
  }
  if (stored.num_shards != expected.num_shards) {
    differ("shard count", std::to_string(stored.num_shards), std::to_string(expected.num_shards));
  }
  if (stored.shard_id != expected.shard_id) {
    differ("shard id", std::to_string(stored.shard_id), std::to_string(expected.shard_id));
  }
  if (stored.num_workers != expected.num_workers) {
    differ("worker count", std::to_string(stored.num_workers), std::to_string(expected.num_workers));
  }
  if (diffs.empty()) return Status::Ok();
  return FailedPreconditionError(std::string(where) + " belongs to a different configuration: " + diffs +
                                 "; refusing to use it (point the shard at another directory, or remove "
                                 "this one to start from scratch)");
}

ShardStoreSpec ShardStoreSpec::Of(const ModelSpec& spec, const ShardOptions& options) {
  ShardStoreSpec out;
  out.fingerprint = StoreFingerprint::Of(spec, options);
  for (const ChunkKey key : spec.ChunksOfShard(options.shard_id, options.num_shards)) {
    out.chunks.push_back(ChunkExtent{key, spec.ChunkElements(key)});
  }
  return out;
}

void ChunkBatch::Clear() {
  keys_.clear();
  offsets_.assign(1, 0);
  used_ = 0;
}

float* ChunkBatch::Append(ChunkKey key, int64_t elements) {
  if (used_ + elements > capacity_) {
    const int64_t capacity = std::max<int64_t>({used_ + elements, capacity_ * 2, 1024});
    std::unique_ptr<float[]> grown(new float[capacity]);
    if (used_ > 0) std::memcpy(grown.get(), data_.get(), static_cast<size_t>(used_) * sizeof(float));
    data_ = std::move(grown);
    capacity_ = capacity;
  }
  float* out = data_.get() + used_;
  used_ += elements;
  keys_.push_back(key);
  offsets_.push_back(used_);
  return out;
}

void ChunkBatch::Reserve(int64_t elements) {
  if (elements <= capacity_) return;
  std::unique_ptr<float[]> grown(new float[elements]);
  if (used_ > 0) std::memcpy(grown.get(), data_.get(), static_cast<size_t>(used_) * sizeof(float));
  data_ = std::move(grown);
  capacity_ = elements;
}

void ChunkBatch::Add(ChunkKey key, std::span<const float> values) {
  float* out = Append(key, static_cast<int64_t>(values.size()));
  if (!values.empty()) std::memcpy(out, values.data(), values.size_bytes());
}

int64_t ShardCommit::chunk_elements() const {
  int64_t n = chunks.total_elements();
  if (deferred_chunks != nullptr) {
    for (size_t i = 0; i < deferred_chunks->size(); ++i) n += deferred_chunks->elements(i);
  }
  return n;
}

Status ShardCommit::ForEachChunk(const std::function<Status(ChunkKey, std::span<const float>)>& fn) const {
  for (size_t i = 0; i < chunks.size(); ++i) GEOPS_RETURN_IF_ERROR(fn(chunks.key(i), chunks.values(i)));
  if (deferred_chunks == nullptr) return Status::Ok();
  int64_t largest = 0;
  for (size_t i = 0; i < deferred_chunks->size(); ++i) largest = std::max(largest, deferred_chunks->elements(i));
  std::unique_ptr<float[]> scratch(new float[std::max<int64_t>(largest, 1)]);
  for (size_t i = 0; i < deferred_chunks->size(); ++i) {
    const int64_t n = deferred_chunks->elements(i);
    deferred_chunks->Read(i, scratch.get());
    GEOPS_RETURN_IF_ERROR(fn(deferred_chunks->key(i), std::span<const float>(scratch.get(), static_cast<size_t>(n))));
  }
  return Status::Ok();
}

Status ShardCommit::ForEachOutbound(const std::function<Status(const std::string&, const std::string*)>& fn) const {
  for (const OutboundRecord& r : outbound_puts) GEOPS_RETURN_IF_ERROR(fn(r.key, &r.value));
  if (deferred_outbound == nullptr) return Status::Ok();
  std::string value;
  for (size_t i = 0; i < deferred_outbound->size(); ++i) {
    const bool put = deferred_outbound->Read(i, &value);
    GEOPS_RETURN_IF_ERROR(fn(deferred_outbound->key(i), put ? &value : nullptr));
  }
  return Status::Ok();
}

void ShardCommit::Clear() {
  chunks.Clear();
  deferred_chunks = nullptr;
  deferred_outbound = nullptr;
  workers.clear();
  origins.clear();
  outbound_puts.clear();
  outbound_deletes.clear();
  ledger_clears.clear();
  ledger_adds.clear();
  quarantined.clear();
  shard_clock = 0;
}

Status ValidateShardState(const ShardState& state, const ShardStoreSpec& spec, std::string_view where) {
  GEOPS_RETURN_IF_ERROR(CheckFingerprint(state.fingerprint, spec.fingerprint, where));
  const std::string w(where);
  // Both lists are in key order: walk them together.
  size_t next = 0;
  for (size_t i = 0; i < state.chunks.size(); ++i) {
    const ChunkKey key = state.chunks.key(i);
    if (i > 0 && !(state.chunks.key(i - 1) < key)) {
      return DataLossError(w + ": " + Key(key) + " is stored twice or out of order");
    }
    while (next < spec.chunks.size() && spec.chunks[next].key < key) {
      if (state.commits > 0) return DataLossError(w + ": " + Key(spec.chunks[next].key) + " is missing");
      ++next;
    }
    if (next == spec.chunks.size() || spec.chunks[next].key != key) {
      return DataLossError(w + ": holds " + Key(key) + ", which this shard does not own");
    }
    const int64_t got = static_cast<int64_t>(state.chunks.values(i).size());
    if (got != spec.chunks[next].elements) {
      return DataLossError(w + ": " + Key(key) + " has " + std::to_string(got) + " values, the model says " +
                           std::to_string(spec.chunks[next].elements));
    }
    ++next;
  }
  if (state.commits > 0 && next < spec.chunks.size()) {
    return DataLossError(w + ": " + Key(spec.chunks[next].key) + " is missing");
  }
  WorkerId previous = -1;
  for (const WorkerRecord& r : state.workers) {
    const std::string who = w + ": worker record " + std::to_string(r.worker);
    if (r.worker < 0 || r.worker >= spec.fingerprint.num_workers) {
      return DataLossError(who + " is outside [0, " + std::to_string(spec.fingerprint.num_workers) + ")");
    }
    if (r.worker <= previous) return DataLossError(who + " is stored twice or out of order");
    previous = r.worker;
    if (r.clock < 0 || r.last_update_clock < -1 || r.last_update_clock > r.clock) {
      return DataLossError(who + " is inconsistent: clock " + std::to_string(r.clock) +
                           ", last update clock " + std::to_string(r.last_update_clock));
    }
  }
  for (size_t i = 1; i < state.origins.size(); ++i) {
    if (state.origins[i].origin <= state.origins[i - 1].origin) {
      return DataLossError(w + ": origin record " + std::to_string(state.origins[i].origin) +
                           " is stored twice or out of order");
    }
  }
  return Status::Ok();
}

}  // namespace geops
