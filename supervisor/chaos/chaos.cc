#include "supervisor/chaos/chaos.h"

#include <uv.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "metrics/event_line.h"
#include "supervisor/chaos/chaos_report.h"
#include "supervisor/launch/child_event.h"
#include "supervisor/launch/process_manager.h"
#include "supervisor/launch/summary.h"
#include "supervisor/launch/worker_env.h"

extern char** environ;

namespace geops::supervisor {

Status ValidateChaosTopology(const config::Topology& t) {
  for (const config::SiteSpec& s : t.sites) {
    if (s.base_port <= 0) {
      return InvalidArgumentError("site " + s.name +
                                  " has no base_port: a restarted process must come back on the same address");
    }
  }
  if (!t.persistent() || t.durability != "sync") {
    return InvalidArgumentError(
        "a chaos run needs [storage] with durability = \"sync\": a killed shard must keep what it acknowledged");
  }
  if (t.workload != "counter") {
    return InvalidArgumentError("a chaos run needs workload = \"counter\" (its end state is checked exactly), not \"" +
                                t.workload + "\"");
  }
  if (!t.faults.empty()) return InvalidArgumentError("a chaos run makes its own faults: remove the [[faults]]");
  if (!t.command.empty()) return InvalidArgumentError("a chaos run starts geops workers: remove [training] command");
  return Status::Ok();
}

namespace {

constexpr uint64_t kTickMs = 100;

enum class Phase { kStarting, kTraining, kChecking, kStopping };

// One process of the deployment, over its restarts.
struct Proc {
  std::string name;
  ProcessSpec spec;
  bool shard = false;
  int site = 0;
  int index = 0;          // shard or worker index in the site
  int id = -1;            // ProcessManager id of the current run
  bool listening = false;  // shards
  bool down = false;       // killed, not yet restarted
  bool finished = false;   // workers: exited 0
  double last_advance_t = 0;
  int64_t clock = -1;
  int restarts = 0;
};

class Chaos {
 public:
  explicit Chaos(const ChaosOptions& o) : o_(o), rng_(o.seed) {}

  int Run();

 private:
  double Now() const { return static_cast<double>(uv_hrtime() - start_ns_) * 1e-9; }
  void Log(nlohmann::json event);
  void Spawn(int p, bool restart);
  void StartWorkers();
  void OnLine(int id, OutputStream stream, std::string_view line);
  void OnExit(int id, const ProcessExit& exit);
  void Tick();
  void MaybeKill();
  void Kill(bool drain);
  void Restart();
  void StartChecks();
  void Fail(const std::string& why);
  void Stop();
  nlohmann::json Report() const;

  static void OnTickTimer(uv_timer_t* t) { static_cast<Chaos*>(t->data)->Tick(); }
  static void OnRestartTimer(uv_timer_t* t) { static_cast<Chaos*>(t->data)->Restart(); }
  static void OnSignal(uv_signal_t* h, int signum);

