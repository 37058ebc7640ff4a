// A shard process's memory budget: what the shard plans to hold, checked
// against the budget before it serves, and a guard that refuses updates
// while the process is over the budget.
//
// The plan is the memory that grows with the model and stays: the chunk
// values, the WAN accumulator (one row per chunk), one backlog per peer
// (a backlog coalesces: a peer that is down for an hour needs no more than
// one row per chunk), the store's memtables, the request buffers the LAN
// port admits at once, and a fixed allowance for the process itself. A
// budget below the plan is refused at start, naming every part, so a shard
// never starts only to be killed by the kernel hours later.
//
// What the plan cannot bound (a commit's copy-on-write copies while it is
// written, allocator slack) the guard watches: it samples the process's
// resident memory, and while that is over the budget, updates are refused
// with Unavailable (workers retry within their retry window) and freed
// memory is handed back to the kernel, until resident memory is back
// under 90% of the budget. Reads, clocks and WAN traffic go on.
//
// Thread-safety: MemoryGuard is thread-safe (atomics); Sample() is called
// from one sampling thread.
#ifndef GEOPS_DATACENTER_MEMORY_BUDGET_H_
#define GEOPS_DATACENTER_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace geops::datacenter {

struct MemoryPlan {
  struct Part {
    std::string name;  // e.g. "chunk values"
    int64_t bytes = 0;
  };
  std::vector<Part> parts;

  void Add(std::string name, int64_t bytes) { parts.push_back(Part{std::move(name), bytes}); }
  int64_t total() const;
  // "chunk values 191 MiB + WAN accumulator 191 MiB + ..."
  std::string Describe() const;
};

// The fixed allowance for the process itself (code, threads, allocator,
// RocksDB's caches), in the plan of every shard.
inline constexpr int64_t kProcessAllowanceBytes = int64_t{96} << 20;

// OK when budget_bytes <= 0 (no budget) or the plan fits. Otherwise
// FailedPrecondition: "<who> needs at least X MiB (parts) but its memory
// budget is B MiB; ...".
Status CheckMemoryPlan(const MemoryPlan& plan, int64_t budget_bytes, std::string_view who);

class MemoryGuard {
 public:
  // `resident` returns the process's resident bytes now (ResidentBytes()
  // in a real process; tests pass their own), or < 0 when unknown (then
  // nothing is refused). REQUIRES: budget_bytes > 0.
  MemoryGuard(int64_t budget_bytes, std::function<int64_t()> resident, std::string who);

  // Takes a sample. Returns true when the guard has just started refusing
  // (the caller may then hand freed memory back, e.g. malloc_trim).
  bool Sample();
  // OK, or Unavailable naming the resident memory and the budget.
  Status AdmitUpdate();

  struct Stats {
    int64_t budget_bytes = 0;
    int64_t resident_bytes = 0;       // at the last sample; -1 unknown
    int64_t peak_resident_bytes = 0;  // most seen by a sample
    int64_t updates_refused = 0;
    bool over = false;
  };
  Stats stats() const;
  int64_t budget_bytes() const { return budget_; }

 private:
  const int64_t budget_;
  const int64_t resume_;  // refusing stops at or below this
  const std::function<int64_t()> resident_;
  const std::string who_;
  std::atomic<int64_t> last_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<bool> over_{false};
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_MEMORY_BUDGET_H_
