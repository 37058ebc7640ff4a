// CapturedRows: rows of one SignificanceFilter (the WAN accumulator, or one
// peer's backlog) that a commit holds, captured copy-on-write.
//
// The outbound journal's rows must reach the store as they were at the
// commit's capture (taken while no change is in progress), but the store
// writes long after, while the replicator goes on. Rather than copy every
// changed row at the capture, the capture marks the rows; the store reads
// each from the live filter when it writes it, and a change that reaches a
// marked row first saves the row as it was (SignificanceFilter::RowHook),
// which the store then reads instead. A copy exists only for a row changed
// while its commit is being written, and only until the store has read it.
//
// Thread-safety: Capture() runs while the filter's owner changes nothing
// (the shard's persistence barrier); Read() and Release() run in the
// committer while the owner goes on. Every member is touched only under
// the filter's mutex (the hook runs under it, the others take it).
#ifndef GEOPS_WAN_REPLICATION_CAPTURED_ROWS_H_
#define GEOPS_WAN_REPLICATION_CAPTURED_ROWS_H_

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/ids.h"
#include "wan/replication/significance_filter.h"

namespace geops::wan {

class CapturedRows final : public SignificanceFilter::RowHook {
 public:
  // Hooks itself into `filter`, which must outlive it. REQUIRES: no change
  // to the filter in flight.
  explicit CapturedRows(SignificanceFilter* filter);
  ~CapturedRows();
  CapturedRows(const CapturedRows&) = delete;
  CapturedRows& operator=(const CapturedRows&) = delete;

  // Marks `key`'s row as part of the commit being captured.
  void Capture(ChunkKey key);
  // Sets *value to the bytes of `key`'s row as of the capture and returns
  // true; false when the row held no mass then (the record is deleted).
  // Each captured row at most once.
  bool Read(ChunkKey key, std::string* value);
  // After the commit (written or not): forgets the rows not read.
  void Release();

  void BeforeRowWrite(ChunkKey key, std::span<const float> current) override;

  // Rows saved because a change reached them before the store read them,
  // and the most bytes of such copies held at once.
  int64_t rows_saved() const;
  int64_t peak_saved_bytes() const;

 private:
  SignificanceFilter* const filter_;
  std::unordered_set<ChunkKey, ChunkKeyHash> captured_;                    // marked, not yet changed
  std::unordered_map<ChunkKey, std::vector<float>, ChunkKeyHash> saved_;  // marked, then changed
  int64_t saved_bytes_ = 0;
  int64_t peak_saved_bytes_ = 0;
  int64_t rows_saved_ = 0;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_CAPTURED_ROWS_H_
