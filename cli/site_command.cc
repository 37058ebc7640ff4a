// `geops site`: one shard server process. With a store directory (flag
// --data-dir, or the topology's [storage]) the shard loads its persisted
// state before it listens, persists every change while it serves, and
// flushes what is pending when it stops.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <fstream>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/event_line.h"
#include "cli/metrics_endpoint.h"
#include "cli/model_from_topology.h"
#include "cli/shard_memory.h"
#include "cli/shard_metrics.h"
#include "cli/site_mirror.h"
#include "cli/site_wan.h"
#include "cli/tls_options.h"
#include "common/process_memory.h"
#include "common/shard_store.h"
#include "datacenter/shard.h"
#include "datacenter/shard_host.h"
#include "storage/client_model_file.h"
#include "storage/rocksdb_shard_store.h"
#include "thrift/ps_server.h"

namespace geops::cli {
namespace {

nlohmann::json StatusJson(const ShardStatus& st) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerState& w : st.workers) {
    workers.push_back({{"worker", w.worker_id}, {"clock", w.clock}, {"live", w.live},
                       {"finished", w.finished}});
  }
  return {{"shard_clock", st.shard_clock},
          {"num_chunks", st.num_chunks},
          {"num_elements", st.num_elements},
          {"update_batches_applied", st.update_batches_applied},
          {"update_batches_duplicate", st.update_batches_duplicate},
          {"update_bytes_applied", st.update_bytes_applied},
          {"reads_served", st.reads_served},
          {"read_bytes_served", st.read_bytes_served},
          {"requests_rejected", st.requests_rejected},
          {"read_wait_seconds", st.read_wait_seconds},
          {"persistent", st.persistent},
          {"store_commits", st.store_commits},
          {"store_bytes_committed", st.store_bytes_committed},
          {"store_commit_seconds", st.store_commit_seconds},
          {"store_chunks_saved", st.store_chunks_saved},
          {"store_peak_saved_bytes", st.store_peak_saved_bytes},
          {"memory_budget_bytes", st.memory_budget_bytes},
          {"memory_peak_resident_bytes", st.memory_peak_resident_bytes},
          {"memory_updates_refused", st.memory_updates_refused},
          {"workers", workers}};
}

// Exit code for a store that cannot be opened: configuration (another
// model or shard, not a store) is 2, anything else (damage, I/O) is 1.
int StoreExitCode(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

// The parts of one shard process that exist once its model is known, in
// the order they are made: the store, the shard over it, the WAN side over
// the shard. A client-defined model makes them when the first worker's
// schema and values are in (from a handler thread), any other at start.
struct ShardParts {
  std::unique_ptr<ShardStore> store;  // outlives the shard
  std::unique_ptr<datacenter::MemoryGuard> memory_guard;  // outlives the shard; null without a budget
  std::unique_ptr<MemorySampler> memory_sampler;
  std::unique_ptr<datacenter::Shard> shard;
  std::unique_ptr<SiteWan> wan;
};

}  // namespace

