// The WAN side of a topology as the site processes use it: the effective
// directed link between every pair of sites (from `[[links]]`, the
// Skyplane grid by each site's `region`, or a geops CSV trace; optionally
// made to vary over time like a Mahimahi trace scaled to each link's mean),
// and the WanOptions of `[wan]`.
//
//   links = "static"    each ordered pair needs a [[links]] entry; an entry
//                       without its reverse serves both directions
//   links = "skyplane"  wan.trace_dir holds the Skyplane throughput.csv and
//                       latency.csv; bandwidth is the measured iperf3
//                       throughput of the pair (sum of 64 TCP connections)
//                       divided by 64 with skyplane_bandwidth =
//                       "per-connection" (one flow's share), or as measured
//                       with "aggregate"; one-way delay is half the ping RTT
//   links = "csv"       wan.trace_file, `time_s,src,dst,bandwidth_mbps,delay_ms`
//   bandwidth_scale     every link's bandwidth times this (a stream that
//                       gets only part of one connection's share)
//   variation = FILE    each link's bandwidth follows the Mahimahi trace
//                       FILE, scaled so its mean is the link's bandwidth;
//                       its empty bins are outages. With
//                       variation_stagger_s = S the i-th directed link
//                       (in site order) replays it from i x S seconds in,
//                       so the links do not fade and fail in lockstep
// Relative paths are taken from the topology file's folder.
//
// Free functions of a Topology; thread-compatible.
#ifndef GEOPS_CONFIG_WAN_LINKS_H_
#define GEOPS_CONFIG_WAN_LINKS_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "config/topology.h"
#include "wan/link/link_schedule.h"
#include "wan/wan_options.h"

namespace geops::config {

struct EffectiveLink {
  int src = 0;  // site indexes
  int dst = 0;
  wan::LinkSchedule schedule;
};

// Every ordered pair of distinct sites, src-major. NotFound / InvalidArgument
// naming the missing link, site region or bad trace file.
Result<std::vector<EffectiveLink>> BuildLinks(const Topology& topology);

// The link one shard of a site with `shards` shards gets towards its mirror:
// the site-to-site link with 1/shards of its bandwidth, the same delay.
Result<wan::LinkSchedule> ShardShareOf(const wan::LinkSchedule& site_link, int shards);

// The WanOptions of `[wan]`. InvalidArgument for bad values.
Result<wan::WanOptions> BuildWanOptions(const Topology& topology);

// The link table `geops trace show` prints: one row per directed link with
// its bandwidth (mean, min and max over the trace), one-way delay, the
// share each shard link gets, and how long one full fp32 copy of the model
// takes on it (model_bytes 0: unknown, a model the workers bring; shown as
// "-"). Ends with a newline.
std::string FormatLinkTable(const Topology& topology, const std::vector<EffectiveLink>& links,
                            int64_t model_bytes);

}  // namespace geops::config

#endif  // GEOPS_CONFIG_WAN_LINKS_H_
