#include "datacenter/shard_host.h"


namespace geops::datacenter {

std::unique_ptr<ShardHost> ShardHost::Serving(Shard* shard) {
  std::unique_ptr<ShardHost> host(new ShardHost(shard->options(), nullptr, nullptr));
  host->shard_.store(shard, std::memory_order_release);
  return host;
}

Result<std::unique_ptr<ShardHost>> ShardHost::AwaitingModel(const ShardOptions& options, Builder build,
                                                          PeerCheck peer_check) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (!build) return InvalidArgumentError("a shard host awaiting its model needs a builder");
  return std::unique_ptr<ShardHost>(new ShardHost(options, std::move(build), std::move(peer_check)));
}

void ShardHost::Fail(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  failure_ = why.ok() ? InternalError("shard host failed without a reason") : why;
  failed_.store(true, std::memory_order_release);
}

std::optional<ModelSpec> ShardHost::FixedModel() const {
  if (Shard* s = shard_.load(std::memory_order_acquire)) return s->spec();
  std::lock_guard<std::mutex> lock(mu_);
  return fixed_;
}

Status ShardHost::NotReady() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_acquire)) return failure_;
  const std::string who = "shard " + std::to_string(options_.shard_id);
  if (!fixed_) {
    return UnavailableError(who + " is waiting for its model: no worker has registered the model's schema yet");
  }
 if (!peers_checked_) return UnavailableError(who + " is comparing its model with the other sites'");
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

Result<std::optional<SchemaReply>> ShardHost::AgainstFixedLocked(const ModelSpec& proposal) const {
  if (failed_.load(std::memory_order_acquire)) return failure_;
  if (Shard* s = shard_.load(std::memory_order_acquire)) {
    if (!s->spec().client_defined()) {
      return FailedPreconditionError(
          "shard " + std::to_string(options_.shard_id) +
          " trains the topology's built-in model; a model defined by the worker needs [model] workload = \"client\"");
    }
    GEOPS_RETURN_IF_ERROR(s->spec().CheckSameSchema(proposal, "this site trains"));
    return std::optional<SchemaReply>(SchemaReply{s->spec().Fingerprint(), {}});
  }
  if (fixed_) {
    GEOPS_RETURN_IF_ERROR(
        fixed_->CheckSameSchema(proposal, "worker " + std::to_string(fixed_by_) + " registered first"));
    return std::optional<SchemaReply>(SchemaReply{fixed_->Fingerprint(), MissingLocked()});
  }
  return std::optional<SchemaReply>();
}

Result<SchemaReply> ShardHost::RegisterSchema(WorkerId worker, const ModelSpec& proposal,
                                              const std::string& auth_token) {
  GEOPS_RETURN_IF_ERROR(CheckCaller(worker, auth_token));
  if (!proposal.client_defined()) {
    return InvalidArgumentError("a registered schema must give every table's initial values (kProvided)");
  }
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    GEOPS_ASSIGN_OR_RETURN(std::optional<SchemaReply> known, AgainstFixedLocked(proposal));
    if (known) return *std::move(known);
    // Fixed first, asked second: a peer that asks now already sees this
    // model, so of two sites fixing different models at once at least one
    // finds the other's.
    fixed_ = proposal;
    fixed_by_ = worker;
    own_ = proposal.ChunksOfShard(options_.shard_id, options_.num_shards);
    values_ = std::make_shared<ChunkValuesMap>();
    validator_.emplace(&*fixed_, options_.shard_id, options_.num_shards, options_.max_batch_bytes);
    peers_checked_ = !peer_check_;
    generation = ++generation_;
  }
  if (peer_check_) {
    // Without the lock: the peers' own checks ask this host meanwhile.
    Status peers = peer_check_(proposal);
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_ || !fixed_) {
      return UnavailableError("shard " + std::to_string(options_.shard_id) + ": the model changed while it was "
                              "compared with the peer sites; register again");
    }
    if (!peers.ok()) {
      UnfixLocked();
      refused_ = peers;
      return peers;
    }
    peers_checked_ = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (generation != generation_ || !fixed_) {
    return UnavailableError("shard " + std::to_string(options_.shard_id) + ": the model changed while it was "
                            "being fixed; register again");
  }
  const uint64_t fingerprint = fixed_->Fingerprint();
  // Nothing to wait for (more shards than chunks), or other workers sent
  // every value while the peers were asked.
  if (MissingLocked().empty()) GEOPS_RETURN_IF_ERROR(BuildLocked());
  return SchemaReply{fingerprint, MissingLocked()};
}

void ShardHost::UnfixLocked() {
  validator_.reset();
  fixed_.reset();
  own_.clear();
  values_.reset();
  peers_checked_ = false;
  ++generation_;
}

Result<int64_t> ShardHost::InitValues(WorkerId worker, uint64_t model_fingerprint,
                                      std::span<const ChunkKey> keys, std::span<const float> values,
                                      const std::string& auth_token) {
  GEOPS_RETURN_IF_ERROR(CheckCaller(worker, auth_token));
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_acquire)) return failure_;
  if (Shard* s = shard_.load(std::memory_order_acquire)) {
    if (model_fingerprint != s->spec().Fingerprint()) {
      return FailedPreconditionError("initial values for another model than the one this site trains");
    }
    return int64_t{0};
  }
  if (!fixed_) {
    if (!refused_.ok()) return FailedPreconditionError("initial values for a model this site refused: " + refused_.message());
    return FailedPreconditionError("initial values before any schema: register the model's schema first");
  }
  if (model_fingerprint != fixed_->Fingerprint()) {
    return FailedPreconditionError("initial values for another model than the one worker " +
                                   std::to_string(fixed_by_) + " registered");
  }
  // The whole batch is checked before any of it is kept.
  GEOPS_RETURN_IF_ERROR(validator_->CheckValues(keys, values, "initial values"));
  int64_t offset = 0;
  for (ChunkKey k : keys) {
    const int64_t n = fixed_->ChunkElements(k);
    if (values_->count(k) == 0) {
      (*values_)[k] = std::vector<float>(values.begin() + offset, values.begin() + offset + n);
    }
    offset += n;
  }
  const int64_t missing = static_cast<int64_t>(MissingLocked().size());
  if (missing > 0) return missing;
  if (!peers_checked_) return int64_t{0};  // the registration comparing it with the peers builds it
  GEOPS_RETURN_IF_ERROR(BuildLocked());
  return int64_t{0};
}

Status ShardHost::BuildLocked() {
  Result<ModelSpec> spec = fixed_->WithInitialValues(values_);
  Result<Shard*> built = spec.ok() ? build_(*spec) : Result<Shard*>(spec.status());
  if (!built.ok()) {
    UnfixLocked();
    return built.status();
  }
  shard_.store(*built, std::memory_order_release);
  return Status::Ok();
}

}  // namespace geops::datacenter
