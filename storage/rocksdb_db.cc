#include "storage/rocksdb_db.h"

#include <rocksdb/env.h>
#include <rocksdb/iterator.h>

#include <algorithm>
#include <cstdarg>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "storage/ledger_merge_operator.h"
#include "storage/quarantine_format.h"
#include "storage/store_format.h"

namespace geops::storage {
namespace fs = std::filesystem;
namespace {

// Discards RocksDB's informational log, so that opening read-only creates no
// LOG file in the directory.
class NullLogger final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
  void Logv(const rocksdb::InfoLogLevel /*level*/, const char* /*format*/, va_list /*ap*/) override {}
};

// In the order of RocksDb::handles_.
constexpr const char* kFamilies[] = {format::kDefaultFamily, format::kChunksFamily, format::kMetaFamily,
                                     format::kOutboxFamily, format::kLedgerFamily};

rocksdb::ColumnFamilyOptions FamilyOptions(const StorageOptions& options, std::string_view family) {
  return family == format::kLedgerFamily ? LedgerFamilyOptions(options) : StoreFamilyOptions(options);
}

// The format version in the meta family of `dir`, read on a read-only open
// of the families that are there (a read-only open may leave some out).
Result<int32_t> ReadFormatVersion(const std::string& dir, const StorageOptions& options,
                                  const std::set<std::string>& have) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  size_t meta = 0;
  for (const char* family : kFamilies) {
    if (!have.count(family)) continue;
    if (std::string_view(family) == format::kMetaFamily) meta = families.size();
    families.emplace_back(family, FamilyOptions(options, family));
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(StoreDbOptions(options, /*quiet=*/true), dir, families, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "opening " + dir + " to read its format version");
  const std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), handles[meta],
              rocksdb::Slice(format::kFormatVersionKey.data(), format::kFormatVersionKey.size()), &value);
  for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  db->Close().PermitUncheckedError();
  GEOPS_RETURN_IF_ERROR(FromRocks(s, "reading the format version of " + dir));
  int32_t version = 0;
  GEOPS_RETURN_IF_ERROR(format::DecodeI32(format::kFormatVersionKey, value, &version));
  return version;
}

// A store without column family `family`: damaged, unless it is of another
// format version (an older store lacks the families added since), which its
// meta family tells when it is there.
Status RefuseMissingFamily(const std::string& dir, const StorageOptions& options,
                           const std::set<std::string>& have, const char* family) {
  const std::string where = "shard store " + dir;
  if (have.count(format::kMetaFamily)) {
    Result<int32_t> version = ReadFormatVersion(dir, options, have);
    if (version.ok()) {
      Status other_format = format::CheckFormatVersion(*version, where);
      if (other_format.code() == StatusCode::kFailedPrecondition) return other_format;
    }
  }
  return DataLossError(where + " is damaged: column family '" + family + "' is missing");
}

}  // namespace

Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  const std::string msg = std::string(context) + ": " + s.ToString();
  if (s.ok()) return Status::Ok();
  if (s.IsCorruption()) return DataLossError(msg);
  if (s.IsNoSpace()) return ResourceExhaustedError(msg);
  if (s.IsIOError() || s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) return UnavailableError(msg);
  if (s.IsInvalidArgument() || s.IsNotSupported()) return FailedPreconditionError(msg);
  if (s.IsAborted()) return AbortedError(msg);
  return InternalError(msg);
}

Result<DirKind> ClassifyDirectory(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return UnavailableError("cannot look at " + dir + ": " + ec.message());
  }
  if (!fs::exists(st)) return DirKind::kMissing;
  if (!fs::is_directory(st)) return FailedPreconditionError(dir + " exists and is not a directory");
  fs::directory_iterator it(dir, ec);
  if (ec) return UnavailableError("cannot list " + dir + ": " + ec.message());
  if (it == fs::directory_iterator()) return DirKind::kEmpty;

  const std::string marker = dir + "/" + format::kMarkerFile;
  if (!fs::exists(marker, ec)) {
    const bool rocks = fs::exists(dir + "/CURRENT", ec);
    return FailedPreconditionError(
        dir + (rocks ? " holds a RocksDB database that is not a geops shard store"
                     : " is not empty and is not a geops shard store") +
        " (no " + format::kMarkerFile + " file); refusing to use it");
  }
  std::ifstream in(marker, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str() != format::kMarkerText) {
    return DataLossError(marker + " is damaged: it does not say \"geops shard store\"");
  }
  return DirKind::kStore;
}

