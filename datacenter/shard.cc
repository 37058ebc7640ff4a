// The Shard implementation: ChunkStore holds the values, ClockTracker the SSP
// clocks and leases, BatchValidator checks every request before it touches
// either. The class is private to this file; Shard::Create is the factory.
//
// Lock discipline:
//   worker_mu_[w]  serialises Update and AdvanceClock of worker w, so that a
//                  batch's admission and its apply are one step with respect
//                  to that worker's retries and clock advance: once
//                  AdvanceClock(c + 1) returns, the clock-c batch is in the
//                  store, and a concurrent retry waits for the original.
//   ClockTracker::mu_ and the per-chunk locks are taken inside those
//                  classes and released before they return; neither is held
//                  while taking the other. An update holds the locks of all
//                  its chunks at once (ChunkStore::BatchGuard, taken in
//                  local-index order) while it checks that every result is
//                  finite and adds: all or nothing.
//   ShardPersister's Mutation scope (with a store) spans a batch's admission
//                  and apply, or a clock advance, so that a commit never
//                  holds half of one. It is entered under worker_mu_[w], and
//                  worker_mu_[w] stays held while the call waits for its
//                  commit: a concurrent retry of the same worker is not
//                  answered before the original's commit is written.
//   apply_mu_      serialises ApplyRemote and ResetOrigin. ResetOrigin also
//                  takes every worker_mu_, in id order (no other path holds
//                  two), so no update or clock advance runs during a reset.
//   Order: apply_mu_ -> worker_mu_[w] -> persister barrier ->
//   (ClockTracker::mu_ | one chunk lock). last_ticket_[w] is guarded by
//   worker_mu_[w].
// Readers take only the tracker's mutex (to wait) and then, one at a time,
// shared chunk locks while copying; they never hold worker_mu_ and never
// wait for commits.
#include "datacenter/shard.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "datacenter/batch_validator.h"
#include "datacenter/chunk_store.h"
#include "datacenter/clock_tracker.h"
#include "datacenter/read_sessions.h"
#include "common/float_kernels.h"
#include "datacenter/remote_applier.h"
#include "datacenter/registration_hold.h"
#include "datacenter/shard_persister.h"

