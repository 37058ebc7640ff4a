#include "cli/client_options.h"

#include <algorithm>

namespace geops::cli {

WorkerClientOptions BuildClientOptions(const Topology& t, int worker) {
  WorkerClientOptions o;
  o.worker_id = worker;
  o.staleness = t.staleness;
  o.rpc_timeout_ms = t.rpc_timeout_ms;
  o.heartbeat_ms = std::max<int64_t>(10, t.worker_lease_ms / 5);
  o.auth_token = t.auth_token;
  o.retry_window_ms = t.retry_window_ms;
  // A planned restart must fit in the window, whatever the topology says.
  double longest_restart_s = -1;
  for (const FaultSpec& f : t.faults) longest_restart_s = std::max(longest_restart_s, f.restart_after_s);
  if (longest_restart_s >= 0) {
    o.retry_window_ms = std::max<int64_t>(o.retry_window_ms,
                                          static_cast<int64_t>(longest_restart_s * 1000) + kRestartRetryMarginMs);
  }
  return o;
}

}  // namespace geops::cli
