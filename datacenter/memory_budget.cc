#include "datacenter/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace geops::datacenter {
namespace {

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

int64_t MemoryPlan::total() const {
  int64_t sum = 0;
  for (const Part& p : parts) sum += p.bytes;
  return sum;
}

std::string MemoryPlan::Describe() const {
  std::string out;
  for (const Part& p : parts) {
    if (p.bytes <= 0) continue;
    if (!out.empty()) out += " + ";
    out += p.name + " " + Mib(p.bytes);
  }
  return out;
}

Status CheckMemoryPlan(const MemoryPlan& plan, int64_t budget_bytes, std::string_view who) {
  if (budget_bytes <= 0 || plan.total() <= budget_bytes) return Status::Ok();
  return FailedPreconditionError(std::string(who) + " needs at least " + Mib(plan.total()) + " (" + plan.Describe() +
                                 ") but its memory budget is " + Mib(budget_bytes) +
                                 "; raise the budget (shard_memory_mib, --memory-budget-mib) or spread the model "
                                 "over more shards");
}

MemoryGuard::MemoryGuard(int64_t budget_bytes, std::function<int64_t()> resident, std::string who)
    : budget_(budget_bytes), resume_(budget_bytes / 10 * 9), resident_(std::move(resident)), who_(std::move(who)) {}

bool MemoryGuard::Sample() {
  const int64_t now = resident_ ? resident_() : -1;
  last_.store(now, std::memory_order_relaxed);
  if (now < 0) {
    over_.store(false, std::memory_order_relaxed);
    return false;
  }
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  const bool was_over = over_.load(std::memory_order_relaxed);
  const bool over = was_over ? now > resume_ : now > budget_;
  over_.store(over, std::memory_order_relaxed);
  return over && !was_over;
}

Status MemoryGuard::AdmitUpdate() {
  if (!over_.load(std::memory_order_relaxed)) return Status::Ok();
  refused_.fetch_add(1, std::memory_order_relaxed);
  return UnavailableError(who_ + " is over its memory budget (resident " + Mib(last_.load(std::memory_order_relaxed)) +
                          ", budget " + Mib(budget_) + "): the update was not applied; updates are refused until it is " +
                          "back under " + Mib(resume_) + "; retry");
}

MemoryGuard::Stats MemoryGuard::stats() const {
  Stats s;
  s.budget_bytes = budget_;
  s.resident_bytes = last_.load(std::memory_order_relaxed);
  s.peak_resident_bytes = peak_.load(std::memory_order_relaxed);
  s.updates_refused = refused_.load(std::memory_order_relaxed);
  s.over = over_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace geops::datacenter
