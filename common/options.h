// Options structs, one per scope. Plain values with in-class defaults; each
// is checked once, by Validate(), when the object that uses it is built.
// Flags, environment and TOML are read only in cli/.
#ifndef GEOPS_COMMON_OPTIONS_H_
#define GEOPS_COMMON_OPTIONS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/status.h"
#include "common/time_source.h"

namespace geops {

// Staleness value meaning "no bound" (fully asynchronous).
inline constexpr int64_t kAsync = -1;

// Largest payload (bytes) of one read reply or update batch. Larger requests
// are refused with ResourceExhausted before anything is applied.
inline constexpr int64_t kDefaultMaxBatchBytes = int64_t{512} << 20;

struct ShardOptions {
  ShardId shard_id = 0;               // this shard's index, 0 <= shard_id < num_shards
  int num_shards = 1;                 // shards in the site
  int num_workers = 1;                // workers of the site that hold the clock (ids 0..n-1)
  int64_t worker_lease_ms = 10000;    // a worker silent this long leaves the clock minimum
  int64_t max_read_wait_ms = 120000;  // upper bound on any server-side read wait, ms
  int64_t max_batch_bytes = kDefaultMaxBatchBytes;  // bytes per read/update payload
  std::string auth_token;             // if non-empty, workers must present it to register
  // With a store whose durability is sync or async: longest an Update or
  // AdvanceClock waits for its commit before answering Unavailable, ms.
  int64_t max_commit_wait_ms = 10000;
  // Where leases and read waits read the time; null: the steady clock (a
  // ManualTime in tests). Must outlive the shard.
  const TimeSource* time = nullptr;
  // Incremental reads (Shard::ReadChanged) are tracked for workers
  // 0..change_readers-1, at one bit per element each; -1: for worker 0 when
  // the site has one worker (whose reads then carry only what its peers'
  // updates changed), else for none (other workers' dense updates change
  // every chunk at every clock, so there is nothing to save).
  int change_readers = -1;
  // The number of workers whose reads are tracked.
  int ChangeReaders() const {
    return change_readers >= 0 ? std::min(change_readers, num_workers) : (num_workers == 1 ? 1 : 0);
  }

  Status Validate() const;
};

// How far a shard's commits go before the call that caused them is answered.
//   kSync   each commit is fsynced before the updates it holds are
//           acknowledged: no acknowledged update is lost, even when the
//           machine loses power.
//   kAsync  acknowledged once written to the store's log, without fsync: a
//           killed process loses nothing acknowledged; a machine crash loses
//           what the OS had not yet written back (seconds).
//   kOff    acknowledged at once; commits run in the background at every
//           clock tick, without fsync: a killed process loses what was
//           acknowledged since the last finished commit (about one tick).
enum class Durability : int32_t { kSync = 0, kAsync = 1, kOff = 2 };

// "sync", "async", "off".
std::string_view DurabilityName(Durability durability);
// Parses the names above; InvalidArgument naming the accepted values.
Result<Durability> ParseDurability(std::string_view text);

// Where and how a shard persists its state (see common/shard_store.h).
struct StorageOptions {
  std::string data_dir;                    // the shard's store directory; empty: in memory only
  Durability durability = Durability::kSync;
  // Memtable size per column family, MiB; 0 (default): a sixteenth of the
  // shard's chunk payload, within 8..32 MiB. The log (replayed at restart) is kept
  // under twice this.
  int64_t write_buffer_mib = 0;
  int max_background_jobs = 2;             // flush and compaction threads of the store
  // A commit reaches RocksDB in write batches of at most this many bytes
  // (a larger chunk is a batch of its own), so that neither a batch nor a
  // memtable holds a whole model; the last batch makes the commit live.
  int64_t commit_piece_bytes = int64_t{8} << 20;

  Status Validate() const;
};

struct WorkerClientOptions {
  WorkerId worker_id = 0;           // 0 <= worker_id < ShardOptions::num_workers
  int64_t staleness = 0;            // SSP bound s in clocks; 0 = BSP, kAsync = unbounded
  int64_t rpc_timeout_ms = 30000;   // deadline of one RPC, server-side waits included
  // A shard that answers Unavailable (down, restarting, not ready) is tried
  // again with capped exponential back-off for retry_window_ms (long enough
  // for a supervisor to restart it) before the call gives up. A read the
  // shard held past rpc_timeout_ms (DeadlineExceeded: waiting for a live
  // worker or peer site that is behind) is asked again within the same window.
  int64_t retry_window_ms = 300000;
  int max_attempts = 0;             // also give up after this many tries; 0 = only the window
  int64_t retry_backoff_ms = 20;    // first back-off, doubled per retry
  int64_t max_backoff_ms = 500;     // cap of the back-off: a restarted shard is used within it
  int64_t heartbeat_ms = 1000;      // heartbeat period while idle
  std::string auth_token;           // presented at registration
  // A worker id that another live process holds is refused by the shards
  // (AlreadyExists naming it). Registration asks again for this long, so
  // that a worker restarted by hand right after a crash gets its id once
  // the dead predecessor's lease (ShardOptions::worker_lease_ms) ends; a
  // second live process with the same id fails after it.
  int64_t held_id_wait_ms = 20000;
  // Set by a supervisor that saw this worker's previous process exit (geops
  // launch: GEOPS_TAKEOVER=1): the id is taken at once, without waiting out
  // the dead process's lease.
  bool takeover = false;
  // Where the retry window and back-off read the time and wait; null: the
  // steady clock (a ManualTime in tests). Heartbeats keep the steady clock.
  // Must outlive the client.
  const TimeSource* time = nullptr;

  Status Validate() const;
};

}  // namespace geops

#endif  // GEOPS_COMMON_OPTIONS_H_
