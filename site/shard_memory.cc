#include "site/shard_memory.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/shard_store.h"
#include "common/thread_name.h"
#include "storage/rocksdb_shard_store.h"
#include "worker/ps_client.h"

namespace geops::site {

datacenter::MemoryPlan ShardMemoryPlan(const Topology& topology, int site, const ModelSpec& spec,
                                       const ShardOptions& shard_options, const StorageOptions* storage) {
  const ShardStoreSpec store_spec = ShardStoreSpec::Of(spec, shard_options);
  int64_t values = 0;
  for (const ChunkExtent& c : store_spec.chunks) values += c.elements * int64_t{sizeof(float)};
  datacenter::MemoryPlan plan;
  plan.Add("chunk values", values);
  const int peers = static_cast<int>(topology.sites.size()) - 1;
  if (peers > 0) {
    plan.Add("WAN accumulator", values);
    // Per peer: an accumulator like the one above, and one bit per element
    // marking what came since the last cut.
    plan.Add("WAN backlogs (" + std::to_string(peers) + (peers == 1 ? " peer)" : " peers)"),
             (values + values / 32) * peers);
  }
  if (const int readers = shard_options.ChangeReaders(); readers > 0) {
    // Incremental reads: one bit per element per tracked worker (ChunkStore::EnableChangeTracking).
    plan.Add("read change marks", values / 32 * readers);
  }
  if (storage != nullptr) plan.Add("store memtables", storage::StoreMemtableBytes(*storage, store_spec));
  // geops' clients send an update in parts of at most kMaxRequestBytes and
  // read in pieces of the same size: two requests per worker in flight.
  const int64_t per_request =
      std::min<int64_t>(shard_options.max_batch_bytes, worker::PsClient::kMaxRequestBytes);
  plan.Add("LAN requests in flight", int64_t{2} * topology.sites[site].workers * per_request);
  plan.Add("process", datacenter::kProcessAllowanceBytes);
  return plan;
}

MemorySampler::MemorySampler(datacenter::MemoryGuard* guard, int period_ms)
    : guard_(guard), period_ms_(period_ms), thread_([this] {
        NameThisThread("memory-guard");
        Run();
      }) {}

MemorySampler::~MemorySampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MemorySampler::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    if (guard_->Sample()) {
      const datacenter::MemoryGuard::Stats s = guard_->stats();
      spdlog::warn("shard over its memory budget: resident {} MiB, budget {} MiB; refusing updates until it is "
                   "back under 90% of the budget",
                   s.resident_bytes >> 20, s.budget_bytes >> 20);
      ::malloc_trim(0);
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(period_ms_), [this] { return stop_; });
  }
}

}  // namespace geops::site
