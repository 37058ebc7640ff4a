// geops: the one command of a geops deployment.
//
//   geops launch TOPOLOGY.toml --out DIR   start every process of a topology here
//   geops site   --topology T --site S --shard I [--port P] [--data-dir D]
//   geops inspect DATA_DIR                  show what a shard's store holds
//   geops worker --topology T --site S --worker W [--shards H:P,...]
//   geops worker --check --topology T --site S [--wait SECONDS]   check a site's replica
//   geops trace show TOPOLOGY.toml          print the effective WAN link table
//   geops chaos TOPOLOGY.toml --out DIR     kill and restart processes at random; check the end state
//   geops certs TOPOLOGY.toml --out DIR     make the deployment's CA and its mutual-TLS certificates
//   geops deploy k8s TOPOLOGY.toml --certs DIR --out DIR   Kubernetes manifests of the deployment
//
// Exit codes: 0 success, 1 runtime failure, 2 bad arguments or configuration;
// `launch` returns 130 / 143 when stopped by SIGINT / SIGTERM.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/launch_command.h"
#include "worker/blas_core.h"

int main(int argc, char** argv) {
  // Before anything else: a CPU newer than the BLAS gets its vector kernels.
  geops::worker::ReexecForBlasCore(argv);
  CLI::App app{"geops: a geo-distributed, hierarchical parameter server"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  geops::cli::LaunchArgs launch;
  CLI::App* launch_cmd = app.add_subcommand("launch", "Start every site, shard and worker of a topology on this machine");
  launch_cmd->add_option("topology", launch.topology_path, "Topology TOML file")->required();
  launch_cmd->add_option("--out", launch.out_dir, "Results folder (summary.json, metrics, logs)")->required();
  launch_cmd->add_option("--timeout", launch.timeout_seconds, "Stop everything after this many seconds")
      ->check(CLI::PositiveNumber);
  launch_cmd->add_flag("--plain", launch.force_plain, "Plain progress lines even on a terminal");
  launch_cmd->add_flag("--resume", launch.resume,
                       "Continue the run the results folder holds (shard stores, clocks, logs and metrics are kept)");
  launch_cmd->add_option("--max-restarts", launch.max_restarts,
                         "Restarts of each shard or worker that dies on its own before the run fails (default 3)")
      ->check(CLI::Range(0, 1000));
  launch_cmd->add_flag("--replace", launch.replace,
                       "Delete the run the results folder holds (and the topology's shard stores), then start afresh");

  geops::cli::SiteArgs site;
  CLI::App* site_cmd = app.add_subcommand("site", "Serve one shard of a site");
  site_cmd->add_option("--topology", site.topology_path, "Topology TOML file")->required();
  site_cmd->add_option("--site", site.site, "Site name")->required();
  site_cmd->add_option("--shard", site.shard, "Shard index")->required()->check(CLI::NonNegativeNumber);
  site_cmd->add_option("--port", site.port, "Port (0 = any free port; default: base_port + shard)")
      ->check(CLI::Range(0, 65535));
  site_cmd->add_option("--out", site.out_dir, "Results folder");
  site_cmd->add_option("--metrics-port", site.metrics_port,
                       "Prometheus /metrics port (0 = any free port; default: the site's metrics_base_port + shard)")
      ->check(CLI::Range(0, 65535));
  site_cmd->add_option("--memory-budget-mib", site.memory_budget_mib,
                       "The shard process's memory budget, MiB (0 = none; default: the site's shard_memory_mib)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  CLI::Option* data_dir_opt = site_cmd->add_option(
      "--data-dir", site.data_dir,
      "The shard's store directory (default: from the topology's [storage]; \"\" keeps it in memory)");
  site_cmd->add_option("--run-id", site.run_id,
                       "Read only a peers file written for this run (geops launch passes its run's id)");
  site_cmd->add_flag("--exit-with-parent", site.exit_with_parent,
                     "Stop when standard input closes (set by geops launch)");
  site_cmd->add_option("--mirror-port", site.mirror_port,
                       "WAN mirror port (0 = any free port; default: base_port + 1000 + shard)")
      ->check(CLI::Range(0, 65535));
  site_cmd->add_option("--mirror-peers", site.mirror_peers,
                       "Mirror addresses of this shard in the other sites: site=host:port,...");
  site_cmd->add_option("--peers-file", site.peers_file, "Peers file written by geops launch");

  geops::cli::InspectArgs inspect;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "Show what a shard's store holds, without changing it");
  inspect_cmd->add_option("data_dir", inspect.data_dir, "The shard's store directory")->required();

  geops::cli::TraceShowArgs trace_show;
  CLI::App* trace_cmd = app.add_subcommand("trace", "WAN link traces");
  trace_cmd->require_subcommand(1);
  CLI::App* trace_show_cmd = trace_cmd->add_subcommand("show", "Print the effective WAN link table of a topology");
  trace_show_cmd->add_option("topology", trace_show.topology_path, "Topology TOML file")->required();

  geops::cli::WorkerArgs worker;
  CLI::App* worker_cmd = app.add_subcommand("worker", "Run one training worker");
  worker_cmd->add_option("--topology", worker.topology_path, "Topology TOML file")->required();
  worker_cmd->add_option("--site", worker.site, "Site name")->required();
  CLI::Option* worker_index = worker_cmd->add_option("--worker", worker.worker, "Worker index within the site")
                                  ->check(CLI::NonNegativeNumber);
  bool check = false;
  double check_wait = 0;
  worker_cmd->add_flag("--check", check,
                       "Print the site's replica per table instead of training (no worker registers); for the "
                       "counter workload exit 0 only when every value is exact");
  worker_cmd->add_option("--wait", check_wait, "With --check: poll up to this many seconds for an exact counter")
      ->check(CLI::NonNegativeNumber);
  worker_cmd->add_option("--shards", worker.shards, "Shard addresses host:port,... in shard order");
  worker_cmd->add_option("--out", worker.out_dir, "Results folder");
  worker_cmd->add_flag("--takeover", worker.takeover,
                       "The previous process of this worker is known to be dead (a supervisor restarts it): "
                       "take its worker id at once instead of waiting for its lease to end");
  worker_cmd->add_option("--metrics-port", worker.metrics_port,
                         "Prometheus /metrics port (0 = any free port; default: the site's metrics_base_port + "
                         "shards + worker)")
      ->check(CLI::Range(0, 65535));
  worker_cmd->add_option("--progress-every", worker.progress_every_s, "Seconds between progress events")
      ->check(CLI::PositiveNumber);
  worker_cmd->add_flag("--exit-with-parent", worker.exit_with_parent,
                       "Stop when standard input closes (set by geops launch)");

  geops::cli::ChaosArgs chaos;
  CLI::App* chaos_cmd = app.add_subcommand(
      "chaos", "Run a topology's processes as a supervisor would, kill and restart them at random, check the end");
  chaos_cmd->add_option("topology", chaos.topology_path, "Topology TOML file (fixed ports, sync storage, counter)")
      ->required();
  chaos_cmd->add_option("--out", chaos.out_dir, "Results folder (chaos.json, events.jsonl, logs)")->required();
  chaos_cmd->add_option("--seed", chaos.seed, "Seed of the kill schedule");
  chaos_cmd->add_option("--kills", chaos.kills, "Kills in all")->check(CLI::NonNegativeNumber);
  chaos_cmd->add_option("--drain-kills", chaos.drain_kills, "Of them, kills once a worker has finished")
      ->check(CLI::NonNegativeNumber);
  chaos_cmd->add_option("--kinds", chaos.kinds, "Victims to choose from: worker,shard,site");
  chaos_cmd->add_option("--restart-min-ms", chaos.restart_min_ms, "Shortest delay before a restart")
      ->check(CLI::NonNegativeNumber);
  chaos_cmd->add_option("--restart-max-ms", chaos.restart_max_ms, "Longest delay before a restart")
      ->check(CLI::NonNegativeNumber);
  chaos_cmd->add_option("--stall-bound", chaos.stall_bound_s, "Fail when a worker advances no clock this long, s")
      ->check(CLI::PositiveNumber);
  chaos_cmd->add_option("--timeout", chaos.timeout_s, "Fail when the run takes longer, s")->check(CLI::PositiveNumber);

  geops::cli::CertsArgs certs;
  CLI::App* certs_cmd = app.add_subcommand(
      "certs", "Make the deployment's certificate authority and a certificate for every site and worker");
  certs_cmd->add_option("topology", certs.topology_path, "Topology TOML file")->required();
  certs_cmd->add_option("--out", certs.out_dir, "Folder for ca.pem, ca.key, sites/ and workers/")->required();
  certs_cmd->add_option("--days", certs.days, "Validity of every certificate, days")->check(CLI::Range(1, 36500));
  certs_cmd->add_flag("--force", certs.force, "Replace an existing CA and every certificate (old ones stop working)");

  geops::cli::DeployArgs deploy;
  CLI::App* deploy_cmd = app.add_subcommand("deploy", "Render the manifests of a deployment");
  deploy_cmd->require_subcommand(1);
  CLI::App* k8s_cmd = deploy_cmd->add_subcommand(
      "k8s", "Kubernetes: per site a StatefulSet of shards with volumes, an indexed Job of workers, services, "
             "certificate secrets (writes OUT/geops.yaml)");
  k8s_cmd->add_option("topology", deploy.topology_path, "Topology TOML file")->required();
  k8s_cmd->add_option("--out", deploy.out_dir, "Folder for geops.yaml")->required();
  k8s_cmd->add_option("--certs", deploy.certs_dir, "The folder `geops certs` wrote for the topology")->required();
  k8s_cmd->add_option("--image", deploy.image, "Container image (deploy/Dockerfile)");
  k8s_cmd->add_option("--namespace", deploy.namespace_name, "Kubernetes namespace");
  k8s_cmd->add_option("--storage-size", deploy.storage_size, "Each shard's volume, e.g. 20Gi");
  k8s_cmd->add_flag("--emulate-links", deploy.emulate_links,
                    "Keep replaying the topology's links in the pods (a cluster in one region rehearsing a "
                    "multi-region run); by default the pods' topology says [wan] emulate = false: across "
                    "real regions the network is the link");
  k8s_cmd->add_option("--repo-root", deploy.repo_root,
                      "The repository the image was built from: trace paths under it map to /opt/geops");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "geops: %s (see geops --help)\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("[%H:%M:%S.%e] [%l] %v");

  if (*launch_cmd) return geops::cli::RunLaunch(launch);
  if (*chaos_cmd) return geops::cli::RunChaosCommand(chaos);
  if (*certs_cmd) return geops::cli::RunCerts(certs);
  if (*k8s_cmd) return geops::cli::RunDeployK8s(deploy);
  if (*worker_cmd && check) return geops::cli::RunCheck(worker, check_wait);
  if (*worker_cmd && worker_index->count() == 0) {
    std::fprintf(stderr, "geops worker: --worker is required (or --check)\n");
    return 2;
  }
  site.data_dir_given = data_dir_opt->count() > 0;
  if (*site_cmd) return geops::cli::RunSite(site);
  if (*inspect_cmd) return geops::cli::RunInspect(inspect);
  if (*worker_cmd) return geops::cli::RunWorker(worker);
  if (*trace_show_cmd) return geops::cli::RunTraceShow(trace_show);
  return 2;
}