namespace geops::datacenter {
namespace {

// Bounds the per-worker state a misconfigured shard would allocate.
constexpr int kMaxWorkers = 1 << 16;
// Least time allowed for the first commit of a fresh store (every chunk).
constexpr int64_t kFirstCommitWaitMs = 60000;

// A float for an error message: "inf", "nan", or shortest round-trip digits.
std::string FloatText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
  return buf;
}

// Compares without an early exit, so timing does not reveal a prefix.
bool TokensEqual(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

class ShardImpl;

// The RunDurable scope this thread is inside, if any.
struct OpenScope {
  const ShardImpl* shard = nullptr;
  ShardPersister::Mutation* mutation = nullptr;
};
thread_local OpenScope open_scope;

class ShardImpl final : public Shard {
 public:
  using Shard::Heartbeat;
  using Shard::RegisterWorker;
  using Shard::Update;
  ShardImpl(const ModelSpec& spec, const ShardOptions& options)
      : Shard(spec, options),
        fingerprint_(spec_.Fingerprint()),
        time_(options.time != nullptr ? options.time : SystemTime()),
        tracker_(options.shard_id, options.num_workers,
                 std::chrono::milliseconds(options.worker_lease_ms), time_),
        worker_mu_(new std::mutex[options.num_workers]),
        last_ticket_(new uint64_t[options.num_workers]()) {}

  Status Init(ShardStore* persistent) {
    GEOPS_ASSIGN_OR_RETURN(store_, ChunkStore::Create(&spec_, options_.shard_id, options_.num_shards));
    sessions_ = std::make_unique<ReadSessions>(store_.get(), options_.ChangeReaders());
    validator_ = std::make_unique<BatchValidator>(&spec_, options_.shard_id, options_.num_shards,
                                                  options_.max_batch_bytes);
    remote_ = std::make_unique<RemoteApplier>(&spec_, store_.get(), options_.shard_id, options_.num_shards);
    if (persistent == nullptr) return Status::Ok();
    return Recover(persistent);
  }

  Result<RegisterReply> RegisterWorker(WorkerId worker, uint64_t model_fingerprint, const std::string& auth_token,
                                       const WorkerSession& session) override {
    Status s = CheckWorker(worker);
    if (s.ok() && !options_.auth_token.empty() && !TokensEqual(auth_token, options_.auth_token)) {
      s = FailedPreconditionError("worker " + std::to_string(worker) + ": authentication failed for shard " +
                                  std::to_string(options_.shard_id) + "; check the site's auth token");
    }
    if (s.ok() && model_fingerprint != 0 && model_fingerprint != fingerprint_) {
      s = FailedPreconditionError("model fingerprint mismatch: worker " + std::to_string(worker) + " has " +
                                  FingerprintText(model_fingerprint) + ", shard " + std::to_string(options_.shard_id) +
                                  " has " + FingerprintText(fingerprint_) + "; both must load the same model spec");
    }
    if (s.ok()) s = hold_.Check(options_.shard_id);
    if (!s.ok()) return Reject(std::move(s));
    Result<ClockTracker::Registration> registered = tracker_.Register(worker, session);
    if (!registered.ok()) return Reject(registered.status());
    const ClockTracker::Registration r = *registered;
    RegisterReply reply;
    reply.shard_id = options_.shard_id;
    reply.num_shards = options_.num_shards;
    reply.worker_clock = r.worker_clock;
    reply.shard_clock = r.shard_clock;
    reply.lease_ms = options_.worker_lease_ms;
    reply.model_fingerprint = fingerprint_;
    return reply;
  }

  Result<ReadReply> Read(WorkerId worker, Clock clock, int64_t staleness,
                         std::span<const ChunkKey> keys, float* out, Deadline deadline) override {
    int64_t elements = 0;
    GEOPS_ASSIGN_OR_RETURN(const Clock shard_clock, WaitReadable(worker, clock, staleness, keys, deadline, &elements));
    float* dst = out;
    for (const ChunkKey key : keys) {
      const int64_t local = store_->LocalIndex(key);
      store_->Read(local, dst);
      dst += store_->elements(local);
    }
    reads_served_.fetch_add(1, std::memory_order_relaxed);
    read_bytes_.fetch_add(elements * int64_t{sizeof(float)}, std::memory_order_relaxed);
    ReadReply reply;
    reply.shard_clock = shard_clock;
    return reply;
  }

  Result<ReadReply> ReadChanged(WorkerId worker, Clock clock, int64_t staleness, std::span<const ChunkKey> keys,
                                uint64_t since, ChangedValues* out, Deadline deadline) override {
    int64_t elements = 0;
    GEOPS_ASSIGN_OR_RETURN(const Clock shard_clock, WaitReadable(worker, clock, staleness, keys, deadline, &elements));
    sessions_->Serve(worker, since, keys, out);
    reads_served_.fetch_add(1, std::memory_order_relaxed);
    read_bytes_.fetch_add(static_cast<int64_t>(out->values.size() * sizeof(float) + out->runs.size() * sizeof(uint32_t)),
                          std::memory_order_relaxed);
    ReadReply reply;
    reply.shard_clock = shard_clock;
    return reply;
  }

  // A read's checks and wait (the SSP clock, then the WAN gate): the shard
  // clock it is served at, with *elements the floats `keys` hold.
  Result<Clock> WaitReadable(WorkerId worker, Clock clock, int64_t staleness, std::span<const ChunkKey> keys,
                             Deadline deadline, int64_t* elements) {
    Status s = CheckWorker(worker);
    if (s.ok()) s = CheckClock(clock, "read");
    if (s.ok() && staleness < kAsync) {
      s = InvalidArgumentError("read: staleness must be >= 0, or -1 for async; got " + std::to_string(staleness));
    }
    if (s.ok()) s = validator_->CheckRead(keys, elements);
    if (!s.ok()) return Reject(std::move(s));

    const Deadline capped = deadline.Min(ReadWaitCap());
    double waited = 0;
    Result<Clock> shard_clock = tracker_.WaitForClock(worker, clock, staleness, capped.when(), &waited);
    if (waited > 0) read_wait_ns_.fetch_add(static_cast<int64_t>(waited * 1e9), std::memory_order_relaxed);
    if (!shard_clock.ok()) return Reject(shard_clock.status());
    if (ReadGate* gate = gate_.load(std::memory_order_acquire); gate != nullptr) {
      double gate_waited = 0;
      bool all_finished = true;
      for (const WorkerState& w : tracker_.States()) all_finished = all_finished && w.finished;
      Status gated = gate->WaitReadable(keys, *shard_clock, all_finished, capped, &gate_waited);
      if (gate_waited > 0) read_wait_ns_.fetch_add(static_cast<int64_t>(gate_waited * 1e9), std::memory_order_relaxed);
      waited += gate_waited;
      if (!gated.ok()) {
        read_wait_hist_.Observe(waited);
        return Reject(std::move(gated));
      }
    }
    read_wait_hist_.Observe(waited);
    return *shard_clock;
  }

  void CountRefused(StatusCode code) override { Count(code); }

  void BeginStop() override {
    const std::string why = "shard " + std::to_string(options_.shard_id) + " is stopping";
    tracker_.Interrupt(why);
    if (ReadGate* gate = gate_.load(std::memory_order_acquire); gate != nullptr) gate->Interrupt(why);
  }

  Result<UpdateReply> Update(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                             std::span<const float> values, int32_t part) override {
    // (Shard::Update(worker, clock, keys, values) is part 0.)
    Status s = CheckWorker(worker);
    if (s.ok()) s = CheckClock(clock, "update");
    // The values' own NaN/Inf check is the sum check below (one pass).
    if (s.ok()) s = validator_->CheckShape(keys, values);
    if (s.ok()) {
      if (MemoryGuard* guard = memory_guard_.load(std::memory_order_acquire)) s = guard->AdmitUpdate();
    }
    if (!s.ok()) return Reject(std::move(s));

    std::lock_guard<std::mutex> worker_lock(worker_mu_[worker]);
    if (persister_ != nullptr) {
      s = persister_->failure();
      if (!s.ok()) return Reject(std::move(s));
    }
    std::optional<ShardPersister::Mutation> mutation;
    if (persister_ != nullptr) mutation.emplace(persister_->Begin());
    Result<ClockTracker::Admission> admission = tracker_.AdmitUpdate(worker, clock, part);
    if (!admission.ok()) return Reject(admission.status());
    UpdateReply reply;
    reply.shard_clock = admission->shard_clock;
    if (!admission->apply) {
      mutation.reset();
      batches_duplicate_.fetch_add(1, std::memory_order_relaxed);
      s = WaitDurable(worker);  // the original may still be on its way to disk
      if (!s.ok()) return Reject(std::move(s));
      return reply;
    }
    std::vector<int64_t> locals(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) locals[i] = store_->LocalIndex(keys[i]);
    std::optional<ChunkStore::BatchGuard::NonFinite> bad;
    {
      // All or nothing: no stored value may become NaN or infinite.
      // The worker's own copy gets this batch from the worker (Shard::ReadChanged).
      ChunkStore::BatchGuard guard(store_.get(), locals, sessions_->WriterSlot(worker));
      bad = guard.CheckSum(values.data());
      if (!bad) guard.Add(values.data());
    }
    if (bad) {
      tracker_.RevokeAdmission(worker, clock, *admission);
      mutation.reset();
      if (!std::isfinite(bad->delta)) return Reject(validator_->CheckFinite(keys, values));
      const ChunkKey key = keys[bad->chunk];
      return Reject(InvalidArgumentError(
          "update of worker " + std::to_string(worker) + " at clock " + std::to_string(clock) +
          " refused, nothing applied: table '" + spec_.table(key.table).name + "' chunk " +
          std::to_string(key.chunk) + " element " + std::to_string(bad->element) + " would become " +
          FloatText(bad->stored + bad->delta) + " (stored " + FloatText(bad->stored) + " + update " +
          FloatText(bad->delta) + "); every stored value must stay finite"));
    }
    if (mutation) {
      for (int64_t local : locals) mutation->MarkChunk(local);
    }
    // Inside the persistence scope: what the tap records (the WAN layer's
    // unshipped mass) commits together with the chunks.
    if (ReplicationTap* tap = tap_.load(std::memory_order_acquire); tap != nullptr) tap->OnLocalUpdate(worker, clock, part, keys, values);
    if (mutation) {
      mutation->MarkWorker(worker);
      last_ticket_[worker] = mutation->Finish();
    }
    batches_applied_.fetch_add(1, std::memory_order_relaxed);
    update_bytes_.fetch_add(static_cast<int64_t>(values.size_bytes()), std::memory_order_relaxed);
    s = WaitDurable(worker);
    if (!s.ok()) return Reject(std::move(s));
    reply.applied = true;
    return reply;
  }

  Result<Clock> AdvanceClock(WorkerId worker, Clock new_clock, bool finished) override {
    Status s = CheckWorker(worker);
    if (s.ok()) s = CheckClock(new_clock, "AdvanceClock");
    if (!s.ok()) return Reject(std::move(s));
    if (ReadGate* gate = gate_.load(std::memory_order_acquire); gate != nullptr) {
      // The WAN drift bound holds clock advances too, not only reads: a
      // worker that serves its reads from its cache would otherwise run on.
      double waited = 0;
      Status gated = gate->WaitAdvance(new_clock, ReadWaitCap(), &waited);
      if (waited > 0) read_wait_ns_.fetch_add(static_cast<int64_t>(waited * 1e9), std::memory_order_relaxed);
      if (!gated.ok()) return Reject(std::move(gated));
    }
    std::lock_guard<std::mutex> worker_lock(worker_mu_[worker]);
    if (persister_ == nullptr) {
      Result<Clock> clock = tracker_.Advance(worker, new_clock, finished);
      if (!clock.ok()) return Reject(clock.status());
      TapClock(*clock);
      return clock;
    }
    s = persister_->failure();
    if (!s.ok()) return Reject(std::move(s));
    ShardPersister::Mutation mutation = persister_->Begin();
    Result<Clock> clock = tracker_.Advance(worker, new_clock, finished);
    if (!clock.ok()) return Reject(clock.status());
    mutation.MarkWorker(worker);
    last_ticket_[worker] = mutation.Finish();
    if (durability_ == Durability::kOff) {
      // A commit per shard clock tick; a worker's advance that does not move
      // the shard clock rides along with the next one.
      if (last_tick_.exchange(*clock, std::memory_order_relaxed) != *clock) {
        persister_->RequestCommit(last_ticket_[worker]);
      }
    } else {
      s = WaitDurable(worker);
      if (!s.ok()) return Reject(std::move(s));
    }
    TapClock(*clock);
    return clock;
  }

  Status Flush(Deadline deadline) override {
    return persister_ == nullptr ? Status::Ok() : persister_->Flush(deadline);
  }

  Status Heartbeat(WorkerId worker, uint64_t session) override {
    Status s = CheckWorker(worker);
    if (s.ok()) s = tracker_.Touch(worker, session);
    if (!s.ok()) return Reject(std::move(s));
    return s;
  }

  ShardStatus GetStatus() const override {
    ShardStatus st;
    st.shard_id = options_.shard_id;
    st.num_shards = options_.num_shards;
    st.shard_clock = tracker_.ShardClock();
    st.num_chunks = store_->num_chunks();
    st.num_elements = store_->num_elements();
    st.update_batches_applied = batches_applied_.load(std::memory_order_relaxed);
    st.update_batches_duplicate = batches_duplicate_.load(std::memory_order_relaxed);
    st.update_bytes_applied = update_bytes_.load(std::memory_order_relaxed);
    st.reads_served = reads_served_.load(std::memory_order_relaxed);
    st.read_bytes_served = read_bytes_.load(std::memory_order_relaxed);
    st.requests_rejected = rejected_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < rejected_by_code_.size(); ++i) {
      st.rejected_by_code[i] = rejected_by_code_[i].load(std::memory_order_relaxed);
    }
    st.read_wait_seconds = static_cast<double>(read_wait_ns_.load(std::memory_order_relaxed)) * 1e-9;
    st.read_wait = read_wait_hist_.Snapshot();
    if (persister_ != nullptr) {
      const PersisterStats ps = persister_->stats();
      st.persistent = true;
      st.store_commits = ps.commits;
      st.store_bytes_committed = ps.bytes;
      st.store_commit_seconds = ps.seconds;
      st.store_commit = ps.commit_latency;
      st.store_chunks_saved = ps.chunks_saved;
      st.store_peak_saved_bytes = ps.peak_saved_bytes;
    }
    if (const MemoryGuard* guard = memory_guard_.load(std::memory_order_acquire)) {
      const MemoryGuard::Stats ms = guard->stats();
      st.memory_budget_bytes = ms.budget_bytes;
      st.memory_resident_bytes = ms.resident_bytes;
      st.memory_peak_resident_bytes = ms.peak_resident_bytes;
      st.memory_updates_refused = ms.updates_refused;
      st.memory_over_budget = ms.over;
    }
    st.workers = tracker_.States();
    return st;
  }

  void Snapshot(std::vector<std::pair<ChunkKey, std::vector<float>>>* out) const override {
    store_->Snapshot(out);
  }

  void SetMemoryGuard(MemoryGuard* guard) override { memory_guard_.store(guard, std::memory_order_release); }

  void AttachReplication(ReplicationTap* tap, ReadGate* gate) override {
    tap_.store(tap, std::memory_order_release);
    gate_.store(gate, std::memory_order_release);
    // The tap learns where the shard stands now: a shard recovered from its
    // store may be far into the run, or have every worker finished, in which
    // case no clock advance will come to say so and its site must still
    // drain to its peers.
    if (tap != nullptr) TapClock(tracker_.ShardClock());
  }

  // Remote deltas: validated and applied by RemoteApplier; with a store the
  // changed chunks go into the next commit like local ones.
  Result<RemoteApplyResult> ApplyRemote(SiteId origin, uint64_t seq,
                                        std::span<const RemoteChunkDelta> deltas) override {
    if (persister_ != nullptr) {
      Status s = persister_->failure();
      if (!s.ok()) return Reject(std::move(s));
    }
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    std::optional<ShardPersister::Mutation> mutation;
    Result<RemoteApplyResult> r = remote_->Apply(
        origin, seq, deltas,
        [&] {
          if (persister_ != nullptr) mutation.emplace(persister_->Begin());
        },
        [&](int64_t local) {
          if (mutation) mutation->MarkChunk(local);
        });
    if (mutation && r.ok() && r->quarantined) {
      // Nothing applied, so nothing for the ledger; the consumed seq is
      // durable like an applied one, or a restart would wait for it forever.
      // The batch itself is kept beside it, for an operator to look at.
      mutation->MarkOrigin(origin, seq);
      QuarantineRecord q{origin, seq, static_cast<int64_t>(UnixSeconds() * 1e6), r->quarantine, {}};
      q.chunks.reserve(deltas.size());
      for (const RemoteChunkDelta& d : deltas) {
        q.chunks.push_back(LedgerAdd{origin, d.key, d.num_elements, {d.indices.begin(), d.indices.end()},
                                     {d.values.begin(), d.values.end()}});
      }
      mutation->Quarantine(std::move(q));
    }
    if (mutation && r.ok() && r->applied) {
      // In the same commit as the chunks: the seq, and the deltas in the
      // origin's ledger (what ResetOrigin would take back).
      mutation->MarkOrigin(origin, seq);
      for (const RemoteChunkDelta& d : deltas) {
        if (d.indices.empty()) continue;
        mutation->AddLedger(LedgerAdd{origin, d.key, d.num_elements, {d.indices.begin(), d.indices.end()},
                                      {d.values.begin(), d.values.end()}});
      }
    }
    const uint64_t ticket = mutation ? mutation->Finish() : 0;
    if (!r.ok()) return Reject(r.status());
    // The sender forgets a batch once it is acknowledged: acknowledge only
    // what a crash cannot take back.
    if (persister_ != nullptr && durability_ != Durability::kOff && ticket != 0) {
      Status s = persister_->AwaitDurable(ticket, Deadline::InMs(options_.max_commit_wait_ms));
      if (!s.ok()) return Reject(std::move(s));
    }
    return r;
  }

  Status ResetOrigin(SiteId origin, const std::function<void(std::span<const ChunkMass>)>& change,
                     Deadline deadline) override {
    if (persister_ == nullptr) {
      return FailedPreconditionError("shard " + std::to_string(options_.shard_id) + " keeps no store, so it has no "
                                     "ledger of what site " + std::to_string(origin) +
                                     " contributed and cannot take it back");
    }
    GEOPS_RETURN_IF_ERROR(persister_->failure());
    // No remote apply and no local update or clock advance may run from
    // here to the end of the scope: every worker's lock, in id order (the
    // order no other path takes more than one of).
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    std::vector<std::unique_lock<std::mutex>> worker_locks;
    worker_locks.reserve(static_cast<size_t>(options_.num_workers));
    for (WorkerId w = 0; w < options_.num_workers; ++w) worker_locks.emplace_back(worker_mu_[w]);
    // Every applied delta is in the store's ledgers once this returns.
    GEOPS_RETURN_IF_ERROR(persister_->Flush(deadline).WithContext("resetting site " + std::to_string(origin)));

    std::map<ChunkKey, std::vector<double>> remote_sum;  // all origins
    std::vector<LedgerRow> retract;
    GEOPS_RETURN_IF_ERROR(ReadLedgers(origin, &remote_sum, &retract));

    uint64_t ticket;
    {
      ShardPersister::Mutation mutation = persister_->Begin();
      const std::vector<ChunkMass> own = OwnMass(remote_sum);
      std::vector<float> values;
      for (const LedgerRow& row : retract) {
        const int64_t local = store_->LocalIndex(row.key);
        values.resize(row.values.size());
        store_->Read(local, values.data());
        for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(double{values[i]} - row.values[i]);
        store_->Overwrite(local, values.data());
        mutation.MarkChunk(local);
      }
      remote_->Restore(origin, 0);
      mutation.ForgetOrigin(origin);
      mutation.ClearLedger(origin);
      change(own);
      mutation.MarkOutbound();
      ticket = mutation.Finish();
    }
    worker_locks.clear();
    if (durability_ == Durability::kOff) {
      persister_->RequestCommit(ticket);
      return Status::Ok();
    }
    return persister_->AwaitDurable(ticket, deadline);
  }

  bool SetOutboundParticipant(OutboundParticipant* participant) override {
    if (persister_ == nullptr) return false;
    persister_->SetOutboundParticipant(participant);
    return true;
  }

  Status RunDurable(const std::function<void()>& change, Deadline deadline) override {
    if (persister_ == nullptr) {
      change();
      return Status::Ok();
    }
    uint64_t ticket;
    {
      ShardPersister::Mutation mutation = persister_->Begin();
      // SetChunkValue from inside `change` (the outer step) joins this scope:
      // a second Begin on this thread would wait for a commit that waits for
      // this scope to end.
      const OpenScope outer = open_scope;
      open_scope = OpenScope{this, &mutation};
      change();
      open_scope = outer;
      mutation.MarkOutbound();
      ticket = mutation.Finish();
    }
    if (durability_ == Durability::kOff) {
      persister_->RequestCommit(ticket);
      return Status::Ok();
    }
    return persister_->AwaitDurable(ticket, deadline);
  }

  std::vector<OutboundRecord> TakeRecoveredOutbound() override {
    std::lock_guard<std::mutex> lock(recovered_mu_);
    return std::move(recovered_outbound_);
  }

  uint64_t LastAppliedSeq(SiteId origin) const override { return remote_->LastSeq(origin); }

  Clock ShardClock() const override { return tracker_.ShardClock(); }

  // The store's index of `key`, or InvalidArgument when this shard does
  // not hold it.
  Result<int64_t> HeldChunk(ChunkKey key) const {
    if (!spec_.HasChunk(key) || store_->LocalIndex(key) < 0) {
      return InvalidArgumentError("shard " + std::to_string(options_.shard_id) + " does not hold chunk (" +
                                  std::to_string(key.table) + ", " + std::to_string(key.chunk) + ")");
    }
    return store_->LocalIndex(key);
  }

  Status ReadChunkValue(ChunkKey key, float* out) const override {
    GEOPS_ASSIGN_OR_RETURN(int64_t local, HeldChunk(key));
    store_->Read(local, out);
    return Status::Ok();
  }

  Status ReadChunkElements(ChunkKey key, std::span<const uint32_t> at, float* out) const override {
    GEOPS_ASSIGN_OR_RETURN(int64_t local, HeldChunk(key));
    Status s;
    store_->Inspect(local, [&](std::span<const float> values) {
      for (size_t k = 0; k < at.size(); ++k) {
        if (at[k] >= values.size()) {
          s = InvalidArgumentError("element " + std::to_string(at[k]) + " past the end of chunk (" +
                                   std::to_string(key.table) + ", " + std::to_string(key.chunk) + ")");
          return;
        }
        out[k] = values[at[k]];
      }
    });
    return s;
  }

  Status CheckReadKeys(std::span<const ChunkKey> keys, int64_t* elements) const override {
    return validator_->CheckRead(keys, elements);
  }

  std::vector<WorkerRecord> WorkerRecords() const override {
    std::vector<WorkerRecord> out;
    out.reserve(static_cast<size_t>(options_.num_workers));
    for (WorkerId w = 0; w < options_.num_workers; ++w) out.push_back(tracker_.Record(w));
    return out;
  }

  Status ResumeWorkers(std::span<const WorkerRecord> records) override {
    for (const WorkerRecord& r : records) {
      GEOPS_RETURN_IF_ERROR(CheckWorker(r.worker));
      if (r.clock < 0 || r.last_update_clock < -1 || r.last_update_clock > r.clock) {
        return InvalidArgumentError("worker " + std::to_string(r.worker) + ": clock " + std::to_string(r.clock) +
                                    " with last update at clock " + std::to_string(r.last_update_clock));
      }
      if (tracker_.Record(r.worker).last_update_clock >= 0) {
        return FailedPreconditionError("worker " + std::to_string(r.worker) + " has updated shard " +
                                       std::to_string(options_.shard_id) + " already; its clock stays");
      }
    }
    std::optional<ShardPersister::Mutation> mutation;
    GEOPS_ASSIGN_OR_RETURN(ShardPersister::Mutation * scope, JoinScope(&mutation));
    for (const WorkerRecord& r : records) {
      tracker_.Restore(r);
      if (scope != nullptr) scope->MarkWorker(r.worker);
    }
    return Status::Ok();
  }

  void HoldWorkers(const std::string& why) override { hold_.Hold(why); }
  void ReleaseWorkers(const Status& outcome) override { hold_.Release(outcome); }

  Status SetChunkValue(ChunkKey key, std::span<const float> values) override {
    GEOPS_ASSIGN_OR_RETURN(const int64_t local, HeldChunk(key));
    if (static_cast<int64_t>(values.size()) != store_->elements(local)) {
      return InvalidArgumentError("chunk (" + std::to_string(key.table) + ", " + std::to_string(key.chunk) +
                                  ") has " + std::to_string(store_->elements(local)) + " floats, got " +
                                  std::to_string(values.size()));
    }
    const int64_t bad = FirstNonFinite(values.data(), static_cast<int64_t>(values.size()));
    if (bad >= 0) {
      return InvalidArgumentError("chunk (" + std::to_string(key.table) + ", " + std::to_string(key.chunk) +
                                  "): element " + std::to_string(bad) + " would become NaN or Inf; unchanged");
    }
    std::optional<ShardPersister::Mutation> mutation;
    GEOPS_ASSIGN_OR_RETURN(ShardPersister::Mutation * scope, JoinScope(&mutation));
    store_->Overwrite(local, values.data());
    if (scope != nullptr) scope->MarkChunk(local);
    return Status::Ok();
  }

 private:
  // The persistence scope a change to persistent state joins: RunDurable's
  // on this thread, or a new one in *own; null without a store.
  // Unavailable once the store failed.
  Result<ShardPersister::Mutation*> JoinScope(std::optional<ShardPersister::Mutation>* own) {
    if (persister_ == nullptr) return static_cast<ShardPersister::Mutation*>(nullptr);
    GEOPS_RETURN_IF_ERROR(persister_->failure());
    if (open_scope.shard == this) return open_scope.mutation;
    return &own->emplace(persister_->Begin());
  }

  // The longest any read or clock advance waits here, on the shard's time.
  Deadline ReadWaitCap() const {
    return Deadline(time_->Now() + std::chrono::milliseconds(options_.max_read_wait_ms));
  }

  Status CheckWorker(WorkerId worker) const {
    if (worker >= 0 && worker < options_.num_workers) return Status::Ok();
    return InvalidArgumentError("worker id " + std::to_string(worker) + " outside [0, " +
                                std::to_string(options_.num_workers) + ") for shard " +
                                std::to_string(options_.shard_id));
  }

  static Status CheckClock(Clock clock, const char* what) {
    if (clock >= 0) return Status::Ok();
    return InvalidArgumentError(std::string(what) + ": clock must be >= 0, got " + std::to_string(clock));
  }

  // Tells the tap the shard clock after an advance, and whether every worker
  // has finished.
  void TapClock(Clock shard_clock) {
    ReplicationTap* tap = tap_.load(std::memory_order_acquire);
    if (tap == nullptr) return;
    bool all_finished = true;
    for (const WorkerState& w : tracker_.States()) all_finished = all_finished && w.finished;
    tap->OnShardClock(shard_clock, all_finished);
  }

  // Counts a refused request and passes its status through.
  Status Reject(Status s) {
    Count(s.code());
    return s;
  }
  void Count(StatusCode code) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    const auto i = static_cast<size_t>(code);
    if (i < rejected_by_code_.size()) rejected_by_code_[i].fetch_add(1, std::memory_order_relaxed);
  }

