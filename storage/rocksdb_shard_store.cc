// RocksDbShardStore, the class behind OpenRocksDbShardStore, and the steps of
// opening: classify the directory, create a fresh store in a sibling
// directory and rename it into place, probe read-only, then open read-write.
//
// Lock discipline: mu_ serialises Commit(), Load() and ReadLedger() and
// guards commits_ and loaded_; RocksDB is called under it (one commit at a
// time is what the shard does anyway, and it keeps the commit counter in step
// with the log).
#include "storage/rocksdb_shard_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <map>
#include <optional>
#include <unordered_map>

#include "common/file_io.h"
#include "storage/rocksdb_db.h"
#include "storage/quarantine_format.h"
#include "storage/store_format.h"

namespace geops::storage {
namespace fs = std::filesystem;
namespace {

// Bounds of the automatic memtable size (StorageOptions::write_buffer_mib 0).
constexpr int64_t kMinAutoBufferMib = 8;
constexpr int64_t kMaxAutoBufferMib = 32;

Status WriteFileSynced(const fs::path& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create " + path.string());
  Status s = WriteAllSynced(fd, content, path);
  ::close(fd);
  return s;
}

// The meta records of a store that has never committed.
Status WriteInitialMeta(const RocksDb& db, const StoreFingerprint& fp, const std::string& where) {
  rocksdb::WriteBatch batch;
  auto put = [&](std::string_view key, const std::string& value) {
    return batch.Put(db.meta(), rocksdb::Slice(key.data(), key.size()), value);
  };
  rocksdb::Status s = put(format::kFormatVersionKey, format::EncodeI32(format::kFormatVersion));
  if (s.ok()) s = put(format::kModelKey, format::EncodeU64(fp.model));
  if (s.ok()) s = put(format::kModelSummaryKey, fp.model_summary);
  if (s.ok()) s = put(format::kShardIdKey, format::EncodeI32(fp.shard_id));
  if (s.ok()) s = put(format::kNumShardsKey, format::EncodeI32(fp.num_shards));
  if (s.ok()) s = put(format::kNumWorkersKey, format::EncodeI32(fp.num_workers));
  if (s.ok()) s = put(format::kCommitsKey, format::EncodeU64(0));
  if (s.ok()) s = put(format::kShardClockKey, format::EncodeI64(0));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (s.ok()) s = db.db()->Write(wo, &batch);
  return FromRocks(s, "creating " + where);
}

// Builds a complete, empty store next to `dir` and renames it into place
// (rename(2) replaces an empty directory), so that `dir` either holds a
// whole store or what it held before.
Status CreateStore(const fs::path& dir, const StorageOptions& options, const StoreFingerprint& fp) {
  const std::string where = "shard store " + dir.string();
  fs::path parent = dir.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return UnavailableError("cannot create " + parent.string() + ": " + ec.message());
  const fs::path tmp = parent / ("." + dir.filename().string() + ".creating-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);  // left by an earlier crash of a process with our pid
  if (!fs::create_directory(tmp, ec) || ec) {
    return UnavailableError("cannot create " + tmp.string() + ": " + ec.message());
  }
  Status s = [&]() -> Status {
    GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<RocksDb> db, RocksDb::Create(tmp.string(), options));
    GEOPS_RETURN_IF_ERROR(WriteInitialMeta(*db, fp, where));
    GEOPS_RETURN_IF_ERROR(db->Close());
    GEOPS_RETURN_IF_ERROR(WriteFileSynced(tmp / format::kMarkerFile, format::kMarkerText));
    GEOPS_RETURN_IF_ERROR(SyncDirectory(tmp));
    if (::rename(tmp.c_str(), dir.c_str()) != 0) {
      return ErrnoError("cannot move the new store into " + dir.string() +
                        " (did another process create it at the same time?)");
    }
    return SyncDirectory(parent);
  }();
  if (!s.ok()) fs::remove_all(tmp, ec);
  return s;
}

class RocksDbShardStore final : public ShardStore {
 public:
  // `chunks`: the chunks the shard owns, in key order (ShardStoreSpec).
  // `slots`: which slot of each record is live, as read with `loaded`.
  RocksDbShardStore(std::string dir, const StorageOptions& options, std::vector<ChunkExtent> chunks,
                    std::unique_ptr<RocksDb> db, ShardState loaded, const StoreSlots& slots)
      : dir_(std::move(dir)), durability_(options.durability),
        piece_bytes_(static_cast<size_t>(options.commit_piece_bytes)), chunks_(std::move(chunks)), db_(std::move(db)),
        commits_(loaded.commits), loaded_(std::move(loaded)), chunk_live_(chunks_.size(), -1),
        outbox_live_(slots.outbox.begin(), slots.outbox.end()) {
    for (const auto& [key, slot] : slots.chunks) {
      const size_t index = ChunkIndex(key);
      if (index < chunks_.size()) chunk_live_[index] = static_cast<int8_t>(slot);
    }
  }

