#include "common/options.h"

namespace geops {

Status ShardOptions::Validate() const {
  if (num_shards < 1) return InvalidArgumentError("num_shards must be >= 1, got " + std::to_string(num_shards));
  if (shard_id < 0 || shard_id >= num_shards) {
    return InvalidArgumentError("shard_id " + std::to_string(shard_id) + " outside [0, " +
                                std::to_string(num_shards) + ")");
  }
  if (num_workers < 1) return InvalidArgumentError("num_workers must be >= 1, got " + std::to_string(num_workers));
  if (worker_lease_ms < 10) return InvalidArgumentError("worker_lease_ms must be >= 10, got " + std::to_string(worker_lease_ms));
  if (max_read_wait_ms < 1) return InvalidArgumentError("max_read_wait_ms must be >= 1");
  if (max_batch_bytes < 1024) return InvalidArgumentError("max_batch_bytes must be >= 1024");
  return Status::Ok();
}

Status WorkerClientOptions::Validate() const {
  if (worker_id < 0) return InvalidArgumentError("worker_id must be >= 0, got " + std::to_string(worker_id));
  if (staleness < kAsync) return InvalidArgumentError("staleness must be >= 0 or -1 (async), got " + std::to_string(staleness));
  if (rpc_timeout_ms < 1) return InvalidArgumentError("rpc_timeout_ms must be >= 1");
  if (max_attempts < 1) return InvalidArgumentError("max_attempts must be >= 1");
  if (retry_backoff_ms < 0) return InvalidArgumentError("retry_backoff_ms must be >= 0");
  if (heartbeat_ms < 1) return InvalidArgumentError("heartbeat_ms must be >= 1");
  return Status::Ok();
}

}  // namespace geops
