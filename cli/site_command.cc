// `geops site`: one shard server process. With a store directory (flag
// --data-dir, or the topology's [storage]) the shard loads its persisted
// state before it listens, persists every change while it serves, and
// flushes what is pending when it stops.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/event_line.h"
#include "cli/model_from_topology.h"
#include "cli/site_wan.h"
#include "common/shard_store.h"
#include "datacenter/shard.h"
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
          {"workers", workers}};
}

// Exit code for a store that cannot be opened: configuration (another
// model or shard, not a store) is 2, anything else (damage, I/O) is 1.
int StoreExitCode(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

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
  const SiteSpec& spec_site = topology->sites[*site];
  if (args.shard < 0 || args.shard >= spec_site.shards) {
    std::fprintf(stderr, "geops site: --shard %d outside 0..%d of site %s\n", args.shard,
                 spec_site.shards - 1, spec_site.name.c_str());
    return 2;
  }
  auto model = BuildModelSpec(*topology);
  if (!model.ok()) {
    std::fprintf(stderr, "geops site: %s\n", model.status().ToString().c_str());
    return 2;
  }
  const ShardOptions shard_options = BuildShardOptions(*topology, *site, args.shard);
  const std::string data_dir =
      args.data_dir_given ? args.data_dir : topology->ShardDataDir(*site, args.shard, args.out_dir);
  const auto load_start = std::chrono::steady_clock::now();
  std::unique_ptr<ShardStore> store;  // outlives the shard
  if (!data_dir.empty()) {
    const StorageOptions storage_options = BuildStorageOptions(*topology, data_dir);
    auto opened = storage::OpenRocksDbShardStore(storage_options, ShardStoreSpec::Of(*model, shard_options));
    if (!opened.ok()) {
      std::fprintf(stderr, "geops site: %s\n", opened.status().ToString().c_str());
      return StoreExitCode(opened.status());
    }
    store = std::move(opened).value();
  }
  auto shard = datacenter::Shard::Create(*model, shard_options, store.get());
  if (!shard.ok()) {
    std::fprintf(stderr, "geops site: %s\n", shard.status().ToString().c_str());
    return store ? StoreExitCode(shard.status()) : 2;
  }
  if (store) {
    const ShardStatus loaded = (*shard)->GetStatus();
    std::string clocks;
    for (const WorkerState& w : loaded.workers) clocks += (clocks.empty() ? "" : ",") + std::to_string(w.clock);
    spdlog::info("site {} shard {}: store {} ({}) loaded in {:.0f} ms; shard clock {}, worker clocks [{}]",
                 spec_site.name, args.shard, data_dir, DurabilityName(store->durability()),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count(),
                 loaded.shard_clock, clocks);
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  if (args.exit_with_parent) ExitWithParent();

  // The WAN side taps the shard before any worker can reach it.
  std::unique_ptr<SiteWan> wan;
  if (topology->multi_site()) {
    SiteWanArgs wan_args;
    wan_args.mirror_port = args.mirror_port;
    wan_args.mirror_peers = args.mirror_peers;
    wan_args.peers_file = args.peers_file;
    auto started = SiteWan::Start(*topology, *site, args.shard, &*model, shard->get(), wan_args);
    if (!started.ok()) {
      std::fprintf(stderr, "geops site: %s\n", started.status().ToString().c_str());
      return started.status().code() == StatusCode::kUnavailable ? 1 : 2;
    }
    wan = std::move(started).value();
  }

  rpc::PsServerOptions server_options;
  server_options.host = spec_site.host;
  server_options.port = args.port >= 0 ? args.port
                                       : (spec_site.base_port > 0 ? spec_site.base_port + args.shard : 0);
  auto server = rpc::PsServer::Start(shard->get(), server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "geops site: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string address = spec_site.host + ":" + std::to_string((*server)->port());
  spdlog::info("site {} shard {}/{} serving {} chunks on {}", spec_site.name, args.shard,
               spec_site.shards, (*shard)->GetStatus().num_chunks, address);
  nlohmann::json listening = {{"event", "listening"}, {"site", spec_site.name}, {"shard", args.shard},
                              {"address", address}};
  if (wan) listening["mirror"] = wan->mirror_address();
  EmitEvent(listening);

  int sig = 0;
  sigwait(&stop, &sig);
  spdlog::info("site {} shard {}: signal {}, stopping", spec_site.name, args.shard, sig);
  if (wan) wan->Settle(5000);
  Status stopped = (*server)->Stop(Deadline::InMs(5000));
  Status flushed = (*shard)->Flush(Deadline::InMs(30000));
  if (!flushed.ok()) std::fprintf(stderr, "geops site: %s\n", flushed.ToString().c_str());
  nlohmann::json stats = StatusJson((*shard)->GetStatus());
  stats["event"] = "shard_stats";
  stats["site"] = spec_site.name;
  stats["shard"] = args.shard;
  if (wan) {
    stats["wan"] = wan->StatsJson();
    if (nlohmann::json recovery = wan->RecoveryJson(); !recovery.is_null()) stats["recovery"] = recovery;
  }
  EmitEvent(stats);
  if (!args.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.out_dir + "/metrics", ec);
    std::ofstream(args.out_dir + "/metrics/" + spec_site.name + "-shard-" + std::to_string(args.shard) +
                  ".json") << stats.dump(2) << "\n";
  }
  server->reset();  // then the WAN side, the shard it serves, the store the shard writes to
  wan.reset();
  shard->reset();
  store.reset();
  if (!stopped.ok()) {
    std::fprintf(stderr, "geops site: %s\n", stopped.ToString().c_str());
    return 1;
  }
  return flushed.ok() ? 0 : 1;
}

}  // namespace geops::cli