  const ChaosOptions& o_;
  std::mt19937_64 rng_;
  uv_loop_t loop_{};
  uv_timer_t tick_{}, restart_timer_{};
  uv_signal_t sigint_{}, sigterm_{};
  uint64_t start_ns_ = 0;
  std::unique_ptr<ProcessManager> pm_;
  std::FILE* events_ = nullptr;
  Phase phase_ = Phase::kStarting;
  std::vector<Proc> procs_;
  std::vector<int> owner_;               // ProcessManager id -> procs_ index, or -1 (a check)
  std::vector<int> checks_;              // ProcessManager ids of the replica checks
  int checks_done_ = 0;
  std::vector<int64_t> thresholds_;      // clocks at which the training kills fire
  std::vector<ChaosKill> kills_;
  std::vector<int> pending_;             // procs_ to restart
  bool drain_ = false;                   // a worker has finished
  int64_t front_clock_ = -1;
  ChaosProgress progress_;
  std::vector<std::string> failures_;
  int exit_code_ = 0;
  double end_t_ = 0;
};

void Chaos::OnSignal(uv_signal_t* h, int signum) {
  auto* c = static_cast<Chaos*>(h->data);
  if (c->exit_code_ == 0) c->exit_code_ = 128 + signum;
  c->Fail(std::string("interrupted by ") + (signum == SIGINT ? "SIGINT" : "SIGTERM"));
}

void Chaos::Log(nlohmann::json event) {
  event["chaos_t"] = Now();
  if (events_) std::fprintf(events_, "%s\n", DumpJsonLine(event).c_str());
}

int Chaos::Run() {
  const config::Topology& t = o_.topology;
  std::filesystem::create_directories(o_.out_dir + "/logs");
  events_ = std::fopen((o_.out_dir + "/events.jsonl").c_str(), "w");
  progress_.progress.resize(t.sites.size());
  progress_.finished.resize(t.sites.size());
  for (int s = 0; s < static_cast<int>(t.sites.size()); ++s) {
    const config::SiteSpec& site = t.sites[static_cast<size_t>(s)];
    std::string shards;
    for (int i = 0; i < site.shards; ++i) {
      shards += (i ? "," : "") + site.host + ":" + std::to_string(site.base_port + i);
      Proc p;
      p.name = site.name + "-shard-" + std::to_string(i);
      p.shard = true;
      p.site = s;
      p.index = i;
      p.spec.argv = {o_.geops_binary, "site", "--topology", o_.topology_path, "--site", site.name, "--shard",
                     std::to_string(i), "--out", o_.out_dir, "--data-dir", t.ShardDataDir(s, i, o_.out_dir),
                     "--exit-with-parent"};
      procs_.push_back(std::move(p));
    }
    for (int w = 0; w < site.workers; ++w) {
      Proc p;
      p.name = site.name + "-worker-" + std::to_string(w);
      p.site = s;
      p.index = w;
      WorkerCommand c = BuildWorkerCommand(t, WorkerEnvArgs{s, w, shards, o_.topology_path, o_.out_dir, ""},
                                           o_.geops_binary, environ);
      p.spec.argv = std::move(c.argv);
      p.spec.argv.push_back("--progress-every");
      p.spec.argv.push_back(std::to_string(o_.progress_every_s));
      procs_.push_back(std::move(p));
    }
    progress_.progress[static_cast<size_t>(s)].resize(static_cast<size_t>(site.workers));
    progress_.finished[static_cast<size_t>(s)].resize(static_cast<size_t>(site.workers));
  }
  for (Proc& p : procs_) p.spec.name = p.name, p.spec.log_path = o_.out_dir + "/logs/" + p.name + ".log";

  // Training kills at random clocks of the furthest worker, in order.
  const int training_kills = std::max(0, o_.kills - o_.drain_kills);
  std::uniform_int_distribution<int64_t> at(std::max<int64_t>(1, t.clocks / 20), std::max<int64_t>(1, t.clocks * 3 / 4));
  for (int k = 0; k < training_kills; ++k) thresholds_.push_back(at(rng_));
  std::sort(thresholds_.begin(), thresholds_.end());

  uv_loop_init(&loop_);
  start_ns_ = uv_hrtime();
  ProcessManagerOptions pmo;
  pmo.tail_lines = 15;
  pmo.tail_exclude_prefix = std::string(metrics::kEventPrefix);
  pm_ = std::make_unique<ProcessManager>(&loop_, pmo);
  pm_->set_line_callback([this](int id, OutputStream s, std::string_view l) { OnLine(id, s, l); });
  pm_->set_exit_callback([this](int id, const ProcessExit& e) { OnExit(id, e); });
  uv_timer_init(&loop_, &tick_);
  uv_timer_init(&loop_, &restart_timer_);
  tick_.data = restart_timer_.data = this;
  uv_signal_init(&loop_, &sigint_);
  uv_signal_init(&loop_, &sigterm_);
  sigint_.data = sigterm_.data = this;
  uv_signal_start(&sigint_, OnSignal, SIGINT);
  uv_signal_start(&sigterm_, OnSignal, SIGTERM);
  uv_timer_start(&tick_, OnTickTimer, kTickMs, kTickMs);

  Log({{"event", "chaos_started"}, {"seed", o_.seed}, {"kills", o_.kills}, {"thresholds", thresholds_}});
  std::printf("geops chaos: seed %llu, %d kills (%d during the drain), restarts after %lld-%lld ms\n",
              static_cast<unsigned long long>(o_.seed), o_.kills, o_.drain_kills,
              static_cast<long long>(o_.restart_min_ms), static_cast<long long>(o_.restart_max_ms));
  for (int p = 0; p < static_cast<int>(procs_.size()); ++p) {
    if (procs_[static_cast<size_t>(p)].shard) Spawn(p, false);
  }
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
  pm_.reset();

  const nlohmann::json report = Report();
  Status written = WriteJsonAtomically(o_.out_dir + "/chaos.json", report);
  if (!written.ok()) std::fprintf(stderr, "geops chaos: %s\n", written.message().c_str());
  if (events_) std::fclose(events_);
  for (const nlohmann::json& k : report["kills"]) {
    std::printf("  kill %-6s %-40s at %6.1f s%s: restart after %.1f s, survivors' longest stall %s s, back "
                "training %s s after the restart\n",
                k["kind"].get<std::string>().c_str(), k["victims"].dump().c_str(), k["kill_t"].get<double>(),
                k["during_drain"].get<bool>() ? " (drain)" : "", k["delay_s"].get<double>(),
                k["max_stall_s"].dump().c_str(), k["restart_to_training_s"].dump().c_str());
  }
  if (failures_.empty()) {
    std::printf("geops chaos: PASSED: %zu kills, every worker finished, every site's counter exact, "
                "every shard stopped cleanly (%.1f s); results in %s\n",
                kills_.size(), end_t_, o_.out_dir.c_str());
    return 0;
  }
  for (const std::string& f : failures_) std::fprintf(stderr, "geops chaos: FAILED: %s\n", f.c_str());
  return exit_code_ != 0 ? exit_code_ : 1;
}

void Chaos::Spawn(int p, bool restart) {
  Proc& proc = procs_[static_cast<size_t>(p)];
  proc.spec.append_log = restart;
  // A worker restarted after its kill was reaped: it takes its id at once.
  std::vector<std::string>& argv = proc.spec.argv;
  if (restart && !proc.shard && std::find(argv.begin(), argv.end(), "--takeover") == argv.end()) {
    argv.push_back("--takeover");
  }
  Result<int> id = pm_->Spawn(proc.spec);
  if (!id.ok()) {
    Fail("cannot start " + proc.name + ": " + id.status().message());
    return;
  }
  proc.id = *id;
  proc.listening = false;
  proc.clock = -1;  // a restarted worker's first report counts as an advance
  proc.last_advance_t = Now();
  if (owner_.size() <= static_cast<size_t>(*id)) owner_.resize(static_cast<size_t>(*id) + 1, -1);
  owner_[static_cast<size_t>(*id)] = p;
}

void Chaos::StartWorkers() {
  phase_ = Phase::kTraining;
  for (int p = 0; p < static_cast<int>(procs_.size()); ++p) {
    if (!procs_[static_cast<size_t>(p)].shard) Spawn(p, false);
  }
  Log({{"event", "workers_started"}});
}

void Chaos::OnLine(int id, OutputStream stream, std::string_view line) {
  if (stream != OutputStream::kStdout) return;
  ChildLine parsed = ParseChildLine(line);
  if (parsed.kind != ChildLineKind::kEvent) return;
  const int p = owner_.at(static_cast<size_t>(id));
  nlohmann::json logged = parsed.event;
  logged["process"] = p >= 0 ? procs_[static_cast<size_t>(p)].name : pm_->name(id);
  Log(logged);
  if (p < 0) return;
  Proc& proc = procs_[static_cast<size_t>(p)];
  if (proc.shard && parsed.name == "listening") {
    proc.listening = true;
    if (phase_ == Phase::kStarting &&
        std::all_of(procs_.begin(), procs_.end(), [](const Proc& q) { return !q.shard || q.listening; })) {
      StartWorkers();
    }
  } else if (!proc.shard && parsed.name == "progress") {
    const std::optional<int64_t> c = IntField(parsed.event, "clock");
    if (c && *c > proc.clock) {
      proc.clock = *c;
      proc.last_advance_t = Now();
      progress_.progress[static_cast<size_t>(proc.site)][static_cast<size_t>(proc.index)].push_back(Now());
      front_clock_ = std::max(front_clock_, *c);
    }
  }
}

void Chaos::OnExit(int id, const ProcessExit& exit) {
  const int p = owner_.at(static_cast<size_t>(id));
  if (p < 0) {  // a replica check
    if (!exit.clean()) {
      std::string tail;
      for (const std::string& l : pm_->Tail(id)) tail += "\n    " + l;
      Fail(pm_->name(id) + " ended with " + exit.Describe() + ":" + tail);
      return;
    }
    if (++checks_done_ == static_cast<int>(checks_.size())) Stop();
    return;
  }
  Proc& proc = procs_[static_cast<size_t>(p)];
  if (proc.id != id) return;  // an earlier run of it
  Log({{"event", "process_exit"}, {"process", proc.name}, {"how", exit.Describe()}});
  if (phase_ == Phase::kStopping) {
    if (proc.shard && !exit.clean() && !proc.down) Fail(proc.name + " did not stop cleanly on SIGTERM: " + exit.Describe());
    return;
  }
  if (!proc.shard && exit.clean()) {  // finished (even if a kill was on its way)
    proc.finished = true;
    proc.down = false;
    progress_.finished[static_cast<size_t>(proc.site)][static_cast<size_t>(proc.index)] = Now();
    drain_ = true;
    return;
  }
  if (proc.down && exit.signalled_by_us) return;  // a victim; Restart() starts it again
  std::string tail;
  for (const std::string& l : pm_->Tail(id)) tail += "\n    " + l;
  Fail(proc.name + " ended by itself with " + exit.Describe() + ":" + tail);
}

void Chaos::Tick() {
  const double now = Now();
  if (phase_ == Phase::kStopping) return;
  if (now > o_.timeout_s) {
    Fail("the run took longer than " + std::to_string(o_.timeout_s) + " s");
    return;
  }
  if (phase_ != Phase::kTraining) return;
  for (const Proc& p : procs_) {
    if (p.shard || p.finished || p.down) continue;
    if (now - p.last_advance_t > o_.stall_bound_s) {
      Fail(p.name + " made no progress for " + std::to_string(static_cast<int>(now - p.last_advance_t)) +
           " s (stall bound " + std::to_string(static_cast<int>(o_.stall_bound_s)) + " s) at clock " +
           std::to_string(p.clock));
      return;
    }
  }
  MaybeKill();
  const bool all_finished = std::all_of(procs_.begin(), procs_.end(), [](const Proc& p) { return p.shard || p.finished; });
  if (all_finished && pending_.empty() && static_cast<int>(kills_.size()) >= o_.kills) StartChecks();
}

void Chaos::MaybeKill() {
  if (!pending_.empty() || static_cast<int>(kills_.size()) >= o_.kills) return;
  const size_t k = kills_.size();
  if (drain_) {
    Kill(true);  // the training kills not made yet become drain kills
  } else if (k < thresholds_.size() && front_clock_ >= thresholds_[k]) {
    Kill(false);
  }
}

void Chaos::Kill(bool drain) {
  std::vector<std::string> kinds;
  const bool live_worker =
      std::any_of(procs_.begin(), procs_.end(), [](const Proc& p) { return !p.shard && !p.finished; });
  for (const std::string& kind : o_.kinds) {
    if (kind != "worker" || live_worker) kinds.push_back(kind);
  }
  if (kinds.empty()) kinds.push_back("shard");
  ChaosKill kill;
  kill.kind = kinds[std::uniform_int_distribution<size_t>(0, kinds.size() - 1)(rng_)];
  kill.during_drain = drain;
  std::vector<int> victims;
  if (kill.kind == "worker") {
    std::vector<int> live;
    for (int p = 0; p < static_cast<int>(procs_.size()); ++p) {
      if (!procs_[static_cast<size_t>(p)].shard && !procs_[static_cast<size_t>(p)].finished) live.push_back(p);
    }
    victims.push_back(live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng_)]);
  } else {
    kill.site = std::uniform_int_distribution<int>(0, static_cast<int>(o_.topology.sites.size()) - 1)(rng_);
    const int shard = std::uniform_int_distribution<int>(0, o_.topology.sites[static_cast<size_t>(kill.site)].shards - 1)(rng_);
    for (int p = 0; p < static_cast<int>(procs_.size()); ++p) {
      const Proc& q = procs_[static_cast<size_t>(p)];
      if (q.site != kill.site || q.finished) continue;
      if (kill.kind == "site" || (q.shard && q.index == shard)) victims.push_back(p);
    }
  }
  kill.site = procs_[static_cast<size_t>(victims.front())].site;
  kill.kill_t = Now();
  kill.delay_s = static_cast<double>(std::uniform_int_distribution<int64_t>(o_.restart_min_ms, o_.restart_max_ms)(rng_)) / 1000;
  for (int p : victims) {
    Proc& q = procs_[static_cast<size_t>(p)];
    q.down = true;
    kill.victims.push_back(q.name);
    if (!q.shard) kill.victim_workers.push_back(q.index);
    Status s = pm_->Signal(q.id, SIGKILL);
    if (!s.ok()) Fail("cannot kill " + q.name + ": " + s.message());
  }
  pending_ = victims;
  Log({{"event", "chaos_kill"}, {"kind", kill.kind}, {"victims", kill.victims}, {"drain", drain},
       {"restart_after_s", kill.delay_s}});
  std::printf("[%6.1f s] kill %s %s; restart in %.1f s\n", kill.kill_t, kill.kind.c_str(),
              nlohmann::json(kill.victims).dump().c_str(), kill.delay_s);
  std::fflush(stdout);
  kills_.push_back(std::move(kill));
  uv_timer_start(&restart_timer_, OnRestartTimer, static_cast<uint64_t>(kills_.back().delay_s * 1000), 0);
}

