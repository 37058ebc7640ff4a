#include "thrift/type_convert.h"

#include <utility>

namespace geops::rpc {

std::vector<int64_t> PackKeys(std::span<const ChunkKey> keys) {
  std::vector<int64_t> out;
  out.reserve(keys.size());
  for (const ChunkKey& k : keys) out.push_back(static_cast<int64_t>(k.Packed()));
  return out;
}

std::vector<ChunkKey> UnpackKeys(const std::vector<int64_t>& packed) {
  std::vector<ChunkKey> out;
  out.reserve(packed.size());
  for (int64_t p : packed) out.push_back(ChunkKey::FromPacked(static_cast<uint64_t>(p)));
  return out;
}

namespace {

// The geops structs and their Thrift counterparts name their fields alike,
// so one copy serves both directions; the 64-bit fingerprint is the one
// field whose type differs (unsigned here, i64 on the wire).
template <typename To, typename From>
To CopyRegisterReply(const From& in) {
  To out;
  out.shard_id = in.shard_id;
  out.num_shards = in.num_shards;
  out.worker_clock = in.worker_clock;
  out.shard_clock = in.shard_clock;
  out.lease_ms = in.lease_ms;
  out.model_fingerprint = static_cast<decltype(out.model_fingerprint)>(in.model_fingerprint);
  return out;
}

template <typename To, typename From>
To CopyShardStatus(const From& in) {
  To out;
  out.shard_id = in.shard_id;
  out.num_shards = in.num_shards;
  out.shard_clock = in.shard_clock;
  out.num_chunks = in.num_chunks;
  out.num_elements = in.num_elements;
  out.update_batches_applied = in.update_batches_applied;
  out.update_batches_duplicate = in.update_batches_duplicate;
  out.update_bytes_applied = in.update_bytes_applied;
  out.reads_served = in.reads_served;
  out.read_bytes_served = in.read_bytes_served;
  out.requests_rejected = in.requests_rejected;
  out.read_wait_seconds = in.read_wait_seconds;
  out.workers.reserve(in.workers.size());
  for (const auto& from : in.workers) {
    typename decltype(out.workers)::value_type w;
    w.worker_id = from.worker_id;
    w.clock = from.clock;
    w.live = from.live;
    w.finished = from.finished;
    w.ms_since_heard = from.ms_since_heard;
    out.workers.push_back(std::move(w));
  }
  return out;
}

}  // namespace

gen::RegisterReply ToThrift(const RegisterReply& in) { return CopyRegisterReply<gen::RegisterReply>(in); }

RegisterReply FromThrift(const gen::RegisterReply& in) { return CopyRegisterReply<RegisterReply>(in); }

gen::ShardStatus ToThrift(const ShardStatus& in) { return CopyShardStatus<gen::ShardStatus>(in); }

ShardStatus FromThrift(const gen::ShardStatus& in) { return CopyShardStatus<ShardStatus>(in); }

gen::ReplicaSummary ToThrift(const ReplicaSummary& in) {
  gen::ReplicaSummary out;
  out.shard_id = in.shard_id;
  out.shard_clock = in.shard_clock;
  for (const TableSummary& t : in.tables) {
    gen::TableSummary g;
    g.table = t.table;
    g.elements = t.elements;
    g.min_value = t.min;
    g.max_value = t.max;
    g.sum = t.sum;
    g.nonfinite = t.nonfinite;
    out.tables.push_back(g);
  }
  return out;
}

ReplicaSummary FromThrift(const gen::ReplicaSummary& in) {
  ReplicaSummary out;
  out.shard_id = in.shard_id;
  out.shard_clock = in.shard_clock;
  for (const gen::TableSummary& g : in.tables) {
    out.tables.push_back(TableSummary{static_cast<TableId>(g.table), g.elements, g.min_value, g.max_value, g.sum, g.nonfinite});
  }
  return out;
}

std::vector<gen::TableSchema> SchemaToThrift(const ModelSpec& spec) {
  std::vector<gen::TableSchema> out;
  out.reserve(static_cast<size_t>(spec.num_tables()));
  for (const TableSpec& t : spec.tables()) {
    gen::TableSchema g;
    g.name = t.name;
    g.rows = t.rows;
    g.cols = t.cols;
    g.init_checksum = static_cast<int64_t>(t.init_checksum);
    out.push_back(std::move(g));
  }
  return out;
}

Result<ModelSpec> SchemaFromThrift(const std::vector<gen::TableSchema>& tables, int64_t chunk_bytes) {
  if (static_cast<int64_t>(tables.size()) > kMaxTables) {
    return InvalidArgumentError("a schema of " + std::to_string(tables.size()) + " tables (max " +
                                std::to_string(kMaxTables) + ")");
  }
  std::vector<TableSpec> specs;
  specs.reserve(tables.size());
  for (const gen::TableSchema& g : tables) {
    TableSpec t;
    t.name = g.name;
    t.rows = g.rows;
    t.cols = g.cols;
    t.init = InitKind::kProvided;
    t.init_checksum = static_cast<uint64_t>(g.init_checksum);
    specs.push_back(std::move(t));
  }
  return ModelSpec::Create(std::move(specs), chunk_bytes, 0);
}

}  // namespace geops::rpc
