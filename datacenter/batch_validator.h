// BatchValidator: checks a read or update request against the model and the
// shard's ownership before anything is touched.
//
// It refuses, with a message naming the problem: an unknown table id, a chunk
// id out of range, a chunk another shard owns (naming both shards), a chunk
// named twice in one update, a payload whose float count differs from the
// chunks' sizes (expected vs got), NaN or +-Inf values (naming table, chunk,
// element, row and column), and a payload over max_batch_bytes
// (ResourceExhausted). Everything else is InvalidArgument. The NaN/Inf scan
// is one vectorised pass over the payload.
//
// It checks update batches and the initial values of a client-defined model
// (datacenter/shard_host.h) alike; `what` names the request in messages.
//
// Thread-safety: immutable after construction; all methods are const and may
// be called concurrently.
#ifndef GEOPS_DATACENTER_BATCH_VALIDATOR_H_
#define GEOPS_DATACENTER_BATCH_VALIDATOR_H_

#include <cstdint>
#include <span>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/status.h"

namespace geops::datacenter {

class BatchValidator {
 public:
  // `spec` must outlive the validator; `shard` of `num_shards` owns the
  // chunks ModelSpec::ShardOf gives it.
  BatchValidator(const ModelSpec* spec, ShardId shard, int num_shards, int64_t max_batch_bytes);

  // Checks the keys of a read: each exists, is owned by this shard and is
  // named once, and the reply fits in max_batch_bytes. On success sets
  // *total_elements to the sum of ChunkElements.
  Status CheckRead(std::span<const ChunkKey> keys, int64_t* total_elements) const;

  // Checks a batch of chunk values in full: at least one key, keys as for a
  // read, values.size() equal to the sum of ChunkElements, every value
  // finite. `what` starts each message ("update batch", "initial values").
  Status CheckValues(std::span<const ChunkKey> keys, std::span<const float> values,
                     const char* what = "update batch") const;
  // CheckValues without the finite check, for a caller whose apply checks
  // every sum (stored + value), which catches a non-finite value in the
  // same pass (Shard::Update); it then calls CheckFinite for the message.
  Status CheckShape(std::span<const ChunkKey> keys, std::span<const float> values,
                    const char* what = "update batch") const;
  // Every value finite; otherwise InvalidArgument naming the first bad one
  // (table, chunk, element, row and column).
  Status CheckFinite(std::span<const ChunkKey> keys, std::span<const float> values,
                     const char* what = "update batch") const;

 private:
  Status CheckKeys(std::span<const ChunkKey> keys, const char* what, int64_t* total_elements) const;
  Status CheckNoRepeats(std::span<const ChunkKey> keys, const char* what) const;
  Status CheckBytes(int64_t bytes, const char* what) const;

  const ModelSpec* spec_;
  const ShardId shard_;
  const int num_shards_;
  const int64_t max_batch_bytes_;
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_BATCH_VALIDATOR_H_
