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
  if (max_commit_wait_ms < 1) return InvalidArgumentError("max_commit_wait_ms must be >= 1");
  if (change_readers < -1) {
    return InvalidArgumentError("change_readers must be >= 0, or -1 for automatic; got " +
                                std::to_string(change_readers));
  }
  return Status::Ok();
}

std::string_view DurabilityName(Durability durability) {
  switch (durability) {
    case Durability::kSync: return "sync";
    case Durability::kAsync: return "async";
    case Durability::kOff: return "off";
  }
  return "unknown";
}

Result<Durability> ParseDurability(std::string_view text) {
  if (text == "sync") return Durability::kSync;
  if (text == "async") return Durability::kAsync;
  if (text == "off") return Durability::kOff;
  return InvalidArgumentError("durability must be \"sync\", \"async\" or \"off\", got \"" +
                              std::string(text) + "\"");
}

Status StorageOptions::Validate() const {
  if (durability != Durability::kSync && durability != Durability::kAsync && durability != Durability::kOff) {
    return InvalidArgumentError("durability has an unknown value " +
                                std::to_string(static_cast<int>(durability)));
  }
  if (write_buffer_mib < 0 || write_buffer_mib > 65536) {
    return InvalidArgumentError("write_buffer_mib must be in 0..65536 (0: automatic), got " +
                                std::to_string(write_buffer_mib));
  }
  if (max_background_jobs < 1 || max_background_jobs > 64) {
    return InvalidArgumentError("max_background_jobs must be in 1..64, got " +
                                std::to_string(max_background_jobs));
  }
  if (commit_piece_bytes < 4096 || commit_piece_bytes > (int64_t{1} << 30)) {
    return InvalidArgumentError("commit_piece_bytes must be in 4096..1073741824, got " +
                                std::to_string(commit_piece_bytes));
  }
  return Status::Ok();
}

Status WorkerClientOptions::Validate() const {
  if (worker_id < 0) return InvalidArgumentError("worker_id must be >= 0, got " + std::to_string(worker_id));
  if (staleness < kAsync) return InvalidArgumentError("staleness must be >= 0 or -1 (async), got " + std::to_string(staleness));
  if (rpc_timeout_ms < 1) return InvalidArgumentError("rpc_timeout_ms must be >= 1");
  if (retry_window_ms < 0) return InvalidArgumentError("retry_window_ms must be >= 0");
  if (max_attempts < 0) return InvalidArgumentError("max_attempts must be >= 0 (0: only the retry window)");
  if (retry_backoff_ms < 0) return InvalidArgumentError("retry_backoff_ms must be >= 0");
  if (max_backoff_ms < retry_backoff_ms) return InvalidArgumentError("max_backoff_ms must be >= retry_backoff_ms");
  if (heartbeat_ms < 1) return InvalidArgumentError("heartbeat_ms must be >= 1");
  if (held_id_wait_ms < 0) return InvalidArgumentError("held_id_wait_ms must be >= 0");
  return Status::Ok();
}

}  // namespace geops
