// A shard process's memory budget as `geops site` applies it: the plan of
// what the shard will hold (checked before anything is allocated), and a
// thread that samples resident memory for the shard's MemoryGuard.
#ifndef GEOPS_SITE_SHARD_MEMORY_H_
#define GEOPS_SITE_SHARD_MEMORY_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/model_spec.h"
#include "common/options.h"
#include "config/topology.h"
#include "datacenter/memory_budget.h"

namespace geops::site {

using config::Topology;

// What shard `shard_options.shard_id` of `site` holds for `spec`: its chunk
// values; with two or more sites, the WAN accumulator and one backlog per
// peer (each at most one row per chunk); with a store (`storage` non-null),
// its memtables; the LAN requests the site's workers can have in flight;
// and the process allowance.
datacenter::MemoryPlan ShardMemoryPlan(const Topology& topology, int site, const ModelSpec& spec,
                                       const ShardOptions& shard_options, const StorageOptions* storage);

// Samples a guard every `period_ms` on its own thread; when the guard
// starts refusing, hands freed memory back to the kernel (malloc_trim).
// Stops (and joins) on destruction.
class MemorySampler {
 public:
  MemorySampler(datacenter::MemoryGuard* guard, int period_ms);
  ~MemorySampler();
  MemorySampler(const MemorySampler&) = delete;
  MemorySampler& operator=(const MemorySampler&) = delete;

 private:
  void Run();

  datacenter::MemoryGuard* const guard_;
  const int period_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace geops::site

#endif  // GEOPS_SITE_SHARD_MEMORY_H_
