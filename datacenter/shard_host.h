// ShardHost: what one shard process serves, before and after its model is
// known.
//
// A site that trains the topology's built-in model knows its model at start:
// its host serves a ready shard from the first call (Serving). A site whose
// model the workers bring (topology workload "client", e.g. a PyTorch model)
// starts without one (AwaitingModel):
//   1. The first worker to call RegisterSchema fixes the model: its tables
//      (names, shapes, a checksum of each table's initial values) and chunk
//      size. A later schema must match it exactly, or is refused with
//      FailedPrecondition naming the first table that differs and how.
//   2. Workers then send the initial values of the shard's chunks
//      (InitValues). Any worker that registered the same schema may send
//      them; a chunk that already has values keeps them, so concurrent or
//      retried uploads are harmless.
//      In a multi-site topology the host then asks a peer check (the
//      site's mirror side) whether a peer site has fixed another model; if
//      so it unfixes the model and refuses the schema: every site trains the
//      same model. The model is fixed before the peers are asked, so that of
//      two sites fixing different models at once at least one sees the
//      other's; it is not built until the check passed.
//   3. With the last chunk in, the host calls its builder with the model and
//      its values. The builder makes the shard (and whatever must exist before
//      it serves: its store, its WAN side) and returns it; from then on
//      shard() is that shard. If the builder fails, the model is unfixed
//      again, so that a correct schema can take its place, and the caller
//      gets the builder's error.
// Until then every other call is answered by NotReady(): Unavailable, so a
// worker retries until the model is in. Fail() ends a host for good (two
// sites found they fixed different models): every call from then on gets
// its status.
//
// Thread-safety: all methods may be called concurrently. Schema calls take
// the host's intake lock (they are rare: a few per worker start); the
// builder runs under it, so one build at a time and never concurrently with
// another intake call.
#ifndef GEOPS_DATACENTER_SHARD_HOST_H_
#define GEOPS_DATACENTER_SHARD_HOST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/options.h"
#include "common/ps_types.h"
#include "common/status.h"
#include "datacenter/batch_validator.h"
#include "datacenter/shard.h"

namespace geops::datacenter {

class ShardHost {
 public:
  // Makes the shard for a fixed model (values attached). The returned shard
  // must outlive the host's last call.
  using Builder = std::function<Result<Shard*>(const ModelSpec& spec)>;
  // Whether a proposed model may be fixed here, asked before the first
  // schema fixes it (without the host's lock held: it may make calls to
  // other sites). Its error is the caller's.
  using PeerCheck = std::function<Status(const ModelSpec& proposal)>;

  // A host that serves `shard` (which must outlive it) from the start.
  static std::unique_ptr<ShardHost> Serving(Shard* shard);
  // A host that waits for a client-defined model. `options` are the shard's
  // (id, count, workers, token, batch bound). InvalidArgument when they do not
  // validate or `build` is empty.
  static Result<std::unique_ptr<ShardHost>> AwaitingModel(const ShardOptions& options, Builder build,
                                                          PeerCheck peer_check = nullptr);

  const ShardOptions& options() const { return options_; }
  // The shard, or nullptr while the model is not in yet (or the host failed).
  Shard* shard() const { return failed_.load(std::memory_order_acquire) ? nullptr : shard_.load(std::memory_order_acquire); }
  // Why a call cannot be served: Unavailable naming the shard and what it
  // waits for, or the status the host failed with.
  Status NotReady() const;
  // The model fixed or served (schema; values not included), nullopt while
  // none is.
  std::optional<ModelSpec> FixedModel() const;
  // Refuses every call from now on with `why` (not OK). The shard, if
  // built, stays alive for its owner to stop.
  void Fail(const Status& why);

  // Step 1 above. InvalidArgument for a worker id out of range or a proposal
  // whose tables are not all kProvided; FailedPrecondition "authentication
  // failed" for a wrong token, naming what differs for another model, and
  // for a shard serving the topology's built-in model. On success the
  // reply lists the chunks of this shard that still lack values (none once
  // it serves).
  Result<SchemaReply> RegisterSchema(WorkerId worker, const ModelSpec& proposal,
                                     const std::string& auth_token);

  // Step 2. `values` are the chunks `keys` back to back, checked as an update
  // batch is (datacenter/batch_validator.h): InvalidArgument for a chunk
  // this shard does not own, a repeated chunk, a payload of the wrong length,
  // or NaN/Inf; FailedPrecondition when no model is fixed or
  // `model_fingerprint` is not the fixed one's, or for a wrong token;
  // ResourceExhausted past max_batch_bytes; the builder's error when this
  // upload completed the model and the build failed. Returns the number of
  // chunks still missing (0: the shard serves).
  Result<int64_t> InitValues(WorkerId worker, uint64_t model_fingerprint, std::span<const ChunkKey> keys,
                             std::span<const float> values, const std::string& auth_token);

 private:
  ShardHost(const ShardOptions& options, Builder build, PeerCheck peer_check)
      : options_(options), build_(std::move(build)), peer_check_(std::move(peer_check)) {}

  Status CheckCaller(WorkerId worker, const std::string& auth_token) const;
  // The reply for `proposal` when a model is already fixed or served (an
  // error naming what differs if it is another), nullopt when none is.
  // REQUIRES: mu_ held.
  Result<std::optional<SchemaReply>> AgainstFixedLocked(const ModelSpec& proposal) const;
  // Forgets the fixed model and its values. REQUIRES: mu_ held.
  void UnfixLocked();
  // REQUIRES: mu_ held, fixed_ set.
  std::vector<ChunkKey> MissingLocked() const;
  // Runs the builder on the fixed model and its values; on failure unfixes
  // the model. REQUIRES: mu_ held, fixed_ set, nothing missing.
  Status BuildLocked();

  const ShardOptions options_;
  const Builder build_;
  const PeerCheck peer_check_;
  std::atomic<Shard*> shard_{nullptr};
  std::atomic<bool> failed_{false};

  mutable std::mutex mu_;
  std::optional<ModelSpec> fixed_;         // GUARDED_BY(mu_); the schema, without values
  WorkerId fixed_by_ = 0;                  // GUARDED_BY(mu_)
  std::vector<ChunkKey> own_;              // GUARDED_BY(mu_); this shard's chunks of fixed_
  std::shared_ptr<ChunkValuesMap> values_; // GUARDED_BY(mu_); received so far
  std::optional<BatchValidator> validator_;  // GUARDED_BY(mu_); over *fixed_
  Status failure_;                           // GUARDED_BY(mu_); set with failed_
  bool peers_checked_ = false;               // GUARDED_BY(mu_); fixed_ passed the peer check
  uint64_t generation_ = 0;                  // GUARDED_BY(mu_); moves at every fix and unfix
  Status refused_;                           // GUARDED_BY(mu_); the last peer check's refusal
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_SHARD_HOST_H_
