// PsClient: a worker's access to the parameters of its site.
//
// It keeps a process-level cache of the whole model (one dense buffer per
// table), stamped with the site clock it was read at, and an op-log holding
// this clock's deltas (one dense buffer per table, coalescing every update
// of the clock). Access is batched: a refresh asks every shard once for all
// its chunks, a clock flush sends every shard one update batch with its
// dirty chunks; the shards are contacted in parallel.
//
// A refresh asks each shard only for what changed since its last reply
// (ShardConnection::ReadChanged, docs/wire_format.md "Incremental reads")
// and copies that over the cache. A shard that does not track this worker
// answers with every chunk, and one without the call with an error: either
// is read whole from then on, and so is every read that also fills a
// caller's copy.
//
// Stale synchronous parallel reads: at clock c with staleness s, Refresh()
// serves from the cache when its stamp is >= c - s, else it reads from the
// shards, which answer once the site clock reaches c - s. s = kAsync reads
// fresh values every clock without waiting. The worker sees its own updates
// (they are added to the cache when the clock is flushed).
//
// Calls that fail with Unavailable are retried with capped exponential
// back-off for the options' retry window (minutes by default: long enough
// for a supervisor to restart a shard), logging (and telling the wait
// callback) every few seconds while they wait. A read the shard held for a
// whole RPC deadline (DeadlineExceeded: the site clock or the WAN gate is
// waiting for a worker or peer site that is alive but behind) is asked again
// at once, within the same window, so a peer's slow restart does not kill
// the survivors. Aborted (the shard forgot the worker, e.g. it restarted)
// re-registers and retries. Update batches carry (worker, clock), so a retry
// is applied once. A background thread sends heartbeats on its own
// connections so a long computation does not cost the worker its lease.
//
// Thread-safety: one thread drives a PsClient; stats() may be called from any.
#ifndef GEOPS_WORKER_PS_CLIENT_H_
#define GEOPS_WORKER_PS_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/options.h"
#include "common/status.h"
#include "worker/shard_connection.h"

namespace geops::worker {

struct PsClientStats {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t refreshes = 0;          // reads that went to the shards
  int64_t cache_hits = 0;         // reads served from the cache
  int64_t retries = 0;
  int64_t max_staleness = 0;      // max over reads of (clock - cache stamp)
  double read_wait_seconds = 0;   // time spent in refreshes
  double flush_seconds = 0;       // time spent flushing clocks
};

class PsClient {
 public:
  // InvalidArgument for bad options or num_shards < 1. `factory` must outlive
  // the client.
  static Result<std::unique_ptr<PsClient>> Create(const ModelSpec& spec, int num_shards,
                                                  const WorkerClientOptions& options,
                                                  ShardConnectionFactory* factory);
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Connects to and registers with every shard, then starts heartbeats. The
  // worker resumes at the clock the shards hold for it. FailedPrecondition if
  // the shards disagree on that clock or on the model.
  //
  // A client-defined model (every table kProvided; datacenter/shard_host.h)
  // first registers its schema with every shard and sends the initial values
  // each still lacks: `initial_values[t]` points at table t's dense
  // row-major values, whose ValuesChecksum must be the table's
  // init_checksum (InvalidArgument otherwise, or for a missing table).
  // FailedPrecondition naming the table when the site already trains another
  // model. The cache starts as those values. Other models take no values.
  Status Start(std::span<const float* const> initial_values = {});

  const ModelSpec& spec() const { return spec_; }
  geops::Clock clock() const { return clock_; }
  // Site clock the cache was read at: it includes every update of clocks < stamp.
  geops::Clock cache_stamp() const { return cache_stamp_; }

  // Makes the cache fresh enough for the current clock (see above).
  // Blocks for at most rpc_timeout_ms per attempt.
  // `also_into` (empty, or one dense row-major buffer per table): when the
  // call reads from the shards, every chunk read is also written there, from
  // the reply as it is scattered into the cache (a caller that keeps its own
  // copy of the values, e.g. a framework's parameter tensors, saves a second
  // pass over the whole model). Nothing is written there on a cache hit.
  Status Refresh(std::span<float* const> also_into = {});
  // Reads from the shards at clock `clock` with staleness `staleness`,
  // whatever the cache holds (used for the final, exact read).
  Status ReadAt(geops::Clock clock, int64_t staleness, std::span<float* const> also_into = {});

  // Moves whenever the cache's contents may have changed: by one at every
  // read from the shards (ReadAt, or a Refresh that reads, failed or not) and
  // by one at every successful Clock() (which adds this clock's deltas). A
  // device copy of the cache (worker/cuda) re-uploads only when it moves.
  uint64_t cache_version() const { return cache_version_; }

  // Whether a read with `also_into` writes both copies with streaming stores
  // (a model of kStreamModelBytes or more); a caller that fills buffers of
  // its own for this model may follow the same rule (and fence its stores).
  bool streams_copies() const { return stream_both_; }

  // The cached table, dense row-major. Valid until the next Refresh/ReadAt.
  const float* table(TableId id) const { return cache_[id].data(); }
  std::span<const float* const> tables() const { return cache_ptrs_; }

  // This clock's delta buffer for a table (dense, zeroed at every clock).
  // Writing into it does not by itself ship anything: call MarkDirty.
  float* delta(TableId id) { return oplog_[id].data(); }
  std::span<float* const> deltas() { return oplog_ptrs_; }
  // Marks every chunk of `id` (or of all tables) to be shipped at Clock().
  void MarkDirty(TableId id);
  void MarkAllDirty();
  // Adds `values` into the op-log of `id` at element `offset` and marks the
  // touched chunks dirty. InvalidArgument if the range leaves the table.
  Status Update(TableId id, int64_t offset, std::span<const float> values);

