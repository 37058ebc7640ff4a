// Plain types exchanged between a worker and a shard, independent of the
// transport: the core, the in-process test transport and the Thrift adapter
// all use these. Values only; no thread-safety concerns.
#ifndef GEOPS_COMMON_PS_TYPES_H_
#define GEOPS_COMMON_PS_TYPES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/histogram.h"
#include "common/ids.h"
#include "common/status.h"

namespace geops {

// Who registers as a worker: one process's run of it. A shard refuses a
// worker id that another live session holds (AlreadyExists naming the
// holder), so two processes can never both act as one worker. id 0 is
// anonymous (in-process callers and old clients): never checked.
inline constexpr size_t kMaxHolderBytes = 256;  // WorkerSession::holder on the wire

struct WorkerSession {
  uint64_t id = 0;       // random per process run; 0: anonymous
  std::string holder;    // for messages: "pid 123 on host h"
  bool takeover = false; // a supervisor that saw the previous holder die: take the id at once
};

struct RegisterReply {
  ShardId shard_id = 0;
  int num_shards = 1;
  Clock worker_clock = 0;       // the clock the shard holds for this worker
  Clock shard_clock = 0;        // min clock of the site's live workers
  int64_t lease_ms = 0;         // heartbeat within this or be dropped
  uint64_t model_fingerprint = 0;
};

// The answer to a worker that registered a client-defined model's schema.
struct SchemaReply {
  uint64_t model_fingerprint = 0;    // of the model the shard holds
  std::vector<ChunkKey> missing;     // the shard's chunks still without initial values
};

struct ReadReply {
  // Minimum clock of the live workers when the read was served: the values
  // include every update of every live worker for clocks < shard_clock.
  Clock shard_clock = 0;
};

// An incremental read's answer (Shard::ReadChanged): what changed in the
// chunks read since the reader's last incremental read of this shard, as
// runs of elements. The chunks are laid back to back in the order read,
// as a full read's values are.
struct ChangedValues {
  // To send as `since` with the next incremental read of this shard; 0:
  // the reader is not tracked, and the runs cover every chunk read.
  uint64_t read_id = 0;
  std::vector<uint32_t> runs;  // (start, length) pairs, ascending, disjoint
  std::vector<float> values;   // the runs' values, back to back
};

struct UpdateReply {
  bool applied = false;  // false: this (worker, clock) batch was already applied
  Clock shard_clock = 0;
  bool clocked = false;  // the same call advanced the worker's clock (UpdateThenClock)
};

struct WorkerState {
  WorkerId worker_id = 0;
  Clock clock = 0;
  bool live = true;
  bool finished = false;
  int64_t ms_since_heard = 0;
};

struct ShardStatus {
  ShardId shard_id = 0;
  int num_shards = 1;
  Clock shard_clock = 0;
  int64_t num_chunks = 0;
  int64_t num_elements = 0;
  int64_t update_batches_applied = 0;
  int64_t update_batches_duplicate = 0;
  int64_t update_bytes_applied = 0;
  int64_t reads_served = 0;
  int64_t read_bytes_served = 0;
  int64_t requests_rejected = 0;
  std::array<int64_t, kNumStatusCodes> rejected_by_code{};  // the same, by StatusCode
  double read_wait_seconds = 0;  // total time reads spent waiting for the clock
  HistogramSnapshot read_wait;    // per read: its wait for the SSP clock and the WAN gate
  // Persistence (all zero for a shard without a store).
  bool persistent = false;
  int64_t store_commits = 0;         // commits written by this process
  int64_t store_bytes_committed = 0; // chunk payload bytes in them
  double store_commit_seconds = 0;   // time spent writing them
  HistogramSnapshot store_commit;    // per commit: its time in ShardStore::Commit
  int64_t store_chunks_saved = 0;     // chunks changed while their commit was written (copied first)
  int64_t store_peak_saved_bytes = 0; // most bytes of such copies at once
  // Memory budget (all zero without one): the budget, resident memory at
  // the last sample and the most seen, updates refused while over it.
  int64_t memory_budget_bytes = 0;
  int64_t memory_resident_bytes = 0;
  int64_t memory_peak_resident_bytes = 0;
  int64_t memory_updates_refused = 0;
  bool memory_over_budget = false;
  std::vector<WorkerState> workers;
};

// What one shard holds of one table (Shard::Summarize): the values as they
// are now, not waiting for any clock.
struct TableSummary {
  TableId table = 0;
  int64_t elements = 0;
  double min = 0;        // over the finite values; 0 when there are none
  double max = 0;
  double sum = 0;        // of the finite values
  int64_t nonfinite = 0;  // NaN or +-Inf
};

struct ReplicaSummary {
  ShardId shard_id = 0;
  Clock shard_clock = 0;
  std::vector<TableSummary> tables;  // tables with chunks on the shard, by id
};

}  // namespace geops

#endif  // GEOPS_COMMON_PS_TYPES_H_
