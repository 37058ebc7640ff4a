// `geops site`: one shard server process (site/site_process.h owns its
// parts). With a store directory (flag --data-dir, or the topology's
// [storage]) the shard loads its persisted state before it listens,
// persists every change while it serves, and flushes what is pending when
// it stops.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "config/topology.h"
#include "metrics/event_line.h"
#include "site/site_process.h"

namespace geops::cli {

int RunSite(const SiteArgs& args) {
  auto topology = config::LoadTopology(args.topology_path);
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
  spdlog::info("site {} shard {}: {}", args.site, args.shard, config::SecuritySummary(*topology));

  site::SiteProcessOptions options;
  options.site = *site;
  options.shard = args.shard;
  options.port = args.port;
  options.metrics_port = args.metrics_port;
  options.memory_budget_mib = args.memory_budget_mib;
  options.mirror_port = args.mirror_port;
  options.mirror_peers = args.mirror_peers;
  options.peers_file = args.peers_file;
  options.run_id = args.run_id;
  if (args.shard >= 0 && args.shard < topology->sites[*site].shards) {
    options.data_dir = args.data_dir_given ? args.data_dir : topology->ShardDataDir(*site, args.shard, args.out_dir);
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  if (args.exit_with_parent) ExitWithParent();

  int exit_code = 2;
  auto process = site::SiteProcess::Start(*topology, options, &exit_code);
  if (!process.ok()) {
    std::fprintf(stderr, "geops site: %s\n", process.status().ToString().c_str());
    return exit_code;
  }

  int sig = 0;
  sigwait(&stop, &sig);
  spdlog::info("{}: signal {}, stopping", (*process)->who(), sig);
  site::SiteProcess::Stopped stopped = (*process)->Stop();
  if (!stopped.flushed.ok()) std::fprintf(stderr, "geops site: %s\n", stopped.flushed.ToString().c_str());
  metrics::EmitEvent(stopped.stats);
  if (!args.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.out_dir + "/metrics", ec);
    std::ofstream(args.out_dir + "/metrics/" + topology->sites[*site].name + "-shard-" + std::to_string(args.shard) +
                  ".json") << stopped.stats.dump(2) << "\n";
  }
  process->reset();  // the parts, in reverse order (SiteProcess)
  if (!stopped.server.ok()) std::fprintf(stderr, "geops site: %s\n", stopped.server.ToString().c_str());
  return stopped.exit_code();
}

}  // namespace geops::cli
