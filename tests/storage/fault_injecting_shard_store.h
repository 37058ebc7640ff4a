// FaultInjectingShardStore: an in-memory ShardStore that can lose what was
// never synced, in the manner of LevelDB's db/fault_injection_test.cc.
//
// It keeps two images. A commit under Durability::kSync reaches the durable
// image, together with every earlier unsynced commit (as an fsync of a log
// does); under kAsync or kOff it reaches only the visible image. Load() and
// ReadLedger() read the visible image: a process restart still sees unsynced
// commits (the OS kept them). DropUnsyncedWrites() is a machine crash: the visible image goes
// back to the durable one. Further faults: Freeze() (the process died: later
// commits fail and change nothing, until Thaw()), FailNextCommits(n) (I/O
// errors), and a gate that holds commits until opened (a slow disk).
//
// Thread-safety: all methods may be called concurrently.
#ifndef GEOPS_TESTS_STORAGE_FAULT_INJECTING_SHARD_STORE_H_
#define GEOPS_TESTS_STORAGE_FAULT_INJECTING_SHARD_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/shard_store.h"
#include "tests/storage/memory_shard_store.h"

namespace geops::storage::testing {

class FaultInjectingShardStore : public ShardStore {
 public:
  FaultInjectingShardStore(StoreFingerprint fingerprint, Durability durability);

  Durability durability() const override { return durability_; }
  std::string name() const override { return "fault-injecting shard store"; }
  Result<ShardState> Load() override;
  // Unavailable when frozen or failing; blocks while the gate is closed.
  // InvalidArgument (nothing applied) when MemoryImage::Check refuses it.
  Status Commit(const ShardCommit& commit) override;
  Result<std::vector<LedgerRow>> ReadLedger(SiteId origin) override;

  void DropUnsyncedWrites();
  void Freeze();
  // A new process starts: commits work again.
  void Thaw();
  void FailNextCommits(int n);
  void CloseGate();
  void OpenGate();

  int64_t commits() const;          // successful commits
  int64_t synced_commits() const;   // of which reached the durable image directly
  int64_t waiting_at_gate() const;  // commits blocked on the closed gate now
  int64_t dropped_commits() const;  // unsynced commits lost by DropUnsyncedWrites
  MemoryImage durable_image() const;
  MemoryImage visible_image() const;

 private:
  const Durability durability_;
  mutable std::mutex mu_;
  std::condition_variable gate_cv_;
  MemoryImage visible_;      // GUARDED_BY(mu_)
  MemoryImage durable_;      // GUARDED_BY(mu_)
  int64_t unsynced_ = 0;     // GUARDED_BY(mu_): commits in visible_ but not durable_
  bool frozen_ = false;      // GUARDED_BY(mu_)
  int fail_next_ = 0;        // GUARDED_BY(mu_)
  bool gate_closed_ = false; // GUARDED_BY(mu_)
  int64_t waiting_ = 0;      // GUARDED_BY(mu_)
  int64_t commits_ = 0;      // GUARDED_BY(mu_)
  int64_t synced_ = 0;       // GUARDED_BY(mu_)
  int64_t dropped_ = 0;      // GUARDED_BY(mu_)
};

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_FAULT_INJECTING_SHARD_STORE_H_
