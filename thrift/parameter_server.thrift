// geops LAN protocol: workers <-> the shards of their own site.
//
// Transport: framed (4-byte big-endian length, then one message) over TCP,
// TBinaryProtocol. geops resets Thrift's per-connection message budget at
// every frame (THRIFT-5492; see thrift/framed_transport.h), so one connection
// may carry any number of bytes; each frame is bounded by max_frame_bytes.
// Floats travel as `binary`: little-endian IEEE-754 float32, the chunks of
// `chunk_keys` back to back, each ModelSpec::ChunkElements long.
// A chunk key is packed into one i64: (table id << 32) | chunk id.

// Generated C++ lives in geops::rpc::gen; the adapters in thrift/ are geops::rpc.
namespace cpp geops.rpc.gen

// Error codes: the numeric values of geops::StatusCode (common/status.h).
exception GeopsError {
  1: i32 code,
  2: string message,
}

struct RegisterRequest {
  1: i32 worker_id,
  2: i64 model_fingerprint,   // 0 skips the check
  3: string auth_token,
  4: i64 session_id,          // the registering process run (random); 0: anonymous, never checked
  5: string holder,           // "pid P on host H", named when another process holds the id
  6: bool takeover,           // a supervisor saw the previous holder die: take the id at once
}

struct RegisterReply {
  1: i32 shard_id,
  2: i32 num_shards,
  3: i64 worker_clock,
  4: i64 shard_clock,
  5: i64 lease_ms,
  6: i64 model_fingerprint,
}

struct ReadRequest {
  1: i32 worker_id,
  2: i64 clock,               // the reader's clock c
  3: i64 staleness,           // s; the reply includes all updates through c-s-1; -1 = async
  4: list<i64> chunk_keys,
  5: i64 deadline_ms,         // longest the shard may wait for its clock
}

struct ReadReply {
  1: i64 shard_clock,
  2: binary values,
}

// An incremental read (Shard::ReadChanged): what changed since the reply
// whose read_id is `since` (0: none; everything counts as changed).
struct ReadChangedRequest {
  1: ReadRequest request,
  2: i64 since,
}

struct ReadChangedReply {
  1: i64 shard_clock,
  2: i64 read_id,             // the next request's `since`; 0: not tracked, every chunk whole
  3: binary runs,             // (u32 start, u32 length) pairs, little-endian, in floats of the chunks back to back
  4: binary values,           // the runs' float32 values, back to back
}

// One batch per shard per clock; (worker_id, clock) makes it idempotent.
struct UpdateRequest {
  1: i32 worker_id,
  2: i64 clock,
  3: list<i64> chunk_keys,
  4: binary values,           // deltas, already scaled by -lr
  5: i32 part = 0,            // a clock's update may come in parts 0, 1, ... (bounded requests)
  // Set on the clock's last part: once the part is applied (or found applied
  // before), the worker's clock advances to clock + 1 as clock() would, so a
  // clock costs one round trip per shard instead of two.
  6: bool then_clock = false,
  7: bool finished = false,   // with then_clock: as ClockRequest.finished
}

struct UpdateReply {
  1: bool applied,            // false: this batch was applied before (a retry)
  2: i64 shard_clock,         // after the clock advance when `clocked`
  // The clock advanced in this call (then_clock). A shard that predates
  // then_clock leaves it false, and the worker sends clock() itself.
  3: bool clocked = false,
}

struct ClockRequest {
  1: i32 worker_id,
  2: i64 clock,               // the worker's new clock (iterations completed)
  3: bool finished,           // the worker is done and stops holding the clock
}

struct ClockReply {
  1: i64 shard_clock,
}

struct WorkerState {
  1: i32 worker_id,
  2: i64 clock,
  3: bool live,
  4: bool finished,
  5: i64 ms_since_heard,
}

struct ShardStatus {
  1: i32 shard_id,
  2: i32 num_shards,
  3: i64 shard_clock,
  4: i64 num_chunks,
  5: i64 num_elements,
  6: i64 update_batches_applied,
  7: i64 update_batches_duplicate,
  8: i64 update_bytes_applied,
  9: i64 reads_served,
  10: i64 read_bytes_served,
  11: i64 requests_rejected,
  12: double read_wait_seconds,
  13: list<WorkerState> workers,
}

// What one shard holds of one table, summarised (replicaSummary): for an
// operator's check of a site's replica without running a training worker.
struct TableSummary {
  1: i32 table,
  2: i64 elements,           // of this table held by the shard
  3: double min_value,       // over the finite values; 0 when there are none
  4: double max_value,
  5: double sum,             // of the finite values, in double precision
  6: i64 nonfinite,          // NaN or +-Inf values (never expected)
}

struct ReplicaSummary {
  1: i32 shard_id,
  2: i64 shard_clock,
  3: list<TableSummary> tables,  // one per table the shard holds chunks of, by table id
}

// A client-defined model (topology workload "client"): its tables as the
// worker's framework made them. The first schema a shard receives fixes its
// model; a later one must match it (names, order, shapes, checksums, chunk
// size) or is refused with FailedPrecondition naming what differs.
struct TableSchema {
  1: string name,
  2: i64 rows,
  3: i64 cols,
  4: i64 init_checksum,       // geops::ValuesChecksum of the table's initial values
}

struct SchemaRequest {
  1: i32 worker_id,
  2: list<TableSchema> tables,
  3: i64 chunk_bytes,
  4: string auth_token,
}

struct SchemaReply {
  1: i64 model_fingerprint,   // of the fixed model
  2: list<i64> missing_chunk_keys,  // this shard's chunks still without initial values
}

// Initial values of some of the shard's chunks, for the model with this
// fingerprint; chunks that already have theirs are left as they are.
struct InitValuesRequest {
  1: i32 worker_id,
  2: i64 model_fingerprint,
  3: list<i64> chunk_keys,
  4: binary values,           // the chunks' floats back to back, as in UpdateRequest
  5: string auth_token,
}

struct InitValuesReply {
  1: i64 missing_chunks,      // chunks still without values; 0: the shard is serving
}

service ParameterServer {
  SchemaReply registerSchema(1: SchemaRequest req) throws (1: GeopsError err),
  InitValuesReply initValues(1: InitValuesRequest req) throws (1: GeopsError err),
  RegisterReply registerWorker(1: RegisterRequest req) throws (1: GeopsError err),
  ReadReply read(1: ReadRequest req) throws (1: GeopsError err),
  ReadChangedReply readChanged(1: ReadChangedRequest req) throws (1: GeopsError err),
  UpdateReply update(1: UpdateRequest req) throws (1: GeopsError err),
  ClockReply clock(1: ClockRequest req) throws (1: GeopsError err),
  void heartbeat(1: i32 worker_id, 2: i64 session_id) throws (1: GeopsError err),  // session: as registered; 0 unchecked
  ShardStatus status() throws (1: GeopsError err),
  // Reads nothing through the clock or the WAN gate and registers no one.
  ReplicaSummary replicaSummary() throws (1: GeopsError err),
}