void Chaos::Restart() {
  if (phase_ == Phase::kStopping) return;
  for (int p : pending_) {
    if (pm_->live(procs_[static_cast<size_t>(p)].id)) {  // not reaped yet
      uv_timer_start(&restart_timer_, OnRestartTimer, 50, 0);
      return;
    }
  }
  std::vector<std::string> restarted;
  for (int p : pending_) {  // shards first: they come first in procs_
    Proc& q = procs_[static_cast<size_t>(p)];
    if (q.finished) continue;  // it finished before the kill landed
    q.down = false;
    ++q.restarts;
    Spawn(p, true);
    restarted.push_back(q.name);
  }
  pending_.clear();
  kills_.back().restart_t = Now();
  Log({{"event", "chaos_restart"}, {"processes", restarted}});
}

void Chaos::StartChecks() {
  phase_ = Phase::kChecking;
  Log({{"event", "checks_started"}});
  for (const config::SiteSpec& site : o_.topology.sites) {
    ProcessSpec spec;
    spec.name = site.name + "-check";
    spec.log_path = o_.out_dir + "/logs/" + spec.name + ".log";
    spec.argv = {o_.geops_binary, "worker", "--check", "--topology", o_.topology_path, "--site", site.name,
                 "--wait", std::to_string(o_.check_wait_s)};
    Result<int> id = pm_->Spawn(spec);
    if (!id.ok()) {
      Fail("cannot start " + spec.name + ": " + id.status().message());
      return;
    }
    if (owner_.size() <= static_cast<size_t>(*id)) owner_.resize(static_cast<size_t>(*id) + 1, -1);
    checks_.push_back(*id);
  }
}

