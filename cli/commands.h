// The subcommands of the `geops` program. Each returns the process exit code:
// 0 success, 1 a runtime failure, 2 bad arguments or configuration (after a
// one-line error on stderr).
#ifndef GEOPS_CLI_COMMANDS_H_
#define GEOPS_CLI_COMMANDS_H_

#include <cstdint>
#include <string>

namespace geops::cli {

// Watches standard input and raises SIGTERM in this process when it reaches
// end of file: `geops launch` holds the other end, so its children stop when
// it dies, however it dies.
void ExitWithParent();

struct SiteArgs {
  std::string topology_path;
  std::string site;
  int shard = 0;
  int port = -1;          // -1: from the topology (base_port + shard); 0: any free port
  std::string out_dir;    // optional: where to write shard status at exit
  int metrics_port = -1;  // -1: from the topology (SiteSpec::MetricsPort); 0: any free port
  int64_t memory_budget_mib = -1;  // -1: the site's shard_memory_mib; 0: none
  // The shard's store directory; "" keeps it in memory. Only when
  // data_dir_given; otherwise it comes from the topology's [storage].
  std::string data_dir;
  bool data_dir_given = false;
  bool exit_with_parent = false;  // see ExitWithParent
  // WAN (topologies with two or more sites; see site/site_wan.h).
  int mirror_port = -1;          // -1: base_port + 1000 + shard, or any free port
  std::string mirror_peers;      // "site=host:port,..." of the same shard of the other sites
  std::string peers_file;        // written by geops launch once every shard listens
  std::string run_id;            // only a peers file of this run counts (geops launch sets it); "" any
};
// Serves one shard of a site until SIGINT/SIGTERM. With a store directory it
// loads the shard's persisted state first (refusing a store of another
// configuration, exit 2, or a damaged one, exit 1) and persists every change.
int RunSite(const SiteArgs& args);

struct InspectArgs {
  std::string data_dir;   // a shard's store directory
};
// Prints what a shard's store holds, without changing it. 2 for a directory
// that is not a store, 1 for a damaged one.
int RunInspect(const InspectArgs& args);

struct WorkerArgs {
  std::string topology_path;
  std::string site;
  int worker = 0;
  std::string shards;     // "host:port,host:port" in shard order; empty: from the topology
  std::string out_dir;    // metrics JSONL goes to OUT/metrics/
  int metrics_port = -1;  // -1: from the topology (SiteSpec::MetricsPort); 0: any free port
  bool exit_with_parent = false;  // see ExitWithParent
  double progress_every_s = 0.5;  // seconds between progress events
  bool takeover = false;  // the previous process of this worker is known dead: take its id at once
};
// Runs one worker's training to the end.
int RunWorker(const WorkerArgs& args);

// `geops worker --check`: prints the site's replica per table, registering
// no worker; for the counter workload 0 only when every value is the exact
// end count (polling up to `wait_seconds` for it), else 1; 2 for bad
// arguments or configuration.
int RunCheck(const WorkerArgs& args, double wait_seconds);

struct ChaosArgs {
  std::string topology_path;
  std::string out_dir;
  uint64_t seed = 1;
  int kills = 5;
  int drain_kills = 1;
  std::string kinds = "worker,shard,site";
  int64_t restart_min_ms = 1000;
  int64_t restart_max_ms = 10000;
  double stall_bound_s = 120;
  double timeout_s = 1800;
};
// Kills and restarts the processes of a topology at random (supervisor/chaos/chaos.h).
int RunChaosCommand(const ChaosArgs& args);

struct TraceShowArgs {
  std::string topology_path;
};
// Prints the effective WAN link table of a topology (2: bad topology or links).
int RunTraceShow(const TraceShowArgs& args);

struct CertsArgs {
  std::string topology_path;
  std::string out_dir;
  int days = 365;      // validity of every certificate
  bool force = false;  // replace an existing CA and its certificates
};
// Makes the deployment's CA and the certificate of every site and worker
// (certs/cert_authority.h) and lists the files. 2 for a bad topology or files
// already there without --force, 1 when writing fails.
int RunCerts(const CertsArgs& args);

struct DeployArgs {
  std::string topology_path;
  std::string out_dir;
  std::string certs_dir;                 // what `geops certs` wrote
  std::string image = "geops:latest";    // built from deploy/Dockerfile
  std::string namespace_name = "geops";
  std::string storage_size = "20Gi";     // each shard's volume
  std::string repo_root = ".";           // trace paths under it are in the image at /opt/geops
  bool emulate_links = false;            // keep replaying the topology's links (one region rehearsing)
};
// `geops deploy k8s`: the Kubernetes manifests (cli/deploy_k8s.h).
int RunDeployK8s(const DeployArgs& args);

}  // namespace geops::cli

#endif  // GEOPS_CLI_COMMANDS_H_