rocksdb::DBOptions StoreDbOptions(const StorageOptions& options, bool quiet) {
  rocksdb::DBOptions o;
  o.create_if_missing = false;
  o.create_missing_column_families = false;
  o.paranoid_checks = true;
  // A torn last commit (power cut mid-write) is dropped whole: the store
  // comes back at the last complete commit.
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  o.max_background_jobs = options.max_background_jobs;
  // Every commit touches the small meta family; flushing it when the log
  // grows keeps the log (and the replay at restart) short.
  o.max_total_wal_size = static_cast<uint64_t>(options.write_buffer_mib) << 21;
  o.keep_log_file_num = 4;
  o.max_log_file_size = 8 << 20;
  if (quiet) o.info_log = std::make_shared<NullLogger>();
  return o;
}

rocksdb::ColumnFamilyOptions StoreFamilyOptions(const StorageOptions& options) {
  rocksdb::ColumnFamilyOptions o;
  o.compression = rocksdb::kLZ4Compression;
  o.write_buffer_size = static_cast<size_t>(options.write_buffer_mib) << 20;
  return o;
}

rocksdb::ColumnFamilyOptions LedgerFamilyOptions(const StorageOptions& options) {
  rocksdb::ColumnFamilyOptions o = StoreFamilyOptions(options);
  o.merge_operator = NewLedgerMergeOperator();
  return o;
}

RocksDb::RocksDb(std::string dir, rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : dir_(std::move(dir)), db_(db), handles_(std::move(handles)) {
  chunks_ = handles_[1];
  meta_ = handles_[2];
  outbox_ = handles_[3];
  ledger_ = handles_[4];
}

RocksDb::~RocksDb() { Close().IgnoreError(); }

Status RocksDb::Close() {
  if (db_ == nullptr) return Status::Ok();
  rocksdb::Status first;
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    rocksdb::Status s = db_->DestroyColumnFamilyHandle(h);
    if (first.ok()) first = s;
  }
  handles_.clear();
  rocksdb::Status closed = db_->Close();
  if (first.ok() && !closed.IsNotSupported()) first = closed;
  delete db_;
  db_ = nullptr;
  return FromRocks(first, "closing shard store " + dir_);
}

Result<std::unique_ptr<RocksDb>> RocksDb::OpenReadOnly(const std::string& dir, const StorageOptions& options) {
  return Open(dir, options, /*read_only=*/true, /*create=*/false);
}

Result<std::unique_ptr<RocksDb>> RocksDb::OpenReadWrite(const std::string& dir, const StorageOptions& options) {
  return Open(dir, options, /*read_only=*/false, /*create=*/false);
}

Result<std::unique_ptr<RocksDb>> RocksDb::Create(const std::string& dir, const StorageOptions& options) {
  return Open(dir, options, /*read_only=*/false, /*create=*/true);
}

Result<std::unique_ptr<RocksDb>> RocksDb::Open(const std::string& dir, const StorageOptions& options,
                                               bool read_only, bool create) {
  rocksdb::DBOptions db_options = StoreDbOptions(options, /*quiet=*/read_only);
  db_options.create_if_missing = create;
  db_options.create_missing_column_families = create;
  if (!create) {
    // Every family must be named when opening, so look first: a damaged or
    // foreign layout is refused before RocksDB is asked to open it.
    std::vector<std::string> names;
    rocksdb::DBOptions list_options = StoreDbOptions(options, /*quiet=*/true);
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(list_options, dir, &names);
    if (!s.ok()) {
      // The marker says this is a store, so missing or unreadable RocksDB
      // files mean damaged data.
      return DataLossError("shard store " + dir + " is damaged: cannot read its column families: " +
                           s.ToString());
    }
    const std::set<std::string> have(names.begin(), names.end());
    for (const char* family : kFamilies) {
      if (!have.count(family)) return RefuseMissingFamily(dir, options, have, family);
    }
    for (const std::string& name : names) {
      if (std::find(std::begin(kFamilies), std::end(kFamilies), name) == std::end(kFamilies)) {
        return FailedPreconditionError("shard store " + dir + " has an unknown column family '" + name +
                                       "' (written by a newer geops?); refusing to use it");
      }
    }
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* family : kFamilies) {
    families.emplace_back(family, FamilyOptions(options, family));
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = read_only ? rocksdb::DB::OpenForReadOnly(db_options, dir, families, &handles, &db)
                                : rocksdb::DB::Open(db_options, dir, families, &handles, &db);
  if (!s.ok()) {
    std::string context = "cannot open shard store " + dir;
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      context += " (is another geops site process serving it?)";
    }
    Status st = FromRocks(s, context);
    if (!create && (st.code() == StatusCode::kFailedPrecondition || st.code() == StatusCode::kInternal)) {
      st = DataLossError(st.message());  // e.g. a missing CURRENT or MANIFEST file
    }
    return st;
  }
  return std::unique_ptr<RocksDb>(new RocksDb(dir, db, std::move(handles)));
}

