// The launcher's supervision: a shard or worker that dies on its own while
// the others train (a crash, an OOM kill, a kill -9 from outside) is
// restarted with the same command after a delay, within the restart budget
// (supervisor/launch/restart_budget.h), while every other process trains on:
//   - a worker resumes at the clock its shards hold for it; it is started
//     with the takeover flag (--takeover, or GEOPS_TAKEOVER=1 for a
//     [training] command), since the launcher saw its previous process
//     exit, so its shards give it the worker id at once;
//   - a shard resumes from its store, on the ports it had; a shard whose
//     state is in memory only (no [storage]) is not restarted: its part of
//     the model is gone, and the run fails saying so.
// Events: "process_died" and "process_restarted" (source "launcher") in
// events.jsonl; summary.json "supervision" lists every restart.
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "supervisor/launch/child_event.h"
#include "supervisor/launch/launcher_state.h"

namespace geops::supervisor::launch_detail {

void MarkTakeover(ChildRole* role) {
  if (!role->env.empty()) {
    std::erase_if(role->env, [](const std::string& e) { return e.rfind("GEOPS_TAKEOVER=", 0) == 0; });
    role->env.push_back("GEOPS_TAKEOVER=1");
    return;
  }
  if (role->argv.size() > 1 && role->argv[1] == "worker" &&
      std::find(role->argv.begin(), role->argv.end(), "--takeover") == role->argv.end()) {
    role->argv.push_back("--takeover");
  }
}

void Launcher::Supervise(int id, const ProcessExit& exit, const std::string& what) {
  const ChildRole& role = roles_.at(static_cast<size_t>(id));
  const std::string name = pm_->name(id);
  if (phase_ != Phase::kTraining) {  // before every shard listened: the launch itself failed
    ReportChildFailure(id, what);
    return;
  }
  if (role.shard && o_.topology.storage_dir.empty()) {
    ReportChildFailure(id, what + "; not restarted: its state was in memory only (restarting a shard needs "
                                  "[storage], from which it resumes)");
    return;
  }
  const std::optional<double> delay = budget_.Take(name);
  if (!delay) {
    ReportChildFailure(id, what + "; restart budget spent (" + std::to_string(budget_.policy().max_restarts) +
                               " restarts of " + name + ")");
    return;
  }
  SupervisedRestart r;
  r.process = name;
  r.reason = exit.Describe();
  r.number = budget_.restarts(name);
  r.died_t = Now();
  r.delay_s = *delay;
  if (!role.shard) r.clock_reported = workers_[static_cast<size_t>(role.site)][static_cast<size_t>(role.index)].reported;
  const int entry = static_cast<int>(restarts_.size());
  restarts_.push_back(r);
  LogEvent({{"event", "process_died"},
            {"process", name},
            {"reason", r.reason},
            {"restart", r.number},
            {"max_restarts", budget_.policy().max_restarts},
            {"restart_in_s", r.delay_s},
            {"clock_reported", r.clock_reported ? nlohmann::json(*r.clock_reported) : nlohmann::json(nullptr)}});
  char buf[256];
  std::snprintf(buf, sizeof(buf), "; restarting in %g s (restart %d of %d)", r.delay_s, r.number,
                budget_.policy().max_restarts);
  std::string message = what + buf + "; last lines of " + LogPath(name) + ":";
  for (const std::string& l : pm_->Tail(id)) message += "\n    " + l;
  display_.Message(message, true);

  auto timer = std::make_unique<RestartTimer>();
  uv_timer_init(&loop_, &timer->timer);
  timer->launcher = this;
  timer->entry = entry;
  timer->old_id = id;
  timer->timer.data = timer.get();
  uv_update_time(&loop_);
  uv_timer_start(&timer->timer, OnRestartTimerCb, ToMs(r.delay_s), 0);
  restart_timers_.push_back(std::move(timer));
  ++pending_restarts_;
}

void Launcher::OnRestartTimerCb(uv_timer_t* t) {
  auto* rt = static_cast<RestartTimer*>(t->data);
  rt->launcher->RespawnSupervised(rt->entry, rt->old_id);
}

void Launcher::RespawnSupervised(int entry, int old_id) {
  --pending_restarts_;
  if (phase_ != Phase::kTraining) return;
  ChildRole role = roles_.at(static_cast<size_t>(old_id));
  role.address.reset();
  role.mirror.reset();
  role.malformed = 0;
  role.killed_by = -1;
  role.restart_of = -1;
  role.supervised = entry;
  if (!role.shard) MarkTakeover(&role);
  const bool shard = role.shard;
  const int site = role.site, index = role.index;
  const std::string name = pm_->name(old_id);
  const int id = SpawnChild(name, std::move(role), /*restart=*/true);
  if (id < 0) return;  // the launch is stopping
  SupervisedRestart& r = restarts_.at(static_cast<size_t>(entry));
  r.restarted_t = Now();
  if (!shard) stats_.OnWorkerRestarted(site, index);
  LogEvent({{"event", "process_restarted"},
            {"process", name},
            {"pid", pm_->pid(id)},
            {"restart", r.number},
            {"after", "died"}});
  display_.Message("restarted " + name + " (restart " + std::to_string(r.number) + " of " +
                   std::to_string(budget_.policy().max_restarts) + ")");
  MaybeFinish();  // the workers may all have finished while a shard was down
}

void Launcher::OnSupervisedStarted(int id, const nlohmann::json& event) {
  SupervisedRestart& r = restarts_.at(static_cast<size_t>(roles_.at(static_cast<size_t>(id)).supervised));
  if (r.resumed_t) return;
  r.resumed_clock = IntField(event, "clock");
  r.resumed_t = Now();
}

nlohmann::json Launcher::SupervisionSummary() const {
  nlohmann::json list = nlohmann::json::array();
  for (const SupervisedRestart& r : restarts_) {
    auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json e = {{"process", r.process},
                        {"reason", r.reason},
                        {"restart", r.number},
                        {"died_t", r.died_t},
                        {"delay_s", r.delay_s},
                        {"restarted_t", opt(r.restarted_t)},
                        {"clock_reported", opt(r.clock_reported)},
                        {"resumed_clock", opt(r.resumed_clock)},
                        {"resumed_t", opt(r.resumed_t)}};
    // Down from its death until it said it runs again (a worker) or was started (a shard).
    if (r.resumed_t) {
      e["down_seconds"] = *r.resumed_t - r.died_t;
    } else if (r.restarted_t) {
      e["down_seconds"] = *r.restarted_t - r.died_t;
    }
    list.push_back(std::move(e));
  }
  return {{"max_restarts", budget_.policy().max_restarts},
          {"restarts_total", budget_.total()},
          {"restarts", std::move(list)}};
}

}  // namespace geops::supervisor::launch_detail
