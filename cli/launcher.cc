#include "cli/launcher.h"

#include <signal.h>
#include <uv.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <map>
#include <optional>

#include "cli/child_event.h"
#include "cli/launch_stats.h"
#include "cli/launch_wan.h"
#include "cli/process_manager.h"
#include "cli/progress_display.h"
#include "cli/summary.h"

namespace geops::cli {
namespace {

constexpr int kMaxMalformedWarnings = 5;  // per child

enum class Phase { kStartingShards, kTraining, kStopping };

struct ChildRole {
  bool shard = false;
  int site = 0;
  int index = 0;                // shard or worker number within the site
  std::optional<std::string> address;  // shards: from their "listening" event
  int malformed = 0;
  std::optional<std::string> mirror;   // shards of a multi-site topology: their WAN mirror address
};

uint64_t ToMs(double s) { return s <= 0 ? 1 : static_cast<uint64_t>(s * 1000.0); }

class Launcher {
 public:
  explicit Launcher(const LauncherOptions& o)
      : o_(o),
        stats_(o.topology),
        display_("geops launch " + o.topology.name,
                 ProgressDisplayOptions{o.live_display, o.plain_interval_seconds, stdout, stderr}) {}

  int Run();

 private:
  double Now() const { return static_cast<double>(uv_hrtime() - start_ns_) / 1e9; }
  std::string LogPath(const std::string& name) const { return o_.out_dir + "/logs/" + name + ".log"; }
  std::string SiteName(int site) const { return o_.topology.sites[site].name; }

  void StartShards();
  void StartWorkers();
  bool SpawnChild(const std::string& name, std::vector<std::string> argv, ChildRole role);
  void OnLine(int id, OutputStream stream, std::string_view line);
  void OnListening(int id, const nlohmann::json& event);
  void OnExit(int id, const ProcessExit& exit);
  void ReportChildFailure(int id, const std::string& what);
  void BeginStop(const std::string& exit, const std::string& failure);
  void CloseAll();
  std::string PhaseText() const;

  static void OnProgressTimer(uv_timer_t* t);
  static void OnListenTimer(uv_timer_t* t);
  static void OnLaunchTimer(uv_timer_t* t);
  static void OnSignal(uv_signal_t* s, int signum);

