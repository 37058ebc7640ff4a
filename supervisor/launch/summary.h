// The results of a launch: summary.json (machine-readable, one object) and
// the short table printed at the end. Both are built from the topology, the
// LaunchStats gathered from the children's events, and how the launch ended.
//
// summary.json fields: topology, workload, sites, workers, clocks,
// wall_seconds (first worker spawn to last worker exit), final_loss (mean of
// the workers' final_loss; null for the counter workload), test_accuracy and
// test_loss (the evaluator's final report; in a partial run, the latest
// evaluation), lan_bytes (all workers' sent + received), wan_bytes,
// max_staleness_observed, counter_expected, counter_max_abs_error,
// time_to_target_seconds (first worker spawn to the first evaluation reaching
// target_accuracy), target_accuracy, examples (total), examples_per_second,
// per_worker (the "final" events), shard_stats, exit ("ok", "failed",
// "interrupted", "timeout"), failure (message or null), interrupted,
// launcher_seconds. With [[faults]], the launcher adds faults and recoveries
// (supervisor/launch/summary_faults.h); per_worker entries carry start_clocks.
//
// Free functions; thread-safe on distinct arguments.
#ifndef GEOPS_SUPERVISOR_LAUNCH_SUMMARY_H_
#define GEOPS_SUPERVISOR_LAUNCH_SUMMARY_H_

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/topology.h"
#include "supervisor/launch/launch_stats.h"

namespace geops::supervisor {

struct LaunchOutcome {
  std::string exit = "ok";                  // "ok", "failed", "interrupted" or "timeout"
  std::string failure;                      // what went wrong; empty when exit == "ok"
  std::optional<double> workers_started_t;  // launcher seconds at the first worker spawn
  std::optional<double> workers_ended_t;    // launcher seconds at the last worker exit (or the stop)
  double launcher_seconds = 0;              // the whole launch, shards included
};

nlohmann::json BuildSummary(const config::Topology& topology, const LaunchStats& stats,
                            const LaunchOutcome& outcome);

// Writes `value` pretty-printed to `path` through a temporary file in the
// same folder and a rename, so readers never see half a file.
// Errors: Unavailable (cannot write or rename; the message names the path).
Status WriteJsonAtomically(const std::string& path, const nlohmann::json& value);

// A few lines for humans: one row per site, then accuracy / counter error,
// traffic and how the launch ended. Ends with a newline.
std::string FormatSummaryTable(const config::Topology& topology, const nlohmann::json& summary);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_SUMMARY_H_
