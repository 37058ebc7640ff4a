#include "supervisor/launch/restart_budget.h"

#include <algorithm>
#include <cmath>

namespace geops::supervisor {

std::optional<double> RestartBudget::Take(const std::string& process) {
  int& taken = taken_[process];
  if (taken >= policy_.max_restarts) return std::nullopt;
  const double delay = std::min(policy_.max_delay_s, policy_.first_delay_s * std::ldexp(1.0, taken));
  ++taken;
  ++total_;
  return std::max(0.0, delay);
}

int RestartBudget::restarts(const std::string& process) const {
  auto it = taken_.find(process);
  return it == taken_.end() ? 0 : it->second;
}

}  // namespace geops::supervisor
