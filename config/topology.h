// Topology: everything `geops launch` needs to start a deployment, read from
// a TOML file: the model and workload, training settings, and the sites with
// their shards and workers. Only cli/ reads TOML; the rest of geops receives
// the options structs built from a Topology.
//
// A value type; thread-compatible.
#ifndef GEOPS_CONFIG_TOPOLOGY_H_
#define GEOPS_CONFIG_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace geops::config {

struct SiteSpec {
  std::string name;              // e.g. "us-east-1"; unique
  std::string host = "127.0.0.1";  // address the site's shards listen on
  int base_port = 0;             // shard i listens on base_port + i; 0 = any free port
  int shards = 1;                // shard processes of the site
  int workers = 1;               // worker processes of the site
  std::string region;            // measured-grid region, e.g. "aws:us-east-1" ([wan] links = "skyplane")
  // Prometheus /metrics on `host`: shard i on metrics_base_port + i, worker
  // w on metrics_base_port + shards + w; 0 = any free port (geops launch
  // writes where they went into prometheus_targets.json); -1 = none.
  int metrics_base_port = -1;
  // Each shard process's memory budget, MiB; 0 (default): none. A shard
  // whose plan does not fit refuses to start; one over it at run time
  // refuses updates until it is back under (datacenter/memory_budget.h).
  int64_t shard_memory_mib = 0;
  // The port of a process's /metrics; -1 when off.
  int MetricsPort(bool shard, int index) const {
    if (metrics_base_port <= 0) return metrics_base_port;
    return metrics_base_port + (shard ? index : shards + index);
  }
};

// One directed WAN link of `[[links]]`. Without an entry for the reverse
// direction, it serves both.
struct LinkSpec {
  std::string src;
  std::string dst;
  double bandwidth_mbps = 0;  // > 0
  double delay_ms = 0;        // one-way, >= 0
};

// `[wan]`: how the sites replicate to each other (only with >= 2 sites).
// Field meanings: wan/wan_options.h; link sources: config/wan_links.h.
struct WanSpec {
  std::string mode = "asp";            // "bsp", "all-async", "asp", "avg", "diloco"
  int64_t staleness_ds = 2;            // asp: drift bound DS in clocks; -1 = none
  int64_t max_drift_allowance = 24;    // asp: clocks in delivery the bound may add to DS
  int64_t max_hold_clocks = 0;         // asp: a chunk held this many ticks ships whole (0: never)
  double threshold = 0.01;             // asp: t0 (relative change)
  double threshold_floor = 0.001;      // asp: floor of t(k)
  bool threshold_follows_lr = false;   // asp: t(k) also decays like the learning rate
  int64_t threshold_settle_clocks = 0; // asp: t(k) falls to 0 over the training's last clocks
  double value_floor = 1e-6;           // asp: |w| counts as at least this in the significance
  std::string codec = "fp16";          // asp: "fp32", "fp16", "int8", "int4", "sign"
  bool compress = true;                // LZ4 over each batch
  int64_t averaging_period = 10;       // avg, diloco: H in clocks
  int64_t outer_fragments = 1;         // avg, diloco: streaming fragments (divides H)
  double outer_lr = 0.7;               // diloco: the outer optimiser (Nesterov momentum)
  double outer_momentum = 0.9;
  bool outer_overlap = true;           // one outer step in flight while the next H clocks run
  bool outer_nesterov = true;
  bool outer_average_last = true;      // the last step averages the sites' models
  int64_t max_inflight_batches = 2;    // per peer link, before updates coalesce ...
  double max_queue_ms = 500;           // ... or once the link has this much queued
  int64_t backlog_revisit = 8;         // a backlog cut looks at each chunk whole every this many cuts
  bool selective_barrier = true;       // asp: announce slow batches (below); false: never
  bool tie_reports = false;            // asp: a peer takes a clock once the batches sent before it landed
  int64_t report_every_clocks = 1;     // asp: a clock report to each peer every this many clocks
  double target_utilization = 0;       // asp: steer the cut-off to this share of the busiest link (0: off)
  bool tie_backlog = false;            // asp: a report's clock stays before what waits in the backlog
  int64_t tie_backlog_clocks = 0;      // ... at most this many clocks behind the shard's (0: no bound)
  int64_t tie_backlog_last_clocks = 0; // ... over the training's last this many clocks only (0: all)
  bool fresh_first = false;            // asp: a backlog of codec residuals only does not hold a link's batches
  double notice_min_ms = 50;           // asp: announce batches slower than this on the wire
  int64_t notice_timeout_ms = 10000;
  int64_t peer_lease_ms = 30000;       // a silent site leaves the mirror clock after this
  // A batch a peer has not acknowledged this long goes through another
  // site whose link answers (docs/wan_replication.md); 0 = never relay.
  int64_t relay_after_ms = 0;
  double time_scale = 1.0;             // link model runs this many times faster than real time
  bool kernel_rate = false;            // tc on the hosts limits the rate; geops adds delay and outages
  // false: the sites are in different regions and the network is the link:
  // geops holds nothing back, and the links below only inform its
  // estimates (expected rate and delay). true: geops replays the links.
  bool emulate = true;
  std::string links = "static";        // "static" ([[links]]), "skyplane" (regions), "csv"
  std::string trace_dir;               // skyplane: folder with throughput.csv and latency.csv
  std::string skyplane_bandwidth = "per-connection";  // or "aggregate" (sum of 64 connections)
  double bandwidth_scale = 1.0;        // every link's bandwidth times this (a share of a busier link)
  std::string trace_file;              // csv: geops CSV trace
  std::string variation;               // optional Mahimahi trace: bandwidth varies like it
  double variation_bin_s = 0.5;        // Mahimahi bin width, seconds
  double variation_stagger_s = 0;      // link i replays the variation from i x this seconds in
};

