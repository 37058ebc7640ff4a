// The launcher's state machine (RunLauncher, supervisor/launch/launcher.h), shared
// by its two files: launcher.cc (starting shards and workers, their events
// and exits, the end of the run, timers and signals) and fault_executor.cc
// (firing the topology's [[faults]] and restarting what they killed).
// Private to supervisor/launch/.
//
// Thread-safety: everything runs on the launcher's one libuv loop thread.
#ifndef GEOPS_SUPERVISOR_LAUNCH_LAUNCHER_STATE_H_
#define GEOPS_SUPERVISOR_LAUNCH_LAUNCHER_STATE_H_

#include <uv.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/launch/fault_plan.h"
#include "supervisor/launch/launch_stats.h"
#include "supervisor/launch/launcher.h"
#include "supervisor/launch/process_manager.h"
#include "supervisor/launch/progress_display.h"
#include "supervisor/launch/prometheus_targets.h"
#include "supervisor/launch/restart_budget.h"
#include "supervisor/launch/summary.h"

namespace geops::supervisor::launch_detail {


inline constexpr int kMaxMalformedWarnings = 5;  // per child

enum class Phase { kStartingShards, kTraining, kStopping };

struct ChildRole {
  bool shard = false;
  int site = 0;
  int index = 0;                       // shard or worker number within the site
  std::vector<std::string> argv;       // how it was started: a restart runs the same command
  std::vector<std::string> env;        // workers running [training] command: their environment
  std::string cwd;                     // and working directory
  std::optional<std::string> address;  // shards: from their "listening" event
  int malformed = 0;
  std::optional<std::string> mirror;   // shards of a multi-site topology: their WAN mirror address
  int killed_by = -1;                  // the fault that SIGKILLed it, if any
  int restart_of = -1;                 // the fault it was re-spawned after, if any
  int supervised = -1;                 // the entry of restarts_ it was re-spawned for, if any
};

// One restart of a process that died on its own (supervisor/launch/supervision.cc).
struct SupervisedRestart {
  std::string process;
  std::string reason;                  // "exit code 1", "signal 9 (Killed)"
  int number = 0;                      // 1 for the process's first restart
  double died_t = 0;                   // launcher seconds
  double delay_s = 0;
  std::optional<int64_t> clock_reported;  // the worker's last progress clock before it died
  std::optional<double> restarted_t;
  std::optional<int64_t> resumed_clock;   // a worker's clock at its restart ("worker_started")
  std::optional<double> resumed_t;        // when it said so
};


// Makes a worker's command (the built-in worker's argv, or a [training]
// command's environment) take its worker id at once when it registers: for
// a restart after the launcher saw the previous process exit.
void MarkTakeover(ChildRole* role);

// What the launcher knows of one worker of one site, over every run of it.
struct WorkerSlot {
  int id = -1;                         // its current (latest) process
  bool done = false;                   // a run of it exited cleanly
  std::optional<int64_t> reported;     // highest clock its progress events reported
};

class Launcher;

// A pending restart of a process that died on its own.
struct RestartTimer {
  uv_timer_t timer;
  Launcher* launcher = nullptr;
  int entry = 0;   // in Launcher::restarts_
  int old_id = 0;  // the dead process's id
};

struct FaultTimer {
  uv_timer_t timer;
  uv_timer_t grace;  // stop-site: the SIGTERM's grace before SIGKILL
  Launcher* launcher = nullptr;
  int fault = 0;
};

inline uint64_t ToMs(double s) { return s <= 0 ? 1 : static_cast<uint64_t>(s * 1000.0); }

class Launcher {
 public:
  explicit Launcher(const LauncherOptions& o)
      : o_(o),
        stats_(o.topology),
        faults_(o.topology),
        display_("geops launch " + o.topology.name,
                 ProgressDisplayOptions{o.live_display, o.plain_interval_seconds, stdout, stderr}),
        budget_(o.restarts) {}

  int Run();

 private:
  double Now() const { return static_cast<double>(uv_hrtime() - start_ns_) / 1e9; }
  std::string LogPath(const std::string& name) const { return o_.out_dir + "/logs/" + name + ".log"; }
  std::string SiteName(int site) const { return o_.topology.sites[site].name; }

  void StartShards();
  void StartWorkers();
  // The child's process id, or -1 after a failure (the launch is then stopping).
  int SpawnChild(const std::string& name, ChildRole role, bool restart = false);
  void OnLine(int id, OutputStream stream, std::string_view line);
  void OnListening(int id, const nlohmann::json& event);
  void PinPorts(ChildRole* role);
  void OnExit(int id, const ProcessExit& exit);
  void ReportChildFailure(int id, const std::string& what);
  void MaybeFinish();
  void BeginStop(const std::string& exit, const std::string& failure);
  void CloseAll();
  std::string PhaseText() const;
  void LogEvent(nlohmann::json event);

  // The fault plan (supervisor/launch/fault_plan.h).
  bool WorkerRunning(int site, int worker) const;
  void CheckFaults(int site);
  void FireFault(int fault);
  void OnVictimExit(int id, bool planned, const ProcessExit& exit);
  void OnFaultTimer(int fault);
  void OnStopGrace(int fault);
  void MaybeRestart(int fault);
  void OnRestartedShardListening(int id);
  void RespawnWorkers(int fault);

  // Supervision (supervisor/launch/supervision.cc): a process that died on its own
  // is restarted after a delay while its budget lasts; else the run fails.
  void Supervise(int id, const ProcessExit& exit, const std::string& what);
  void RespawnSupervised(int entry, int old_id);
  void OnSupervisedStarted(int id, const nlohmann::json& event);
  nlohmann::json SupervisionSummary() const;
  static void OnRestartTimerCb(uv_timer_t* t);

  static void OnProgressTimer(uv_timer_t* t);
  static void OnListenTimer(uv_timer_t* t);
  static void OnLaunchTimer(uv_timer_t* t);
  static void OnFaultTimerCb(uv_timer_t* t);
  static void OnStopGraceCb(uv_timer_t* t);
  static void OnSignal(uv_signal_t* s, int signum);

  const LauncherOptions& o_;
  LaunchStats stats_;
  FaultPlan faults_;
  ProgressDisplay display_;
  uv_loop_t loop_;
  std::unique_ptr<ProcessManager> pm_;
  uv_timer_t progress_timer_, listen_timer_, launch_timer_;
  std::vector<FaultTimer> fault_timers_;  // one per fault; sized once, never moved
  RestartBudget budget_;
  std::vector<SupervisedRestart> restarts_;
  std::vector<std::unique_ptr<RestartTimer>> restart_timers_;  // each closed with the loop
  int pending_restarts_ = 0;
  uv_signal_t sigint_, sigterm_;
  uint64_t start_ns_ = 0;
  double start_unix_ = 0;
  FILE* events_ = nullptr;
  Phase phase_ = Phase::kStartingShards;
  std::vector<ChildRole> roles_;  // by process id
  std::vector<std::vector<int>> shard_ids_;          // [site][shard] -> current process id
  std::vector<std::vector<WorkerSlot>> workers_;     // [site][worker]
  int shards_listening_ = 0;
  int shards_total_ = 0;
  bool target_announced_ = false;
  LaunchOutcome outcome_;
  int exit_code_ = 0;
  PrometheusTargets metrics_targets_{o_.out_dir + "/prometheus_targets.json"};
};

}  // namespace geops::supervisor::launch_detail

#endif  // GEOPS_SUPERVISOR_LAUNCH_LAUNCHER_STATE_H_
