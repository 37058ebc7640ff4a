// SiteWan: the WAN side of one `geops site` process (a shard of a site in a
// topology with two or more sites): builds the links towards the same shard
// of every other site from the topology (cli/wan_links.h; each shard's link
// gets 1/shards of the site-to-site bandwidth), starts the WanEndpoint
// (shaped links, replicator, mirror service) and learns the peers' mirror
// addresses, from --mirror-peers or, under `geops launch`, from the peers
// file the launcher writes once every shard listens (polled in the
// background).
//
// Peers file (JSON): {"mirrors": {"<site>": ["host:port of shard 0", ...]}}.
//
// Every progress_ms it prints a "wan_progress" event line: the bytes each
// link has put on the wire so far and the reads' barrier wait, so that
// bytes can be related to accuracy over time.
//
// Thread-safety: Start, Settle and StatsJson are called by the process's
// main thread; the watcher thread only fills the endpoint's address book.
#ifndef GEOPS_CLI_SITE_WAN_H_
#define GEOPS_CLI_SITE_WAN_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/topology.h"
#include "common/model_spec.h"
#include "common/status.h"
#include "datacenter/shard.h"
#include "thrift/wan_endpoint.h"

namespace geops::cli {

struct SiteWanArgs {
  int mirror_port = -1;       // -1: base_port + 1000 + shard when base_port > 0, else any free port
  std::string mirror_peers;   // "site=host:port,..." for this shard; overrides the peers file
  std::string peers_file;     // written by geops launch
  int64_t progress_ms = 1000; // "wan_progress" events; 0 = none
};

class SiteWan {
 public:
  // InvalidArgument / NotFound for a bad [wan] section or link source;
  // Unavailable when the mirror port cannot be bound. Call before the
  // shard serves workers. REQUIRES: topology.multi_site(); `spec` and
  // `shard` outlive the SiteWan.
  static Result<std::unique_ptr<SiteWan>> Start(const Topology& topology, int site, int shard_index,
                                                const ModelSpec* spec, datacenter::Shard* shard,
                                                const SiteWanArgs& args);
  ~SiteWan();

  std::string mirror_address() const;
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

 private:
  SiteWan() = default;
  // The peers that came back with a new store, and when their streams
  // were reset.
  nlohmann::json StreamResetsJson(const wan::ReplicatorStats& r) const;
  void WatchPeersFile(std::string path);
  void ReportProgress(int64_t period_ms);
  Status ParsePeers(const nlohmann::json& doc);

  const Topology* topology_ = nullptr;
  int site_ = 0;
  int shard_ = 0;
  std::unique_ptr<rpc::WanEndpoint> endpoint_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
  std::thread reporter_;
};

}  // namespace geops::cli

#endif  // GEOPS_CLI_SITE_WAN_H_
