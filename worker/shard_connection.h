// ShardConnection: a worker's view of one shard, whatever carries the calls.
//
// The Thrift client (thrift/) implements it over TCP; tests implement it over
// an in-process Shard, optionally wrapped to drop, delay or fail calls. The
// contract of each call is the one of datacenter::Shard, plus: Unavailable
// means the call may not have reached the shard (connection lost, timeout of
// the transport) and may be retried as is; the connection reconnects on the
// next call by itself.
//
// Thread-safety: one connection is used by one thread at a time.
#ifndef GEOPS_WORKER_SHARD_CONNECTION_H_
#define GEOPS_WORKER_SHARD_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/ps_types.h"
#include "common/status.h"

namespace geops::worker {

// Bytes a connection moved, payload and framing included where known.
struct TransferStats {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t calls = 0;
  int64_t retries = 0;
};

class ShardConnection {
 public:
  virtual ~ShardConnection() = default;

  // `session` names the process (ps_types.h); the shard refuses a worker id
  // another live session holds (AlreadyExists).
  virtual Result<RegisterReply> Register(WorkerId worker, uint64_t model_fingerprint, const std::string& auth_token,
                                         const WorkerSession& session = {}) = 0;
  // A client-defined model (datacenter/shard_host.h): proposes the schema of
  // `spec` (every table kProvided), then sends initial values of chunks the
  // shard lacks. Pure, so that a wrapping connection cannot drop them by
  // forgetting to forward; one that cannot carry them says so (Unimplemented).
  virtual Result<SchemaReply> RegisterSchema(WorkerId worker, const ModelSpec& spec,
                                             const std::string& auth_token) = 0;
  // Returns the number of chunks the shard still lacks.
  virtual Result<int64_t> InitValues(WorkerId worker, uint64_t model_fingerprint,
                                     std::span<const ChunkKey> keys, std::span<const float> values,
                                     const std::string& auth_token) = 0;
  // `deadline_ms`: how long the shard may wait for the clock before answering
  // DeadlineExceeded. REQUIRES: out has room for every chunk of `keys`.
  virtual Result<ReadReply> Read(WorkerId worker, Clock clock, int64_t staleness,
                                 std::span<const ChunkKey> keys, float* out,
                                 int64_t deadline_ms) = 0;
  // An incremental read (Shard::ReadChanged): what changed since the reply
  // whose read_id is `since`. The caller checks that the runs fit `keys`
  // (PsClient::ScatterChanged). This default has none: Unimplemented, and
  // the caller reads whole (Read).
  virtual Result<ReadReply> ReadChanged(WorkerId /*worker*/, Clock /*clock*/, int64_t /*staleness*/,
                                        std::span<const ChunkKey> /*keys*/, uint64_t /*since*/,
                                        ChangedValues* /*out*/, int64_t /*deadline_ms*/) {
    return UnimplementedError("this connection has no incremental reads");
  }
  // `part`: see Shard::Update (a clock's update in bounded parts).
  virtual Result<UpdateReply> Update(WorkerId worker, Clock clock,
                                     std::span<const ChunkKey> keys,
                                     std::span<const float> values, int32_t part) = 0;
  Result<UpdateReply> Update(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                             std::span<const float> values) {
    return Update(worker, clock, keys, values, 0);
  }
  virtual Result<Clock> AdvanceClock(WorkerId worker, Clock new_clock, bool finished) = 0;
  // The last part of a clock's update, then AdvanceClock(worker, clock + 1,
  // finished), in one round trip where the connection can (the reply says
  // `clocked`); a reply without `clocked` means the clock did not move and
  // the caller must call AdvanceClock. Retrying the whole call is safe: the
  // part is then found applied and the advance repeats harmlessly. This
  // default makes the two calls.
  virtual Result<UpdateReply> UpdateThenClock(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                                              std::span<const float> values, int32_t part, bool finished) {
    Result<UpdateReply> r = Update(worker, clock, keys, values, part);
    if (!r.ok()) return r;
    Result<Clock> advanced = AdvanceClock(worker, clock + 1, finished);
    if (!advanced.ok()) return advanced.status();
    r->shard_clock = *advanced;
    r->clocked = true;
    return r;
  }
  // `session`: the WorkerSession id it registered with (0: unchecked).
  virtual Status Heartbeat(WorkerId worker, uint64_t session = 0) = 0;
  virtual Result<ShardStatus> GetStatus() = 0;
  // The shard's values summarised per table (datacenter/replica_summary.h);
  // registers nothing. Unimplemented where the carrier has no such call.
  virtual Result<ReplicaSummary> GetReplicaSummary() {
    return UnimplementedError("this connection cannot summarise a replica");
  }

  virtual TransferStats stats() const = 0;
};

// Makes a fresh connection to shard `shard` of the site; used by the client
// to open one connection per shard (and a separate one for heartbeats).
class ShardConnectionFactory {
 public:
  virtual ~ShardConnectionFactory() = default;
  virtual Result<std::unique_ptr<ShardConnection>> Connect(ShardId shard) = 0;
};

}  // namespace geops::worker

#endif  // GEOPS_WORKER_SHARD_CONNECTION_H_
