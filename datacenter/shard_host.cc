#include "datacenter/shard_host.h"

#include <cmath>
#include <set>

namespace geops::datacenter {

std::unique_ptr<ShardHost> ShardHost::Serving(Shard* shard) {
  std::unique_ptr<ShardHost> host(new ShardHost(shard->options(), nullptr));
  host->shard_.store(shard, std::memory_order_release);
  return host;
}

Result<std::unique_ptr<ShardHost>> ShardHost::AwaitingModel(const ShardOptions& options, Builder build) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (!build) return InvalidArgumentError("a shard host awaiting its model needs a builder");
  return std::unique_ptr<ShardHost>(new ShardHost(options, std::move(build)));
}

Status ShardHost::NotReady() const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string who = "shard " + std::to_string(options_.shard_id);
  if (!fixed_) {
    return UnavailableError(who + " is waiting for its model: no worker has registered the model's schema yet");
  }
  return UnavailableError(who + " is waiting for the initial values of " + std::to_string(MissingLocked().size()) +
                          " of its " + std::to_string(own_.size()) + " chunks");
}

Status ShardHost::CheckCaller(WorkerId worker, const std::string& auth_token) const {
  if (worker < 0 || worker >= options_.num_workers) {
    return InvalidArgumentError("worker id " + std::to_string(worker) + " is outside 0.." +
                                std::to_string(options_.num_workers - 1));
  }
  if (!options_.auth_token.empty() && auth_token != options_.auth_token) {
    return FailedPreconditionError("authentication failed for worker " + std::to_string(worker));
  }
  return Status::Ok();
}

std::vector<ChunkKey> ShardHost::MissingLocked() const {
  std::vector<ChunkKey> missing;
  for (ChunkKey k : own_) {
    if (values_->count(k) == 0) missing.push_back(k);
  }
  return missing;
}

Result<SchemaReply> ShardHost::RegisterSchema(WorkerId worker, const ModelSpec& proposal,
                                              const std::string& auth_token) {
  GEOPS_RETURN_IF_ERROR(CheckCaller(worker, auth_token));
  if (!proposal.client_defined()) {
    return InvalidArgumentError("a registered schema must give every table's initial values (kProvided)");
  }
  if (Shard* s = shard()) {
    if (!s->spec().client_defined()) {
      return FailedPreconditionError(
          "shard " + std::to_string(options_.shard_id) +
          " trains the topology's built-in model; a model defined by the worker needs [model] workload = \"client\"");
    }
    GEOPS_RETURN_IF_ERROR(s->spec().CheckSameSchema(proposal, "this site trains"));
    return SchemaReply{s->spec().Fingerprint(), {}};
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (Shard* s = shard()) {  // built while this call waited for the lock
    GEOPS_RETURN_IF_ERROR(s->spec().CheckSameSchema(proposal, "this site trains"));
    return SchemaReply{s->spec().Fingerprint(), {}};
  }
  if (fixed_) {
    GEOPS_RETURN_IF_ERROR(
        fixed_->CheckSameSchema(proposal, "worker " + std::to_string(fixed_by_) + " registered first"));
  } else {
    fixed_ = proposal;
    fixed_by_ = worker;
    own_ = proposal.ChunksOfShard(options_.shard_id, options_.num_shards);
    values_ = std::make_shared<ChunkValuesMap>();
    if (own_.empty()) {  // more shards than chunks: nothing to wait for
      const uint64_t fingerprint = fixed_->Fingerprint();
      GEOPS_RETURN_IF_ERROR(BuildLocked());
      return SchemaReply{fingerprint, {}};
    }
  }
  return SchemaReply{fixed_->Fingerprint(), MissingLocked()};
}

Result<int64_t> ShardHost::InitValues(WorkerId worker, uint64_t model_fingerprint,
                                      std::span<const ChunkKey> keys, std::span<const float> values,
                                      const std::string& auth_token) {
  GEOPS_RETURN_IF_ERROR(CheckCaller(worker, auth_token));
  const int64_t bytes = static_cast<int64_t>(values.size_bytes());
  if (bytes > options_.max_batch_bytes) {
    return ResourceExhaustedError("initial values of " + std::to_string(bytes) + " bytes exceed max_batch_bytes " +
                                  std::to_string(options_.max_batch_bytes) + "; send fewer chunks per call");
  }
  if (Shard* s = shard()) {
    if (model_fingerprint != s->spec().Fingerprint()) {
      return FailedPreconditionError("initial values for another model than the one this site trains");
    }
    return int64_t{0};
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (Shard* s = shard()) {
    (void)s;
    return int64_t{0};
  }
  if (!fixed_) {
    return FailedPreconditionError("initial values before any schema: register the model's schema first");
  }
  if (model_fingerprint != fixed_->Fingerprint()) {
    return FailedPreconditionError("initial values for another model than the one worker " +
                                   std::to_string(fixed_by_) + " registered");
  }
  // Validate the whole batch before keeping any of it.
  std::set<ChunkKey> seen;
  int64_t offset = 0;
  for (ChunkKey k : keys) {
    if (!fixed_->HasChunk(k) || fixed_->ShardOf(k, options_.num_shards) != options_.shard_id) {
      return InvalidArgumentError("initial values for chunk (" + std::to_string(k.table) + ", " +
                                  std::to_string(k.chunk) + "), which shard " +
                                  std::to_string(options_.shard_id) + " does not hold");
    }
    if (!seen.insert(k).second) {
      return InvalidArgumentError("initial values name chunk " + std::to_string(k.chunk) + " of table '" +
                                  fixed_->table(k.table).name + "' twice");
    }
    offset += fixed_->ChunkElements(k);
  }
  if (offset != static_cast<int64_t>(values.size())) {
    return InvalidArgumentError("initial values hold " + std::to_string(values.size()) + " floats, expected " +
                                std::to_string(offset) + " for " + std::to_string(keys.size()) + " chunks");
  }
  offset = 0;
  for (ChunkKey k : keys) {
    const int64_t n = fixed_->ChunkElements(k);
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(values[offset + i])) {
        return InvalidArgumentError("initial value " + std::to_string(fixed_->ChunkOffset(k) + i) +
                                    " of table '" + fixed_->table(k.table).name + "' is NaN or infinite");
      }
    }
    offset += n;
  }
  offset = 0;
  for (ChunkKey k : keys) {
    const int64_t n = fixed_->ChunkElements(k);
    if (values_->count(k) == 0) {
      (*values_)[k] = std::vector<float>(values.begin() + offset, values.begin() + offset + n);
    }
    offset += n;
  }
  const int64_t missing = static_cast<int64_t>(MissingLocked().size());
  if (missing > 0) return missing;
  GEOPS_RETURN_IF_ERROR(BuildLocked());
  return int64_t{0};
}

Status ShardHost::BuildLocked() {
  Result<ModelSpec> spec = fixed_->WithInitialValues(values_);
  Result<Shard*> built = spec.ok() ? build_(*spec) : Result<Shard*>(spec.status());
  if (!built.ok()) {
    fixed_.reset();
    own_.clear();
    values_.reset();
    return built.status();
  }
  shard_.store(*built, std::memory_order_release);
  return Status::Ok();
}

}  // namespace geops::datacenter