Status RocksDb::ReadMeta(ShardState* state) const {
  const std::string where = "shard store " + dir_;
  auto get = [&](std::string_view key, std::string* value) -> Status {
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, rocksdb::Slice(key.data(), key.size()), value);
    if (s.IsNotFound()) {
      return DataLossError(where + " is damaged: meta record '" + std::string(key) + "' is missing");
    }
    return FromRocks(s, where + ": reading meta record '" + std::string(key) + "'");
  };
  std::string value;
  GEOPS_RETURN_IF_ERROR(get(format::kFormatVersionKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeI32(format::kFormatVersionKey, value, &state->format_version));
  GEOPS_RETURN_IF_ERROR(format::CheckFormatVersion(state->format_version, where));
  uint64_t model = 0;
  int32_t shard_id = 0, num_shards = 0, num_workers = 0;
  GEOPS_RETURN_IF_ERROR(get(format::kModelKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeU64(format::kModelKey, value, &model));
  GEOPS_RETURN_IF_ERROR(get(format::kModelSummaryKey, &state->fingerprint.model_summary));
  GEOPS_RETURN_IF_ERROR(get(format::kShardIdKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeI32(format::kShardIdKey, value, &shard_id));
  GEOPS_RETURN_IF_ERROR(get(format::kNumShardsKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeI32(format::kNumShardsKey, value, &num_shards));
  GEOPS_RETURN_IF_ERROR(get(format::kNumWorkersKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeI32(format::kNumWorkersKey, value, &num_workers));
  state->fingerprint.model = model;
  state->fingerprint.shard_id = shard_id;
  state->fingerprint.num_shards = num_shards;
  state->fingerprint.num_workers = num_workers;
  GEOPS_RETURN_IF_ERROR(get(format::kCommitsKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeU64(format::kCommitsKey, value, &state->commits));
  GEOPS_RETURN_IF_ERROR(get(format::kShardClockKey, &value));
  GEOPS_RETURN_IF_ERROR(format::DecodeI64(format::kShardClockKey, value, &state->shard_clock));

  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, meta_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const std::string_view v(it->value().data(), it->value().size());
    if (key.starts_with(format::kWorkerPrefix)) {
      WorkerRecord r;
      GEOPS_RETURN_IF_ERROR(format::DecodeWorker(key.substr(format::kWorkerPrefix.size()), v, &r)
                                .WithContext(where + " is damaged"));
      state->workers.push_back(r);
    } else if (key.starts_with(format::kOriginPrefix)) {
      OriginRecord r;
      GEOPS_RETURN_IF_ERROR(format::DecodeOrigin(key.substr(format::kOriginPrefix.size()), v, &r)
                                .WithContext(where + " is damaged"));
      state->origins.push_back(r);
    }  // other keys: the fixed records read above, or ones a later format adds
  }
  return FromRocks(it->status(), where + ": reading meta records");
}

Status RocksDb::ReadState(ShardState* state, StoreSlots* slots) const {
  *state = ShardState();
  StoreSlots local;
  if (slots == nullptr) slots = &local;
  *slots = StoreSlots();
  GEOPS_RETURN_IF_ERROR(ReadMeta(state));
  const std::string where = "shard store " + dir_;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.verify_checksums = true;
  // A chunk's slots are adjacent in key order (8 bytes, then the same 8
  // and 0x01): the live one is the latest commit not above the count.
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, chunks_));
  struct Candidate {
    uint64_t commit = 0;
    int slot = -1;
    std::string value;
  };
  std::optional<ChunkKey> current;
  Candidate best;
  auto finish_chunk = [&]() -> Status {
    if (!current.has_value()) return Status::Ok();
    if (best.slot >= 0) {
      slots->chunks[*current] = best.slot;
      GEOPS_RETURN_IF_ERROR(
          format::DecodeChunkValue(*current, best.value, &state->chunks).WithContext(where + " is damaged"));
    }
    current.reset();
    best = Candidate();
    return Status::Ok();
  };
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view stored(it->key().data(), it->key().size());
    ChunkKey key;
    int slot = 0;
    if (!format::DecodeChunkSlotKey(stored, &key, &slot)) {
      return DataLossError(where + " is damaged: a chunk key has " + std::to_string(stored.size()) +
                           " bytes, expected " + std::to_string(format::kChunkKeySize) + " (or " +
                           std::to_string(format::kChunkKeySize + 1) + " for slot 1)");
    }
    if (!current.has_value() || !(*current == key)) {
      GEOPS_RETURN_IF_ERROR(finish_chunk());
      current = key;
    }
    const std::string_view value(it->value().data(), it->value().size());
    uint64_t commit = 0;
    GEOPS_RETURN_IF_ERROR(format::PeekChunkCommit(key, value, &commit).WithContext(where + " is damaged"));
    if (commit > state->commits) {
      slots->stale_chunk_keys.emplace_back(stored);
      continue;
    }
    if (best.slot < 0 || commit > best.commit) best = Candidate{commit, slot, std::string(value)};
  }
  GEOPS_RETURN_IF_ERROR(FromRocks(it->status(), where + ": reading chunks"));
  GEOPS_RETURN_IF_ERROR(finish_chunk());

  // Outbox: format 2 records sort before the slotted ones (0xff first), so
  // candidates are gathered per record key, then the live ones kept in key
  // order.
  std::map<std::string, Candidate> records;
  it.reset(db_->NewIterator(ro, outbox_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view stored(it->key().data(), it->key().size());
    int slot = -1;
    std::string_view key;
    if (!format::DecodeOutboxSlotKey(stored, &slot, &key)) {
      return DataLossError(where + " is damaged: an outbox record has a malformed key of " +
                           std::to_string(stored.size()) + " bytes");
    }
    std::string_view value(it->value().data(), it->value().size());
    uint64_t commit = 0;
    if (slot >= 0) {
      GEOPS_RETURN_IF_ERROR(format::DecodeOutboxSlotValue(value, &commit, &value).WithContext(where + " is damaged"));
      if (commit > state->commits) {
        slots->stale_outbox_keys.emplace_back(stored);
        continue;
      }
    }
    auto [entry, fresh] = records.try_emplace(std::string(key));
    if (fresh || commit > entry->second.commit) entry->second = Candidate{commit, slot, std::string(value)};
  }
  GEOPS_RETURN_IF_ERROR(FromRocks(it->status(), where + ": reading the outbox"));
  state->outbound.reserve(records.size());
  for (auto& [key, c] : records) {
    slots->outbox[key] = c.slot;
    state->outbound.push_back(OutboundRecord{key, std::move(c.value)});
  }
  return Status::Ok();
}

Status RocksDb::ReadQuarantine(std::vector<QuarantineRecord>* out) const {
  const std::string where = "shard store " + dir_;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, meta_));
  const rocksdb::Slice prefix(format::kQuarantinePrefix.data(), format::kQuarantinePrefix.size());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    QuarantineRecord r;
    GEOPS_RETURN_IF_ERROR(format::DecodeQuarantine(std::string_view(it->key().data(), it->key().size()),
                                                   std::string_view(it->value().data(), it->value().size()), &r)
                              .WithContext(where + " is damaged"));
    out->push_back(std::move(r));
  }
  return FromRocks(it->status(), where + ": reading the quarantined batches");
}

