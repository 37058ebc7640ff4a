// MemoryShardStore: a ShardStore kept in memory, the "disk" of tests. A store
// object outlives the shards built over it, so destroying a shard and
// building another over the same store is a process restart.
//
// MemoryImage is the stored state as a value (copyable), so that fault
// injection can keep a durable and a visible copy (see
// fault_injecting_shard_store.h).
//
// Thread-safety: MemoryImage is thread-compatible; MemoryShardStore's methods
// may be called concurrently (one mutex).
#ifndef GEOPS_TESTS_STORAGE_MEMORY_SHARD_STORE_H_
#define GEOPS_TESTS_STORAGE_MEMORY_SHARD_STORE_H_

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/shard_store.h"

namespace geops::storage::testing {

struct MemoryImage {
  StoreFingerprint fingerprint;
  uint64_t commits = 0;
  Clock shard_clock = 0;
  std::map<ChunkKey, std::vector<float>> chunks;
  std::map<WorkerId, WorkerRecord> workers;
  std::map<SiteId, uint64_t> origins;
  std::map<std::string, std::string> outbound;
  std::map<std::pair<SiteId, ChunkKey>, std::vector<double>> ledger;  // (origin, chunk) -> sums

  // InvalidArgument for what the RocksDB store refuses too: a ledger clear
  // of a negative origin, or a ledger add that breaks LedgerAdd's contract
  // or whose num_elements differs from its row's size.
  Status Check(const ShardCommit& commit) const;
  // Applies every record of `commit` (ledger clears before ledger adds) and
  // counts it. REQUIRES: Check(commit).ok().
  void Apply(const ShardCommit& commit);
  ShardState ToState() const;
  // The ledger rows of `origin`, in key order.
  std::vector<LedgerRow> Ledger(SiteId origin) const;
};

class MemoryShardStore : public ShardStore {
 public:
  explicit MemoryShardStore(StoreFingerprint fingerprint, Durability durability = Durability::kSync);

  Durability durability() const override { return durability_; }
  std::string name() const override { return "memory shard store"; }
  Result<ShardState> Load() override;
  // InvalidArgument (nothing applied) when MemoryImage::Check refuses it.
  Status Commit(const ShardCommit& commit) override;
  Result<std::vector<LedgerRow>> ReadLedger(SiteId origin) override;

  MemoryImage image() const;
  void set_image(MemoryImage image);

 private:
  const Durability durability_;
  mutable std::mutex mu_;
  MemoryImage image_;  // GUARDED_BY(mu_)
};

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_MEMORY_SHARD_STORE_H_
