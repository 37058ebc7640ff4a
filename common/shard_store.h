// ShardStore: where one shard's state outlives its process. The seam between
// datacenter/ (which decides what to persist and when) and storage/ (which
// knows how: RocksDB), so neither sees the other's types.
//
// A store holds, for one shard of one site:
//   * the values of every chunk the shard owns (written in full once, when
//     the store is first initialised, then whenever a chunk changes);
//   * per worker: its clock, the clock of its last applied update batch and
//     whether it finished -- the marks that make a retried batch a duplicate;
//   * per origin site: the last applied WAN sequence number (for the WAN
//     layer; empty until it uses it);
//   * per origin site: its ledger, the sum of every WAN delta applied from
//     that site, per chunk (in double precision), so that a site that lost
//     its store can have its contributions taken back out of the replica;
//   * the shard clock when the last commit was taken (informational);
//   * the fingerprint of the configuration that wrote it (model, shard id,
//     shard count, worker count), so a store is never loaded into a shard it
//     does not belong to.
// Commit() writes a set of chunk values and meta records all-or-nothing: after
// a crash a load sees either every record of a commit or none. Because the
// worker marks travel in the same commit as the chunk values they cover, a
// batch is applied exactly once across crashes. How far a commit goes before
// Commit() returns depends on durability() (see Durability in options.h).
//
// The values here (ChunkBatch, ShardCommit, ShardState, StoreFingerprint,
// ShardStoreSpec) are plain data; thread-compatible. A ShardStore's methods
// may be called from any thread but not concurrently with each other unless
// an implementation says otherwise; the shard calls Load() once, before it
// serves, and then Commit() from one committer thread at a time.
#ifndef GEOPS_COMMON_SHARD_STORE_H_
#define GEOPS_COMMON_SHARD_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/options.h"
#include "common/status.h"

namespace geops {

// Identifies the configuration a store belongs to. The parts are kept apart
// so that a mismatch can say which one differs.
struct StoreFingerprint {
  uint64_t model = 0;         // ModelSpec::Fingerprint()
  std::string model_summary;  // readable: chunk size, seed, tables; informative, not compared
  ShardId shard_id = 0;
  int num_shards = 1;
  int num_workers = 1;

  static StoreFingerprint Of(const ModelSpec& spec, const ShardOptions& options);
};

// OK when model, shard_id, num_shards and num_workers all agree. Otherwise
// FailedPrecondition "<where> belongs to a different configuration: <part>
// differs (stored X, this process Y); ..." naming every part that differs.
Status CheckFingerprint(const StoreFingerprint& stored, const StoreFingerprint& expected,
                        std::string_view where);

// One chunk a shard owns and its size in floats.
struct ChunkExtent {
  ChunkKey key;
  int64_t elements = 0;
};

// What a shard expects its store to hold: its fingerprint and the chunks it
// owns, in key order.
struct ShardStoreSpec {
  StoreFingerprint fingerprint;
  std::vector<ChunkExtent> chunks;

  static ShardStoreSpec Of(const ModelSpec& spec, const ShardOptions& options);
};

// Chunk values back to back, with their keys. Reusable: Clear() keeps the
// memory, so a committer that refills one batch per commit allocates only
// while the batch grows.
class ChunkBatch {
 public:
  ChunkBatch() = default;
  ChunkBatch(ChunkBatch&&) noexcept = default;
  ChunkBatch& operator=(ChunkBatch&&) noexcept = default;

