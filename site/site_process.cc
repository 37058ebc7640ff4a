#include "site/site_process.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/process_cpu.h"
#include "common/process_memory.h"
#include "config/model_from_topology.h"
#include "config/tls_options.h"
#include "metrics/event_line.h"
#include "metrics/shard_metrics.h"
#include "storage/client_model_file.h"
#include "storage/rocksdb_shard_store.h"

namespace geops::site {
namespace {

using metrics::EmitEvent;
using nlohmann::json;

json StatusJson(const ShardStatus& st) {
  json workers = json::array();
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

// 1 for a port that cannot be had (Unavailable), else 2.
int PortExitCode(const Status& s) { return s.code() == StatusCode::kUnavailable ? 1 : 2; }

}  // namespace

SiteProcess::SiteProcess(const config::Topology& topology, SiteProcessOptions options)
    : topology_(topology),
      options_(std::move(options)),
      spec_site_(topology.sites[options_.site]),
      shard_options_(config::BuildShardOptions(topology, options_.site, options_.shard)),
      who_("site " + spec_site_.name + " shard " + std::to_string(options_.shard)) {}

Result<std::unique_ptr<SiteProcess>> SiteProcess::Start(const config::Topology& topology, SiteProcessOptions options,
                                                        int* exit_code) {
  *exit_code = 2;
  if (options.site < 0 || options.site >= static_cast<int>(topology.sites.size())) {
    return InvalidArgumentError("site index " + std::to_string(options.site) + " outside the topology");
  }
  const config::SiteSpec& s = topology.sites[options.site];
  if (options.shard < 0 || options.shard >= s.shards) {
    return InvalidArgumentError("--shard " + std::to_string(options.shard) + " outside 0.." +
                                std::to_string(s.shards - 1) + " of site " + s.name);
  }
  std::unique_ptr<SiteProcess> p(new SiteProcess(topology, std::move(options)));
  // Each step leaves what it made to the destructor when a later one fails.
  GEOPS_RETURN_IF_ERROR(p->StartMirror(exit_code));
  GEOPS_RETURN_IF_ERROR(p->StartHost(exit_code));
  GEOPS_RETURN_IF_ERROR(p->StartServer(exit_code));
  GEOPS_RETURN_IF_ERROR(p->StartMetrics(exit_code));
  *exit_code = 0;
  return p;
}

Status SiteProcess::StartMirror(int* exit_code) {
  if (!topology_.multi_site()) return Status::Ok();
  SiteMirrorArgs args;
  args.mirror_port = options_.mirror_port;
  args.mirror_peers = options_.mirror_peers;
  args.peers_file = options_.peers_file;
  args.run_id = options_.run_id;
  args.schema = [this]() -> std::optional<ModelSpec> {
    datacenter::ShardHost* h = host_ptr_.load(std::memory_order_acquire);
    return h != nullptr ? h->FixedModel() : std::nullopt;
  };
  args.on_conflict = [this](const Status& why) {
    if (datacenter::ShardHost* h = host_ptr_.load(std::memory_order_acquire)) h->Fail(why);
  };
  auto started = SiteMirror::Start(topology_, options_.site, options_.shard, std::move(args));
  if (!started.ok()) {
    *exit_code = PortExitCode(started.status());
    return started.status();
  }
  mirror_ = std::move(started).value();
  return Status::Ok();
}

Result<std::optional<ModelSpec>> SiteProcess::KnownModel(int* exit_code) {
  *exit_code = 2;
  if (!topology_.client_model()) {
    GEOPS_ASSIGN_OR_RETURN(ModelSpec built_in, config::BuildModelSpec(topology_));
    return std::optional<ModelSpec>(std::move(built_in));
  }
  if (options_.data_dir.empty()) return std::optional<ModelSpec>();
  auto kept = storage::ReadClientModel(options_.data_dir);
  if (!kept.ok()) {
    *exit_code = StoreExitCode(kept.status());
    return kept.status();
  }
  model_file_read_ = kept->has_value();
  return std::move(kept).value();
}

Result<datacenter::Shard*> SiteProcess::BuildParts(const ModelSpec& spec) {
  const auto load_start = std::chrono::steady_clock::now();
  // The memory budget, before anything the plan counts is allocated.
  const int64_t budget_mib =
      options_.memory_budget_mib >= 0 ? options_.memory_budget_mib : spec_site_.shard_memory_mib;
  std::unique_ptr<datacenter::MemoryGuard> guard;
  if (budget_mib > 0) {
    std::optional<StorageOptions> storage_options;
    if (!options_.data_dir.empty()) storage_options = config::BuildStorageOptions(topology_, options_.data_dir);
    const datacenter::MemoryPlan plan = ShardMemoryPlan(topology_, options_.site, spec, shard_options_,
                                                        storage_options ? &*storage_options : nullptr);
    build_exit_ = 2;
    GEOPS_RETURN_IF_ERROR(datacenter::CheckMemoryPlan(plan, budget_mib << 20, who_));
    spdlog::info("{}: memory budget {} MiB; the plan holds {} MiB ({})", who_, budget_mib, plan.total() >> 20,
                 plan.Describe());
    guard = std::make_unique<datacenter::MemoryGuard>(budget_mib << 20, [] { return ResidentBytes(); }, who_);
  }
  std::unique_ptr<ShardStore> store;
  if (!options_.data_dir.empty()) {
    const StorageOptions storage_options = config::BuildStorageOptions(topology_, options_.data_dir);
    auto opened = storage::OpenRocksDbShardStore(storage_options, ShardStoreSpec::Of(spec, shard_options_));
    if (!opened.ok()) build_exit_ = StoreExitCode(opened.status());
    GEOPS_ASSIGN_OR_RETURN(store, std::move(opened));
    // Into the store's directory (which exists now), before the shard's
    // first commit: a store that has values always has its model file.
    if (spec.client_defined() && !model_file_read_) {
      build_exit_ = 1;
      GEOPS_RETURN_IF_ERROR(storage::WriteClientModel(options_.data_dir, spec));
      build_exit_ = 2;
    }
  }
  auto created = datacenter::Shard::Create(spec, shard_options_, store.get());
  if (!created.ok()) build_exit_ = store ? StoreExitCode(created.status()) : 2;
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
    spdlog::info("{}: store {} ({}) loaded in {:.0f} ms; shard clock {}, worker clocks [{}]", who_,
                 options_.data_dir, DurabilityName(store->durability()),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count(),
                 loaded.shard_clock, clocks);
  }
  // The WAN side taps the shard before any worker can reach it.
  std::unique_ptr<SiteWan> wan;
  if (mirror_) {
    auto started = SiteWan::Start(topology_, options_.site, options_.shard, &shard->spec(), shard.get(), mirror_.get());
    if (!started.ok()) build_exit_ = PortExitCode(started.status());
    GEOPS_ASSIGN_OR_RETURN(wan, std::move(started));
  }
  if (spec.client_defined()) {
    EmitEvent({{"event", "model_fixed"}, {"site", spec_site_.name}, {"shard", options_.shard},
               {"tables", spec.num_tables()}, {"elements", spec.total_elements()},
               {"fingerprint", std::to_string(spec.Fingerprint())}});
  }
  store_ = std::move(store);
  memory_guard_ = std::move(guard);
  memory_sampler_ = std::move(sampler);
  shard_ = std::move(shard);
  wan_ = std::move(wan);
  wan_ptr_.store(wan_.get(), std::memory_order_release);
  return shard_.get();
}

Status SiteProcess::StartHost(int* exit_code) {
  GEOPS_ASSIGN_OR_RETURN(std::optional<ModelSpec> model, KnownModel(exit_code));
  if (model) {
    Result<datacenter::Shard*> built = BuildParts(*model);
    if (!built.ok()) {
      *exit_code = build_exit_;
      return built.status();
    }
    host_ = datacenter::ShardHost::Serving(*built);
  } else {
    datacenter::ShardHost::PeerCheck peer_check;
    if (mirror_) {
      peer_check = [m = mirror_.get()](const ModelSpec& proposal) { return m->CheckPeersModel(proposal); };
    }
    auto awaiting = datacenter::ShardHost::AwaitingModel(
        shard_options_, [this](const ModelSpec& spec) { return BuildParts(spec); }, std::move(peer_check));
    if (!awaiting.ok()) {
      *exit_code = 2;
      return awaiting.status();
    }
    host_ = std::move(awaiting).value();
    spdlog::info("{}: waiting for a worker to register the model", who_);
  }
  host_ptr_.store(host_.get(), std::memory_order_release);
  return Status::Ok();
}

Status SiteProcess::StartServer(int* exit_code) {
  server_options_ = config::ServerOptionsOf(topology_, options_.site);
  server_options_.port = options_.port >= 0
                             ? options_.port
                             : (spec_site_.base_port > 0 ? spec_site_.base_port + options_.shard : 0);
  auto server = rpc::PsServer::Start(host_.get(), server_options_);
  if (!server.ok()) {
    *exit_code = 1;
    return server.status();
  }
  server_ = std::move(server).value();
  const std::string address = spec_site_.host + ":" + std::to_string(server_->port());
  if (shard_) {
    spdlog::info("site {} shard {}/{} serving {} chunks on {}", spec_site_.name, options_.shard, spec_site_.shards,
                 shard_->GetStatus().num_chunks, address);
  } else {
    spdlog::info("site {} shard {}/{} listening on {}", spec_site_.name, options_.shard, spec_site_.shards, address);
  }
  json listening = {{"event", "listening"}, {"site", spec_site_.name}, {"shard", options_.shard},
                    {"address", address}};
  if (mirror_) listening["mirror"] = mirror_->address();
  EmitEvent(listening);
  return Status::Ok();
}

Status SiteProcess::StartMetrics(int* exit_code) {
  // Prometheus /metrics: a fresh snapshot of the shard's stats per scrape.
  const int port = options_.metrics_port >= 0 ? options_.metrics_port : spec_site_.MetricsPort(true, options_.shard);
  if (port < 0) return Status::Ok();
  auto started = metrics::MetricsEndpoint::Start(spec_site_.host, port, [this] {
    metrics::MetricsBuilder b({{"site", spec_site_.name}, {"shard", std::to_string(options_.shard)}});
    if (datacenter::Shard* shard = host_->shard()) {
      metrics::AppendShardMetrics(shard->GetStatus(), server_->connections_refused(), &b);
    }
    if (SiteWan* wan = wan_ptr_.load(std::memory_order_acquire)) wan->AppendMetrics(&b);
    return b.Take();
  });
  if (!started.ok()) {
    *exit_code = 1;
    return started.status();
  }
  metrics_ = std::move(started).value();
  spdlog::info("{}: metrics on http://{}/metrics", who_, metrics_->address());
  EmitEvent({{"event", "metrics"}, {"site", spec_site_.name}, {"shard", options_.shard},
             {"address", metrics_->address()}});
  return Status::Ok();
}

SiteProcess::Stopped SiteProcess::Stop() {
  Stopped out;
  metrics_.reset();  // no scrape may reach the parts once they go
  // The server's handler threads may still build the parts until it stops.
  if (datacenter::Shard* serving = host_->shard()) serving->BeginStop();
  if (wan_) wan_->Settle(5000);
  out.server = server_->Stop(Deadline::InMs(10000));
  json stats = {{"shard_clock", 0}, {"model", "none registered"}};
  if (shard_) {
    out.flushed = shard_->Flush(Deadline::InMs(30000));
    stats = StatusJson(shard_->GetStatus());
  }
  stats["event"] = "shard_stats";
  // At exit: the limits in force, and the connections refused at accept.
  stats["lan_port"] = {{"connections_refused", server_->connections_refused()},
                       {"max_connections", server_options_.max_connections},
                       {"max_active_requests", server_options_.max_active_requests},
                       {"idle_timeout_ms", server_options_.idle_timeout_ms},
                       {"frame_timeout_ms", server_options_.transport.frame_timeout_ms},
                       {"send_timeout_ms", server_options_.send_timeout_ms},
                       {"max_frame_bytes", server_options_.transport.max_frame_bytes}};
  stats["site"] = spec_site_.name;
  stats["shard"] = options_.shard;
  // Everything this process ran (serving, applying, the WAN tick loop),
  // for the summary's CPU per clock.
  stats["cpu_seconds"] = ProcessCpuSeconds();
  if (wan_) {
    stats["wan"] = wan_->StatsJson();
    if (json recovery = wan_->RecoveryJson(); !recovery.is_null()) stats["recovery"] = recovery;
  }
  out.stats = std::move(stats);
  return out;
}

SiteProcess::~SiteProcess() { TearDown(); }

void SiteProcess::TearDown() {
  metrics_.reset();
  server_.reset();
  // No mirror call may reach the host once it goes.
  if (mirror_) {
    Status stopped = mirror_->service()->Stop(Deadline::InMs(10000));
    if (!stopped.ok()) spdlog::warn("{}: {}", who_, stopped.message());
  }
  host_ptr_.store(nullptr, std::memory_order_release);
  host_.reset();
  wan_ptr_.store(nullptr, std::memory_order_release);
  wan_.reset();
  mirror_.reset();
  shard_.reset();
  memory_sampler_.reset();
  store_.reset();
  memory_guard_.reset();
}

}  // namespace geops::site
