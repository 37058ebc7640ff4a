// The models and shard configurations shared by the crash tests and the
// child process they kill (storage_crash_child), so both sides agree on the
// store's fingerprint. Pure functions; thread-safe.
#ifndef GEOPS_TESTS_STORAGE_CRASH_MODEL_H_
#define GEOPS_TESTS_STORAGE_CRASH_MODEL_H_

#include <string>
#include <utility>
#include <vector>

#include "common/model_spec.h"
#include "common/options.h"
#include "common/shard_store.h"

namespace geops::storage::testing {

// A small all-zero model for the counter workload: 17 chunks of up to 256
// floats; shard 1 of 2 owns 8 of them.
inline ModelSpec CounterModel() {
  std::vector<TableSpec> tables = {{"w", 64, 64, InitKind::kZeros, 0.0f}, {"b", 1, 64, InitKind::kZeros, 0.0f}};
  return std::move(ModelSpec::Create(std::move(tables), 1024, 3)).value();
}

// A 1M-float model (4 MiB) whose commits are large enough that a kill often
// lands in the middle of one.
inline ModelSpec BigModel() {
  std::vector<TableSpec> tables = {{"big", 4096, 256, InitKind::kZeros, 0.0f}};
  return std::move(ModelSpec::Create(std::move(tables), 16 * 1024, 3)).value();
}

inline ShardOptions CrashShardOptions(int num_workers) {
  ShardOptions o;
  o.shard_id = 1;
  o.num_shards = 2;
  o.num_workers = num_workers;
  o.worker_lease_ms = 60000;
  o.max_commit_wait_ms = 30000;
  return o;
}

inline StorageOptions CrashStorageOptions(const std::string& dir, Durability durability) {
  StorageOptions o;
  o.data_dir = dir;
  o.durability = durability;
  o.write_buffer_mib = 4;  // small: flushes to table files happen during the test too
  o.commit_piece_bytes = 256 << 10;  // a commit of the big model is eight pieces: kills land between them
  return o;
}

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_CRASH_MODEL_H_