  // Ends the clock: ships one batch per shard with its dirty chunks, then
  // advances the clock on every shard (`finished`: this was the last one).
  // The deltas are also added to the cache. On error the clock is unchanged
  // and Clock() may be called again: batches already applied are not re-applied.
  Status Clock(bool finished = false);

  PsClientStats stats() const;

  // Called (on the calling thread) about every kWaitNoteMs while a call
  // keeps retrying an unavailable shard: the shard, how long it has waited,
  // the last refusal. Set before Start.
  using WaitCallback = std::function<void(ShardId shard, int64_t waited_ms, const Status& last)>;
  void set_wait_callback(WaitCallback callback) { wait_callback_ = std::move(callback); }
  static constexpr int64_t kWaitNoteMs = 5000;

  // Largest read or update request (values), unless one chunk is larger;
  // shards plan their memory for it (site/shard_memory.h).
  static constexpr int64_t kMaxRequestBytes = int64_t{8} << 20;
  // From this model size on, a read that also fills a caller's copy writes
  // both copies with streaming stores (see ReadShard): a model this large
  // does not stay in the CPU's caches between a pull and the next push.
  static constexpr int64_t kStreamModelBytes = int64_t{8} << 20;

 private:
  PsClient(const ModelSpec& spec, int num_shards, const WorkerClientOptions& options,
           ShardConnectionFactory* factory);

  // Runs `call` against shard `s` with retries (see class comment).
  template <typename Fn>
  Status CallShard(ShardId s, Fn&& call);
  Status Register(ShardId s, RegisterReply* reply);
  // Registers the schema with shard `s` and sends the initial values it lacks.
  Status SendSchema(ShardId s, std::span<const float* const> initial_values);
  // Bytes of initial values per InitValues call.
  static constexpr int64_t kInitBatchBytes = int64_t{16} << 20;
  // Runs fn(shard) for every shard in parallel and returns the first error.
  template <typename Fn>
  Status ForEachShard(Fn&& fn);
  // Copies `changed` (shard s's reply to ReadChanged of `group`) into the
  // cache; Internal, with nothing copied, when its runs do not fit.
  Status ScatterChanged(ShardId s, std::span<const ChunkKey> group, const ChangedValues& changed);
  Status ReadShard(ShardId s, geops::Clock clock, int64_t staleness, geops::Clock* stamp,
                   std::span<float* const> also_into);
  Status FlushShard(ShardId s, bool finished);
  void HeartbeatLoop();

  const ModelSpec spec_;
  const int num_shards_;
  const WorkerClientOptions options_;
  ShardConnectionFactory* const factory_;
  const WorkerSession session_;  // this process's run, named to the shards at registration
  // Set when a heartbeat learns another process holds this worker now; every
  // call then fails with it (FailedPrecondition), so a replaced process
  // cannot go on as a second copy of the worker.
  std::mutex replaced_mu_;
  Status replaced_;  // GUARDED_BY(replaced_mu_)

  geops::Clock clock_ = 0;
  geops::Clock cache_stamp_ = -1;  // nothing cached yet
  uint64_t cache_version_ = 0;  // see cache_version()
  std::vector<std::vector<float>> cache_;
  std::vector<const float*> cache_ptrs_;
  std::vector<std::vector<float>> oplog_;
  std::vector<float*> oplog_ptrs_;
  // A read with a caller's copy writes both copies with streaming stores:
  // true for a model larger than the CPU's caches (kStreamModelBytes).
  bool stream_both_ = false;
  std::vector<uint8_t> dirty_;  // per global chunk index (table-major)
  std::vector<int64_t> first_chunk_;  // global index of each table's chunk 0

  // Per shard: its chunks, and buffers for reading and sending them.
  std::vector<std::vector<ChunkKey>> shard_keys_;
  // Per shard: fixed groups of shard_keys_, [begin, end), of at most
  // kMaxRequestBytes: one read request each, and update part g holds the
  // dirty chunks of group g.
  std::vector<std::vector<std::pair<size_t, size_t>>> read_groups_;
  std::vector<std::vector<float>> read_buf_;
  std::vector<std::vector<float>> send_buf_;
  // Incremental reads (ShardConnection::ReadChanged), per shard: whether
  // the connection has them, and the read_id of the last reply scattered
  // into the cache (0: none, or the cache may not hold the shard's values
  // plus this worker's own updates since: the next read gets everything).
  std::vector<uint8_t> incremental_;
  std::vector<uint64_t> since_;
  std::vector<ChangedValues> changed_;  // per shard: its last reply (shards are read in parallel)
  std::vector<std::unique_ptr<ShardConnection>> conns_;

  mutable std::mutex stats_mu_;
  PsClientStats stats_;  // GUARDED_BY(stats_mu_), except bytes (from connections)
  std::atomic<int64_t> retries_{0};
  WaitCallback wait_callback_;

  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;  // GUARDED_BY(hb_mu_)
  std::vector<std::unique_ptr<ShardConnection>> hb_conns_;  // heartbeat thread only
  std::atomic<int64_t> hb_bytes_sent_{0};
  std::atomic<int64_t> hb_bytes_received_{0};
  std::thread hb_thread_;
};

}  // namespace geops::worker

#endif  // GEOPS_WORKER_PS_CLIENT_H_
