#include "storage/ledger_merge_operator.h"

#include <rocksdb/env.h>

#include <deque>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/store_format.h"

namespace geops::storage {
namespace {

// See TakeLedgerMergeError(); one per thread, like errno.
thread_local std::string last_merge_error;

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Adds `entries` (oldest first) onto `sums`.
template <typename Entries>
Status AddAll(const Entries& entries, format::LedgerSums* sums) {
  for (const rocksdb::Slice& entry : entries) GEOPS_RETURN_IF_ERROR(format::AddLedgerEntry(View(entry), sums));
  return Status::Ok();
}

class LedgerMergeOperator final : public rocksdb::MergeOperator {
 public:
  const char* Name() const override { return "geops.LedgerSum"; }

  // The stored row (if any) plus every operand, as one dense row.
  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    format::LedgerSums sums;
    Status s = in.existing_value != nullptr ? format::AddLedgerEntry(View(*in.existing_value), &sums) : Status::Ok();
    if (s.ok()) s = AddAll(in.operand_list, &sums);
    if (!s.ok()) {
      RecordFailure(in.key, s, in.logger);
      return false;
    }
    out->new_value = format::EncodeLedgerRow(sums.values);
    return true;
  }

  // Operands without the row under them (while flushing or compacting):
  // combined into one dense row only when that is no bigger than they are
  // together, so that a few small sparse adds stay sparse. Declining keeps
  // the operands as they are, for a later merge.
  bool PartialMergeMulti(const rocksdb::Slice& key, const std::deque<rocksdb::Slice>& operands,
                         std::string* new_value, rocksdb::Logger* logger) const override {
    if (!WorthCombining(operands)) return false;
    format::LedgerSums sums;
    // A malformed operand is left in place: the full merge that needs it
    // reports it, with the read that asked.
    if (!AddAll(operands, &sums).ok()) return false;
    *new_value = format::EncodeLedgerRow(sums.values);
    return true;
  }

  bool PartialMerge(const rocksdb::Slice& key, const rocksdb::Slice& left, const rocksdb::Slice& right,
                    std::string* new_value, rocksdb::Logger* logger) const override {
    return PartialMergeMulti(key, std::deque<rocksdb::Slice>{left, right}, new_value, logger);
  }

 private:
  static bool WorthCombining(const std::deque<rocksdb::Slice>& operands) {
    format::LedgerEntryHeader header;
    if (operands.empty() || !format::PeekLedgerEntry(View(operands.front()), &header)) return false;
    const size_t row_bytes = format::kLedgerRowHeaderSize + size_t{header.num_elements} * sizeof(double);
    size_t bytes = 0;
    for (const rocksdb::Slice& op : operands) {
      if (!op.empty() && static_cast<uint8_t>(op[0]) == format::kLedgerRowTag) return true;  // already dense
      bytes += op.size();
    }
    return bytes >= row_bytes;
  }

  static void RecordFailure(const rocksdb::Slice& key, const Status& s, rocksdb::Logger* logger) {
    SiteId origin = 0;
    ChunkKey chunk;
    const std::string row = format::DecodeLedgerKey(View(key), &origin, &chunk)
                                ? format::DescribeLedgerRow(origin, chunk)
                                : "ledger row with a malformed key of " + std::to_string(key.size()) + " bytes";
    last_merge_error = row + ": " + s.message();
    rocksdb::Log(rocksdb::InfoLogLevel::ERROR_LEVEL, logger, "geops ledger merge failed: %s",
                 last_merge_error.c_str());
  }
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewLedgerMergeOperator() { return std::make_shared<LedgerMergeOperator>(); }

std::string TakeLedgerMergeError() {
  std::string error = std::move(last_merge_error);
  last_merge_error.clear();
  return error;
}

}  // namespace geops::storage
