#include "common/model_spec.h"

#include <algorithm>
#include <set>

namespace geops {

Result<ModelSpec> ModelSpec::Create(std::vector<TableSpec> tables, int64_t chunk_bytes) {
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

uint64_t ModelSpec::Fingerprint() const {
  // FNV-1a over a canonical text form.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix("chunk_bytes=" + std::to_string(chunk_bytes_) + ";");
  for (const TableSpec& t : tables_) {
    mix(t.name + ":" + std::to_string(t.rows) + "x" + std::to_string(t.cols) + ";");
  }
  return h;
}

}  // namespace geops