  ~RocksDbShardStore() override {
    std::lock_guard<std::mutex> lock(mu_);
    db_->Close().IgnoreError();  // every commit was already written; nothing to lose here
  }

  Durability durability() const override { return durability_; }
  std::string name() const override { return "shard store " + dir_; }

  Result<ShardState> Load() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (loaded_.has_value()) {  // read and checked while opening, nothing committed since
      ShardState state = std::move(*loaded_);
      loaded_.reset();
      return state;
    }
    ShardState state;
    GEOPS_RETURN_IF_ERROR(db_->ReadState(&state));
    return state;
  }

  // Writes `commit` as commit number N = commits_ + 1. Chunk values and
  // outbox records go to the slot that is not live, stamped N, in pieces of
  // at most StorageOptions::commit_piece_bytes written without a sync; the last piece holds every
  // small record and the new commit count, and is written as durability
  // says. Until that last piece is in, a load still reads the slots of
  // commit N - 1 and earlier (the new ones carry N, above the count), so a
  // commit is all-or-nothing while neither RocksDB's write batch nor its
  // memtable ever holds more than a piece of it.
  Status Commit(const ShardCommit& commit) override {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_.reset();
    const uint64_t number = commits_ + 1;
    const std::string what = name() + ": commit " + std::to_string(number);
    GEOPS_RETURN_IF_ERROR(CheckLedgerWrites(commit).WithContext(what));
    for (const OutboundRecord& r : commit.outbound_puts) {
      if (r.key.empty()) return InvalidArgumentError(what + " has an outbox record with an empty key");
    }
    if (commit.deferred_outbound != nullptr) {
      for (size_t i = 0; i < commit.deferred_outbound->size(); ++i) {
        if (commit.deferred_outbound->key(i).empty()) {
          return InvalidArgumentError(what + " has an outbox record with an empty key");
        }
      }
    }
    for (const QuarantineRecord& r : commit.quarantined) {
      if (r.origin < 0) {
        return InvalidArgumentError(what + " quarantines a batch of the negative origin " + std::to_string(r.origin));
      }
    }
    Pieces pieces(db_->db(), piece_bytes_, what);
    // Chunk values, each into the slot that is not live.
    std::vector<std::pair<size_t, int>> chunk_slots;  // (index in chunks_, slot written)
    chunk_slots.reserve(commit.num_chunks());
    GEOPS_RETURN_IF_ERROR(commit.ForEachChunk([&](ChunkKey chunk, std::span<const float> values) -> Status {
      const size_t index = ChunkIndex(chunk);
      const int slot = index < chunks_.size() && chunk_live_[index] == 0 ? 1 : 0;
      const std::string key = format::ChunkSlotKey(chunk, slot);
      const format::ChunkHeader header = format::EncodeChunkHeader(values, number);
      const rocksdb::Slice key_slice(key);
      const rocksdb::Slice value_parts[2] = {
          rocksdb::Slice(header.data(), header.size()),
          rocksdb::Slice(reinterpret_cast<const char*>(values.data()), values.size_bytes())};
      GEOPS_RETURN_IF_ERROR(pieces.Add([&](rocksdb::WriteBatch* b) {
        return b->Put(db_->chunks(), rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
      }));
      if (index < chunks_.size()) chunk_slots.emplace_back(index, slot);
      return Status::Ok();
    }));
    // Outbox records: puts into the slot that is not live; a delete removes
    // every form of its key (a put of the same key in this commit wins).
    std::map<std::string, int> outbox_slots;   // record key -> slot written
    std::vector<std::string> deferred_deletes;  // deferred records that turned out empty
    GEOPS_RETURN_IF_ERROR(commit.ForEachOutbound([&](const std::string& record, const std::string* value) -> Status {
      if (record.empty()) return InvalidArgumentError(what + " has an outbox record with an empty key");
      if (value == nullptr) {
        deferred_deletes.push_back(record);
        return Status::Ok();
      }
      const auto live = outbox_live_.find(record);
      const int slot = live != outbox_live_.end() && live->second == 0 ? 1 : 0;
      const std::string key = format::OutboxSlotKey(record, slot);
      const std::string header = format::EncodeOutboxSlotValue(number, {});
      const rocksdb::Slice key_slice(key);
      const rocksdb::Slice value_parts[2] = {rocksdb::Slice(header), ToSlice(*value)};
      GEOPS_RETURN_IF_ERROR(pieces.Add([&](rocksdb::WriteBatch* b) {
        return b->Put(db_->outbox(), rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
      }));
      outbox_slots[record] = slot;
      return Status::Ok();
    }));
    std::vector<std::string> deletes = commit.outbound_deletes;
    deletes.insert(deletes.end(), deferred_deletes.begin(), deferred_deletes.end());
    // The last piece: everything small, then the count that makes it all live.
    rocksdb::WriteBatch* last = pieces.last();
    rocksdb::Status s;
    for (const auto& [key, slot] : outbox_slots) {
      const auto live = outbox_live_.find(key);
      if (live != outbox_live_.end() && live->second < 0) s = last->Delete(db_->outbox(), ToSlice(key));
      if (!s.ok()) break;
    }
    for (size_t i = 0; i < deletes.size() && s.ok(); ++i) {
      const std::string& key = deletes[i];
      if (outbox_slots.contains(key)) continue;
      s = last->Delete(db_->outbox(), ToSlice(key));
      if (s.ok()) s = last->Delete(db_->outbox(), format::OutboxSlotKey(key, 0));
      if (s.ok()) s = last->Delete(db_->outbox(), format::OutboxSlotKey(key, 1));
    }
    for (size_t i = 0; i < commit.workers.size() && s.ok(); ++i) {
      s = last->Put(db_->meta(), format::WorkerKey(commit.workers[i].worker), format::EncodeWorker(commit.workers[i]));
    }
    for (size_t i = 0; i < commit.origins.size() && s.ok(); ++i) {
      s = last->Put(db_->meta(), format::OriginKey(commit.origins[i].origin), format::EncodeU64(commit.origins[i].seq));
    }
    if (s.ok()) s = AddLedgerWrites(commit, last);
    for (size_t i = 0; i < commit.quarantined.size() && s.ok(); ++i) {
      s = last->Put(db_->meta(), format::QuarantineKey(commit.quarantined[i]),
                    format::EncodeQuarantine(commit.quarantined[i]));
    }
    if (s.ok()) s = last->Put(db_->meta(), ToSlice(format::kShardClockKey), format::EncodeI64(commit.shard_clock));
    if (s.ok()) {
      s = last->Put(db_->meta(), ToSlice(format::kFormatVersionKey), format::EncodeI32(format::kFormatVersion));
    }
    if (s.ok()) s = last->Put(db_->meta(), ToSlice(format::kCommitsKey), format::EncodeU64(number));
    if (!s.ok()) return FromRocks(s, "building " + what);
    GEOPS_RETURN_IF_ERROR(pieces.WriteLast(durability_ == Durability::kSync));
    // Written: the new slots are the live ones.
    ++commits_;
    for (const auto& [index, slot] : chunk_slots) chunk_live_[index] = static_cast<int8_t>(slot);
    for (const std::string& key : deletes) {
      if (!outbox_slots.contains(key)) outbox_live_.erase(key);
    }
    for (const auto& [key, slot] : outbox_slots) outbox_live_[key] = slot;
    return Status::Ok();
  }

  Result<std::vector<LedgerRow>> ReadLedger(SiteId origin) override {
    if (origin < 0) {
      return InvalidArgumentError(name() + ": there is no ledger of the negative origin " + std::to_string(origin));
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<LedgerRow> rows;
    GEOPS_RETURN_IF_ERROR(db_->ReadLedger(origin, &rows));
    GEOPS_RETURN_IF_ERROR(CheckLedgerRows(origin, rows));
    return rows;
  }

 private:
  static rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

  // A commit's write batches: Add() puts a record into the current one
  // and writes it, unsynced, once it holds `piece_bytes`; WriteLast() writes
  // the last one (which holds the commit count) as asked.
  class Pieces {
   public:
    Pieces(rocksdb::DB* db, size_t piece_bytes, const std::string& what)
        : db_(db), piece_bytes_(piece_bytes), what_(what) {}
    template <typename PutFn>
    Status Add(PutFn put) {
      rocksdb::Status s = put(&batch_);
      if (!s.ok()) return FromRocks(s, "building " + what_);
      if (batch_.GetDataSize() < piece_bytes_) return Status::Ok();
      rocksdb::WriteOptions wo;
      wo.sync = false;
      s = db_->Write(wo, &batch_);
      if (!s.ok()) return FromRocks(s, "writing " + what_ + " (a piece before its last)");
      batch_.Clear();
      return Status::Ok();
    }
    rocksdb::WriteBatch* last() { return &batch_; }
    Status WriteLast(bool sync) {
      rocksdb::WriteOptions wo;
      wo.sync = sync;  // also syncs the log of the pieces before it
      return FromRocks(db_->Write(wo, &batch_), "writing " + what_);
    }

   private:
    rocksdb::DB* const db_;
    const size_t piece_bytes_;
    const std::string& what_;
    rocksdb::WriteBatch batch_;
  };

  // The position of `key` in chunks_, or chunks_.size() for a chunk this
  // shard does not own.
  size_t ChunkIndex(ChunkKey key) const {
    const auto it = std::lower_bound(chunks_.begin(), chunks_.end(), key,
                                     [](const ChunkExtent& c, ChunkKey k) { return c.key < k; });
    return it != chunks_.end() && it->key == key ? static_cast<size_t>(it - chunks_.begin()) : chunks_.size();
  }

  // The chunk's size in floats, or -1 for a chunk this shard does not own.
  int64_t ChunkElements(ChunkKey key) const {
    const auto it = std::lower_bound(chunks_.begin(), chunks_.end(), key,
                                     [](const ChunkExtent& c, ChunkKey k) { return c.key < k; });
    return it != chunks_.end() && it->key == key ? it->elements : -1;
  }

  // InvalidArgument for a clear of a negative origin, or a ledger add that
  // breaks LedgerAdd's contract or does not fit a chunk this shard owns: a
  // bad operand would make every later merge of its row fail.
  Status CheckLedgerWrites(const ShardCommit& commit) const {
    for (SiteId origin : commit.ledger_clears) {
      if (origin < 0) {
        return InvalidArgumentError("it clears the ledger of the negative origin " + std::to_string(origin));
      }
    }
    for (const LedgerAdd& add : commit.ledger_adds) {
      GEOPS_RETURN_IF_ERROR(format::CheckLedgerAdd(add));
      const int64_t elements = ChunkElements(add.key);
      if (elements < 0) {
        return InvalidArgumentError(format::DescribeLedgerAdd(add) + ": this shard does not own that chunk");
      }
      if (elements != int64_t{add.num_elements}) {
        return InvalidArgumentError(format::DescribeLedgerAdd(add) + " has num_elements " +
                                    std::to_string(add.num_elements) + ", but the chunk has " +
                                    std::to_string(elements) + " floats");
      }
    }
    return Status::Ok();
  }

  // The commit's ledger clears (one range deletion per origin), then its adds
  // (one merge operand each): an add in the same commit as a clear of its
  // origin comes after the clear, and stays.
  rocksdb::Status AddLedgerWrites(const ShardCommit& commit, rocksdb::WriteBatch* batch) const {
    rocksdb::Status s;
    for (size_t i = 0; i < commit.ledger_clears.size() && s.ok(); ++i) {
      const format::KeyRange range = format::LedgerOriginRange(commit.ledger_clears[i]);
      s = batch->DeleteRange(db_->ledger(), range.begin, range.end);
    }
    std::string operand;
    for (size_t i = 0; i < commit.ledger_adds.size() && s.ok(); ++i) {
      const LedgerAdd& add = commit.ledger_adds[i];
      format::EncodeLedgerAdd(add, &operand);
      s = batch->Merge(db_->ledger(), format::LedgerKey(add.origin, add.key), operand);
    }
    return s;
  }

  // DataLoss for a row of a chunk this shard does not own or of another size
  // than the chunk (Commit writes neither, so the store is damaged).
  Status CheckLedgerRows(SiteId origin, const std::vector<LedgerRow>& rows) const {
    for (const LedgerRow& row : rows) {
      const int64_t elements = ChunkElements(row.key);
      if (elements == static_cast<int64_t>(row.values.size())) continue;
      const std::string what = name() + " is damaged: " + format::DescribeLedgerRow(origin, row.key);
      if (elements < 0) return DataLossError(what + " is for a chunk this shard does not own");
      return DataLossError(what + " has " + std::to_string(row.values.size()) + " sums, but the chunk has " +
                           std::to_string(elements) + " floats");
    }
    return Status::Ok();
  }

  const std::string dir_;
  const Durability durability_;
  const size_t piece_bytes_;
  const std::vector<ChunkExtent> chunks_;  // the chunks the shard owns, in key order
  std::mutex mu_;
  std::unique_ptr<RocksDb> db_;       // GUARDED_BY(mu_)
  uint64_t commits_;                  // GUARDED_BY(mu_)
  std::optional<ShardState> loaded_;  // GUARDED_BY(mu_); the state read at open, until used
  // The live slot of each chunk (by index in chunks_; -1: none yet) and of
  // each outbox record (-1: a format 2 record).
  std::vector<int8_t> chunk_live_;                     // GUARDED_BY(mu_)
  std::unordered_map<std::string, int> outbox_live_;  // GUARDED_BY(mu_)
};

}  // namespace

int64_t EffectiveWriteBufferMib(const StorageOptions& options, const ShardStoreSpec& spec) {
  if (options.write_buffer_mib != 0) return options.write_buffer_mib;
  // Automatic: a sixteenth of the shard's payload, within 8..32 MiB.
  // Commits reach RocksDB in pieces (commit_piece_bytes), so a memtable
  // need not hold a commit: a family holds at most two memtables (the one
  // filling and the one flushing), whatever the model's size.
  int64_t bytes = 0;
  for (const ChunkExtent& c : spec.chunks) bytes += c.elements * int64_t{sizeof(float)};
  return std::clamp<int64_t>((bytes / 16) >> 20, kMinAutoBufferMib, kMaxAutoBufferMib);
}

int64_t StoreMemtableBytes(const StorageOptions& options, const ShardStoreSpec& spec) {
  // Chunks, outbox and ledger take bulk writes: two memtables each at
  // most; the meta and default families stay within one.
  return (3 * 2 + 2) * (EffectiveWriteBufferMib(options, spec) << 20);
}

Result<std::unique_ptr<ShardStore>> OpenRocksDbShardStore(const StorageOptions& options,
                                                          const ShardStoreSpec& spec) {
  GEOPS_RETURN_IF_ERROR(options.Validate().WithContext("storage options"));
  if (options.data_dir.empty()) return InvalidArgumentError("storage options: data_dir is empty");
  StorageOptions tuned = options;
  tuned.write_buffer_mib = EffectiveWriteBufferMib(options, spec);
  fs::path dir(options.data_dir);
  if (!dir.has_filename()) dir = dir.parent_path();  // "a/b/" -> "a/b"
  const std::string where = "shard store " + dir.string();

  GEOPS_ASSIGN_OR_RETURN(const DirKind kind, ClassifyDirectory(dir.string()));
  if (kind != DirKind::kStore) GEOPS_RETURN_IF_ERROR(CreateStore(dir, tuned, spec.fingerprint));

  // Every check reads only: a store that is refused stays as it was.
  ShardState state;
  StoreSlots slots;
  {
    GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<RocksDb> probe, RocksDb::OpenReadOnly(dir.string(), tuned));
    GEOPS_RETURN_IF_ERROR(probe->ReadState(&state, &slots));
    GEOPS_RETURN_IF_ERROR(ValidateShardState(state, spec, where));
    GEOPS_RETURN_IF_ERROR(probe->Close());
  }
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<RocksDb> db, RocksDb::OpenReadWrite(dir.string(), tuned));
  std::string value;
  uint64_t commits = 0;
  GEOPS_RETURN_IF_ERROR(FromRocks(db->db()->Get(rocksdb::ReadOptions(), db->meta(),
                                                rocksdb::Slice(format::kCommitsKey.data(), format::kCommitsKey.size()),
                                                &value),
                                  where + ": reading the commit count"));
  GEOPS_RETURN_IF_ERROR(format::DecodeU64(format::kCommitsKey, value, &commits));
  if (commits != state.commits) {
    return AbortedError(where + " changed while it was being opened (another process wrote to it); try again");
  }
  // Records of a commit that never completed carry its number, the count
  // the next commit takes: they go before that commit can make them live.
  if (!slots.stale_chunk_keys.empty() || !slots.stale_outbox_keys.empty()) {
    rocksdb::WriteBatch batch;
    rocksdb::Status s;
    for (size_t i = 0; i < slots.stale_chunk_keys.size() && s.ok(); ++i) {
      s = batch.Delete(db->chunks(), slots.stale_chunk_keys[i]);
    }
    for (size_t i = 0; i < slots.stale_outbox_keys.size() && s.ok(); ++i) {
      s = batch.Delete(db->outbox(), slots.stale_outbox_keys[i]);
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (s.ok()) s = db->db()->Write(wo, &batch);
    GEOPS_RETURN_IF_ERROR(FromRocks(s, where + ": removing the records of an unfinished commit"));
  }
  return std::unique_ptr<ShardStore>(new RocksDbShardStore(dir.string(), options, spec.chunks,
                                                           std::move(db), std::move(state), slots));
}

Result<StoreInfo> InspectShardStore(const std::string& dir) {
  GEOPS_ASSIGN_OR_RETURN(const DirKind kind, ClassifyDirectory(dir));
  if (kind == DirKind::kMissing) return FailedPreconditionError(dir + " does not exist");
  if (kind == DirKind::kEmpty) return FailedPreconditionError(dir + " is empty: not a geops shard store");
  StoreInfo info;
  {
    StorageOptions options;
    options.write_buffer_mib = 8;  // reading only: no memtable of ours fills
    GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<RocksDb> db, RocksDb::OpenReadOnly(dir, options));
    GEOPS_RETURN_IF_ERROR(db->ReadState(&info.state));
    info.outbox_records = static_cast<int64_t>(info.state.outbound.size());
    GEOPS_ASSIGN_OR_RETURN(info.ledger_rows, db->CountLedgerRows());
    GEOPS_RETURN_IF_ERROR(db->ReadQuarantine(&info.quarantined));
    GEOPS_RETURN_IF_ERROR(db->Close());
  }
  for (size_t i = 0; i < info.state.chunks.size(); ++i) {
    const ChunkKey key = info.state.chunks.key(i);
    if (info.tables.empty() || info.tables.back().table != key.table) info.tables.push_back({key.table, 0, 0});
    info.tables.back().chunks += 1;
    info.tables.back().elements += static_cast<int64_t>(info.state.chunks.values(i).size());
  }
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const uintmax_t size = it->file_size(file_ec);
    if (file_ec) continue;  // removed by RocksDB while we looked
    info.disk_bytes += static_cast<int64_t>(size);
    info.files += 1;
  }
  if (ec) return UnavailableError("cannot list " + dir + ": " + ec.message());
  return info;
}

}  // namespace geops::storage