void Chaos::Fail(const std::string& why) {
  failures_.push_back(why);
  Log({{"event", "chaos_failed"}, {"reason", why}});
  Stop();
}

void Chaos::Stop() {
  if (phase_ == Phase::kStopping) return;
  phase_ = Phase::kStopping;
  end_t_ = Now();
  uv_timer_stop(&tick_);
  uv_timer_stop(&restart_timer_);
  pm_->StopAll(30, [this] {
    pm_->Close();
    uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&restart_timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
  });
}

nlohmann::json Chaos::Report() const {
  nlohmann::json kills = nlohmann::json::array();
  std::map<std::string, std::vector<double>> stalls, back;
  for (const ChaosKill& k : kills_) {
    const KillEffect e = MeasureKill(k, progress_, end_t_);
    nlohmann::json stall_by_site = nlohmann::json::object();
    for (size_t s = 0; s < e.stall_s.size(); ++s) {
      if (e.stall_s[s]) stall_by_site[o_.topology.sites[s].name] = *e.stall_s[s];
    }
    const std::string kind = k.kind + (k.during_drain ? " (drain)" : "");
    if (e.max_stall_s) stalls[kind].push_back(*e.max_stall_s);
    if (e.restart_to_training_s) back[kind].push_back(*e.restart_to_training_s);
    kills.push_back({{"kind", k.kind}, {"site", o_.topology.sites[static_cast<size_t>(k.site)].name},
                     {"victims", k.victims}, {"kill_t", k.kill_t}, {"delay_s", k.delay_s},
                     {"restart_t", k.restart_t ? nlohmann::json(*k.restart_t) : nlohmann::json(nullptr)},
                     {"during_drain", k.during_drain}, {"stall_s", stall_by_site},
                     {"max_stall_s", e.max_stall_s ? nlohmann::json(*e.max_stall_s) : nlohmann::json(nullptr)},
                     {"restart_to_training_s",
                      e.restart_to_training_s ? nlohmann::json(*e.restart_to_training_s) : nlohmann::json(nullptr)}});
  }
  nlohmann::json by_kind = nlohmann::json::object();
  for (const auto& [kind, v] : stalls) by_kind[kind]["max_stall_s"] = Distribution(v);
  for (const auto& [kind, v] : back) by_kind[kind]["restart_to_training_s"] = Distribution(v);
  nlohmann::json restarts = nlohmann::json::object();
  for (const Proc& p : procs_) {
    if (p.restarts > 0) restarts[p.name] = p.restarts;
  }
  return {{"topology", o_.topology_path}, {"seed", o_.seed}, {"kills_planned", o_.kills},
          {"drain_kills_planned", o_.drain_kills},
          {"restart_delay_ms", {o_.restart_min_ms, o_.restart_max_ms}}, {"progress_every_s", o_.progress_every_s},
          {"passed", failures_.empty()}, {"failures", failures_}, {"wall_s", end_t_}, {"kills", kills},
          {"by_kind", by_kind}, {"restarts", restarts}};
}

}  // namespace

int RunChaos(const ChaosOptions& options) {
  Status valid = ValidateChaosTopology(options.topology);
  if (!valid.ok()) {
    std::fprintf(stderr, "geops chaos: %s\n", valid.message().c_str());
    return 2;
  }
  if (options.kills < 0 || options.drain_kills < 0 || options.drain_kills > options.kills ||
      options.restart_min_ms < 0 || options.restart_max_ms < options.restart_min_ms || options.kinds.empty()) {
    std::fprintf(stderr, "geops chaos: bad kill settings (need 0 <= drain kills <= kills, 0 <= min <= max delay, "
                         "and at least one kind)\n");
    return 2;
  }
  for (const std::string& k : options.kinds) {
    if (k != "worker" && k != "shard" && k != "site") {
      std::fprintf(stderr, "geops chaos: unknown kill kind '%s' (worker, shard, site)\n", k.c_str());
      return 2;
    }
  }
  Chaos chaos(options);
  return chaos.Run();
}

}  // namespace geops::supervisor