  void Clear();
  // Makes room for `elements` floats of chunk `key` at the end and returns
  // where to write them (uninitialised). Invalidates earlier spans.
  float* Append(ChunkKey key, int64_t elements);
  // Makes room for `elements` floats in all, so that appending up to that
  // many allocates once (no doubling past what the commit needs).
  void Reserve(int64_t elements);
  void Add(ChunkKey key, std::span<const float> values);

  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  ChunkKey key(size_t i) const { return keys_[i]; }
  std::span<const float> values(size_t i) const {
    return {data_.get() + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
  }
  int64_t total_elements() const { return used_; }

 private:
  std::vector<ChunkKey> keys_;
  std::vector<int64_t> offsets_ = {0};  // size() + 1 entries
  std::unique_ptr<float[]> data_;
  int64_t used_ = 0;
  int64_t capacity_ = 0;
};

// Chunk values that a commit writes but does not hold: the store asks for
// each when it writes it. A shard's copy-on-write capture is one: it marks
// the chunks a commit holds and keeps their values as of the capture until
// the store has read them, so a commit never needs a second copy of the
// model (datacenter/captured_chunks.h).
class DeferredChunks {
 public:
  virtual ~DeferredChunks() = default;
  virtual size_t size() const = 0;
  virtual ChunkKey key(size_t i) const = 0;
  virtual int64_t elements(size_t i) const = 0;
  // Copies chunk i's values as of the capture into `out` (elements(i)
  // floats). Each i at most once, from the thread that commits.
  virtual void Read(size_t i, float* out) = 0;
};

struct WorkerRecord {
  WorkerId worker = 0;
  Clock clock = 0;               // the clock the shard holds for the worker
  Clock last_update_clock = -1;  // clock of its last applied update batch; -1: none
  bool finished = false;
  // A clock's update may come in parts (a worker splits a large one into
  // bounded requests, part 0, 1, ...): the last part applied at
  // last_update_clock. kWholeClock: the clock's update is complete (a
  // record written before parts existed).
  int32_t last_update_part = -1;
  static constexpr int32_t kWholeClock = 0x7fffffff;
};

struct OriginRecord {
  SiteId origin = 0;
  uint64_t seq = 0;  // last applied WAN batch from that site
};

// One record of the WAN layer's outbound state. The store keeps the bytes
// as given, ordered by key, and does not interpret them; their layout
// belongs to wan/ (docs/on_disk_format.md).
struct OutboundRecord {
  std::string key;  // non-empty
  std::string value;
};

// Outbound records whose values a commit does not hold: the store asks for
// each when it writes it (the WAN layer's copy-on-write capture of its
// accumulator and backlog rows, wan/replication/captured_rows.h).
class DeferredRecords {
 public:
  virtual ~DeferredRecords() = default;
  virtual size_t size() const = 0;
  virtual const std::string& key(size_t i) const = 0;  // non-empty, distinct from the commit's other records
  // Sets *value to record i's value as of the capture and returns true, or
  // returns false when the record is to be deleted instead. Each i at most
  // once, from the thread that commits.
  virtual bool Read(size_t i, std::string* value) = 0;
};

// One applied WAN delta to one chunk, added into the ledger of its origin:
// ledger[origin][key][indices[i]] += values[i].
struct LedgerAdd {
  SiteId origin = 0;
  ChunkKey key;
  uint32_t num_elements = 0;       // floats in the whole chunk
  std::vector<uint32_t> indices;   // strictly increasing, each < num_elements
  std::vector<float> values;       // finite; same length as indices
};

// One chunk of an origin's ledger: num_elements sums.
struct LedgerRow {
  ChunkKey key;
  std::vector<double> values;
};

// A WAN batch the shard did not add to its replica because a sum would not
// be finite (RemoteApplier quarantines it whole), kept in the store for an
// operator to look at (`geops inspect`). The store never reads it back.
struct QuarantineRecord {
  SiteId origin = 0;
  uint64_t seq = 0;
  int64_t unix_micros = 0;       // when it was quarantined; with (origin, seq), the record's key
  std::string reason;            // where and why, as logged
  std::vector<LedgerAdd> chunks; // the batch's deltas as received
};

// One atomic unit of persistence: chunk values that changed and the meta
// records that changed with them.
struct ShardCommit {
  ChunkBatch chunks;                           // chunk values the commit holds
  DeferredChunks* deferred_chunks = nullptr;   // and those read as written (not owned; may be null)
  std::vector<WorkerRecord> workers;
  std::vector<OriginRecord> origins;
  std::vector<OutboundRecord> outbound_puts;    // written (replacing a record of that key)
  std::vector<std::string> outbound_deletes;    // removed; applied before the puts
  DeferredRecords* deferred_outbound = nullptr; // puts (or deletes) read as written (not owned; may be null)
  std::vector<SiteId> ledger_clears;            // origins whose whole ledger is removed; before the adds
  std::vector<LedgerAdd> ledger_adds;           // added to the ledgers, in order
  std::vector<QuarantineRecord> quarantined;    // kept as they are
  Clock shard_clock = 0;

