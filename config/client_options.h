// The worker client options a topology implies (staleness, timeouts, retry
// window, heartbeat, token), shared by `geops worker`, the Python package
// and the C++ client library so that they derive them one way. A pure
// function of a Topology; thread-compatible.
#ifndef GEOPS_CONFIG_CLIENT_OPTIONS_H_
#define GEOPS_CONFIG_CLIENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/status.h"
#include "config/topology.h"

namespace geops::config {

// Calls to a shard that is down are retried (back-off doubling to 0.5 s) for
// [training] retry_window_ms; with [[faults]] that restart shards, for at
// least the longest restart_after_s plus kRestartRetryMarginMs. Heartbeats
// come several times per worker lease.
WorkerClientOptions BuildClientOptions(const Topology& topology, int worker);
inline constexpr int64_t kRestartRetryMarginMs = 60000;

// The shard addresses of site `site`, in shard order: `shards`
// ("host:port,...") when given, else host:base_port+i from the topology.
// InvalidArgument when neither works (no base_port, wrong count).
Result<std::vector<std::string>> SiteShardAddresses(const Topology& topology, int site, const std::string& shards);

}  // namespace geops::config

#endif  // GEOPS_CONFIG_CLIENT_OPTIONS_H_
