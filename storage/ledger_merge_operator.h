// The merge operator of the "ledger" column family. Commit writes each
// LedgerAdd as one sparse merge operand (store_format.h), so adding to a
// ledger row never reads it; RocksDB calls this operator to add a row's
// entries together, in double precision, when it reads the row or compacts
// it, and stores the result as a dense row.
//
// A malformed entry makes the merge fail (RocksDB then reports Corruption to
// the read or compaction that needed it). RocksDB's message does not say
// which row failed or why, so the operator also keeps, per thread, a
// description of its last failure: a read that gets Corruption takes it with
// TakeLedgerMergeError() (the merges of a read run on the reading thread).
//
// Thread-safety: the operator is stateless and may be used by any number of
// threads; the error description is thread-local.
#ifndef GEOPS_STORAGE_LEDGER_MERGE_OPERATOR_H_
#define GEOPS_STORAGE_LEDGER_MERGE_OPERATOR_H_

#include <rocksdb/merge_operator.h>

#include <memory>
#include <string>

namespace geops::storage {

// Its Name() is "geops.LedgerSum".
std::shared_ptr<rocksdb::MergeOperator> NewLedgerMergeOperator();

// Why the last failed ledger merge on this thread failed, naming the row
// ("ledger of origin 3, chunk (table 0, chunk 7): a sparse ledger add has
// ..."), and forgets it; empty when no merge failed since the last call.
std::string TakeLedgerMergeError();

}  // namespace geops::storage

#endif  // GEOPS_STORAGE_LEDGER_MERGE_OPERATOR_H_
