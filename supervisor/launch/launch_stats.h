// LaunchStats: what the launcher has learned from its children's events so
// far: each worker's latest progress, evaluations, final reports and the
// shards' closing statistics. The progress display and summary.json are both
// views of it. Events are attributed to the process that printed them (the
// launcher knows which site and index each child is), not to the fields the
// child wrote, so a confused child cannot corrupt another's entry.
//
// Times are launcher seconds (since the launch started).
//
// A plain object; not thread-safe (used on the launcher's loop thread).
#ifndef GEOPS_SUPERVISOR_LAUNCH_LAUNCH_STATS_H_
#define GEOPS_SUPERVISOR_LAUNCH_LAUNCH_STATS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/topology.h"

namespace geops::supervisor {

// One site's state, for display.
struct SiteProgress {
  std::string name;
  int workers = 0;
  int workers_done = 0;                 // exited
  int64_t min_clock = 0;                // over the site's workers (0 before any progress)
  int64_t max_clock = 0;
  int64_t clocks = 0;                   // clocks per worker
  std::optional<double> mean_loss;      // over workers that reported a loss
  std::optional<double> test_accuracy;  // latest evaluation in the site, if any
  double examples_per_sec = 0;          // sum over the site's running workers
  int workers_down = 0;                 // killed, not (yet) restarted
  int workers_final_read = 0;           // done training, waiting for the final model (every site's drain)
};

class LaunchStats {
 public:
  explicit LaunchStats(const config::Topology& topology);

  // REQUIRES: 0 <= site < sites, 0 <= worker < that site's workers.
  // `event` is a parsed child event (see child_event.h); unknown ones are ignored.
  void OnWorkerEvent(int site, int worker, const nlohmann::json& event, double t);
  void OnWorkerExit(int site, int worker);
  // A worker killed on purpose (the fault plan), and its restart.
  void OnWorkerKilled(int site, int worker);
  void OnWorkerRestarted(int site, int worker);
  // Keeps "shard_stats" events (tagged with site and shard) for the summary.
  void OnShardEvent(int site, int shard, const nlohmann::json& event);

  std::vector<SiteProgress> Sites() const;

  // Launcher time of the first evaluation whose test_accuracy reached the
  // topology's target, if any.
  std::optional<double> target_reached_t() const { return target_reached_t_; }
  // The latest evaluation seen anywhere: (test_accuracy, test_loss).
  std::optional<double> latest_test_accuracy() const { return latest_accuracy_; }
  std::optional<double> latest_test_loss() const { return latest_test_loss_; }
  // "final" events in site, then worker order (workers without one are
  // skipped), each with "start_clocks": the clock every run of the worker
  // started at (its "worker_started" events; more than one if restarted).
  std::vector<nlohmann::json> FinalEvents() const;
  const std::vector<nlohmann::json>& shard_stats() const { return shard_stats_; }
  int workers_with_final() const;

 private:
  struct WorkerState {
    int64_t clock = 0;
    std::optional<double> loss;
    double examples_per_sec = 0;
    bool exited = false;
    bool down = false;
    bool final_read = false;  // said "final_read", not yet "final"
    std::vector<int64_t> start_clocks;
    std::optional<nlohmann::json> final_event;
  };
  struct SiteState {
    std::string name;
    std::vector<WorkerState> workers;
    std::optional<double> test_accuracy;
  };

  int64_t clocks_;
  double target_accuracy_;
  std::vector<SiteState> sites_;
  std::optional<double> target_reached_t_;
  std::optional<double> latest_accuracy_;
  std::optional<double> latest_test_loss_;
  std::vector<nlohmann::json> shard_stats_;
};

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_LAUNCH_STATS_H_