Status RocksDb::ScanLedger(const format::KeyRange* range,
                           const std::function<void(SiteId origin, LedgerRow row)>& visit) const {
  const std::string where = "shard store " + dir_;
  rocksdb::ReadOptions ro;  // an iterator reads one consistent snapshot
  ro.fill_cache = false;
  ro.verify_checksums = true;
  rocksdb::Slice upper;
  if (range != nullptr) {
    upper = rocksdb::Slice(range->end);
    ro.iterate_upper_bound = &upper;
  }
  TakeLedgerMergeError();  // forget a failure that an earlier read on this thread left behind
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, ledger_));
  if (range != nullptr) {
    it->Seek(range->begin);
  } else {
    it->SeekToFirst();
  }
  for (; it->Valid(); it->Next()) {
    SiteId origin = 0;
    LedgerRow row;
    if (!format::DecodeLedgerKey(std::string_view(it->key().data(), it->key().size()), &origin, &row.key)) {
      return DataLossError(where + " is damaged: a ledger key has " + std::to_string(it->key().size()) +
                           " bytes, expected " + std::to_string(format::kLedgerKeySize));
    }
    GEOPS_RETURN_IF_ERROR(
        format::DecodeLedgerRow(std::string_view(it->value().data(), it->value().size()), &row.values)
            .WithContext(where + " is damaged: " + format::DescribeLedgerRow(origin, row.key)));
    visit(origin, std::move(row));
  }
  if (it->status().IsCorruption()) {
    // Our merge operator refused a row's entries; it says which and why.
    const std::string merge_error = TakeLedgerMergeError();
    if (!merge_error.empty()) {
      return DataLossError(where + " is damaged: " + merge_error + " (RocksDB: " + it->status().ToString() + ")");
    }
  }
  return FromRocks(it->status(), where + ": reading the ledger");
}

Status RocksDb::ReadLedger(SiteId origin, std::vector<LedgerRow>* rows) const {
  rows->clear();
  const format::KeyRange range = format::LedgerOriginRange(origin);
  return ScanLedger(&range, [&](SiteId, LedgerRow row) { rows->push_back(std::move(row)); });
}

Result<std::map<SiteId, int64_t>> RocksDb::CountLedgerRows() const {
  std::map<SiteId, int64_t> rows;
  GEOPS_RETURN_IF_ERROR(ScanLedger(nullptr, [&](SiteId origin, LedgerRow) { ++rows[origin]; }));
  return rows;
}

}  // namespace geops::storage
