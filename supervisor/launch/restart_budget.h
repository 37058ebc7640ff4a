// RestartBudget: how often `geops launch` restarts a process that died on
// its own, and after what delay. Each process (by name: "east-worker-1")
// may be restarted max_restarts times over the run; the delay before its
// k-th restart is first_delay_s * 2^(k-1), capped at max_delay_s, so a
// process that dies at once every time spends its budget in seconds, not
// in a tight loop. When the budget is spent the run fails, naming the
// process.
//
// A plain object; not thread-safe (the launcher's loop thread).
#ifndef GEOPS_SUPERVISOR_LAUNCH_RESTART_BUDGET_H_
#define GEOPS_SUPERVISOR_LAUNCH_RESTART_BUDGET_H_

#include <map>
#include <optional>
#include <string>

namespace geops::supervisor {

struct RestartPolicy {
  int max_restarts = 3;       // per process over the whole run; 0: a death fails the run
  double first_delay_s = 1;   // before a process's first restart, seconds
  double max_delay_s = 30;    // cap of the doubling delay, seconds
};

class RestartBudget {
 public:
  explicit RestartBudget(RestartPolicy policy = {}) : policy_(policy) {}

  // Takes one restart of `process` from its budget: the delay before it, in
  // seconds, or nullopt (nothing taken) when the budget is spent.
  std::optional<double> Take(const std::string& process);

  int restarts(const std::string& process) const;  // taken so far
  int total() const { return total_; }
  const RestartPolicy& policy() const { return policy_; }

 private:
  RestartPolicy policy_;
  std::map<std::string, int> taken_;
  int total_ = 0;
};

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_RESTART_BUDGET_H_
