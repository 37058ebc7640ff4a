// What a chaos run (supervisor/chaos/chaos.h) measured, from the kills it made and the
// progress events the workers printed: for every kill, how long the
// surviving sites went without a clock advance (stall) and how long the
// victim's site took from the restart to training again. Pure functions of
// the recorded times; thread-compatible.
#ifndef GEOPS_SUPERVISOR_CHAOS_CHAOS_REPORT_H_
#define GEOPS_SUPERVISOR_CHAOS_CHAOS_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace geops::supervisor {

// One kill, as the harness made it. Times are seconds since the run began.
struct ChaosKill {
  std::string kind;                  // "worker", "shard" or "site"
  int site = 0;                      // the victims' site
  std::vector<std::string> victims;  // process names, e.g. "eu-west-1-shard-0"
  std::vector<int> victim_workers;   // worker indices (of `site`) among the victims
  double kill_t = 0;
  double delay_s = 0;                // chosen restart delay
  std::optional<double> restart_t;   // when the killed command lines were started again
  bool during_drain = false;         // some worker had finished all its clocks
};

// The clock advances the workers reported: progress[site][worker] holds the
// times of their progress events, ascending; finished[site][worker] when the
// worker exited 0 (or nullopt).
struct ChaosProgress {
  std::vector<std::vector<std::vector<double>>> progress;
  std::vector<std::vector<std::optional<double>>> finished;
};

struct KillEffect {
  // Longest interval without a clock advance of each surviving site still
  // training at the kill, from the last advance before the kill until the
  // victim's site trains again (or the window ends); by site index, nullopt
  // for the victim's site (shard and site kills) and sites not training.
  std::vector<std::optional<double>> stall_s;
  std::optional<double> max_stall_s;  // over the surviving sites
  // restart -> first clock advance of the victim's site (worker kills: of
  // the restarted workers) after it; nullopt when it never trained again
  // (it had finished, or the run ended).
  std::optional<double> restart_to_training_s;
};

// `window_s`: how long after the kill a stall is looked for when the
// victim's site never trains again; `end_t`: when the run ended.
KillEffect MeasureKill(const ChaosKill& kill, const ChaosProgress& p, double end_t, double window_s = 60);

// median, p95 and max of `v` (nearest rank); empty object for no values.
nlohmann::json Distribution(std::vector<double> v);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_CHAOS_CHAOS_REPORT_H_
