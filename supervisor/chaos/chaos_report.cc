#include "supervisor/chaos/chaos_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace geops::supervisor {
namespace {

bool IsVictim(const ChaosKill& kill, int site, int worker) {
  if (site != kill.site) return false;
  if (kill.kind != "worker") return true;  // a shard or site kill stops the whole site
  return std::find(kill.victim_workers.begin(), kill.victim_workers.end(), worker) != kill.victim_workers.end();
}

// Times of the clock advances of `site`'s workers that are not victims.
std::vector<double> SurvivorAdvances(const ChaosKill& kill, const ChaosProgress& p, int site) {
  std::vector<double> out;
  for (size_t w = 0; w < p.progress[site].size(); ++w) {
    if (IsVictim(kill, site, static_cast<int>(w))) continue;
    out.insert(out.end(), p.progress[site][w].begin(), p.progress[site][w].end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// When every non-victim worker of `site` had finished, or +inf.
double SurvivorsFinished(const ChaosKill& kill, const ChaosProgress& p, int site) {
  double last = -std::numeric_limits<double>::infinity();
  for (size_t w = 0; w < p.finished[site].size(); ++w) {
    if (IsVictim(kill, site, static_cast<int>(w))) continue;
    if (!p.finished[site][w]) return std::numeric_limits<double>::infinity();
    last = std::max(last, *p.finished[site][w]);
  }
  return last;
}

}  // namespace

KillEffect MeasureKill(const ChaosKill& kill, const ChaosProgress& p, double end_t, double window_s) {
  KillEffect e;
  const int sites = static_cast<int>(p.progress.size());
  e.stall_s.assign(static_cast<size_t>(sites), std::nullopt);

  // The victim's site training again: its (restarted) workers' first advance after the restart.
  if (kill.restart_t) {
    double first = std::numeric_limits<double>::infinity();
    for (size_t w = 0; w < p.progress[kill.site].size(); ++w) {
      if (kill.kind == "worker" && !IsVictim(kill, kill.site, static_cast<int>(w))) continue;
      const std::vector<double>& t = p.progress[kill.site][w];
      auto it = std::upper_bound(t.begin(), t.end(), *kill.restart_t);
      if (it != t.end()) first = std::min(first, *it);
    }
    if (std::isfinite(first)) e.restart_to_training_s = first - *kill.restart_t;
  }

  double window_end = std::min(end_t, kill.kill_t + kill.delay_s + window_s);
  if (e.restart_to_training_s) window_end = std::min(window_end, *kill.restart_t + *e.restart_to_training_s);
  for (int s = 0; s < sites; ++s) {
    if (s == kill.site && kill.kind != "worker") continue;
    const double done = SurvivorsFinished(kill, p, s);
    if (done <= kill.kill_t) continue;  // not training at the kill
    const std::vector<double> t = SurvivorAdvances(kill, p, s);
    const double end = std::min(window_end, done);
    auto it = std::upper_bound(t.begin(), t.end(), kill.kill_t);
    double prev = it == t.begin() ? kill.kill_t : *std::prev(it);
    double longest = 0;
    for (; it != t.end() && *it <= end; ++it) {
      longest = std::max(longest, *it - prev);
      prev = *it;
    }
    if (it != t.end()) {
      longest = std::max(longest, *it - prev);  // the advance that ended the wait
    } else {
      longest = std::max(longest, end - prev);
    }
    e.stall_s[static_cast<size_t>(s)] = longest;
    e.max_stall_s = std::max(e.max_stall_s.value_or(0.0), longest);
  }
  return e;
}

nlohmann::json Distribution(std::vector<double> v) {
  if (v.empty()) return nlohmann::json::object();
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  return {{"count", v.size()}, {"median", rank(0.5)}, {"p95", rank(0.95)}, {"max", v.back()}};
}

}  // namespace geops::supervisor
