// `geops worker`: one training process.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/process_cpu.h"
#include "config/model_from_topology.h"
#include "config/tls_options.h"
#include "metrics/event_line.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/shard_metrics.h"
#include "thrift/shard_connection_factory.h"
#include "worker/blas_core.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

namespace geops::cli {
namespace {

nlohmann::json Optional(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Reports training events as event lines and as metrics JSONL.
//
// Progress normally comes every period_s from the trainer. With `watch`
// clocks (the at_clock of the topology's faults on this worker's site) the
// trainer reports every clock instead (kEveryClock) and this observer keeps
// the same cadence itself, averaging the loss and rate in between, but also
// reports the first clock >= each watched clock at once: the launcher fires
// a fault as soon as the site's slowest worker gets there.
class EventObserver : public worker::TrainerObserver {
 public:
  static constexpr double kEveryClock = 0;

  EventObserver(std::string site, int worker, int64_t clocks, const std::string& metrics_path,
                std::vector<int64_t> watch, double period_s, int examples_per_clock)
      : site_(std::move(site)),
        worker_(worker),
        clocks_(clocks),
        watch_(std::move(watch)),
        period_s_(period_s),
        examples_per_clock_(examples_per_clock) {
    if (!metrics_path.empty()) metrics_.open(metrics_path, std::ios::app);
  }

  // The progress period the trainer should use.
  double trainer_period() const { return watch_.empty() ? period_s_ : kEveryClock; }

  void OnProgress(const worker::ProgressInfo& p) override {
    clock_.store(p.clock, std::memory_order_relaxed);
    if (watch_.empty()) {
      EmitProgress(p.clock, p.loss, p.examples_per_sec, p.t);
      return;
    }
    loss_sum_ += p.loss;
    ++steps_;
    examples_ += examples_per_clock_;
    bool watched = false;
    while (next_watch_ < watch_.size() && p.clock >= watch_[next_watch_]) {
      watched = true;
      ++next_watch_;
    }
    if (!watched && p.t - last_t_ < period_s_) return;
    const double dt = p.t - last_t_;
    EmitProgress(p.clock, loss_sum_ / steps_, dt > 0 ? examples_ / dt : 0.0, p.t);
    last_t_ = p.t;
    loss_sum_ = 0;
    steps_ = 0;
    examples_ = 0;
  }
  void EmitProgress(int64_t clock, double loss, double examples_per_sec, double t) {
    Emit({{"event", "progress"}, {"site", site_}, {"worker", worker_}, {"clock", clock},
          {"clocks", clocks_}, {"loss", loss}, {"examples_per_sec", examples_per_sec},
          {"t", t}});
  }
  void OnEval(const worker::EvalInfo& e) override {
    Emit({{"event", "eval"}, {"site", site_}, {"worker", worker_}, {"clock", e.clock},
          {"test_accuracy", e.test_accuracy}, {"test_loss", e.test_loss}, {"t", e.t},
          {"eval_seconds", e.seconds}, {"model_age_seconds", e.model_age_seconds}});
  }
  void OnFinalRead(geops::Clock clock) override {
    Emit({{"event", "final_read"}, {"site", site_}, {"worker", worker_}, {"clock", clock}});
  }
  int64_t clock() const { return clock_.load(std::memory_order_relaxed); }
  void set_clock(int64_t clock) { clock_.store(clock, std::memory_order_relaxed); }
  void Emit(const nlohmann::json& event) {
    metrics::EmitEvent(event);
    if (metrics_.is_open()) metrics_ << event.dump() << "\n" << std::flush;
  }

 private:
  std::string site_;
  int worker_;
  int64_t clocks_;
  std::vector<int64_t> watch_;  // ascending
  size_t next_watch_ = 0;
  double period_s_;
  int examples_per_clock_;
  double last_t_ = 0;
  double loss_sum_ = 0;
  int64_t steps_ = 0;
  double examples_ = 0;
  std::ofstream metrics_;
  std::atomic<int64_t> clock_{0};  // the last progress clock, for the metrics endpoint
};

}  // namespace

int RunWorker(const WorkerArgs& args) {
  if (args.exit_with_parent) ExitWithParent();  // SIGTERM's default action ends the worker
  auto topology = config::LoadTopology(args.topology_path);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  auto site = topology->FindSite(args.site);
  if (!site.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", site.status().message().c_str());
    return 2;
  }
  if (topology->client_model()) {
    std::fprintf(stderr,
                 "geops worker: %s has workload \"client\": its workers are your own training script "
                 "(the geops Python package); geops worker trains the built-in models only\n",
                 topology->path.c_str());
    return 2;
  }
  const config::SiteSpec& s = topology->sites[*site];
  if (args.worker < 0 || args.worker >= s.workers) {
    std::fprintf(stderr, "geops worker: --worker %d outside 0..%d of site %s\n", args.worker,
                 s.workers - 1, s.name.c_str());
    return 2;
  }
  auto listed = config::SiteShardAddresses(*topology, *site, args.shards);
  if (!listed.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", listed.status().message().c_str());
    return 2;
  }
  const std::vector<std::string>& addresses = *listed;
  auto model = config::BuildModelSpec(*topology);
  if (!model.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", model.status().ToString().c_str());
    return 2;
  }
  rpc::ThriftClientOptions client_options;
  client_options.rpc_timeout_ms = topology->rpc_timeout_ms;
  client_options.tls = config::WorkerTls(*topology, *site, args.worker);
  // With the spec, pulled chunks land straight in the cache and their sizes are checked.
  auto factory = rpc::ThriftShardConnectionFactory::Create(addresses, client_options,
                                                           std::make_shared<const ModelSpec>(*model));
  if (!factory.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", factory.status().ToString().c_str());
    return 2;
  }
  worker::TrainerOptions trainer_options = config::BuildTrainerOptions(*topology, *site, args.worker);
  trainer_options.progress_every_seconds = args.progress_every_s;
  WorkerClientOptions worker_options = config::BuildClientOptions(*topology, args.worker);
  worker_options.takeover = args.takeover;
  auto client = worker::PsClient::Create(*model, s.shards, worker_options, factory->get());
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
  EventObserver observer(s.name, args.worker, topology->clocks, metrics_path, topology->FaultClocks(*site),
                         trainer_options.progress_every_seconds,
                         topology->workload == "mlp" ? topology->batch_size : 0);
  trainer_options.progress_every_seconds = observer.trainer_period();
  // A worker waiting out a shard's restart says so every few seconds.
  (*client)->set_wait_callback([&observer, &s, worker = args.worker](ShardId shard, int64_t waited_ms,
                                                                   const Status& last) {
    observer.Emit({{"event", "waiting"}, {"site", s.name}, {"worker", worker}, {"shard", shard},
                   {"waited_seconds", waited_ms / 1000.0}, {"reason", last.message()}});
  });
  Status started = (*client)->Start();
  if (!started.ok()) {
    std::fprintf(stderr, "geops worker: %s\n", started.ToString().c_str());
    return 1;
  }
  // The clock the shards hold for this worker: 0, or where a restarted worker resumes.
  observer.set_clock((*client)->clock());
  observer.Emit({{"event", "worker_started"}, {"site", s.name}, {"worker", args.worker},
                 {"clock", (*client)->clock()}, {"blas", worker::LoadedBlasCore()}});
  std::unique_ptr<metrics::MetricsEndpoint> metrics;
  const int metrics_port = args.metrics_port >= 0 ? args.metrics_port : s.MetricsPort(false, args.worker);
  if (metrics_port >= 0) {
    worker::PsClient* c = client->get();
    auto started = metrics::MetricsEndpoint::Start(s.host, metrics_port, [&observer, c, &s, &args, &topology] {
      metrics::MetricsBuilder b({{"site", s.name}, {"worker", std::to_string(args.worker)}});
      metrics::AppendWorkerMetrics(observer.clock(), topology->clocks, c->stats(), &b);
      return b.Take();
    });
    if (!started.ok()) {
      std::fprintf(stderr, "geops worker: %s\n", started.status().ToString().c_str());
      return 1;
    }
    metrics = std::move(started).value();
    observer.Emit({{"event", "metrics"}, {"site", s.name}, {"worker", args.worker}, {"address", metrics->address()}});
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
                 {"retries", report->client.retries},
                 {"cpu_seconds", ProcessCpuSeconds()}});
  return 0;
}

}  // namespace geops::cli
