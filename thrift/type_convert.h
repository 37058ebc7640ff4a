// Conversions between the IDL's generated types (geops::rpc::gen) and the
// core's plain types (common/ps_types.h, common/ids.h). Pure functions; the
// only code besides the handler and the client that touches generated types.
#ifndef GEOPS_THRIFT_TYPE_CONVERT_H_
#define GEOPS_THRIFT_TYPE_CONVERT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/ps_types.h"
#include "common/status.h"
#include "gen-cpp/parameter_server_types.h"

namespace geops::rpc {

// Chunk keys travel packed: (table << 32) | chunk, as i64.
std::vector<int64_t> PackKeys(std::span<const ChunkKey> keys);
// Every i64 is a valid packed key, so unpacking cannot fail.
std::vector<ChunkKey> UnpackKeys(const std::vector<int64_t>& packed);

gen::RegisterReply ToThrift(const RegisterReply& in);
RegisterReply FromThrift(const gen::RegisterReply& in);

// A client-defined model's schema: its tables (every one kProvided).
std::vector<gen::TableSchema> SchemaToThrift(const ModelSpec& spec);
// The model a schema request describes (seed 0: its values are provided).
// InvalidArgument naming the problem (as ModelSpec::Create, or a checksum
// that is missing) for a schema that is not a valid model.
Result<ModelSpec> SchemaFromThrift(const std::vector<gen::TableSchema>& tables, int64_t chunk_bytes);

gen::ShardStatus ToThrift(const ShardStatus& in);
ShardStatus FromThrift(const gen::ShardStatus& in);
gen::ReplicaSummary ToThrift(const ReplicaSummary& in);
ReplicaSummary FromThrift(const gen::ReplicaSummary& in);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_TYPE_CONVERT_H_
