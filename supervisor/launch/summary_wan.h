// The WAN part of summary.json, from the shards' closing statistics (the
// "wan" object of each "shard_stats" event) and the evaluators' reports:
//   wan_mode                      "bsp", "all-async", "asp", "avg" (null: one site)
//   wan_bytes                     bytes the mirror connections sent, all links, framing included
//   wan_bytes_by_link             {"src->dst": bytes}
//   wan_links                     per directed link: wire_bytes, payload_bytes (batches after
//                                 compression), batches, offered_bps (the trace's mean bandwidth
//                                 while the link was busy), achieved_bps, utilization
//   barrier_wait_seconds          time reads spent held by the mirror clock (DS) and by
//                                 selective-barrier notices, summed over shards
//   final_wait_seconds            time evaluators' final reads waited for other sites' last updates
//   max_site_drift_clocks         largest (own shard clock - slowest mirror clock) any shard saw
//   test_accuracy_by_site         each site's final accuracy on its own replica
//   counter_max_abs_error_by_site each site's counter error on its own replica
// With several sites, test_accuracy is the lowest of the sites' final
// accuracies and counter_max_abs_error the largest error.
//
// Free functions; thread-safe on distinct arguments.
#ifndef GEOPS_SUPERVISOR_LAUNCH_SUMMARY_WAN_H_
#define GEOPS_SUPERVISOR_LAUNCH_SUMMARY_WAN_H_

#include <string>

#include <nlohmann/json.hpp>

#include "config/topology.h"
#include "supervisor/launch/launch_stats.h"

namespace geops::supervisor {

// Adds (or overwrites) the fields above in *summary.
void AddWanSummary(const config::Topology& topology, const LaunchStats& stats, nlohmann::json* summary);

// One or two lines for the table printed at the end; empty for one site.
std::string FormatWanSummary(const nlohmann::json& summary);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_SUMMARY_WAN_H_
