#include "config/client_options.h"

#include <algorithm>

namespace geops::config {

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

Result<std::vector<std::string>> SiteShardAddresses(const Topology& topology, int site, const std::string& shards) {
  const SiteSpec& s = topology.sites.at(static_cast<size_t>(site));
  std::vector<std::string> addresses;
  if (shards.empty()) {
    if (s.base_port == 0) return InvalidArgumentError("site " + s.name + " has no base_port; pass --shards");
    for (int i = 0; i < s.shards; ++i) addresses.push_back(s.host + ":" + std::to_string(s.base_port + i));
    return addresses;
  }
  size_t start = 0;
  while (start <= shards.size()) {
    size_t comma = shards.find(',', start);
    if (comma == std::string::npos) comma = shards.size();
    addresses.push_back(shards.substr(start, comma - start));
    start = comma + 1;
  }
  if (static_cast<int>(addresses.size()) != s.shards) {
    return InvalidArgumentError("--shards names " + std::to_string(addresses.size()) + " addresses, site " + s.name +
                                " has " + std::to_string(s.shards) + " shards");
  }
  return addresses;
}

}  // namespace geops::config
