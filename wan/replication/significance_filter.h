// SignificanceFilter: the per-chunk accumulators of local updates that a
// shard has not yet shipped to its mirrors (Gaia's Approximate Synchronous
// Parallel).
//
// Local deltas are summed into a float accumulator per chunk; a chunk gets an
// accumulator the first time it receives a delta and keeps it afterwards (so
// steady-state ticks allocate nothing). At each clock tick Select() scans the
// dirty chunks and takes out the elements whose significance
// |acc| / max(|w|, eps) exceeds the threshold, where w is the chunk's current
// value; they come back as sparse updates and their accumulator entries
// become exactly 0. The rest stays accumulated: nothing is ever dropped, only
// delayed, so for every element
//     (sum of shipped values) + (accumulator) == (sum of pushed deltas)
// holds exactly whenever the float sums themselves are exact (e.g. integer
// counters). DrainAll() takes everything, for the end of a run.
//
// Select() is one branch-free pass over acc and w per dirty chunk (about
// 8 bytes read per parameter) with no per-element allocation.
//
// Thread-safety: one owner calls the filter, from one thread (or under its
// own lock). Besides the owner, one other thread (a shard's committer) may
// call InspectRow and Locked: every change to a row runs under the filter's
// own mutex, and the RowHook is told of it first, under that mutex, so a
// copy-on-write capture of rows (CapturedRows) can read them while the
// owner goes on.
#ifndef GEOPS_WAN_REPLICATION_SIGNIFICANCE_FILTER_H_
#define GEOPS_WAN_REPLICATION_SIGNIFICANCE_FILTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "wan/codec/sparse_update.h"

namespace geops::wan {

struct SignificanceFilterOptions {
  // eps in |acc| / max(|w|, eps): keeps values at 0 from dividing by zero.
  // Default 1e-6; must be > 0 and finite.
  float value_epsilon = 1e-6f;
  // A chunk that has held unshipped mass for this many Select() calls is
  // shipped whole (every non-zero element) at the next one, which bounds how
  // long any small update can wait. 0 (default) disables the bound.
  int64_t max_hold_clocks = 0;
  // Largest chunk accepted, in floats. Default 2^26 (256 MiB of floats).
  uint32_t max_chunk_elements = uint32_t{1} << 26;

  Status Validate() const;
};

// Returns a pointer to the current value of the chunk (num_elements floats,
// valid until Select() returns), or nullptr when the value is unknown, in
// which case |w| is taken as 0 (every non-zero element is significant). An
// empty function means every value is unknown.
using ChunkValueLookup = std::function<const float*(ChunkKey key)>;
// Writes the current values of the listed elements of the chunk to out
// (one per index, in order) and returns true, or returns false when the
// value is unknown (|w| taken as 0). Cheaper than a ChunkValueLookup when
// only a few elements are wanted.
using ChunkElementLookup = std::function<bool(ChunkKey key, std::span<const uint32_t> at, float* out)>;

// One slice of a selection: only dirty chunks whose key comes after
// `after` (all of them when !has_after), and no more once max_elements
// values have been taken (the chunk that crosses it is taken whole; <= 0: no
// limit). A tick selects slice after slice, so that nothing it holds (the
// selection, its encoding, the peers' decoding) grows with the model.
struct SelectSlice {
  bool has_after = false;
  ChunkKey after{};
  int64_t max_elements = 0;
  // When set, only the chunks it accepts; the others stay as they are.
  std::function<bool(ChunkKey)> only;
};

struct SelectStats {
  int64_t chunks_scanned = 0;      // dirty chunks visited
  int64_t elements_scanned = 0;    // floats visited in them
  int64_t chunks_selected = 0;     // chunks with at least one element taken
  int64_t elements_selected = 0;   // floats taken out
  int64_t chunks_still_dirty = 0;  // chunks with mass left after the call
  // A slice stopped at its limit: dirty chunks after `last` were not visited.
  bool more = false;
  ChunkKey last{};                 // the last chunk visited (valid when chunks_scanned > 0)
};

class SignificanceFilter {
 public:
  // REQUIRES: options.Validate().ok() (checked by Create).
  static Result<SignificanceFilter> Create(SignificanceFilterOptions options = {});

