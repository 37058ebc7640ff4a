// The RocksDB-backed ShardStore: one RocksDB database per shard directory,
// with the column families "chunks" (chunk values), "meta" (fingerprint,
// worker clocks, per-origin sequence numbers, commit count), "outbox"
// (reserved for the WAN layer) and "ledger" (per-origin sums of applied WAN
// deltas, added to with RocksDB merges: storage/ledger_merge_operator.h).
// Each commit is one RocksDB WriteBatch; with Durability::kSync it is written
// with WriteOptions::sync (fsync of the log).
// Layout: docs/on_disk_format.md and storage/store_format.h.
//
// Opening is careful not to damage what it does not understand. Every check
// runs read-only, before anything in the directory is written:
//   * missing or empty directory -> a fresh store is built in a sibling
//     directory and renamed into place, so a crash while creating leaves no
//     half-made store behind;
//   * a directory without the store's marker file -> FailedPrecondition
//     ("not a geops shard store"), untouched;
//   * a store of another configuration -> FailedPrecondition naming what
//     differs (model, shard count, shard id, worker count), untouched;
//   * a store of another format version (older or newer) ->
//     FailedPrecondition, untouched;
//   * a damaged store (unreadable RocksDB files, missing column families or
//     meta records, bad value sizes or checksums, chunks that do not fit the
//     model) -> DataLoss naming the problem, untouched;
//   * another process holding the store -> Unavailable.
//
// Thread-safety: the returned store's methods may be called from any thread;
// Commit() calls are serialised internally.
#ifndef GEOPS_STORAGE_ROCKSDB_SHARD_STORE_H_
#define GEOPS_STORAGE_ROCKSDB_SHARD_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/shard_store.h"
#include "common/status.h"

namespace geops::storage {

// Opens the store in options.data_dir for the shard described by `spec`,
// creating it when the directory is missing or empty (and its parents).
// Errors as above; InvalidArgument for bad options or an empty data_dir.
// On success Load() returns the state checked during the open. The ledger is
// not read while opening: ReadLedger() checks the rows it reads, and Commit()
// refuses (InvalidArgument) a LedgerAdd that breaks its contract or does not
// fit a chunk of `spec`, before writing anything.
Result<std::unique_ptr<ShardStore>> OpenRocksDbShardStore(const StorageOptions& options,
                                                          const ShardStoreSpec& spec);

// The memtable size a store of `spec` gets, MiB (StorageOptions::
// write_buffer_mib, or the automatic size for 0).
int64_t EffectiveWriteBufferMib(const StorageOptions& options, const ShardStoreSpec& spec);
// The most memory that store's memtables hold at once, bytes.
int64_t StoreMemtableBytes(const StorageOptions& options, const ShardStoreSpec& spec);

// What `geops inspect` shows of a store.
struct StoreInfo {
  struct Table {
    TableId table = 0;
    int64_t chunks = 0;
    int64_t elements = 0;
  };
  ShardState state;           // everything, chunk values included (all verified)
  std::vector<Table> tables;  // tables with stored chunks, in id order
  int64_t outbox_records = 0;
  std::map<SiteId, int64_t> ledger_rows;  // ledger rows (chunks) per origin; origins with none absent
  std::vector<QuarantineRecord> quarantined;  // WAN batches kept aside, by origin and seq
  int64_t disk_bytes = 0;     // sum of the sizes of the directory's files
  int64_t files = 0;
};

// Reads a store without writing to its directory and without knowing the
// model; every ledger row is decoded too. FailedPrecondition for a directory
// that is not a store (or does not exist); DataLoss for a damaged one.
Result<StoreInfo> InspectShardStore(const std::string& dir);

}  // namespace geops::storage

#endif  // GEOPS_STORAGE_ROCKSDB_SHARD_STORE_H_
