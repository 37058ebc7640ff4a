#include "common/model_spec.h"

#include <algorithm>
#include <bit>
#include <cstdio>
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
    if (t.init != InitKind::kZeros && t.init != InitKind::kUniform && t.init != InitKind::kNormal &&
        t.init != InitKind::kProvided) {
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


uint64_t ValuesChecksum(std::span<const float> values) {
  // Four independent multiply-xor lanes over the 32-bit words (fast enough
  // for models of many GiB), folded with the length at the end.
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                      0x082efa98ec4e6c89ull};
  const size_t n = values.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int l = 0; l < 4; ++l) {
      lane[l] = (lane[l] ^ std::bit_cast<uint32_t>(values[i + l])) * kMul;
      lane[l] ^= lane[l] >> 29;
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    lane[l] = (lane[l] ^ std::bit_cast<uint32_t>(values[i])) * kMul;
    lane[l] ^= lane[l] >> 29;
  }
  uint64_t h = static_cast<uint64_t>(n) * kMul;
  for (uint64_t v : lane) {
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}

Result<ModelSpec> ModelSpec::WithInitialValues(std::shared_ptr<const ChunkValuesMap> values) const {
  if (values) {
    for (const auto& [key, v] : *values) {
      if (!HasChunk(key)) {
        return InvalidArgumentError("initial values for chunk (" + std::to_string(key.table) + ", " +
                                    std::to_string(key.chunk) + "), which the model does not have");
      }
      const TableSpec& t = tables_[key.table];
      if (t.init != InitKind::kProvided) {
        return InvalidArgumentError("initial values for table '" + t.name +
                                    "', whose values are not provided by the client");
      }
      if (static_cast<int64_t>(v.size()) != ChunkElements(key)) {
        return InvalidArgumentError("initial values of chunk " + std::to_string(key.chunk) + " of table '" +
                                    t.name + "' hold " + std::to_string(v.size()) + " floats, not " +
                                    std::to_string(ChunkElements(key)));
      }
    }
  }
  ModelSpec copy = *this;
  copy.initial_ = std::move(values);
  return copy;
}

bool ModelSpec::client_defined() const {
  return std::all_of(tables_.begin(), tables_.end(),
                     [](const TableSpec& t) { return t.init == InitKind::kProvided; });
}

bool ModelSpec::HasInitialValues(ChunkKey key) const {
  if (tables_[key.table].init != InitKind::kProvided) return true;
  return initial_ != nullptr && initial_->count(key) > 0;
}

Status ModelSpec::CheckSameSchema(const ModelSpec& other, std::string_view fixed_by) const {
  auto differs = [&](const std::string& what) {
    return FailedPreconditionError("the model differs from the one " + std::string(fixed_by) + ": " + what);
  };
  auto shape = [](const TableSpec& t) { return std::to_string(t.rows) + "x" + std::to_string(t.cols); };
  auto hex = [](uint64_t v) {
    char buf[20];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  const size_t common = std::min(tables_.size(), other.tables_.size());
  for (size_t i = 0; i < common; ++i) {
    const TableSpec& a = tables_[i];
    const TableSpec& b = other.tables_[i];
    if (a.name != b.name) {
      return differs("table " + std::to_string(i) + " is '" + a.name + "' there, '" + b.name + "' here");
    }
    if (a.rows != b.rows || a.cols != b.cols) {
      return differs("table '" + a.name + "' has shape " + shape(a) + " there, " + shape(b) + " here");
    }
    if (a.init != b.init || a.init_scale != b.init_scale) {
      return differs("table '" + a.name + "' is initialised differently");
    }
    if (a.init == InitKind::kProvided && a.init_checksum != b.init_checksum) {
      return differs("table '" + a.name + "' has other initial values (checksum " + hex(a.init_checksum) +
                     " there, " + hex(b.init_checksum) +
                     " here): build the model from the same seed in every worker");
    }
  }
  if (tables_.size() != other.tables_.size()) {
    const bool more_here = other.tables_.size() > tables_.size();
    const TableSpec& extra = more_here ? other.tables_[common] : tables_[common];
    return differs(std::to_string(tables_.size()) + " tables there, " + std::to_string(other.tables_.size()) +
                   " here; table '" + extra.name + "' is only " + (more_here ? "here" : "there"));
  }
  if (chunk_bytes_ != other.chunk_bytes_) {
    return differs("chunk size " + std::to_string(chunk_bytes_) + " bytes there, " +
                   std::to_string(other.chunk_bytes_) + " here");
  }
  if (!client_defined() && seed_ != other.seed_) {
    return differs("seed " + std::to_string(seed_) + " there, " + std::to_string(other.seed_) + " here");
  }
  return Status::Ok();
}

void ModelSpec::InitChunk(ChunkKey key, float* out) const {
  const TableSpec& t = tables_[key.table];
  const int64_t n = ChunkElements(key);
  if (t.init == InitKind::kProvided) {
    const std::vector<float>& v = initial_->at(key);
    std::copy(v.begin(), v.end(), out);
    return;
  }
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
  // The seed makes no value of a client-defined model, so it does not count there.
  mix("chunk_bytes=" + std::to_string(chunk_bytes_) + ";seed=" +
      std::to_string(client_defined() ? 0 : seed_) + ";");
  for (const TableSpec& t : tables_) {
    mix(t.name + ":" + std::to_string(t.rows) + "x" + std::to_string(t.cols) + ":init=" +
        std::to_string(static_cast<int>(t.init)) + "/" + std::to_string(t.init_scale) +
        (t.init == InitKind::kProvided ? "/" + std::to_string(t.init_checksum) : std::string()) + ";");
  }
  return h;
}

std::string FingerprintText(uint64_t fingerprint) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(fingerprint));
  return buf;
}

}  // namespace geops
