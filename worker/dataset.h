// In-memory labelled datasets, a worker's share of one, and the batches a
// worker trains on.
//
// A Dataset holds n examples of `dims` floats each (row-major) and n integer
// labels in [0, num_classes). PartitionDataset gives worker w of W the
// examples whose index is congruent to w modulo W: deterministic, disjoint,
// and together they cover the set. BatchSampler walks one (partitioned)
// dataset in epochs; each epoch visits every example in an order shuffled by
// (seed, worker, epoch) alone, so a worker resumed from a saved DataPosition
// sees exactly the batches it would have seen had it never stopped.
//
// Thread-safety: a Dataset is a value and may be read from many threads. A
// BatchSampler is used by one thread at a time.
#ifndef GEOPS_WORKER_DATASET_H_
#define GEOPS_WORKER_DATASET_H_

#include <cstdint>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace geops::worker {

// A view of n examples: x is n x dims floats (row-major), y is n labels.
// Borrowed pointers; whoever made the Batch keeps the memory alive.
struct Batch {
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int n = 0;
};

struct Dataset {
  int64_t n = 0;
  int dims = 0;
  int num_classes = 0;
  std::vector<float> x;    // n * dims
  std::vector<int32_t> y;  // n

  // The whole set as one batch (e.g. for Evaluate). REQUIRES: n fits in int.
  Batch AsBatch() const { return Batch{x.data(), y.data(), static_cast<int>(n)}; }
};

// Worker `worker` of `num_workers`: the examples i with i % num_workers ==
// worker, in their original order. InvalidArgument when num_workers < 1,
// worker is outside [0, num_workers), or the share would be empty.
Result<Dataset> PartitionDataset(const Dataset& data, int worker, int num_workers);

// The checks above of a share of a set of n examples (OK when it is valid
// and not empty), for readers that keep only a share as they read.
Status CheckShare(int64_t n, int worker, int num_workers);

// Where a sampler is: the epoch, and how many examples of that epoch's
// shuffled order have been handed out. Save it with a checkpoint, pass it
// back to resume.
struct DataPosition {
  int64_t epoch = 0;
  int64_t index = 0;
  bool operator==(const DataPosition&) const = default;
};

class BatchSampler {
 public:
  // Samples batches of `batch_size` from `data`, starting at `start`. Each
  // epoch yields floor(n / batch_size) full batches; the few examples left
  // over at the end of an epoch's order are skipped for that epoch (a
  // different few each epoch). InvalidArgument when batch_size < 1 or > n,
  // or `start` is not a valid position.
  // REQUIRES: `data` outlives the sampler and does not change.
  static Result<BatchSampler> Create(const Dataset* data, int batch_size, uint64_t seed,
                                     WorkerId worker, DataPosition start = {});

  // The next batch. The view stays valid until the next call to Next() or
  // Seek() and is stable in memory (no allocation after construction).
  Batch Next();

  // The position of the next batch Next() would return.
  DataPosition position() const { return pos_; }

  // Moves to `pos`. InvalidArgument (sampler unchanged) when pos.epoch < 0 or
  // pos.index is outside [0, n].
  Status Seek(DataPosition pos);

  int batch_size() const { return batch_size_; }
  // Full batches per epoch.
  int64_t batches_per_epoch() const { return data_->n / batch_size_; }

 private:
  BatchSampler(const Dataset* data, int batch_size, uint64_t seed, WorkerId worker);
  // Fills order_ with the permutation of `epoch`.
  void Shuffle(int64_t epoch);

  const Dataset* data_;
  int batch_size_;
  uint64_t seed_;
  WorkerId worker_;
  DataPosition pos_;
  std::vector<int64_t> order_;  // permutation of [0, n) for pos_.epoch
  std::vector<float> x_;        // batch_size * dims
  std::vector<int32_t> y_;      // batch_size
};

}  // namespace geops::worker

#endif  // GEOPS_WORKER_DATASET_H_
