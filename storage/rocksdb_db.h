// RocksDb: an open RocksDB database laid out as a geops shard store (see
// store_format.h), and the steps shared by opening, creating and inspecting
// one: telling a store directory from anything else, opening read-only
// without touching a file, and reading the whole state with every record
// checked. Private to storage/; the rest of geops sees common/shard_store.h.
//
// Thread-safety: a RocksDb may be read from many threads (RocksDB's own
// guarantee); Close() must not race with anything else.
#ifndef GEOPS_STORAGE_ROCKSDB_DB_H_
#define GEOPS_STORAGE_ROCKSDB_DB_H_

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/status.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/options.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "storage/store_format.h"

namespace geops::storage {

// Converts a RocksDB status: Corruption -> DataLoss, NoSpace ->
// ResourceExhausted, other IOError / Busy / TryAgain / TimedOut ->
// Unavailable, InvalidArgument / NotSupported -> FailedPrecondition,
// anything else -> Internal; the message is "<context>: <rocksdb message>".
Status FromRocks(const rocksdb::Status& s, std::string_view context);

// What a directory holds, as far as a shard store is concerned.
enum class DirKind { kMissing, kEmpty, kStore };
// kMissing / kEmpty / kStore for a directory that does not exist, is empty,
// or carries a valid marker file. FailedPrecondition for a file that is not
// a directory or a non-empty directory without the marker (naming whether it
// holds a RocksDB database); DataLoss for a damaged marker; Unavailable when
// the directory cannot be read.
Result<DirKind> ClassifyDirectory(const std::string& dir);

// Database-wide and per-column-family options of every store. `quiet`: no
// info log file (used where the directory must not change).
rocksdb::DBOptions StoreDbOptions(const StorageOptions& options, bool quiet);
rocksdb::ColumnFamilyOptions StoreFamilyOptions(const StorageOptions& options);
// StoreFamilyOptions plus the ledger merge operator, for the "ledger" family.
rocksdb::ColumnFamilyOptions LedgerFamilyOptions(const StorageOptions& options);

// Which slot of each record is live after a load, and the records written
// by a commit that never completed (a commit number above the store's
// count), which OpenRocksDbShardStore deletes before the store serves.
struct StoreSlots {
  std::map<ChunkKey, int> chunks;             // live slot (0 or 1) of each chunk
  std::map<std::string, int> outbox;          // record key -> live slot; -1: a format 2 record
  std::vector<std::string> stale_chunk_keys;  // stored keys, as they are in the family
  std::vector<std::string> stale_outbox_keys;
};

class RocksDb {
 public:
  ~RocksDb();
  RocksDb(const RocksDb&) = delete;
  RocksDb& operator=(const RocksDb&) = delete;

  // Opens an existing store. ReadOnly writes nothing to the directory.
  // DataLoss when the column families are not the store's, or RocksDB finds
  // corruption; FailedPrecondition for extra column families and for a store
  // of an older format (which lacks the families added since); Unavailable
  // for I/O errors or a lock held by another process.
  static Result<std::unique_ptr<RocksDb>> OpenReadOnly(const std::string& dir, const StorageOptions& options);
  static Result<std::unique_ptr<RocksDb>> OpenReadWrite(const std::string& dir, const StorageOptions& options);
  // Creates a new database with the store's column families in `dir`.
  static Result<std::unique_ptr<RocksDb>> Create(const std::string& dir, const StorageOptions& options);

  rocksdb::DB* db() const { return db_; }
  rocksdb::ColumnFamilyHandle* chunks() const { return chunks_; }
  rocksdb::ColumnFamilyHandle* meta() const { return meta_; }
  rocksdb::ColumnFamilyHandle* outbox() const { return outbox_; }
  rocksdb::ColumnFamilyHandle* ledger() const { return ledger_; }

  // Reads and checks every record: the format version, the fingerprint,
  // every chunk (header, size, checksum), worker and origin records. Of the
  // two slots of a chunk or outbox record, the one written by the latest
  // commit up to the store's count is read; `slots` (optional) says which,
  // and lists the records of an unfinished commit.
  // DataLoss naming the first bad record (missing meta included).
  // FailedPrecondition for a store written by a newer format.
  Status ReadState(ShardState* state, StoreSlots* slots = nullptr) const;
  // Every quarantined WAN batch (storage/quarantine_format.h), in key order;
  // DataLoss for one that does not decode.
  Status ReadQuarantine(std::vector<QuarantineRecord>* out) const;
  // The rows of `origin`'s ledger, in key order, as of one consistent read.
  // DataLoss naming the row for a malformed key or value, or entries that do
  // not merge. REQUIRES: origin >= 0.
  Status ReadLedger(SiteId origin, std::vector<LedgerRow>* rows) const;
  // Ledger rows per origin (origins without rows absent), each row decoded
  // and checked as by ReadLedger.
  Result<std::map<SiteId, int64_t>> CountLedgerRows() const;

  // Releases the handles and closes the database; idempotent.
  Status Close();

 private:
  RocksDb(std::string dir, rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles);
  static Result<std::unique_ptr<RocksDb>> Open(const std::string& dir, const StorageOptions& options,
                                               bool read_only, bool create);
  Status ReadMeta(ShardState* state) const;
  // Reads the ledger rows in `range` (the whole family when null) in key
  // order, calling `visit` for each decoded row.
  Status ScanLedger(const format::KeyRange* range,
                    const std::function<void(SiteId origin, LedgerRow row)>& visit) const;

  const std::string dir_;
  rocksdb::DB* db_;  // owned; null once closed
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // owned, in family order
  rocksdb::ColumnFamilyHandle* chunks_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* outbox_ = nullptr;
  rocksdb::ColumnFamilyHandle* ledger_ = nullptr;
};

}  // namespace geops::storage

#endif  // GEOPS_STORAGE_ROCKSDB_DB_H_
