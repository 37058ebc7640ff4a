#include "supervisor/launch/launcher.h"
#include "supervisor/launch/launcher_state.h"

#include <signal.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <map>
#include <optional>

#include "supervisor/launch/child_event.h"
#include "supervisor/launch/fault_plan.h"
#include "supervisor/launch/launch_stats.h"
#include "supervisor/launch/launch_wan.h"
#include "supervisor/launch/process_manager.h"
#include "supervisor/launch/progress_display.h"
#include "supervisor/launch/prometheus_targets.h"
#include "supervisor/launch/summary.h"
#include "supervisor/launch/summary_faults.h"
#include "supervisor/launch/worker_env.h"

namespace geops::supervisor {
namespace launch_detail {

int Launcher::Run() {
  std::error_code ec;
  std::filesystem::create_directories(o_.out_dir + "/logs", ec);
  if (ec) {
    std::fprintf(stderr, "geops launch: cannot create %s/logs: %s\n", o_.out_dir.c_str(), ec.message().c_str());
    return 2;
  }
  std::string events_path = o_.out_dir + "/events.jsonl";
  events_ = std::fopen(events_path.c_str(), o_.resume ? "a" : "w");
  if (events_ == nullptr) {
    std::fprintf(stderr, "geops launch: cannot write %s: %s\n", events_path.c_str(), std::strerror(errno));
    return 2;
  }
  // Say how the ports are protected, before anything starts.
  std::fprintf(stdout, "%s\n", config::SecuritySummary(o_.topology).c_str());
  for (const config::SiteSpec& s : o_.topology.sites) {
    shard_ids_.emplace_back(static_cast<size_t>(s.shards), -1);
    workers_.emplace_back(static_cast<size_t>(s.workers));
  }
  uv_loop_init(&loop_);
  start_ns_ = uv_hrtime();
  start_unix_ = UnixNow();
  ProcessManagerOptions pmo;
  pmo.tail_lines = 10;
  pmo.tail_exclude_prefix = std::string(metrics::kEventPrefix);
  pm_ = std::make_unique<ProcessManager>(&loop_, pmo);
  pm_->set_line_callback([this](int id, OutputStream s, std::string_view l) { OnLine(id, s, l); });
  pm_->set_exit_callback([this](int id, const ProcessExit& e) { OnExit(id, e); });

  for (uv_timer_t* t : {&progress_timer_, &listen_timer_, &launch_timer_}) {
    uv_timer_init(&loop_, t);
    t->data = this;
  }
  fault_timers_.resize(static_cast<size_t>(faults_.size()));
  for (int i = 0; i < faults_.size(); ++i) {
    FaultTimer& ft = fault_timers_[static_cast<size_t>(i)];
    uv_timer_init(&loop_, &ft.timer);
    uv_timer_init(&loop_, &ft.grace);
    ft.launcher = this;
    ft.fault = i;
    ft.timer.data = ft.grace.data = &ft;
  }
  uv_signal_init(&loop_, &sigint_);
  uv_signal_init(&loop_, &sigterm_);
  sigint_.data = sigterm_.data = this;
  uv_signal_start(&sigint_, OnSignal, SIGINT);
  uv_signal_start(&sigterm_, OnSignal, SIGTERM);
  uint64_t progress_ms = ToMs(o_.progress_interval_seconds);
  uv_timer_start(&progress_timer_, OnProgressTimer, progress_ms, progress_ms);
  uv_timer_start(&launch_timer_, OnLaunchTimer, ToMs(o_.timeout_seconds), 0);
  uv_timer_start(&listen_timer_, OnListenTimer, ToMs(o_.listen_timeout_seconds), 0);

  StartShards();
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop_) != 0) std::fprintf(stderr, "geops launch: internal: loop closed with open handles\n");
  pm_.reset();
  if (events_) std::fclose(events_);
  events_ = nullptr;

  if (o_.live_display) display_.Update(Now(), PhaseText(), stats_.Sites());  // the final state stays
  display_.Finish();
  outcome_.launcher_seconds = Now();
  faults_.EndRun();
  nlohmann::json summary = BuildSummary(o_.topology, stats_, outcome_);
  AddFaultSummary(o_.topology, faults_, o_.out_dir, start_unix_, &summary);  // [] and [] without faults
  summary["supervision"] = SupervisionSummary();
  std::string summary_path = o_.out_dir + "/summary.json";
  Status written = WriteJsonAtomically(summary_path, summary);
  std::fprintf(stdout, "\n%s", FormatSummaryTable(o_.topology, summary).c_str());
  std::fprintf(stdout, "results in %s\n", o_.out_dir.c_str());
  std::fflush(stdout);
  if (!written.ok()) {
    std::fprintf(stderr, "geops launch: %s\n", written.message().c_str());
    if (exit_code_ == 0) exit_code_ = 1;
  }
  return exit_code_;
}

