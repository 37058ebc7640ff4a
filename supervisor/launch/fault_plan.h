// FaultPlan: what `geops launch` does with a topology's [[faults]] while the
// run goes on. Each fault waits for its trigger (every live worker of its
// site has reported finishing `at_clock`), is then fired by the launcher
// (SIGKILL by PID to the shard and worker processes it hits; for stop-site
// SIGTERM, and SIGKILL only to what still runs after the launcher's stop
// grace), and, when it restarts, goes down -> restarting -> recovered:
//
//   waiting --Due()--> down --delay elapsed and every killed process reaped-->
//   restarting (shards re-spawned; wipe-disk first deletes their stores)
//   --every re-spawned shard listening--> recovered (workers re-spawned)
//
// A fault without restart_after_s stays down. A fault does not fire while an
// earlier fault of the same site is still down or restarting, and faults
// not fired when the run ends are reported as such.
//
// This header holds the state and the decisions (which fault is due, which
// directories a wipe may delete, the "faults" list of summary.json); the
// launcher (supervisor/launch/launcher.cc) holds the processes and timers and acts.
//
// A plain object; not thread-safe (used on the launcher's loop thread).
#ifndef GEOPS_SUPERVISOR_LAUNCH_FAULT_PLAN_H_
#define GEOPS_SUPERVISOR_LAUNCH_FAULT_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/topology.h"

namespace geops::supervisor {

enum class FaultState {
  kWaiting,     // not fired yet
  kDown,        // fired; waiting for the delay and for the killed processes to be reaped
  kRestarting,  // shards re-spawned, not all listening yet
  kRecovered,   // every killed process re-spawned
  kStaysDown,   // fired, no restart_after_s
  kCancelled,   // fired, but the run ended before the restart
};
const char* FaultStateName(FaultState state);

// One killed (or, for stop-site, stopped) process of a fault, and its
// replacement.
struct FaultVictim {
  std::string process;             // e.g. "eu-west-1-shard-0"
  bool shard = false;
  int index = 0;                   // shard or worker number within the site
  int pid = 0;                     // the killed process
  int process_id = -1;             // the launcher's id of it (supervisor/launch/process_manager.h)
  bool finished_before_kill = false;  // a worker that exited cleanly before the SIGKILL landed: not restarted
  int restarted_pid = 0;           // its replacement; 0 = none (yet)
  int restarted_id = -1;           // the launcher's id of the replacement
  std::optional<int64_t> resumed_clock;  // workers: the clock the replacement resumed at
  // How the signalled process ended ("exit code 0", "signal 9 (Killed)"),
  // and when: launcher seconds (FaultRecord::killed_t is the signal's).
  std::string exit;
  std::optional<double> exited_t;
  bool killed_after_grace = false;  // stop-site: still running after the stop grace, so SIGKILLed
};

struct FaultRecord {
  config::FaultSpec spec;
  int index = 0;                   // in Topology::faults
  FaultState state = FaultState::kWaiting;
  double killed_unix = 0;          // wall clock of the signals (seconds since the epoch)
  double killed_t = 0;             // launcher seconds of the same
  int64_t clock_observed = -1;     // slowest live worker's reported clock when it fired
  std::map<std::string, int64_t> worker_clocks;  // every live worker's reported clock then
  std::vector<FaultVictim> victims;
  int pending_exits = 0;           // killed processes not reaped yet
  bool delay_elapsed = false;
  std::optional<double> restarted_unix;  // when the first replacement was spawned
  std::optional<double> restarted_t;
  std::optional<double> recovered_t;     // launcher seconds: every replacement spawned, shards listening
  std::vector<std::string> wiped_dirs;   // wipe-disk: the store directories deleted
  std::string note;                      // why it did not fire or restart, if so

  bool fired() const { return state != FaultState::kWaiting; }
  // Down or restarting: the site is not back yet.
  bool in_progress() const { return state == FaultState::kDown || state == FaultState::kRestarting; }
};

class FaultPlan {
 public:
  explicit FaultPlan(const config::Topology& topology);

  // The first fault of `site` that is due now, if any: not fired, no earlier
  // fault of the site in progress, and every live worker of the site has
  // reported a clock >= at_clock. `live_clocks` holds the reported clock of
  // each live worker of the site (nullopt: nothing reported yet); with no
  // live worker nothing is due.
  std::optional<int> Due(int site, const std::vector<std::optional<int64_t>>& live_clocks) const;
  // A fired fault that will still restart something: the run is not over.
  bool RestartPending() const;

  int size() const { return static_cast<int>(records_.size()); }
  FaultRecord& at(int i) { return records_.at(static_cast<size_t>(i)); }
  const FaultRecord& at(int i) const { return records_.at(static_cast<size_t>(i)); }
  const std::vector<FaultRecord>& records() const { return records_; }

  // The run ended: faults still down or restarting become cancelled, and
  // waiting ones get a note.
  void EndRun();

  // summary.json "faults": one object per [[faults]] entry (see
  // supervisor/launch/summary_faults.h).
  nlohmann::json ToJson() const;

 private:
  std::vector<FaultRecord> records_;
};

// Deletes the store directory of every shard of `site`
// (Topology::ShardDataDir, relative to `out_dir`), and nothing else: each
// must be named <site>-shard-<i> and be missing, empty, or a geops shard
// store (it holds the store's marker file); a symbolic link or any other
// directory is refused. Every directory is checked before any is deleted.
// Returns the directories deleted (missing ones are skipped).
// Errors: FailedPrecondition (no storage, or a directory refused; nothing
// deleted), Unavailable (a deletion failed; the message names it).
Result<std::vector<std::string>> WipeShardStores(const config::Topology& topology, int site, const std::string& out_dir);

// Seconds since the Unix epoch, as a double (the unit of the shards' metrics).
double UnixNow();

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_FAULT_PLAN_H_
