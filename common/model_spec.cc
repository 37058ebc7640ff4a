#include "common/model_spec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/splitmix.h"

namespace geops {

Result<ModelSpec> ModelSpec::Create(std::vector<TableSpec> tables, int64_t chunk_bytes,
                                   uint64_t seed) {
  if (chunk_bytes < 4) {
    return InvalidArgumentError("chunk_bytes must be >= 4, got " + std::to_string(chunk_bytes));
  }
  if (tables.empty()) return InvalidArgumentError("a model needs at least one table");
  if (static_cast<int>(tables.size()) > kMaxTables) {
    return InvalidArgumentError("too many tables: " + std::to_string(tables.size()) +
                                " (max " + std::to_string(kMaxTables) + ")");
  }
  ModelSpec spec;
  spec.chunk_bytes_ = chunk_bytes;
  spec.seed_ = seed;
  std::set<std::string> names;
  for (const TableSpec& t : tables) {
    if (t.name.empty()) return InvalidArgumentError("a table has an empty name");
    if (t.name.size() > 256) return InvalidArgumentError("table name longer than 256 bytes: " + t.name.substr(0, 32) + "...");
    for (char c : t.name) {
      if (c < 0x21 || c > 0x7e) {
        return InvalidArgumentError("table name '" + t.name + "' has a non-printable or space character");
      }
    }
    if (!names.insert(t.name).second) return InvalidArgumentError("duplicate table '" + t.name + "'");
    if (t.rows <= 0 || t.cols <= 0) {
      return InvalidArgumentError("table '" + t.name + "' has shape " + std::to_string(t.rows) +
                                  "x" + std::to_string(t.cols) + "; both must be > 0");
    }
    if (!(t.init_scale >= 0.0f) || !std::isfinite(t.init_scale)) {
      return InvalidArgumentError("table '" + t.name + "' has init_scale that is negative or not finite");
    }
    if (t.init != InitKind::kZeros && t.init != InitKind::kUniform && t.init != InitKind::kNormal) {
      return InvalidArgumentError("table '" + t.name + "' has an unknown init kind");
    }
    if (t.rows > kMaxTableElements / t.cols) {
      return InvalidArgumentError("table '" + t.name + "' is too large");
    }
    Layout l;
    l.rows_per_chunk = std::max<int64_t>(1, chunk_bytes / (t.cols * int64_t{sizeof(float)}));
    int64_t chunks = (t.rows + l.rows_per_chunk - 1) / l.rows_per_chunk;
    l.num_chunks = static_cast<ChunkId>(chunks);
    l.global_first_chunk = spec.total_chunks_;
    spec.total_chunks_ += chunks;
    spec.total_elements_ += t.rows * t.cols;
    spec.layout_.push_back(l);
  }
  spec.tables_ = std::move(tables);
  return spec;
}

Result<TableId> ModelSpec::FindTable(std::string_view name) const {
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (tables_[i].name == name) return static_cast<TableId>(i);
  }
  return NotFoundError("unknown table '" + std::string(name) + "'");
}

int64_t ModelSpec::ChunkRows(ChunkKey key) const {
  const int64_t first = ChunkFirstRow(key);
  return std::min(rows_per_chunk(key.table), tables_[key.table].rows - first);
}

ShardId ModelSpec::ShardOf(ChunkKey key, int num_shards) const {
  const int64_t global = layout_[key.table].global_first_chunk + key.chunk;
  return static_cast<ShardId>(global % num_shards);
}

std::vector<ChunkKey> ModelSpec::ChunksOfShard(ShardId shard, int num_shards) const {
  std::vector<ChunkKey> out;
  for (TableId t = 0; t < tables_.size(); ++t) {
    for (ChunkId c = 0; c < layout_[t].num_chunks; ++c) {
      if (ShardOf({t, c}, num_shards) == shard) out.push_back({t, c});
    }
  }
  return out;
}

std::vector<ChunkKey> ModelSpec::ChunksOfTable(TableId id) const {
  std::vector<ChunkKey> out;
  out.reserve(layout_[id].num_chunks);
  for (ChunkId c = 0; c < layout_[id].num_chunks; ++c) out.push_back({id, c});
  return out;
}


void ModelSpec::InitChunk(ChunkKey key, float* out) const {
  const TableSpec& t = tables_[key.table];
  const int64_t n = ChunkElements(key);
  if (t.init == InitKind::kZeros || t.init_scale == 0.0f) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  uint64_t state = seed_ ^ (key.Packed() * 0x2545f4914f6cdd1dull);
  SplitMix64(&state);
  if (t.init == InitKind::kUniform) {
    for (int64_t i = 0; i < n; ++i) out[i] = (2.0f * SplitMixUnit(&state) - 1.0f) * t.init_scale;
    return;
  }
  for (int64_t i = 0; i < n; i += 2) {  // Box-Muller, two values per draw
    const float u1 = std::max(SplitMixUnit(&state), 1e-7f);
    const float u2 = SplitMixUnit(&state);
    const float r = std::sqrt(-2.0f * std::log(u1)) * t.init_scale;
    out[i] = r * std::cos(6.2831853f * u2);
    if (i + 1 < n) out[i + 1] = r * std::sin(6.2831853f * u2);
  }
}

uint64_t ModelSpec::Fingerprint() const {
  // FNV-1a over a canonical text form.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix("chunk_bytes=" + std::to_string(chunk_bytes_) + ";seed=" + std::to_string(seed_) + ";");
  for (const TableSpec& t : tables_) {
    mix(t.name + ":" + std::to_string(t.rows) + "x" + std::to_string(t.cols) + ":init=" +
        std::to_string(static_cast<int>(t.init)) + "/" + std::to_string(t.init_scale) + ";");
  }
  return h;
}

}  // namespace geops
