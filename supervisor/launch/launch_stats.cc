#include "supervisor/launch/launch_stats.h"

#include <algorithm>

#include "supervisor/launch/child_event.h"

namespace geops::supervisor {

LaunchStats::LaunchStats(const config::Topology& topology)
    : clocks_(topology.clocks), target_accuracy_(topology.target_accuracy) {
  for (const config::SiteSpec& s : topology.sites) {
    SiteState st;
    st.name = s.name;
    st.workers.resize(static_cast<size_t>(std::max(0, s.workers)));
    sites_.push_back(std::move(st));
  }
}

void LaunchStats::OnWorkerEvent(int site, int worker, const nlohmann::json& event, double t) {
  SiteState& s = sites_.at(static_cast<size_t>(site));
  WorkerState& w = s.workers.at(static_cast<size_t>(worker));
  std::string name = StringField(event, "event").value_or("");
  if (name == "progress") {
    if (auto c = IntField(event, "clock")) w.clock = std::max(w.clock, *c);
    if (auto l = NumberField(event, "loss")) w.loss = *l;
    if (auto r = NumberField(event, "examples_per_sec")) w.examples_per_sec = *r;
  } else if (name == "eval") {
    if (auto c = IntField(event, "clock")) w.clock = std::max(w.clock, *c);
    auto acc = NumberField(event, "test_accuracy");
    if (acc) {
      s.test_accuracy = *acc;
      latest_accuracy_ = *acc;
      // The model reached the target when it was taken, not when its
      // evaluation (in line or in the background) came back.
      const double age = NumberField(event, "model_age_seconds").value_or(0.0);
      if (!target_reached_t_ && *acc >= target_accuracy_) target_reached_t_ = t - std::max(0.0, age);
    }
    if (auto l = NumberField(event, "test_loss")) latest_test_loss_ = *l;
  } else if (name == "worker_started") {
    if (auto c = IntField(event, "clock")) {
      w.start_clocks.push_back(*c);
      w.clock = std::max(w.clock, *c);
    }
  } else if (name == "final_read") {
    w.final_read = true;  // done training; reading the final model (the drain of every site)
  } else if (name == "final") {
    w.final_read = false;
    w.final_event = event;
    (*w.final_event)["site"] = s.name;  // attribute to the process that printed it
    (*w.final_event)["worker"] = worker;
    if (auto c = IntField(event, "clocks")) w.clock = std::max(w.clock, *c);
    if (auto l = NumberField(event, "final_loss")) w.loss = *l;
    if (auto acc = NumberField(event, "test_accuracy")) {
      s.test_accuracy = *acc;
      latest_accuracy_ = *acc;
    }
    if (auto l = NumberField(event, "test_loss")) latest_test_loss_ = *l;
  }
}

void LaunchStats::OnWorkerExit(int site, int worker) {
  WorkerState& w = sites_.at(static_cast<size_t>(site)).workers.at(static_cast<size_t>(worker));
  w.exited = true;
  w.examples_per_sec = 0;
}

void LaunchStats::OnWorkerKilled(int site, int worker) {
  WorkerState& w = sites_.at(static_cast<size_t>(site)).workers.at(static_cast<size_t>(worker));
  w.down = true;
  w.examples_per_sec = 0;
}

void LaunchStats::OnWorkerRestarted(int site, int worker) {
  WorkerState& w = sites_.at(static_cast<size_t>(site)).workers.at(static_cast<size_t>(worker));
  w.down = false;
  w.exited = false;
}

void LaunchStats::OnShardEvent(int site, int shard, const nlohmann::json& event) {
  if (StringField(event, "event").value_or("") != "shard_stats") return;
  nlohmann::json e = event;
  e["site"] = sites_.at(static_cast<size_t>(site)).name;
  e["shard"] = shard;
  shard_stats_.push_back(std::move(e));
}

std::vector<SiteProgress> LaunchStats::Sites() const {
  std::vector<SiteProgress> out;
  for (const SiteState& s : sites_) {
    SiteProgress p;
    p.name = s.name;
    p.workers = static_cast<int>(s.workers.size());
    p.clocks = clocks_;
    p.test_accuracy = s.test_accuracy;
    double loss_sum = 0;
    int loss_n = 0;
    bool first = true;
    for (const WorkerState& w : s.workers) {
      if (w.exited) ++p.workers_done;
      if (w.down && !w.exited) ++p.workers_down;
      if (w.final_read && !w.exited && !w.down) ++p.workers_final_read;
      p.min_clock = first ? w.clock : std::min(p.min_clock, w.clock);
      p.max_clock = first ? w.clock : std::max(p.max_clock, w.clock);
      first = false;
      if (w.loss) {
        loss_sum += *w.loss;
        ++loss_n;
      }
      if (!w.exited && !w.down) p.examples_per_sec += w.examples_per_sec;
    }
    if (loss_n > 0) p.mean_loss = loss_sum / loss_n;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<nlohmann::json> LaunchStats::FinalEvents() const {
  std::vector<nlohmann::json> out;
  for (const SiteState& s : sites_) {
    for (const WorkerState& w : s.workers) {
      if (!w.final_event) continue;
      out.push_back(*w.final_event);
      out.back()["start_clocks"] = w.start_clocks;
    }
  }
  return out;
}

int LaunchStats::workers_with_final() const {
  int n = 0;
  for (const SiteState& s : sites_) {
    for (const WorkerState& w : s.workers) n += w.final_event ? 1 : 0;
  }
  return n;
}

}  // namespace geops::supervisor