void Launcher::StartShards() {
  for (int s = 0; s < static_cast<int>(o_.topology.sites.size()); ++s) {
    const config::SiteSpec& site = o_.topology.sites[s];
    for (int i = 0; i < site.shards; ++i) {
      int port = site.base_port > 0 ? site.base_port + i : 0;
      std::string name = site.name + "-shard-" + std::to_string(i);
      ++shards_total_;
      ChildRole role;
      role.shard = true;
      role.site = s;
      role.index = i;
      role.argv = {o_.geops_binary, "site", "--topology", o_.topology_path, "--site", site.name,
                   "--shard", std::to_string(i), "--port", std::to_string(port), "--out",
                   o_.out_dir, "--data-dir", o_.topology.ShardDataDir(s, i, o_.out_dir),
                   "--exit-with-parent"};
      for (std::string& a : WanSiteArguments(o_.topology, o_.out_dir, o_.run_id)) role.argv.push_back(std::move(a));
      if (SpawnChild(name, std::move(role)) < 0) return;
    }
  }
  display_.Message("started " + std::to_string(shards_total_) + " shards; waiting for them to listen");
}

void Launcher::StartWorkers() {
  uv_timer_stop(&listen_timer_);
  phase_ = Phase::kTraining;
  outcome_.workers_started_t = Now();
  int total = 0;
  for (int s = 0; s < static_cast<int>(o_.topology.sites.size()); ++s) {
    const config::SiteSpec& site = o_.topology.sites[s];
    std::string shards;
    for (int i = 0; i < site.shards; ++i) {
      const int id = shard_ids_[static_cast<size_t>(s)][static_cast<size_t>(i)];
      const ChildRole& r = roles_.at(static_cast<size_t>(id));
      shards += (i ? "," : "") + r.address.value_or("");
    }
    for (int w = 0; w < site.workers; ++w) {
      ChildRole role;
      role.site = s;
      role.index = w;
      WorkerCommand command = BuildWorkerCommand(
          o_.topology, WorkerEnvArgs{s, w, shards, o_.topology_path, o_.out_dir, o_.python_path}, o_.geops_binary,
          environ);
      role.argv = std::move(command.argv);
      role.env = std::move(command.env);
      role.cwd = std::move(command.cwd);
      if (SpawnChild(site.name + "-worker-" + std::to_string(w), std::move(role)) < 0) return;
      ++total;
    }
  }
  display_.Message("all " + std::to_string(shards_total_) + " shards listening; started " + std::to_string(total) +
                   " workers");
}

int Launcher::SpawnChild(const std::string& name, ChildRole role, bool restart) {
  ProcessSpec spec;
  spec.name = name;
  spec.argv = role.argv;
  spec.log_path = LogPath(name);
  spec.append_log = restart || o_.resume;
  spec.env = role.env;
  spec.cwd = role.cwd;
  if (restart) {
    // The restarted process's lines follow the first run's in the same log.
    if (FILE* log = std::fopen(spec.log_path.c_str(), "a")) {
      if (role.supervised >= 0) {
        std::fprintf(log, "---- geops launch: restarted after it died (restart %d) ----\n",
                     restarts_.at(static_cast<size_t>(role.supervised)).number);
      } else {
        std::fprintf(log, "---- geops launch: restarted after fault %d ----\n", role.restart_of);
      }
      std::fclose(log);
    }
  }
  Result<int> id = pm_->Spawn(spec);
  if (!id.ok()) {
    display_.Message("geops launch: " + id.status().message(), true);
    BeginStop("failed", id.status().message());
    return -1;
  }
  const size_t i = static_cast<size_t>(*id);
  if (roles_.size() <= i) roles_.resize(i + 1);
  if (role.shard) {
    shard_ids_[static_cast<size_t>(role.site)][static_cast<size_t>(role.index)] = *id;
  } else {
    workers_[static_cast<size_t>(role.site)][static_cast<size_t>(role.index)].id = *id;
  }
  roles_[i] = std::move(role);
  return *id;
}