  // Loads the store's state into the chunks and the tracker, then starts
  // the persister; a store never written gets everything in one commit.
  Status Recover(ShardStore* persistent) {
    GEOPS_ASSIGN_OR_RETURN(ShardState state, persistent->Load());
    GEOPS_RETURN_IF_ERROR(ValidateShardState(state, ShardStoreSpec::Of(spec_, options_), persistent->name()));
    for (size_t i = 0; i < state.chunks.size(); ++i) {
      store_->Overwrite(store_->LocalIndex(state.chunks.key(i)), state.chunks.values(i).data());
    }
    for (const WorkerRecord& r : state.workers) tracker_.Restore(r);
    for (const OriginRecord& r : state.origins) remote_->Restore(r.origin, r.seq);
    {
      std::lock_guard<std::mutex> lock(recovered_mu_);
      recovered_outbound_ = std::move(state.outbound);
    }
    durability_ = persistent->durability();
    persistent_ = persistent;
    persister_ = std::make_unique<ShardPersister>(persistent, store_.get(), &tracker_, options_.shard_id,
                                                  options_.num_workers);
    persister_->Start();
    if (state.commits > 0) return Status::Ok();
    persister_->MarkEverything();
    return persister_->Flush(Deadline::InMs(std::max<int64_t>(options_.max_commit_wait_ms, kFirstCommitWaitMs)))
        .WithContext("writing the first commit of " + persistent->name());
  }

