// Launcher: runs one whole deployment on this machine. It starts every shard
// of every site, waits until each prints its "listening" event, then starts
// every worker with its site's shard addresses; it relays the children's
// events to events.jsonl and the progress display, and ends the run:
//   - all workers exit 0            -> SIGTERM to the shards, summary, exit "ok";
//   - a child exits non-zero, dies by a signal the launcher did not send, or
//     a shard stops on its own     -> supervision: the process is restarted
//                                     after a delay (the same command; a
//                                     worker resumes at the clock its shards
//                                     hold, a shard from its store) while
//                                     the rest train on, up to
//                                     restarts.max_restarts times per
//                                     process; then, or for a shard whose
//                                     state is in memory only, report it
//                                     with the tail of its log, stop
//                                     everything, exit "failed";
//   - shards not listening in time -> exit "failed", naming the missing ones;
//   - the launch-wide timeout      -> stop everything, exit "timeout";
//   - SIGINT / SIGTERM              -> stop everything, exit "interrupted"
//                                     (a second one SIGKILLs at once).
// Stopping is SIGTERM to every live child, then SIGKILL by PID after
// stop_timeout_seconds; only processes the launcher started are signalled.
// summary.json is written at the end in every case.
//
// The topology's [[faults]] (supervisor/launch/fault_plan.h) are injected along the way:
// when every live worker of a fault's site has reported its at_clock, the
// launcher SIGKILLs (by PID) the shard or the whole site it names, and
// after restart_after_s (a libuv timer; once the killed processes are
// reaped; wipe-disk first deletes the site's shard stores) re-spawns the
// same command lines: the shards first, on the ports they had, then, once
// they listen, the workers, which resume at the clocks their shards hold.
// Processes killed on purpose are not failures; the run ends "ok" once no
// worker runs, no fault is still to restart anything, and at least one
// worker finished. Each fault shows in events.jsonl ("fault_injected",
// "disk_wiped", "process_restarted", with "source": "launcher") and in
// summary.json (faults, recoveries). A restarted process appends to its log.
//
// Results folder: logs/<site>-shard-<i>.log and logs/<site>-worker-<w>.log
// (each child's stdout and stderr), events.jsonl (every child event, plus a
// "launcher_t" field: seconds since the launch started), summary.json.
//
// Not thread-safe: Run() owns a private libuv loop and blocks the calling
// thread until the launch is over. It installs SIGINT/SIGTERM handlers for
// its duration.
#ifndef GEOPS_SUPERVISOR_LAUNCH_LAUNCHER_H_
#define GEOPS_SUPERVISOR_LAUNCH_LAUNCHER_H_

#include <string>

#include "config/topology.h"
#include "supervisor/launch/restart_budget.h"

namespace geops::supervisor {

struct LauncherOptions {
  config::Topology topology;                    // validated
  std::string topology_path;            // passed to the children as --topology
  std::string out_dir;                  // exists; passed to the children as --out
  std::string geops_binary;             // the program spawned for `site` and `worker`
  std::string python_path;              // the geops Python package's folder, for [training] command; "" = none
  double timeout_seconds = 3600;        // whole launch; then everything is stopped
  double listen_timeout_seconds = 30;   // for every shard's "listening" event
  double stop_timeout_seconds = 10;     // SIGTERM -> SIGKILL grace
  bool live_display = false;            // redraw progress in place (a terminal)
  double progress_interval_seconds = 0.5;
  double plain_interval_seconds = 5;    // between plain progress lines
  std::string run_id;                   // this run's id (run_folder.h): in the peers file and the shards' --run-id
  bool resume = false;                  // continues the run in out_dir: logs and events.jsonl are appended to
  RestartPolicy restarts;               // for processes that die on their own (restart_budget.h)
};

// Runs the launch; blocks until every child is gone and summary.json is
// written. Returns the process exit code: 0 ok; 1 failed or timed out;
// 128 + signal number when interrupted by SIGINT (130) or SIGTERM (143);
// 2 when the results folder cannot be written to.
int RunLauncher(const LauncherOptions& options);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_LAUNCHER_H_