void Launcher::LogEvent(nlohmann::json event) {
  event["source"] = "launcher";
  event["launcher_t"] = Now();
  if (events_) std::fprintf(events_, "%s\n", DumpJsonLine(event).c_str());
}

void Launcher::OnLine(int id, OutputStream stream, std::string_view line) {
  if (stream != OutputStream::kStdout) return;
  ChildLine parsed = ParseChildLine(line);
  if (parsed.kind == ChildLineKind::kPlain) return;
  ChildRole& role = roles_.at(static_cast<size_t>(id));
  double t = Now();
  if (parsed.kind == ChildLineKind::kMalformed) {
    if (++role.malformed <= kMaxMalformedWarnings) {
      std::string shown(line.substr(0, 160));
      display_.Message("warning: " + pm_->name(id) + " printed a malformed event (" + parsed.error + "): " + shown,
                       true);
    }
    return;
  }
  nlohmann::json logged = parsed.event;
  logged["launcher_t"] = t;
  if (events_) std::fprintf(events_, "%s\n", DumpJsonLine(logged).c_str());
  if (parsed.name == "metrics") {  // a process's /metrics endpoint: into the service-discovery file
    Status s = metrics_targets_.Set(o_.topology.sites[static_cast<size_t>(role.site)].name, role.shard, role.index,
                                    StringField(parsed.event, "address").value_or(""));
    if (!s.ok()) display_.Message("warning: " + s.message(), true);
    return;
  }
  if (role.shard) {
    if (parsed.name == "listening") {
      OnListening(id, parsed.event);
    } else {
      stats_.OnShardEvent(role.site, role.index, parsed.event);
    }
    return;
  }
  stats_.OnWorkerEvent(role.site, role.index, parsed.event, t);
  WorkerSlot& slot = workers_[static_cast<size_t>(role.site)][static_cast<size_t>(role.index)];
  if (parsed.name == "progress") {
    if (auto c = IntField(parsed.event, "clock")) slot.reported = std::max(slot.reported.value_or(*c), *c);
    CheckFaults(role.site);
  } else if (parsed.name == "worker_started" && role.restart_of >= 0) {
    for (FaultVictim& v : faults_.at(role.restart_of).victims) {
      if (v.process == pm_->name(id)) v.resumed_clock = IntField(parsed.event, "clock");
    }
  } else if (parsed.name == "worker_started" && role.supervised >= 0) {
    OnSupervisedStarted(id, parsed.event);
  }
  if (parsed.name == "eval" && !o_.live_display) {
    auto acc = NumberField(parsed.event, "test_accuracy");
    auto loss = NumberField(parsed.event, "test_loss");
    char buf[256];
    std::snprintf(buf, sizeof(buf), "[%s] eval %s clock %lld: test accuracy %.4f, test loss %.4f",
                  ProgressDisplay::Elapsed(t).c_str(), pm_->name(id).c_str(),
                  static_cast<long long>(IntField(parsed.event, "clock").value_or(-1)), acc.value_or(NAN),
                  loss.value_or(NAN));
    display_.Message(buf);
  }
  if (!target_announced_ && stats_.target_reached_t()) {
    target_announced_ = true;
    double since = t - outcome_.workers_started_t.value_or(0);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "target accuracy %.3f reached %.1f s after the workers started",
                  o_.topology.target_accuracy, since);
    display_.Message(buf);
  }
}

void Launcher::OnListening(int id, const nlohmann::json& event) {
  ChildRole& role = roles_.at(static_cast<size_t>(id));
  std::optional<std::string> address = StringField(event, "address");
  if (!address || address->empty() || address->find(',') != std::string::npos) {
    display_.Message("warning: " + pm_->name(id) + " reported listening without a usable address", true);
    return;
  }
  if (role.address) return;  // repeated
  role.address = *address;
  role.mirror = StringField(event, "mirror");
  PinPorts(&role);
  if (role.restart_of >= 0) {
    OnRestartedShardListening(id);
    return;
  }
  if (role.supervised >= 0) {
    display_.Message(pm_->name(id) + " listening again at " + *role.address);
    return;
  }
  ++shards_listening_;
  if (phase_ != Phase::kStartingShards || shards_listening_ != shards_total_) return;
  if (o_.topology.multi_site()) {
    std::map<std::pair<int, int>, std::string> mirrors;
    for (const ChildRole& r : roles_) {
      if (r.shard && r.mirror) mirrors[{r.site, r.index}] = *r.mirror;
    }
    Status written = WritePeersFile(o_.topology, o_.out_dir, o_.run_id, mirrors);
    if (!written.ok()) {
      display_.Message("geops launch: " + written.message(), true);
      BeginStop("failed", written.message());
      return;
    }
  }
  StartWorkers();
}