  // Reads every origin's ledger from the store: their sum per chunk into
  // *remote_sum, and the rows of `origin` into *retract. DataLoss for a row
  // of a chunk this shard does not hold at that size.
  Status ReadLedgers(SiteId origin, std::map<ChunkKey, std::vector<double>>* remote_sum,
                     std::vector<LedgerRow>* retract) {
    for (SiteId o : remote_->Origins()) {
      GEOPS_ASSIGN_OR_RETURN(std::vector<LedgerRow> rows, persistent_->ReadLedger(o));
      for (const LedgerRow& row : rows) {
        const int64_t local = store_->LocalIndex(row.key);
        if (!spec_.HasChunk(row.key) || local < 0 ||
            static_cast<int64_t>(row.values.size()) != store_->elements(local)) {
          return DataLossError(persistent_->name() + ": the ledger of site " + std::to_string(o) +
                               " holds a chunk (" + std::to_string(row.key.table) + ", " +
                               std::to_string(row.key.chunk) + ") this shard does not hold at that size");
        }
        std::vector<double>& sum = (*remote_sum)[row.key];
        sum.resize(row.values.size(), 0.0);
        for (size_t i = 0; i < row.values.size(); ++i) sum[i] += row.values[i];
      }
      if (o == origin) *retract = std::move(rows);
    }
    return Status::Ok();
  }

