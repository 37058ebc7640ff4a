// Test-only edits of a store's RocksDB database, to build the damaged and
// foreign directories that the store must refuse. The only test file that
// includes RocksDB (in its .cc); this header stays free of RocksDB types.
// Each call opens the database (the "ledger" family with the store's merge
// operator, so that merges already in the store stay readable), makes one
// change, and closes it. Not thread-safe with respect to other users of the
// same directory.
#ifndef GEOPS_TESTS_STORAGE_ROCKSDB_SURGERY_H_
#define GEOPS_TESTS_STORAGE_ROCKSDB_SURGERY_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace geops::storage::testing {

// Writes or deletes one raw record in column family `family` of `dir`.
Status PutRaw(const std::string& dir, const std::string& family, std::string_view key, std::string_view value);
Status DeleteRaw(const std::string& dir, const std::string& family, std::string_view key);
// Writes `operand` as one raw merge operand under `key` in family `family`
// (which must have a merge operator: "ledger").
Status MergeRaw(const std::string& dir, const std::string& family, std::string_view key, std::string_view operand);
// Drops column family `family` of `dir`.
Status DropFamily(const std::string& dir, const std::string& family);
// Creates a plain RocksDB database (default column family, one record).
Status CreatePlainRocksDb(const std::string& dir);

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_ROCKSDB_SURGERY_H_
