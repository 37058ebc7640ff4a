// ModelSpec: the tables of a model, how each is cut into chunks, and which
// shard owns each chunk.
//
// A table is a dense row-major float32 matrix. It is cut into chunks of whole
// rows, about `chunk_bytes` each (at least one row). Chunk -> shard is one
// deterministic function of the spec and the shard count (round-robin over
// the global chunk order), so shard i of every site holds the same chunks.
//
// Immutable after Create(); safe to share between threads.
#ifndef GEOPS_COMMON_MODEL_SPEC_H_
#define GEOPS_COMMON_MODEL_SPEC_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace geops {

// How a table's initial values are made. Every shard of every site fills its
// chunks from (model seed, table, chunk) alone, so all replicas start equal.
enum class InitKind : int32_t {
  kZeros = 0,
  kUniform = 1,  // uniform in [-scale, scale]
  kNormal = 2,   // normal(0, scale)
  // Given by the client that defined the model (workload "client"): the
  // values are whatever its framework initialised, fixed by `init_checksum`;
  // a shard fills its chunks from the values attached with
  // ModelSpec::WithInitialValues.
  kProvided = 3,
};

// A 64-bit digest of float32 values, bit for bit (so -0.0 and 0.0 differ, and
// so do two NaNs with different payloads). Two processes that built the same
// tensor from the same seed get the same digest. Pure; any thread.
uint64_t ValuesChecksum(std::span<const float> values);

struct TableSpec {
  std::string name;  // e.g. "fc1.weight"; unique within a model
  int64_t rows = 0;  // > 0
  int64_t cols = 0;  // > 0
  InitKind init = InitKind::kZeros;
  float init_scale = 0.0f;  // >= 0; see InitKind
  uint64_t init_checksum = 0;  // kProvided only: ValuesChecksum of the whole table
};

// The initial values of some chunks of a client-defined model, by chunk.
using ChunkValuesMap = std::map<ChunkKey, std::vector<float>>;

// Default chunk size, bytes of float32 payload.
inline constexpr int64_t kDefaultChunkBytes = 16 * 1024;
// Upper bounds that keep every message and allocation bounded.
inline constexpr int64_t kMaxTableElements = int64_t{1} << 32;
inline constexpr int kMaxTables = 4096;

class ModelSpec {
 public:
  ModelSpec() = default;

  // Checks names (non-empty, unique, printable), shapes (> 0, bounded) and
  // chunk_bytes (>= 4). Returns InvalidArgument naming the problem.
  static Result<ModelSpec> Create(std::vector<TableSpec> tables,
                                  int64_t chunk_bytes = kDefaultChunkBytes, uint64_t seed = 1);

  int num_tables() const { return static_cast<int>(tables_.size()); }
  const TableSpec& table(TableId id) const { return tables_[id]; }
  const std::vector<TableSpec>& tables() const { return tables_; }
  int64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t seed() const { return seed_; }

  // A copy that fills the chunks of its kProvided tables from `values`
  // (shared, not copied). InvalidArgument naming the chunk when a value
  // list is not ChunkElements long or names a chunk of a table that is not
  // kProvided or does not exist.
  Result<ModelSpec> WithInitialValues(std::shared_ptr<const ChunkValuesMap> values) const;
  // True when every table is kProvided (a client-defined model).
  bool client_defined() const;
  // True when InitChunk(key) is defined: the table is not kProvided, or its
  // values for `key` were attached.
  bool HasInitialValues(ChunkKey key) const;
  const std::shared_ptr<const ChunkValuesMap>& initial_values() const { return initial_; }

  // NotFound naming the table when absent.
  Result<TableId> FindTable(std::string_view name) const;
  bool HasTable(TableId id) const { return id < tables_.size(); }

  int64_t rows_per_chunk(TableId id) const { return layout_[id].rows_per_chunk; }
  ChunkId num_chunks(TableId id) const { return layout_[id].num_chunks; }
  bool HasChunk(ChunkKey key) const {
    return HasTable(key.table) && key.chunk < layout_[key.table].num_chunks;
  }
  // REQUIRES: HasChunk(key).
  int64_t ChunkFirstRow(ChunkKey key) const { return int64_t{key.chunk} * rows_per_chunk(key.table); }
  int64_t ChunkRows(ChunkKey key) const;
  // Number of floats in the chunk (rows * cols); the last chunk may be short.
  int64_t ChunkElements(ChunkKey key) const { return ChunkRows(key) * tables_[key.table].cols; }
  // Offset of the chunk's first float inside its table.
  int64_t ChunkOffset(ChunkKey key) const { return ChunkFirstRow(key) * tables_[key.table].cols; }

  int64_t total_elements() const { return total_elements_; }
  int64_t total_chunks() const { return total_chunks_; }

  // The shard that owns `key` among `num_shards`. REQUIRES: HasChunk(key).
  ShardId ShardOf(ChunkKey key, int num_shards) const;
  // All chunks of the model that `shard` owns, in key order.
  std::vector<ChunkKey> ChunksOfShard(ShardId shard, int num_shards) const;
  // All chunks of one table, in order.
  std::vector<ChunkKey> ChunksOfTable(TableId id) const;

  // Writes the initial values of `key` (ChunkElements floats) to `out`. The
  // same on every machine for the same spec. REQUIRES: HasChunk(key) and
  // HasInitialValues(key).
  void InitChunk(ChunkKey key, float* out) const;

  // A stable 64-bit digest of names, shapes, initialisation (with the
  // checksum of provided values), chunk size and seed; two processes agree on
  // the model iff their fingerprints match.
  uint64_t Fingerprint() const;

  // OK when `other` has the same tables (names, order, shapes, init and
  // checksums) and chunk size as this spec. Otherwise FailedPrecondition
  // naming the first table that differs and how ("table 'fc1.weight': shape
  // 128x784 in the fixed model, 256x784 proposed"), or the chunk size.
  // `fixed_by` says where this spec came from, for the message.
  Status CheckSameSchema(const ModelSpec& other, std::string_view fixed_by) const;

 private:
  struct Layout {
    int64_t rows_per_chunk = 1;
    ChunkId num_chunks = 0;
    int64_t global_first_chunk = 0;  // chunks of all earlier tables
  };
  std::vector<TableSpec> tables_;
  std::vector<Layout> layout_;
  int64_t chunk_bytes_ = kDefaultChunkBytes;
  uint64_t seed_ = 1;
  int64_t total_elements_ = 0;
  int64_t total_chunks_ = 0;
  std::shared_ptr<const ChunkValuesMap> initial_;  // kProvided tables' values; may be null
};

// A fingerprint (ModelSpec::Fingerprint) as messages print it: "0x" and 16
// hex digits.
std::string FingerprintText(uint64_t fingerprint);

}  // namespace geops

#endif  // GEOPS_COMMON_MODEL_SPEC_H_
