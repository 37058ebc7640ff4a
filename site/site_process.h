// SiteProcess: everything one `geops site` process runs, owned in the order
// it is made and torn down in the reverse order:
//
//   mirror service (topologies with two or more sites; it listens from the
//     start, model or not: SiteMirror)
//   -> store -> memory guard -> shard -> WAN side (SiteWan: links,
//     replicator, attached to the shard before any worker can reach it)
//   -> host (the shard, or the wait for the first worker's model)
//   -> LAN server -> metrics endpoint.
//
// The model's parts (store to WAN side) are made at Start for the
// topology's built-in model, or for a client-defined model an earlier run
// kept in the store's directory; otherwise the first worker's register
// makes them, from a server handler thread (datacenter::ShardHost).
//
// Teardown, after Stop() or after a failed Start: the metrics endpoint, the
// server, then the mirror service stops (no peer call may reach the host
// once it goes), the host, the WAN side, the mirror, the shard, the store.
//
// Thread-safety: Start, Stop and the destructor are called by one thread
// (the process's main thread); the parts run their own threads.
#ifndef GEOPS_SITE_SITE_PROCESS_H_
#define GEOPS_SITE_SITE_PROCESS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/model_spec.h"
#include "common/options.h"
#include "common/shard_store.h"
#include "common/status.h"
#include "config/topology.h"
#include "datacenter/memory_budget.h"
#include "datacenter/shard.h"
#include "datacenter/shard_host.h"
#include "metrics/metrics_endpoint.h"
#include "site/shard_memory.h"
#include "site/site_mirror.h"
#include "site/site_wan.h"
#include "thrift/ps_server.h"

namespace geops::site {

struct SiteProcessOptions {
  int site = 0;                    // index in the topology's sites
  int shard = 0;                   // in 0 .. that site's shards - 1
  std::string data_dir;            // the shard's store; "" keeps it in memory
  int port = -1;                   // LAN: -1 the site's base_port + shard (any free port without one); 0 any
  int metrics_port = -1;           // -1: the topology's (SiteSpec::MetricsPort); 0: any free port
  int64_t memory_budget_mib = -1;  // -1: the site's shard_memory_mib; 0: none
  // WAN (topologies with two or more sites; SiteMirror).
  int mirror_port = -1;
  std::string mirror_peers;
  std::string peers_file;
  std::string run_id;      // read only a peers file written for this run; "": any
};

class SiteProcess {
 public:
  // Starts every part in order, printing the "listening" event (and
  // "metrics" with an endpoint) once the LAN port is open. On an error
  // what was made is torn down again and *exit_code says what kind: 2 for
  // configuration (a store of another model or shard, bad [wan] settings,
  // a memory budget the plan exceeds), 1 for the machine (a port, a
  // damaged store, I/O). `topology` must outlive the process object.
  static Result<std::unique_ptr<SiteProcess>> Start(const config::Topology& topology, SiteProcessOptions options,
                                                    int* exit_code);
  ~SiteProcess();
  SiteProcess(const SiteProcess&) = delete;
  SiteProcess& operator=(const SiteProcess&) = delete;

  struct Stopped {
    nlohmann::json stats;          // the "shard_stats" event (not printed)
    Status server = Status::Ok();  // the LAN server's stop
    Status flushed = Status::Ok(); // the store's last commit
    int exit_code() const { return server.ok() && flushed.ok() ? 0 : 1; }
  };
  // A clean stop (SIGTERM from a supervisor or Kubernetes, SIGINT): reads
  // waiting for other workers end now with Unavailable, which the workers
  // retry until this shard is back; what is in flight finishes; the WAN
  // side gets a few seconds to hand over its final updates; the store
  // commits. Call once; the teardown follows in the destructor.
  Stopped Stop();

  // "site S shard i", for messages.
  const std::string& who() const { return who_; }

 private:
  SiteProcess(const config::Topology& topology, SiteProcessOptions options);

  Status StartMirror(int* exit_code);
  // Makes store -> memory guard -> shard -> WAN side for `spec`; on failure
  // nothing is kept and build_exit_ says what kind of failure it was.
  Result<datacenter::Shard*> BuildParts(const ModelSpec& spec);
  // The model: the topology's built-in one, a client-defined one kept in
  // the store's directory, or nullopt (the first worker brings it).
  Result<std::optional<ModelSpec>> KnownModel(int* exit_code);
  Status StartHost(int* exit_code);
  Status StartServer(int* exit_code);
  Status StartMetrics(int* exit_code);
  void TearDown();

  const config::Topology& topology_;
  const SiteProcessOptions options_;
  const config::SiteSpec& spec_site_;
  const ShardOptions shard_options_;
  const std::string who_;
  bool model_file_read_ = false;  // a client-defined model kept by an earlier run
  int build_exit_ = 2;            // exit code for the step of BuildParts that failed

  std::unique_ptr<SiteMirror> mirror_;
  // The model's parts, in the order they are made.
  std::unique_ptr<ShardStore> store_;                      // outlives the shard
  std::unique_ptr<datacenter::MemoryGuard> memory_guard_;  // outlives the shard; null without a budget
  std::unique_ptr<MemorySampler> memory_sampler_;
  std::unique_ptr<datacenter::Shard> shard_;
  std::unique_ptr<SiteWan> wan_;
  std::atomic<SiteWan*> wan_ptr_{nullptr};  // wan_ once built, for the metrics endpoint
  std::unique_ptr<datacenter::ShardHost> host_;
  // The host, for the mirror side's questions (which may come before it
  // exists, and stop before it goes).
  std::atomic<datacenter::ShardHost*> host_ptr_{nullptr};
  rpc::PsServerOptions server_options_;
  std::unique_ptr<rpc::PsServer> server_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_;
};

}  // namespace geops::site

#endif  // GEOPS_SITE_SITE_PROCESS_H_