int RunSite(const SiteArgs& args) {
  auto topology = LoadTopology(args.topology_path);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops site: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  auto site = topology->FindSite(args.site);
  if (!site.ok()) {
    std::fprintf(stderr, "geops site: %s\n", site.status().message().c_str());
    return 2;
  }
  // An operator starting sites by hand hears how the ports are protected.
  spdlog::info("site {} shard {}: {}", args.site, args.shard, SecuritySummary(*topology));
  const SiteSpec& spec_site = topology->sites[*site];
  if (args.shard < 0 || args.shard >= spec_site.shards) {
    std::fprintf(stderr, "geops site: --shard %d outside 0..%d of site %s\n", args.shard,
                 spec_site.shards - 1, spec_site.name.c_str());
    return 2;
  }
  const ShardOptions shard_options = BuildShardOptions(*topology, *site, args.shard);
  const std::string data_dir =
      args.data_dir_given ? args.data_dir : topology->ShardDataDir(*site, args.shard, args.out_dir);

  // The model: the topology's built-in one, a client-defined one kept from
  // an earlier run in the store's directory, or (nullopt) the one the first
  // worker will bring.
  std::optional<ModelSpec> model;
  bool model_file_read = false;  // a client-defined model kept by an earlier run
  if (!topology->client_model()) {
    auto built_in = BuildModelSpec(*topology);
    if (!built_in.ok()) {
      std::fprintf(stderr, "geops site: %s\n", built_in.status().ToString().c_str());
      return 2;
    }
    model = std::move(built_in).value();
  } else if (!data_dir.empty()) {
    auto kept = storage::ReadClientModel(data_dir);
    if (!kept.ok()) {
      std::fprintf(stderr, "geops site: %s\n", kept.status().ToString().c_str());
      return StoreExitCode(kept.status());
    }
    model = std::move(kept).value();
    model_file_read = model.has_value();
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  if (args.exit_with_parent) ExitWithParent();

  // The host, for the mirror side's questions (which may come before it
  // exists, and stop before it goes).
  std::atomic<datacenter::ShardHost*> host_ptr{nullptr};
  // The receiving end of the WAN side listens from the start, model or not.
  std::unique_ptr<SiteMirror> mirror;
  if (topology->multi_site()) {
    SiteMirrorArgs mirror_args;
    mirror_args.mirror_port = args.mirror_port;
    mirror_args.mirror_peers = args.mirror_peers;
    mirror_args.peers_file = args.peers_file;
    mirror_args.schema = [&host_ptr]() -> std::optional<ModelSpec> {
      datacenter::ShardHost* h = host_ptr.load(std::memory_order_acquire);
      return h != nullptr ? h->FixedModel() : std::nullopt;
    };
    mirror_args.on_conflict = [&host_ptr](const Status& why) {
      if (datacenter::ShardHost* h = host_ptr.load(std::memory_order_acquire)) h->Fail(why);
    };
    auto started = SiteMirror::Start(*topology, *site, args.shard, std::move(mirror_args));
    if (!started.ok()) {
      std::fprintf(stderr, "geops site: %s\n", started.status().ToString().c_str());
      return started.status().code() == StatusCode::kUnavailable ? 1 : 2;
    }
    mirror = std::move(started).value();
  }

  ShardParts parts;
  std::atomic<SiteWan*> wan_ptr{nullptr};  // parts.wan once built, for the metrics endpoint
  int build_exit = 2;  // exit code for the step of build() that failed
  // Makes store -> shard -> WAN side for `spec`; on failure nothing is kept.
  const int64_t budget_mib = args.memory_budget_mib >= 0 ? args.memory_budget_mib : spec_site.shard_memory_mib;
  const std::string who = "site " + spec_site.name + " shard " + std::to_string(args.shard);
  auto build = [&](const ModelSpec& spec) -> Result<datacenter::Shard*> {
    const auto load_start = std::chrono::steady_clock::now();
    // The memory budget, before anything the plan counts is allocated.
    std::unique_ptr<datacenter::MemoryGuard> guard;
    if (budget_mib > 0) {
      std::optional<StorageOptions> storage_options;
      if (!data_dir.empty()) storage_options = BuildStorageOptions(*topology, data_dir);
      const datacenter::MemoryPlan plan = ShardMemoryPlan(*topology, *site, spec, shard_options,
                                                          storage_options ? &*storage_options : nullptr);
      build_exit = 2;
      GEOPS_RETURN_IF_ERROR(datacenter::CheckMemoryPlan(plan, budget_mib << 20, who));
      spdlog::info("{}: memory budget {} MiB; the plan holds {} MiB ({})", who, budget_mib, plan.total() >> 20,
                   plan.Describe());
      guard = std::make_unique<datacenter::MemoryGuard>(budget_mib << 20, [] { return ResidentBytes(); }, who);
    }
    std::unique_ptr<ShardStore> store;
    if (!data_dir.empty()) {
      const StorageOptions storage_options = BuildStorageOptions(*topology, data_dir);
      auto opened = storage::OpenRocksDbShardStore(storage_options, ShardStoreSpec::Of(spec, shard_options));
      if (!opened.ok()) build_exit = StoreExitCode(opened.status());
      GEOPS_ASSIGN_OR_RETURN(store, std::move(opened));
      // Into the store's directory (which exists now), before the shard's
      // first commit: a store that has values always has its model file.
      if (spec.client_defined() && !model_file_read) {
        build_exit = 1;
        GEOPS_RETURN_IF_ERROR(storage::WriteClientModel(data_dir, spec));
        build_exit = 2;
      }
    }
    auto created = datacenter::Shard::Create(spec, shard_options, store.get());
    if (!created.ok()) build_exit = store ? StoreExitCode(created.status()) : 2;
    GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<datacenter::Shard> shard, std::move(created));
    std::unique_ptr<MemorySampler> sampler;
    if (guard) {
      shard->SetMemoryGuard(guard.get());
      sampler = std::make_unique<MemorySampler>(guard.get(), 100);
    }
    if (store) {
      const ShardStatus loaded = shard->GetStatus();
      std::string clocks;
      for (const WorkerState& w : loaded.workers) clocks += (clocks.empty() ? "" : ",") + std::to_string(w.clock);
      spdlog::info("site {} shard {}: store {} ({}) loaded in {:.0f} ms; shard clock {}, worker clocks [{}]",
                   spec_site.name, args.shard, data_dir, DurabilityName(store->durability()),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count(),
                   loaded.shard_clock, clocks);
    }
    // The WAN side taps the shard before any worker can reach it.
    if (mirror) {
      auto started = SiteWan::Start(*topology, *site, args.shard, &shard->spec(), shard.get(), mirror.get());
      if (!started.ok()) build_exit = started.status().code() == StatusCode::kUnavailable ? 1 : 2;
      GEOPS_ASSIGN_OR_RETURN(parts.wan, std::move(started));
    }
    if (spec.client_defined()) {
      EmitEvent({{"event", "model_fixed"}, {"site", spec_site.name}, {"shard", args.shard},
                 {"tables", spec.num_tables()}, {"elements", spec.total_elements()},
                 {"fingerprint", std::to_string(spec.Fingerprint())}});
    }
    parts.store = std::move(store);
    parts.memory_guard = std::move(guard);
    parts.memory_sampler = std::move(sampler);
    parts.shard = std::move(shard);
    wan_ptr.store(parts.wan.get(), std::memory_order_release);
    return parts.shard.get();
  };

  std::unique_ptr<datacenter::ShardHost> host;
  if (model) {
    Result<datacenter::Shard*> built = build(*model);
    if (!built.ok()) {
      std::fprintf(stderr, "geops site: %s\n", built.status().ToString().c_str());
      return build_exit;
    }
    host = datacenter::ShardHost::Serving(*built);
  } else {
    datacenter::ShardHost::PeerCheck peer_check;
    if (mirror) peer_check = [m = mirror.get()](const ModelSpec& proposal) { return m->CheckPeersModel(proposal); };
    auto awaiting = datacenter::ShardHost::AwaitingModel(shard_options, build, std::move(peer_check));
    if (!awaiting.ok()) {
      std::fprintf(stderr, "geops site: %s\n", awaiting.status().ToString().c_str());
      return 2;
    }
    host = std::move(awaiting).value();
    spdlog::info("site {} shard {}: waiting for a worker to register the model", spec_site.name, args.shard);
  }

  host_ptr.store(host.get(), std::memory_order_release);

  rpc::PsServerOptions server_options = ServerOptionsOf(*topology, *site);
  server_options.port = args.port >= 0 ? args.port
                                       : (spec_site.base_port > 0 ? spec_site.base_port + args.shard : 0);
  auto server = rpc::PsServer::Start(host.get(), server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "geops site: %s\n", server.status().ToString().c_str());
    // No mirror call may reach the host once it goes.
    if (mirror) mirror->service()->Stop(Deadline::InMs(10000)).IgnoreError();
    host_ptr.store(nullptr, std::memory_order_release);
    return 1;
  }
  const std::string address = spec_site.host + ":" + std::to_string((*server)->port());
  if (parts.shard) {
    spdlog::info("site {} shard {}/{} serving {} chunks on {}", spec_site.name, args.shard, spec_site.shards,
                 parts.shard->GetStatus().num_chunks, address);
  } else {
    spdlog::info("site {} shard {}/{} listening on {}", spec_site.name, args.shard, spec_site.shards, address);
  }
  nlohmann::json listening = {{"event", "listening"}, {"site", spec_site.name}, {"shard", args.shard},
                              {"address", address}};
  if (mirror) listening["mirror"] = mirror->address();
  EmitEvent(listening);

  // Prometheus /metrics: a fresh snapshot of the shard's stats per scrape.
  std::unique_ptr<MetricsEndpoint> metrics;
  const int metrics_port = args.metrics_port >= 0 ? args.metrics_port : spec_site.MetricsPort(true, args.shard);
  if (metrics_port >= 0) {
    rpc::PsServer* srv = server->get();
    auto started = MetricsEndpoint::Start(spec_site.host, metrics_port, [&host, &wan_ptr, srv, &spec_site, &args] {
      MetricsBuilder b({{"site", spec_site.name}, {"shard", std::to_string(args.shard)}});
      if (datacenter::Shard* shard = host->shard()) AppendShardMetrics(shard->GetStatus(), srv->connections_refused(), &b);
      if (SiteWan* wan = wan_ptr.load(std::memory_order_acquire)) wan->AppendMetrics(&b);
      return b.Take();
    });
    if (!started.ok()) {
      std::fprintf(stderr, "geops site: %s\n", started.status().ToString().c_str());
      if (mirror) mirror->service()->Stop(Deadline::InMs(10000)).IgnoreError();
      host_ptr.store(nullptr, std::memory_order_release);
      return 1;
    }
    metrics = std::move(started).value();
    spdlog::info("site {} shard {}: metrics on http://{}/metrics", spec_site.name, args.shard, metrics->address());
    EmitEvent({{"event", "metrics"}, {"site", spec_site.name}, {"shard", args.shard}, {"address", metrics->address()}});
  }

  int sig = 0;
  sigwait(&stop, &sig);
  metrics.reset();  // no scrape may reach the parts once they go
  spdlog::info("site {} shard {}: signal {}, stopping", spec_site.name, args.shard, sig);
  Status stopped = Status::Ok();
  Status flushed = Status::Ok();
  // A clean stop (SIGTERM from a supervisor or Kubernetes, SIGINT): reads
  // waiting for other workers end now with Unavailable, which the workers
  // retry until this shard is back; what is in flight finishes; the WAN
  // side gets a few seconds to hand over its final updates; the store
  // commits. The server's handler threads may still build the parts until
  // it stops.
  if (datacenter::Shard* serving = host->shard()) serving->BeginStop();
  if (parts.wan) parts.wan->Settle(5000);
  stopped = (*server)->Stop(Deadline::InMs(10000));
  nlohmann::json stats = {{"shard_clock", 0}, {"model", "none registered"}};
  if (parts.shard) {
    flushed = parts.shard->Flush(Deadline::InMs(30000));
    if (!flushed.ok()) std::fprintf(stderr, "geops site: %s\n", flushed.ToString().c_str());
    stats = StatusJson(parts.shard->GetStatus());
  }
  stats["event"] = "shard_stats";
  // At exit: the limits in force, and the connections refused at accept.
  stats["lan_port"] = {{"connections_refused", (*server)->connections_refused()},
                       {"max_connections", server_options.max_connections},
                       {"max_active_requests", server_options.max_active_requests},
                       {"idle_timeout_ms", server_options.idle_timeout_ms},
                       {"frame_timeout_ms", server_options.transport.frame_timeout_ms},
                       {"send_timeout_ms", server_options.send_timeout_ms},
                       {"max_frame_bytes", server_options.transport.max_frame_bytes}};
  stats["site"] = spec_site.name;
  stats["shard"] = args.shard;
  if (parts.wan) {
    stats["wan"] = parts.wan->StatsJson();
    if (nlohmann::json recovery = parts.wan->RecoveryJson(); !recovery.is_null()) stats["recovery"] = recovery;
  }
  EmitEvent(stats);
  if (!args.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.out_dir + "/metrics", ec);
    std::ofstream(args.out_dir + "/metrics/" + spec_site.name + "-shard-" + std::to_string(args.shard) +
                  ".json") << stats.dump(2) << "\n";
  }
  // The server, then the host it served, the WAN side, the mirror service
  // it received on, the shard, the store.
  server->reset();
  // No mirror call may reach the host once it goes.
  if (mirror) {
    Status mirror_stopped = mirror->service()->Stop(Deadline::InMs(10000));
    if (!mirror_stopped.ok()) spdlog::warn("site {} shard {}: {}", spec_site.name, args.shard, mirror_stopped.message());
  }
  host_ptr.store(nullptr, std::memory_order_release);
  host.reset();
  parts.wan.reset();
  mirror.reset();
  parts.shard.reset();
  parts.store.reset();
  if (!stopped.ok()) {
    std::fprintf(stderr, "geops site: %s\n", stopped.ToString().c_str());
    return 1;
  }
  return flushed.ok() ? 0 : 1;
}

}  // namespace geops::cli
