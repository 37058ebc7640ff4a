// The Prometheus metrics of `geops site` (one shard) and `geops worker`
// processes, built from their stats at each scrape (metrics/metrics_endpoint.h).
// docs/operations.md lists every metric with its meaning.
#ifndef GEOPS_METRICS_SHARD_METRICS_H_
#define GEOPS_METRICS_SHARD_METRICS_H_

#include <cstdint>

#include "common/ps_types.h"
#include "metrics/metrics_endpoint.h"
#include "worker/ps_client.h"

namespace geops::metrics {

// LAN port (requests and bytes per method, refusals by code), SSP read
// waits, worker clocks, store commits.
void AppendShardMetrics(const ShardStatus& st, int64_t connections_refused, MetricsBuilder* b);

// One worker: its clock, staleness, LAN bytes, read waits.
void AppendWorkerMetrics(int64_t clock, int64_t clocks, const worker::PsClientStats& st, MetricsBuilder* b);

}  // namespace geops::metrics

#endif  // GEOPS_METRICS_SHARD_METRICS_H_