  // This site's own cumulative mass, per chunk: the replica minus the
  // initial values (every site starts from them: they are nobody's
  // contribution) minus what every origin contributed (`remote_sum`).
  // REQUIRES: no update or remote apply in progress.
  std::vector<ChunkMass> OwnMass(const std::map<ChunkKey, std::vector<double>>& remote_sum) const {
    std::vector<ChunkMass> own;
    own.reserve(static_cast<size_t>(store_->num_chunks()));
    std::vector<float> values;
    std::vector<float> initial;
    for (int64_t local = 0; local < store_->num_chunks(); ++local) {
      values.resize(static_cast<size_t>(store_->elements(local)));
      initial.resize(values.size());
      store_->Read(local, values.data());
      ChunkMass m{store_->key(local), std::vector<float>(values.size())};
      spec_.InitChunk(m.key, initial.data());
      auto sum = remote_sum.find(m.key);
      for (size_t i = 0; i < values.size(); ++i) {
        const double remote = sum == remote_sum.end() ? 0.0 : sum->second[i];
        m.values[i] = static_cast<float>(double{values[i]} - double{initial[i]} - remote);
      }
      own.push_back(std::move(m));
    }
    return own;
  }

  // With durability sync or async: waits until the worker's last change is
  // written, up to max_commit_wait_ms. REQUIRES: worker_mu_[worker] held.
  Status WaitDurable(WorkerId worker) {
    if (persister_ == nullptr || durability_ == Durability::kOff) return Status::Ok();
    return persister_->AwaitDurable(last_ticket_[worker], Deadline::InMs(options_.max_commit_wait_ms));
  }