  SignificanceFilter(SignificanceFilter&&) = default;
  SignificanceFilter& operator=(SignificanceFilter&&) = default;

  // acc[key] += delta. The first delta of a chunk fixes its element count.
  // Returns InvalidArgument (and changes nothing) when delta is empty, larger
  // than max_chunk_elements, differs in size from the chunk's earlier
  // deltas, or holds a NaN/Inf.
  Status Add(ChunkKey key, std::span<const float> delta);
  // The same for a delta the caller has already checked to be finite (a
  // shard's update, refused whole before it reaches the filter when any
  // value is NaN/Inf), without a second pass over it. Same errors but the
  // NaN/Inf one; a non-finite value breaks the filter's invariants.
  Status AddFinite(ChunkKey key, std::span<const float> delta);

  // acc[key][indices[i]] += values[i]: the sparse form, used to put codec
  // residuals back (error feedback). Same errors as Add, plus InvalidArgument
  // when an index is >= num_elements or the spans differ in length.
  // With `fresh`, the elements added are also marked for SelectFresh.
  Status AddSparse(ChunkKey key, uint32_t num_elements, std::span<const uint32_t> indices,
                   std::span<const float> values, bool fresh = false);
  Status AddSparse(const SparseChunkUpdate& update, bool fresh = false) {
    return AddSparse(update.key, update.num_elements, update.indices, update.values, fresh);
  }

  // Takes out every element with |acc| > threshold * max(|w|, eps) from each
  // dirty chunk (every non-zero element of a chunk held past
  // max_hold_clocks), setting its accumulator entry to 0. Writes one update
  // per chunk that had anything taken, sorted by key, into *out (its former
  // contents are replaced; their storage is reused). `clock` is the shard's
  // clock and must not decrease between calls. threshold >= 0; 0 takes every
  // non-zero element. Never fails.
  SelectStats Select(Clock clock, const ChunkValueLookup& lookup, float threshold,
                     std::vector<SparseChunkUpdate>* out, const SelectSlice& slice = {});

  // Select for a backlog, at a cost that follows what was added rather than
  // the chunks' size: in each dirty chunk it looks only at the elements
  // marked fresh (AddSparse with fresh) since the chunk was last looked at
  // whole, and takes those that are significant, as Select would. Every
  // `revisit`-th call that reaches a chunk looks at it whole instead (the
  // chunks' turns staggered by key) and clears its marks; with
  // `revisit_clocks` > 0, not twice within that many clocks (for a link that
  // asks for several cuts a clock, which would otherwise read every chunk
  // whole once or more a clock). So an element marked since the chunk's
  // last whole look is looked at by every call, as Select would; one that
  // was not significant at that look and has not been marked since (a codec
  // residual, or an update that stayed under the cut-off) waits at most
  // `revisit` calls (or `revisit_clocks` clocks, if longer). A chunk looked
  // at in part stays dirty. A chunk with more than an eighth of its elements
  // marked is looked at whole (it costs less). Marks cost one bit per
  // element of a chunk that ever had one. revisit <= 1: Select.
  // A part look reads the values it needs through `elements` when given
  // (else through `lookup`, the whole chunk).
  SelectStats SelectFresh(Clock clock, const ChunkValueLookup& lookup, const ChunkElementLookup& elements,
                          float threshold, int64_t revisit, std::vector<SparseChunkUpdate>* out,
                          const SelectSlice& slice = {}, int64_t revisit_clocks = 0);

  // Takes out every non-zero element of every chunk (lossless end-of-run
  // drain). Same output convention as Select(). Afterwards no chunk is dirty.
  SelectStats DrainAll(std::vector<SparseChunkUpdate>* out, const SelectSlice& slice = {});

  // The accumulator of `key`, or an empty span when the chunk never had a
  // delta. Valid until the next non-const call.
  std::span<const float> Accumulated(ChunkKey key) const;