// A shard started on "any free port" is restarted on the port it got (and
// its mirror on the mirror port it got): the workers and the other sites
// know it by those addresses.
void Launcher::PinPorts(ChildRole* role) {
  for (size_t i = 0; i + 1 < role->argv.size(); ++i) {
    if (role->argv[i] == "--port" && role->argv[i + 1] == "0" && PortOf(*role->address) > 0) {
      role->argv[i + 1] = std::to_string(PortOf(*role->address));
    }
  }
  if (role->mirror && PortOf(*role->mirror) > 0 &&
      std::find(role->argv.begin(), role->argv.end(), "--mirror-port") == role->argv.end()) {
    role->argv.push_back("--mirror-port");
    role->argv.push_back(std::to_string(PortOf(*role->mirror)));
  }
}

void Launcher::OnExit(int id, const ProcessExit& exit) {
  const ChildRole role = roles_.at(static_cast<size_t>(id));  // a copy: a restart below may grow roles_
  const std::string name = pm_->name(id);
  // Killed on purpose; a worker that had finished cleanly before the kill landed is just done.
  const bool planned = role.killed_by >= 0 && !(!role.shard && exit.clean());
  // Died on its own while training: supervision restarts it (or fails the run).
  const bool died = !planned && phase_ == Phase::kTraining && (role.shard || !exit.clean());
  if (!role.shard) {
    if (planned || died) {
      stats_.OnWorkerKilled(role.site, role.index);
    } else {
      stats_.OnWorkerExit(role.site, role.index);
    }
  }
  if (role.killed_by >= 0) OnVictimExit(id, planned, exit);
  if (phase_ == Phase::kStopping) {
    if (planned) return;
    if (exit.abandoned || (exit.term_signal == SIGKILL && exit.signalled_by_us)) {
      display_.Message("warning: " + name + " did not stop on SIGTERM; " + exit.Describe(), true);
    } else if (!exit.clean() && !(exit.signalled_by_us && exit.term_signal == SIGTERM) && outcome_.exit == "ok") {
      display_.Message("warning: " + name + " ended with " + exit.Describe() + " while stopping", true);
    }
    return;
  }
  if (planned) {
    MaybeFinish();  // the rest may be done already, and this site stay down
    return;
  }
  if (role.shard) {
    Supervise(id, exit, name + " stopped unexpectedly (" + exit.Describe() + ")");
    return;
  }
  if (!exit.clean()) {
    Supervise(id, exit, name + " failed (" + exit.Describe() + ")");
    return;
  }
  workers_[static_cast<size_t>(role.site)][static_cast<size_t>(role.index)].done = true;
  MaybeFinish();
}

// Ends the run once no worker runs and no fault will restart one: "ok" when
// at least one worker finished.
void Launcher::MaybeFinish() {
  if (phase_ != Phase::kTraining || faults_.RestartPending() || pending_restarts_ > 0) return;
  int done = 0;
  for (int s = 0; s < static_cast<int>(workers_.size()); ++s) {
    for (int w = 0; w < static_cast<int>(workers_[static_cast<size_t>(s)].size()); ++w) {
      const WorkerSlot& slot = workers_[static_cast<size_t>(s)][static_cast<size_t>(w)];
      if (slot.id >= 0 && pm_->live(slot.id)) return;
      done += slot.done ? 1 : 0;
    }
  }
  outcome_.workers_ended_t = Now();
  if (done == 0) {
    const std::string what = "every worker was killed by the fault plan and none restarts";
    display_.Message("geops launch: " + what, true);
    BeginStop("failed", what);
    return;
  }
  BeginStop("ok", "");
}

void Launcher::ReportChildFailure(int id, const std::string& what) {
  std::string msg = "geops launch: " + what + "; last lines of " + LogPath(pm_->name(id)) + ":";
  for (const std::string& l : pm_->Tail(id)) msg += "\n    " + l;
  display_.Message(msg, true);
  BeginStop("failed", what);
}