  const uint64_t fingerprint_;
  std::unique_ptr<ChunkStore> store_;  // set by Init(); thread-safe itself
  std::unique_ptr<ReadSessions> sessions_;  // set by Init(); incremental reads (Shard::ReadChanged)
  std::unique_ptr<BatchValidator> validator_;
  std::unique_ptr<RemoteApplier> remote_;                  // set by Init(); thread-safe itself
  std::atomic<ReplicationTap*> tap_{nullptr};              // see AttachReplication
  std::atomic<ReadGate*> gate_{nullptr};
  // Leases and read waits run on this time (commit waits on the real clock:
  // they wait for the disk).
  const TimeSource* const time_;
  ClockTracker tracker_;                          // thread-safe itself
  std::unique_ptr<std::mutex[]> worker_mu_;       // one per worker id, see the lock discipline above
  std::unique_ptr<uint64_t[]> last_ticket_;       // per worker: ticket of its last change, GUARDED_BY(worker_mu_[w])
  Durability durability_ = Durability::kSync;     // of the store; set by Init()
  ShardStore* persistent_ = nullptr;              // the store, when there is one; set by Init()
  std::mutex apply_mu_;                           // serialises ApplyRemote and ResetOrigin
  std::mutex recovered_mu_;
  std::vector<OutboundRecord> recovered_outbound_;  // GUARDED_BY(recovered_mu_)
  RegistrationHold hold_;                         // HoldWorkers / ReleaseWorkers; thread-safe itself