  // Chunks holding unshipped mass.
  int64_t dirty_chunks() const { return static_cast<int64_t>(dirty_.size()); }
  // Chunks with an accumulator (dirty or not).
  int64_t tracked_chunks() const { return static_cast<int64_t>(slots_.size()); }
  // Bytes held by accumulators.
  int64_t accumulator_bytes() const { return accumulator_bytes_; }
  // L2 norm of everything held unshipped (local updates not yet selected
  // and the codec residuals put back): the error-feedback residual. O(n).
  double ResidualNorm() const;

  // Frees the accumulators of chunks that hold no mass.
  void ReleaseCleanChunks();

  // Told of every change to a row before it happens, under the filter's
  // mutex, with the row as it is then (empty when the chunk has no row yet
  // or its row is being freed). Must be quick and take no other lock that
  // the owner may hold.
  class RowHook {
   public:
    virtual void BeforeRowWrite(ChunkKey key, std::span<const float> current) = 0;

   protected:
    ~RowHook() = default;
  };
  // nullptr: none.
  void set_row_hook(RowHook* hook) {
    std::lock_guard<std::mutex> lock(*mu_);
    hook_ = hook;
  }
  // Calls fn(row) with the accumulator of `key` (empty when none) under
  // the filter's mutex: no change overlaps the call.
  template <typename Fn>
  void InspectRow(ChunkKey key, Fn&& fn) const {
    std::lock_guard<std::mutex> lock(*mu_);
    auto it = slots_.find(key);
    fn(it == slots_.end() ? std::span<const float>() : std::span<const float>(it->second.acc));
  }
  // Calls fn() under the filter's mutex.
  template <typename Fn>
  void Locked(Fn&& fn) const {
    std::lock_guard<std::mutex> lock(*mu_);
    fn();
  }

 private:
  struct Slot {
    std::vector<float> acc;
    bool dirty = false;
    Clock dirty_since = -1;  // clock of the first Select() that saw it dirty; -1 unseen
    std::vector<uint64_t> fresh;  // SelectFresh's marks, one bit per element (empty until the first)
    uint32_t marked = 0;          // how many of them are set
    // SelectFresh: looks since the chunk's last whole look (from a per-key
    // offset; -1 before the first look) and that look's clock.
    int64_t looks_since_whole = -1;
    Clock last_whole = 0;
  };

  explicit SignificanceFilter(SignificanceFilterOptions options) : options_(options) {}

  Result<Slot*> SlotFor(ChunkKey key, uint32_t num_elements);
  void MarkDirty(ChunkKey key, Slot* slot);
  // revisit > 1: SelectFresh's partial looks.
  // SelectFresh's turns for whole looks: every `looks`-th look, and not
  // twice within `clocks` clocks (0: no such bound).
  struct Revisit {
    int64_t looks = 0;
    int64_t clocks = 0;
  };
  SelectStats Scan(Clock clock, const ChunkValueLookup* lookup, const ChunkElementLookup* elements,
                   float threshold, bool take_all, Revisit revisit_at, const SelectSlice& slice,
                   std::vector<SparseChunkUpdate>* out);
  static void ClearFresh(Slot* slot);

  // Under mu_: tells the hook that `key`'s row is about to change.
  void WillWrite(ChunkKey key, std::span<const float> current) {
    if (hook_ != nullptr) hook_->BeforeRowWrite(key, current);
  }

  SignificanceFilterOptions options_;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();  // held by every change to a row
  RowHook* hook_ = nullptr;  // GUARDED_BY(*mu_)
  std::unordered_map<ChunkKey, Slot, ChunkKeyHash> slots_;
  // The dirty chunks and their slots (a node of slots_ stays where it is
  // until erased, and a dirty one is not).
  std::vector<std::pair<ChunkKey, Slot*>> dirty_;
  int64_t accumulator_bytes_ = 0;
  // Scratch for one chunk's selection, sized to the largest chunk seen.
  std::vector<uint32_t> scratch_idx_;
  std::vector<float> scratch_val_;
  std::vector<uint32_t> scratch_at_;  // a chunk's marked elements ...
  std::vector<float> scratch_w_;      // ... and their values
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_SIGNIFICANCE_FILTER_H_
