#include "datacenter/batch_validator.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/float_kernels.h"

namespace geops::datacenter {
namespace {

std::string ChunkName(const ModelSpec& spec, ChunkKey key) {
  return "chunk " + std::to_string(key.chunk) + " of table '" + spec.table(key.table).name + "'";
}

}  // namespace

BatchValidator::BatchValidator(const ModelSpec* spec, ShardId shard, int num_shards, int64_t max_batch_bytes)
    : spec_(spec),
      shard_(shard),
      num_shards_(num_shards),
      max_batch_bytes_(max_batch_bytes) {}

Status BatchValidator::CheckBytes(int64_t bytes, const char* what) const {
  if (bytes <= max_batch_bytes_) return Status::Ok();
  return ResourceExhaustedError(std::string(what) + " of " + std::to_string(bytes) +
                                " bytes exceeds max_batch_bytes " + std::to_string(max_batch_bytes_) +
                                "; split it into smaller batches");
}

Status BatchValidator::CheckKeys(std::span<const ChunkKey> keys, const char* what,
                                 int64_t* total_elements) const {
  int64_t total = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const ChunkKey key = keys[i];
    if (!spec_->HasTable(key.table)) {
      return InvalidArgumentError(std::string(what) + ": unknown table id " +
                                  std::to_string(key.table) + " in key " + std::to_string(i) +
                                  " (the model has " + std::to_string(spec_->num_tables()) + " tables)");
    }
    if (!spec_->HasChunk(key)) {
      return InvalidArgumentError(std::string(what) + ": " + ChunkName(*spec_, key) +
                                  " is out of range (the table has " +
                                  std::to_string(spec_->num_chunks(key.table)) + " chunks)");
    }
    if (spec_->ShardOf(key, num_shards_) != shard_) {
      return InvalidArgumentError(std::string(what) + ": " + ChunkName(*spec_, key) +
                                  " belongs to shard " + std::to_string(spec_->ShardOf(key, num_shards_)) +
                                  ", not shard " + std::to_string(shard_));
    }
    total += spec_->ChunkElements(key);
    // Checked as we go so that a huge key list cannot overflow the sum.
    GEOPS_RETURN_IF_ERROR(CheckBytes(total * int64_t{sizeof(float)}, what));
  }
  *total_elements = total;
  return Status::Ok();
}

Status BatchValidator::CheckRead(std::span<const ChunkKey> keys, int64_t* total_elements) const {
  GEOPS_RETURN_IF_ERROR(CheckKeys(keys, "read", total_elements));
  // One chunk named many times would make a small request a huge reply.
  return CheckNoRepeats(keys, "read");
}

Status BatchValidator::CheckNoRepeats(std::span<const ChunkKey> keys, const char* what) const {
  // Clients send keys in order; only an unordered batch pays for a sort.
  bool ordered = true;
  for (size_t i = 1; i < keys.size() && ordered; ++i) ordered = keys[i - 1] < keys[i];
  if (ordered) return Status::Ok();
  std::vector<ChunkKey> sorted(keys.begin(), keys.end());
  std::sort(sorted.begin(), sorted.end());
  auto repeat = std::adjacent_find(sorted.begin(), sorted.end());
  if (repeat == sorted.end()) return Status::Ok();
  return InvalidArgumentError(std::string(what) + ": " + ChunkName(*spec_, *repeat) +
                              " appears more than once; name each chunk once");
}

Status BatchValidator::CheckFinite(std::span<const ChunkKey> keys, std::span<const float> values,
                                   const char* what) const {
  if (AllFinite(values.data(), static_cast<int64_t>(values.size()))) return Status::Ok();
  const int64_t bad = FirstNonFinite(values.data(), static_cast<int64_t>(values.size()));
  int64_t begin = 0;
  for (const ChunkKey key : keys) {
    const int64_t n = spec_->ChunkElements(key);
    if (bad < begin + n) {
      const int64_t element = bad - begin;
      const int64_t cols = spec_->table(key.table).cols;
      const float v = values[bad];
      const char* kind = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
      return InvalidArgumentError(
          std::string(what) + ": value is " + kind + " in table '" +
          spec_->table(key.table).name + "' chunk " + std::to_string(key.chunk) + " element " +
          std::to_string(element) + " (row " + std::to_string(spec_->ChunkFirstRow(key) + element / cols) +
          ", col " + std::to_string(element % cols) + "); nothing was applied");
    }
    begin += n;
  }
  return InternalError("non-finite value outside every chunk of the batch");
}

Status BatchValidator::CheckValues(std::span<const ChunkKey> keys, std::span<const float> values,
                                   const char* what) const {
  GEOPS_RETURN_IF_ERROR(CheckShape(keys, values, what));
  return CheckFinite(keys, values, what);
}

Status BatchValidator::CheckShape(std::span<const ChunkKey> keys, std::span<const float> values,
                                  const char* what) const {
  GEOPS_RETURN_IF_ERROR(CheckBytes(static_cast<int64_t>(values.size()) * int64_t{sizeof(float)}, what));
  // An empty batch would take the (worker, clock) slot of the real one,
  // which would then be dropped as a duplicate.
  if (keys.empty()) return InvalidArgumentError(std::string(what) + ": the batch names no chunks");
  int64_t expected = 0;
  GEOPS_RETURN_IF_ERROR(CheckKeys(keys, what, &expected));
  GEOPS_RETURN_IF_ERROR(CheckNoRepeats(keys, what));
  if (static_cast<int64_t>(values.size()) != expected) {
    return InvalidArgumentError(std::string(what) + ": payload has " + std::to_string(values.size()) +
                                " floats, expected " + std::to_string(expected) + " for " +
                                std::to_string(keys.size()) + " chunks");
  }
  return Status::Ok();
}

}  // namespace geops::datacenter