void Launcher::BeginStop(const std::string& exit, const std::string& failure) {
  if (phase_ == Phase::kStopping) return;
  phase_ = Phase::kStopping;
  outcome_.exit = exit;
  outcome_.failure = failure;
  if (exit_code_ == 0) exit_code_ = exit == "ok" ? 0 : 1;
  if (outcome_.workers_started_t && !outcome_.workers_ended_t) outcome_.workers_ended_t = Now();
  uv_timer_stop(&listen_timer_);
  uv_timer_stop(&launch_timer_);
  for (FaultTimer& ft : fault_timers_) {
    uv_timer_stop(&ft.timer);
    uv_timer_stop(&ft.grace);  // what a stop-site signalled is the process manager's to stop now
  }
  for (auto& rt : restart_timers_) uv_timer_stop(&rt->timer);  // no restart once stopping
  if (pm_->live_count() > 0) {
    std::string what = exit == "ok" ? "workers done; stopping " + std::to_string(pm_->live_count()) + " shards"
                                    : "stopping " + std::to_string(pm_->live_count()) + " processes";
    display_.Message(what);
  }
  pm_->StopAll(o_.stop_timeout_seconds, [this] { CloseAll(); });
}

void Launcher::CloseAll() {
  pm_->Close();
  for (uv_timer_t* t : {&progress_timer_, &listen_timer_, &launch_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
  }
  for (FaultTimer& ft : fault_timers_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&ft.timer), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&ft.grace), nullptr);
  }
  for (auto& rt : restart_timers_) uv_close(reinterpret_cast<uv_handle_t*>(&rt->timer), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
}

std::string Launcher::PhaseText() const {
  switch (phase_) {
    case Phase::kStartingShards:
      return "starting shards (" + std::to_string(shards_listening_) + "/" + std::to_string(shards_total_) +
             " listening)";
    case Phase::kTraining: {
      std::string down = pending_restarts_ > 0 ? std::to_string(pending_restarts_) + " restarting" : "";
      for (const FaultRecord& r : faults_.records()) {
        if (r.in_progress()) down += (down.empty() ? "" : ", ") + r.spec.site + " " + FaultStateName(r.state);
      }
      return down.empty() ? "training" : "training (fault: " + down + ")";
    }
    case Phase::kStopping:
      return outcome_.exit == "ok" ? "done" : outcome_.exit;
  }
  return "";
}

// ---- Timers and signals ----

void Launcher::OnProgressTimer(uv_timer_t* t) {
  auto* self = static_cast<Launcher*>(t->data);
  self->display_.Update(self->Now(), self->PhaseText(), self->stats_.Sites());
  if (self->events_) std::fflush(self->events_);
}

void Launcher::OnListenTimer(uv_timer_t* t) {
  auto* self = static_cast<Launcher*>(t->data);
  if (self->phase_ != Phase::kStartingShards) return;
  std::string missing;
  for (int id = 0; id < static_cast<int>(self->roles_.size()); ++id) {
    const ChildRole& r = self->roles_[static_cast<size_t>(id)];
    if (r.shard && !r.address) missing += (missing.empty() ? "" : ", ") + self->pm_->name(id);
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", self->o_.listen_timeout_seconds);
  std::string what = "shards not listening after " + std::string(buf) + " s: " + missing;
  self->display_.Message("geops launch: " + what, true);
  self->BeginStop("failed", what);
}

void Launcher::OnLaunchTimer(uv_timer_t* t) {
  auto* self = static_cast<Launcher*>(t->data);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", self->o_.timeout_seconds);
  std::string what = "launch timed out after " + std::string(buf) + " s";
  self->display_.Message("geops launch: " + what, true);
  self->BeginStop("timeout", what);
}

void Launcher::OnSignal(uv_signal_t* s, int signum) {
  auto* self = static_cast<Launcher*>(s->data);
  const char* name = signum == SIGINT ? "SIGINT" : "SIGTERM";
  if (self->phase_ == Phase::kStopping) {
    self->display_.Message(std::string("geops launch: ") + name + " again; killing every process", true);
    self->pm_->KillAll();
    return;
  }
  self->exit_code_ = 128 + signum;
  self->display_.Message(std::string("geops launch: interrupted by ") + name +
                             "; stopping every process (again to kill them)",
                         true);
  self->BeginStop("interrupted", std::string("interrupted by ") + name);
}

}  // namespace launch_detail

int RunLauncher(const LauncherOptions& options) { return launch_detail::Launcher(options).Run(); }

}  // namespace geops::supervisor
