#include "tests/storage/fault_injecting_shard_store.h"

namespace geops::storage::testing {

FaultInjectingShardStore::FaultInjectingShardStore(StoreFingerprint fingerprint, Durability durability)
    : durability_(durability) {
  visible_.fingerprint = fingerprint;
  durable_.fingerprint = std::move(fingerprint);
}

Result<ShardState> FaultInjectingShardStore::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  return visible_.ToState();
}

Result<std::vector<LedgerRow>> FaultInjectingShardStore::ReadLedger(SiteId origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return visible_.Ledger(origin);  // what Load() would read
}

Status FaultInjectingShardStore::Commit(const ShardCommit& commit) {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiting_;
  gate_cv_.wait(lock, [this] { return !gate_closed_; });
  --waiting_;
  if (frozen_) return UnavailableError("injected: the process is dead, this commit never reached the disk");
  if (fail_next_ > 0) {
    --fail_next_;
    return UnavailableError("injected: I/O error while writing the commit");
  }
  GEOPS_RETURN_IF_ERROR(
      visible_.Check(commit).WithContext(name() + ": commit " + std::to_string(visible_.commits + 1)));
  visible_.Apply(commit);
  ++commits_;
  if (durability_ == Durability::kSync) {
    durable_ = visible_;  // the fsync makes earlier unsynced commits durable too
    unsynced_ = 0;
    ++synced_;
  } else {
    ++unsynced_;
  }
  return Status::Ok();
}

void FaultInjectingShardStore::DropUnsyncedWrites() {
  std::lock_guard<std::mutex> lock(mu_);
  visible_ = durable_;
  dropped_ += unsynced_;
  unsynced_ = 0;
}

void FaultInjectingShardStore::Freeze() {
  std::lock_guard<std::mutex> lock(mu_);
  frozen_ = true;
}

void FaultInjectingShardStore::Thaw() {
  std::lock_guard<std::mutex> lock(mu_);
  frozen_ = false;
}

void FaultInjectingShardStore::FailNextCommits(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_ = n;
}

void FaultInjectingShardStore::CloseGate() {
  std::lock_guard<std::mutex> lock(mu_);
  gate_closed_ = true;
}

void FaultInjectingShardStore::OpenGate() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    gate_closed_ = false;
  }
  gate_cv_.notify_all();
}

int64_t FaultInjectingShardStore::commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commits_;
}

int64_t FaultInjectingShardStore::synced_commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

int64_t FaultInjectingShardStore::waiting_at_gate() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

int64_t FaultInjectingShardStore::dropped_commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

MemoryImage FaultInjectingShardStore::durable_image() const {
  std::lock_guard<std::mutex> lock(mu_);
  return durable_;
}

MemoryImage FaultInjectingShardStore::visible_image() const {
  std::lock_guard<std::mutex> lock(mu_);
  return visible_;
}

}  // namespace geops::storage::testing