  const LauncherOptions& o_;
  LaunchStats stats_;
  ProgressDisplay display_;
  uv_loop_t loop_;
  std::unique_ptr<ProcessManager> pm_;
  uv_timer_t progress_timer_, listen_timer_, launch_timer_;
  uv_signal_t sigint_, sigterm_;
  uint64_t start_ns_ = 0;
  FILE* events_ = nullptr;
  Phase phase_ = Phase::kStartingShards;
  std::vector<ChildRole> roles_;  // by process id
  int shards_listening_ = 0;
  int shards_total_ = 0;
  int workers_live_ = 0;
  int workers_clean_ = 0;
  bool target_announced_ = false;
  LaunchOutcome outcome_;
  int exit_code_ = 0;
};

int Launcher::Run() {
  std::error_code ec;
  std::filesystem::create_directories(o_.out_dir + "/logs", ec);
  if (ec) {
    std::fprintf(stderr, "geops launch: cannot create %s/logs: %s\n", o_.out_dir.c_str(), ec.message().c_str());
    return 2;
  }
  std::string events_path = o_.out_dir + "/events.jsonl";
  events_ = std::fopen(events_path.c_str(), "w");
  if (events_ == nullptr) {
    std::fprintf(stderr, "geops launch: cannot write %s: %s\n", events_path.c_str(), std::strerror(errno));
    return 2;
  }
  uv_loop_init(&loop_);
  start_ns_ = uv_hrtime();
  ProcessManagerOptions pmo;
  pmo.tail_lines = 10;
  pmo.tail_exclude_prefix = std::string(kEventPrefix);
  pm_ = std::make_unique<ProcessManager>(&loop_, pmo);
  pm_->set_line_callback([this](int id, OutputStream s, std::string_view l) { OnLine(id, s, l); });
  pm_->set_exit_callback([this](int id, const ProcessExit& e) { OnExit(id, e); });

  for (uv_timer_t* t : {&progress_timer_, &listen_timer_, &launch_timer_}) {
    uv_timer_init(&loop_, t);
    t->data = this;
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
  nlohmann::json summary = BuildSummary(o_.topology, stats_, outcome_);
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
    const SiteSpec& site = o_.topology.sites[s];
    for (int i = 0; i < site.shards; ++i) {
      int port = site.base_port > 0 ? site.base_port + i : 0;
      std::string name = site.name + "-shard-" + std::to_string(i);
      ++shards_total_;
      std::vector<std::string> argv = {o_.geops_binary, "site", "--topology", o_.topology_path, "--site", site.name,
                                       "--shard", std::to_string(i), "--port", std::to_string(port), "--out",
                                       o_.out_dir, "--data-dir", o_.topology.ShardDataDir(s, i, o_.out_dir),
                                       "--exit-with-parent"};
      for (std::string& a : WanSiteArguments(o_.topology, o_.out_dir)) argv.push_back(std::move(a));
      if (!SpawnChild(name, std::move(argv), ChildRole{true, s, i, std::nullopt, 0, std::nullopt})) {
        return;
      }
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
    const SiteSpec& site = o_.topology.sites[s];
    std::vector<std::string> by_shard(static_cast<size_t>(site.shards));
    for (const ChildRole& r : roles_) {
      if (r.shard && r.site == s && r.address) by_shard[static_cast<size_t>(r.index)] = *r.address;
    }
    std::string shards;
    for (size_t i = 0; i < by_shard.size(); ++i) shards += (i ? "," : "") + by_shard[i];
    for (int w = 0; w < site.workers; ++w) {
      std::string name = site.name + "-worker-" + std::to_string(w);
      if (!SpawnChild(name,
                      {o_.geops_binary, "worker", "--topology", o_.topology_path, "--site", site.name, "--worker",
                       std::to_string(w), "--shards", shards, "--out", o_.out_dir, "--exit-with-parent"},
                      ChildRole{false, s, w, std::nullopt, 0, std::nullopt})) {
        return;
      }
      ++workers_live_;
      ++total;
    }
  }
  display_.Message("all " + std::to_string(shards_total_) + " shards listening; started " + std::to_string(total) +
                   " workers");
}

bool Launcher::SpawnChild(const std::string& name, std::vector<std::string> argv, ChildRole role) {
  Result<int> id = pm_->Spawn(ProcessSpec{name, std::move(argv), LogPath(name)});
  if (!id.ok()) {
    display_.Message("geops launch: " + id.status().message(), true);
    BeginStop("failed", id.status().message());
    return false;
  }
  if (static_cast<int>(roles_.size()) <= *id) roles_.resize(static_cast<size_t>(*id) + 1);
  roles_[static_cast<size_t>(*id)] = role;
  return true;
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
  if (role.shard) {
    if (parsed.name == "listening") {
      OnListening(id, parsed.event);
    } else {
      stats_.OnShardEvent(role.site, role.index, parsed.event);
    }
    return;
  }
  stats_.OnWorkerEvent(role.site, role.index, parsed.event, t);
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
  ++shards_listening_;
  if (phase_ != Phase::kStartingShards || shards_listening_ != shards_total_) return;
  if (o_.topology.multi_site()) {
    std::map<std::pair<int, int>, std::string> mirrors;
    for (const ChildRole& r : roles_) {
      if (r.shard && r.mirror) mirrors[{r.site, r.index}] = *r.mirror;
    }
    Status written = WritePeersFile(o_.topology, o_.out_dir, mirrors);
    if (!written.ok()) {
      display_.Message("geops launch: " + written.message(), true);
      BeginStop("failed", written.message());
      return;
    }
  }
  StartWorkers();
}

void Launcher::OnExit(int id, const ProcessExit& exit) {
  const ChildRole& role = roles_.at(static_cast<size_t>(id));
  const std::string& name = pm_->name(id);
  if (!role.shard) {
    --workers_live_;
    stats_.OnWorkerExit(role.site, role.index);
    if (workers_live_ == 0 && !outcome_.workers_ended_t) outcome_.workers_ended_t = Now();
  }
  if (phase_ == Phase::kStopping) {
    if (exit.abandoned || (exit.term_signal == SIGKILL && exit.signalled_by_us)) {
      display_.Message("warning: " + name + " did not stop on SIGTERM; " + exit.Describe(), true);
    } else if (!exit.clean() && !(exit.signalled_by_us && exit.term_signal == SIGTERM) && outcome_.exit == "ok") {
      display_.Message("warning: " + name + " ended with " + exit.Describe() + " while stopping", true);
    }
    return;
  }
  if (role.shard) {
    ReportChildFailure(id, name + " stopped unexpectedly (" + exit.Describe() + ")");
    return;
  }
  if (!exit.clean()) {
    ReportChildFailure(id, name + " failed (" + exit.Describe() + ")");
    return;
  }
  ++workers_clean_;
  if (workers_live_ == 0) BeginStop("ok", "");
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
  uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
}

std::string Launcher::PhaseText() const {
  switch (phase_) {
    case Phase::kStartingShards:
      return "starting shards (" + std::to_string(shards_listening_) + "/" + std::to_string(shards_total_) +
             " listening)";
    case Phase::kTraining:
      return "training";
    case Phase::kStopping:
      return outcome_.exit == "ok" ? "done" : outcome_.exit;
  }
  return "";
}

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

}  // namespace

int RunLauncher(const LauncherOptions& options) {
  Launcher launcher(options);
  return launcher.Run();
}

}  // namespace geops::cli
