// The fault part of summary.json, for a topology with [[faults]]:
//   faults      one object per [[faults]] entry: index, kind, site, shard,
//               at_clock, restart_after_s, fired, state ("waiting",
//               "recovered", "stays-down", "cancelled", ...), and once fired
//               killed_unix, clock_observed (the slowest live worker's
//               reported clock when it fired), worker_clocks, processes,
//               pids, restarted_unix, restarted_pids, resumed_clocks (each
//               restarted worker: the clock it resumed at), wiped_dirs
//               (wipe-disk), note.
//   recoveries  one object per fault that restarted something: fault, site,
//               kind, killed_unix, restarted_unix, detect_seconds (the first
//               surviving shard's detection of the site's silence after the
//               kill), catch_up_seconds (the slowest restarted shard's
//               caught_up_unix - restarted_unix), bytes_transferred (the
//               restarted shards' catch_up_bytes), counter_max_abs_error_by_site
//               (the run's per-site counter errors after the drain), and
//               note: what was missing when a value is null.
// Detection and catch-up come from the shards' metrics files
// (OUT/metrics/<site>-shard-<i>.json, written by each shard at its exit):
//   surviving shards: wan.peers[i].down_events = [{"last_heard_unix",
//     "detected_unix", "back_unix"}] for the peer wan.peers[i].peer (a site
//     name, or a site index);
//   restarted shards: recovery = {"process_start_unix", "state_loaded_unix",
//     "caught_up_unix", "catch_up_bytes"}.
// Files older than the launch are ignored (left by an earlier run).
//
// Free functions; thread-safe on distinct arguments.
#ifndef GEOPS_SUPERVISOR_LAUNCH_SUMMARY_FAULTS_H_
#define GEOPS_SUPERVISOR_LAUNCH_SUMMARY_FAULTS_H_

#include <string>

#include <nlohmann/json.hpp>

#include "config/topology.h"
#include "supervisor/launch/fault_plan.h"

namespace geops::supervisor {

// Adds "faults" and "recoveries" to *summary (which already holds
// counter_max_abs_error_by_site). `launch_start_unix`: files written before
// it are not this run's.
void AddFaultSummary(const config::Topology& topology, const FaultPlan& plan, const std::string& out_dir,
                     double launch_start_unix, nlohmann::json* summary);

// One line per fault for the table printed at the end; empty without faults.
std::string FormatFaultSummary(const nlohmann::json& summary);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_SUMMARY_FAULTS_H_