// One `[[faults]]` entry: a failure `geops launch` injects on purpose
// (supervisor/launch/fault_plan.h). Only the launcher acts on it; `geops worker` reads it
// only to report the clocks it fires at the moment it reaches them.
struct FaultSpec {
  // "kill-site" (SIGKILL), "kill-shard", "stop-site" (SIGTERM: a planned
  // stop, the launcher's stop grace before SIGKILL) or "wipe-disk"
  std::string kind;
  std::string site;               // the site it hits (a [[sites]] name)
  int site_index = 0;             // index of `site` in Topology::sites
  int shard = -1;                 // kill-shard: the shard of the site; -1 for the others
  // Fires once every live worker of the site has reported finishing clock
  // at_clock (0-based, the "clock" of their progress events), i.e. has
  // pushed at_clock + 1 clocks. 0 <= at_clock < training.clocks.
  int64_t at_clock = 0;
  // Seconds from the kill to the restart of what was killed; < 0 (the key
  // absent): it stays down. Required for wipe-disk.
  double restart_after_s = -1;
  int line = 0;                   // of the entry in the topology file (for messages)

  bool restarts() const { return restart_after_s >= 0; }
  // stop-site: the victims get SIGTERM and stop by themselves.
  bool graceful() const { return kind == "stop-site"; }
};

struct Topology {
  std::string name;             // for reports
  std::string path;             // the file it was read from

  // [model]
  // "mlp" (Fashion-MNIST), "counter" (the exactness oracle) or "client" (the
  // workers define the model: its tables, from the first worker to register)
  std::string workload = "mlp";
  std::vector<int> layers = {784, 512, 256, 10};
  int64_t chunk_kib = 16;        // chunk size in KiB
  uint64_t seed = 1;             // initial values and data order

