// `geops worker`: one training process.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/event_line.h"
#include "cli/model_from_topology.h"
#include "thrift/ps_client.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

namespace geops::cli {
namespace {

nlohmann::json Optional(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Reports training events as event lines and as metrics JSONL.
class EventObserver : public worker::TrainerObserver {
 public:
  EventObserver(std::string site, int worker, int64_t clocks, const std::string& metrics_path)
      : site_(std::move(site)), worker_(worker), clocks_(clocks) {
    if (!metrics_path.empty()) metrics_.open(metrics_path, std::ios::app);
  }

  void OnProgress(const worker::ProgressInfo& p) override {
    Emit({{"event", "progress"}, {"site", site_}, {"worker", worker_}, {"clock", p.clock},
          {"clocks", clocks_}, {"loss", p.loss}, {"examples_per_sec", p.examples_per_sec},
          {"t", p.t}});
  }
  void OnEval(const worker::EvalInfo& e) override {
    Emit({{"event", "eval"}, {"site", site_}, {"worker", worker_}, {"clock", e.clock},
          {"test_accuracy", e.test_accuracy}, {"test_loss", e.test_loss}, {"t", e.t}});
  }
  void Emit(const nlohmann::json& event) {
    EmitEvent(event);
    if (metrics_.is_open()) metrics_ << event.dump() << "\n" << std::flush;
  }

 private:
  std::string site_;
  int worker_;
  int64_t clocks_;
  std::ofstream metrics_;
};

}  // namespace

int RunWorker(const WorkerArgs& args) {
  if (args.exit_with_parent) ExitWithParent();  // SIGTERM's default action ends the worker
  auto topology = LoadTopology(args.topology_path);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  auto site = topology->FindSite(args.site);
  if (!site.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", site.status().message().c_str());
    return 2;
  }
  const SiteSpec& s = topology->sites[*site];
  if (args.worker < 0 || args.worker >= s.workers) {
    std::fprintf(stderr, "geops worker: --worker %d outside 0..%d of site %s\n", args.worker,
                 s.workers - 1, s.name.c_str());
    return 2;
  }
  std::vector<std::string> addresses;
  if (args.shards.empty()) {
    if (s.base_port == 0) {
      std::fprintf(stderr, "geops worker: site %s has no base_port; pass --shards\n", s.name.c_str());
      return 2;
    }
    for (int i = 0; i < s.shards; ++i) addresses.push_back(s.host + ":" + std::to_string(s.base_port + i));
  } else {
    size_t start = 0;
    while (start <= args.shards.size()) {
      size_t comma = args.shards.find(',', start);
      if (comma == std::string::npos) comma = args.shards.size();
      addresses.push_back(args.shards.substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (static_cast<int>(addresses.size()) != s.shards) {
    std::fprintf(stderr, "geops worker: --shards names %zu addresses, site %s has %d shards\n",
                 addresses.size(), s.name.c_str(), s.shards);
    return 2;
  }
  auto model = BuildModelSpec(*topology);
  if (!model.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", model.status().ToString().c_str());
    return 2;
  }
  rpc::ThriftClientOptions client_options;
  client_options.rpc_timeout_ms = topology->rpc_timeout_ms;
  // With the spec, pulled chunks land straight in the cache and their sizes are checked.
  auto factory = rpc::ThriftShardConnectionFactory::Create(addresses, client_options,
                                                           std::make_shared<const ModelSpec>(*model));
  if (!factory.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", factory.status().ToString().c_str());
    return 2;
  }
  worker::TrainerOptions trainer_options = BuildTrainerOptions(*topology, *site, args.worker);
  auto client = worker::PsClient::Create(*model, s.shards, BuildClientOptions(*topology, args.worker),
                                         factory->get());
  if (!client.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", client.status().ToString().c_str());
    return 2;
  }
  std::string metrics_path;
  if (!args.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.out_dir + "/metrics", ec);
    metrics_path = args.out_dir + "/metrics/" + s.name + "-worker-" + std::to_string(args.worker) + ".jsonl";
  }
  EventObserver observer(s.name, args.worker, topology->clocks, metrics_path);
  Status started = (*client)->Start();
  if (!started.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", started.ToString().c_str());
    return 1;
  }
  auto report = worker::RunTrainer(trainer_options, client->get(), &observer);
  if (!report.ok()) {
    std::fprintf(stderr, "geops worker %s/%d: %s\n", s.name.c_str(), args.worker,
                 report.status().ToString().c_str());
    return 1;
  }
  observer.Emit({{"event", "final"},
                 {"site", s.name},
                 {"worker", args.worker},
                 {"clocks", report->clocks},
                 {"wall_seconds", report->wall_seconds},
                 {"final_loss", Optional(report->final_loss)},
                 {"test_accuracy", Optional(report->test_accuracy)},
                 {"test_loss", Optional(report->test_loss)},
                 {"lan_bytes_sent", report->client.bytes_sent},
                 {"lan_bytes_received", report->client.bytes_received},
                 {"max_staleness_observed", report->client.max_staleness},
                 {"counter_expected", Optional(report->counter_expected)},
                 {"counter_max_abs_error", Optional(report->counter_max_abs_error)},
                 {"examples", report->examples},
                 {"read_wait_seconds", report->client.read_wait_seconds},
                 {"flush_seconds", report->client.flush_seconds},
                 {"refreshes", report->client.refreshes},
                 {"cache_hits", report->client.cache_hits},
                 {"retries", report->client.retries}});
  return 0;
}

}  // namespace geops::cli