  // Every chunk of the commit: those of `chunks`, then the deferred ones.
  size_t num_chunks() const { return chunks.size() + (deferred_chunks != nullptr ? deferred_chunks->size() : 0); }
  ChunkKey chunk_key(size_t i) const {
    return i < chunks.size() ? chunks.key(i) : deferred_chunks->key(i - chunks.size());
  }
  int64_t chunk_elements() const;
  // Calls fn(key, values) for every chunk, in num_chunks() order, until one
  // returns an error (returned). A deferred chunk is read into one scratch
  // buffer, valid during its call only. Reads the deferred chunks: once per
  // commit.
  Status ForEachChunk(const std::function<Status(ChunkKey, std::span<const float>)>& fn) const;

  // Calls fn(key, value) for every outbound put, then for every deferred
  // record: value is nullptr for a deferred record that turned out to be a
  // delete. Stops at the first error (returned). Reads the deferred records:
  // once per commit.
  Status ForEachOutbound(const std::function<Status(const std::string&, const std::string*)>& fn) const;

  bool empty() const {
    return num_chunks() == 0 && workers.empty() && origins.empty() && outbound_puts.empty() &&
           (deferred_outbound == nullptr || deferred_outbound->size() == 0) &&
           outbound_deletes.empty() && ledger_clears.empty() && ledger_adds.empty() && quarantined.empty();
  }
  void Clear();
};

// Everything a store holds.
struct ShardState {
  StoreFingerprint fingerprint;
  int32_t format_version = 0;  // of the on-disk layout; 0 for stores without one
  uint64_t commits = 0;        // commits written so far; 0: never initialised
  Clock shard_clock = 0;
  ChunkBatch chunks;                  // key order
  std::vector<WorkerRecord> workers;  // worker order
  std::vector<OriginRecord> origins;  // origin order
  std::vector<OutboundRecord> outbound;  // key order
};

// Checks a loaded state against what the shard expects: FailedPrecondition
// (from CheckFingerprint) for another configuration; DataLoss naming the
// first problem for a chunk the shard does not own, a chunk of the wrong
// size or repeated, a missing chunk in an initialised store (commits > 0),
// or a worker record out of range, repeated or inconsistent. `where` names
// the store in messages.
Status ValidateShardState(const ShardState& state, const ShardStoreSpec& spec, std::string_view where);

class ShardStore {
 public:
  virtual ~ShardStore() = default;

  // How far Commit() goes before it returns (see Durability).
  virtual Durability durability() const = 0;

  // Names the store in messages, e.g. "shard store /var/geops/us-east-1-shard-0".
  virtual std::string name() const = 0;

  // The persisted state as of the last successful Commit (a fresh store:
  // its fingerprint, commits == 0, nothing else). DataLoss when stored
  // records cannot be decoded; Unavailable for I/O errors.
  virtual Result<ShardState> Load() = 0;

  // Writes every record of `commit` atomically and counts one commit. With
  // kSync it returns after the commit is on stable storage; otherwise after
  // it is written to the store's log. On error a later Load may see all of
  // the commit or none of it, never a part, and the store may refuse further
  // commits: Unavailable (I/O), ResourceExhausted (disk full), DataLoss
  // (corruption).
  virtual Status Commit(const ShardCommit& commit) = 0;

  // The ledger of `origin` as of the last successful Commit, in key order
  // (empty when nothing from that site was recorded or it was cleared).
  // May be called while no Commit runs. DataLoss for a row that does not
  // decode; Unavailable for I/O errors.
  virtual Result<std::vector<LedgerRow>> ReadLedger(SiteId origin) = 0;
};

}  // namespace geops

#endif  // GEOPS_COMMON_SHARD_STORE_H_