  // [training]
  int64_t clocks = 1000;          // iterations per worker
  int batch_size = 32;            // examples per worker per clock
  double learning_rate = 0.025;   // deltas are -learning_rate * gradient
  double final_learning_rate = -1;  // cosine decay to this at the last clock; < 0: constant
  int64_t staleness = 2;          // SSP bound inside a site; -1 = async
  int64_t eval_every = 250;       // clocks between test-set evaluations (worker 0)
  // Evaluations during training on a copy of the model in a thread of their
  // own, while worker 0 trains on (TrainerOptions::background_eval).
  bool background_eval = true;
  double target_accuracy = 0.85;  // for time_to_target_seconds
  std::string backend = "cpu";    // "cpu", "cuda" or "auto"
  int compute_threads = 1;        // BLAS threads per worker
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t worker_lease_ms = 10000;
  // Workers whose reads carry only what changed (ShardOptions::change_readers):
  // -1 = worker 0 of a site with one worker, else none.
  int change_readers = -1;
  int64_t rpc_timeout_ms = 30000;
  // How long a worker keeps retrying a shard that is unavailable (down,
  // restarting) before it gives up: long enough for a supervisor to restart
  // the shard.
  int64_t retry_window_ms = 300000;
  std::string auth_token;         // optional shared secret for workers
  // The workers' own program (e.g. {"python3", "train.py"}), which `geops
  // launch` starts once per worker instead of `geops worker`, in the
  // topology file's folder, with the GEOPS_* variables (supervisor/launch/worker_env.h).
  // Empty: geops' built-in worker.
  std::vector<std::string> command;

  // [storage]
  // Where shards persist: shard i of site S keeps its store in
  // <storage_dir>/<S>-shard-<i>. Empty (the default): in memory only. A
  // relative path is taken from the launch's results folder (geops launch),
  // or from --out / the current directory for a hand-run `geops site`.
  std::string storage_dir;
  std::string durability = "sync";  // "sync", "async" or "off" (see common/options.h)

  // [security]: mutual TLS on every port (docs/security.md). `certs` is the
  // folder `geops certs` wrote (relative: to the topology file); empty:
  // plaintext, which a topology with a site beyond loopback refuses unless
  // `insecure = true`.
  struct Security {
    std::string certs;
    bool insecure = false;
  } security;
  bool tls() const { return !security.certs.empty(); }

  // [server]: limits of every shard's LAN and mirror ports, against broken
  // or hostile clients (docs/security.md has what each does past its limit).
  struct Server {
    int64_t max_connections = 10000;     // open at once
    int64_t max_active_requests = 1024;  // in progress at once (threads)
    int64_t idle_timeout_ms = 0;         // close a silent connection; 0 = never
    int64_t frame_timeout_ms = 120000;   // a frame's body, once its header came; 0 = no deadline
    int64_t send_timeout_ms = 60000;     // a reply the peer does not drain
  } server;
  // security.certs resolved; empty when TLS is off.
  std::string CertsDir() const;

  std::vector<SiteSpec> sites;
  WanSpec wan;                    // used when there are >= 2 sites
  std::vector<LinkSpec> links;    // [[links]]
  std::vector<FaultSpec> faults;  // [[faults]], in file order

  bool multi_site() const { return sites.size() > 1; }
  bool client_model() const { return workload == "client"; }
  bool persistent() const { return !storage_dir.empty(); }
  // The at_clock of every fault on site `site`, ascending, without repeats.
  std::vector<int64_t> FaultClocks(int site) const;
  // `path` (relative paths are taken from the topology file's folder).
  std::string Resolve(const std::string& path) const;

  int total_workers() const;
  // The store directory of shard `shard` of site `site`, a relative
  // storage_dir taken from `relative_to` (when not empty); "" when the
  // topology keeps shards in memory. REQUIRES: `site` indexes sites.
  std::string ShardDataDir(int site, int shard, const std::string& relative_to) const;
  // Index of the site named `name`, or NotFound listing the sites.
  Result<int> FindSite(const std::string& name) const;
};

// Reads and validates a topology file. Errors name the file, and the line
// where TOML reports one: "topo.toml:12: training.clocks must be >= 1".
// `require_tls` false skips only the [security] rule that a site beyond
// loopback needs certificates (for `geops certs`, which makes them).
Result<Topology> LoadTopology(const std::string& path, bool require_tls = true);
// Same, from text (`origin` names it in errors).
Result<Topology> ParseTopology(const std::string& text, const std::string& origin, bool require_tls = true);

// 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(const std::string& host);

// One line saying how the topology's ports are protected ("security: ..."):
// mutual TLS and where the certificates are, plaintext on loopback, or an
// explicit insecure deployment.
std::string SecuritySummary(const Topology& topology);

}  // namespace geops::config

#endif  // GEOPS_CONFIG_TOPOLOGY_H_
