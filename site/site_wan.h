// SiteWan: the WAN side of one `geops site` process (a shard of a site in a
// topology with two or more sites), once its shard exists: builds the links
// towards the same shard of every other site from the topology
// (config/wan_links.h; each shard's link gets 1/shards of the site-to-site
// bandwidth) and starts the WanEndpoint (shaped links, replicator) over the
// process's SiteMirror (the mirror service, listening since the process
// started, and the peers' addresses).
//
// Every progress_ms it prints a "wan_progress" event line: the bytes each
// link has put on the wire so far and the reads' barrier wait, so that
// bytes can be related to accuracy over time.
//
// Thread-safety: Start, Settle and StatsJson are called by the process's
// main thread (Start maybe from the handler thread that completed the model).
#ifndef GEOPS_SITE_SITE_WAN_H_
#define GEOPS_SITE_SITE_WAN_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/model_spec.h"
#include "common/status.h"
#include "config/topology.h"
#include "datacenter/shard.h"
#include "metrics/metrics_endpoint.h"
#include "site/site_mirror.h"
#include "site/wan_endpoint.h"

namespace geops::site {

using config::Topology;
using metrics::MetricsBuilder;


class SiteWan {
 public:
  // InvalidArgument / NotFound for a bad [wan] section or link source.
  // Call before the shard serves workers. `progress_ms`: period of the
  // "wan_progress" events, 0 = none. REQUIRES: topology.multi_site();
  // `spec`, `shard` and `mirror` (this shard's) outlive the SiteWan.
  static Result<std::unique_ptr<SiteWan>> Start(const Topology& topology, int site, int shard_index,
                                                const ModelSpec* spec, datacenter::Shard* shard,
                                                SiteMirror* mirror, int64_t progress_ms = 1000);
  ~SiteWan();

  // Waits up to `ms` for this shard's final updates to be acknowledged and
  // the peers' to land; logs what is still missing.
  void Settle(int64_t ms);
  // The WAN counters for shard_stats: links, replicator, inbox, gate.
  nlohmann::json StatsJson() const;
  // For a shard restarted from its store, or started with a new one (a
  // first start, or a site that lost its disk and bootstraps from its
  // peers; fresh_store tells): when it started, loaded its state and got
  // back within DS of its peers, and the bytes received until then.
  nlohmann::json RecoveryJson() const;
  // The WAN metrics of this shard for its Prometheus endpoint
  // (docs/operations.md lists them).
  void AppendMetrics(MetricsBuilder* b) const;

 private:
  SiteWan() = default;
  // The peers that came back with a new store, and when their streams
  // were reset.
  nlohmann::json StreamResetsJson(const wan::ReplicatorStats& r) const;
  void ReportProgress(int64_t period_ms);

  const Topology* topology_ = nullptr;
  int site_ = 0;
  int shard_ = 0;
  std::unique_ptr<WanEndpoint> endpoint_;
  std::atomic<bool> stop_{false};
  std::thread reporter_;
};

}  // namespace geops::site

#endif  // GEOPS_SITE_SITE_WAN_H_