  std::atomic<int64_t> batches_applied_{0};
  std::atomic<int64_t> batches_duplicate_{0};
  std::atomic<int64_t> update_bytes_{0};
  std::atomic<int64_t> reads_served_{0};
  std::atomic<int64_t> read_bytes_{0};
  std::atomic<int64_t> rejected_{0};
  std::array<std::atomic<int64_t>, kNumStatusCodes> rejected_by_code_{};
  std::atomic<int64_t> read_wait_ns_{0};
  Histogram read_wait_hist_;
  std::atomic<Clock> last_tick_{0};  // durability off: shard clock of the last commit asked for
  std::atomic<MemoryGuard*> memory_guard_{nullptr};

  // Last member: destroyed first, so its final commit still sees the chunks
  // and the tracker. Null without a store.
  std::unique_ptr<ShardPersister> persister_;
};

}  // namespace

Result<std::unique_ptr<Shard>> Shard::Create(const ModelSpec& spec, const ShardOptions& options,
                                             ShardStore* store) {
  GEOPS_RETURN_IF_ERROR(options.Validate().WithContext("shard options"));
  if (options.num_workers > kMaxWorkers) {
    return InvalidArgumentError("shard options: num_workers must be <= " + std::to_string(kMaxWorkers) +
                                ", got " + std::to_string(options.num_workers));
  }
  if (spec.num_tables() == 0) return InvalidArgumentError("shard needs a model with at least one table");
  auto shard = std::make_unique<ShardImpl>(spec, options);
  GEOPS_RETURN_IF_ERROR(shard->Init(store));
  return std::unique_ptr<Shard>(std::move(shard));
}

}  // namespace geops::datacenter
