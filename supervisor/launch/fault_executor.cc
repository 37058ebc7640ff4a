// The launcher's fault executor: fires the topology's [[faults]] at their
// clocks (supervisor/launch/fault_plan.h says which and when), SIGKILLs the
// victims (stop-site: SIGTERMs them, and SIGKILLs what still runs after the
// stop grace), wipes a site's stores for wipe-disk, and restarts what was
// killed: shards first, on the ports they had, then the workers once their
// shards listen again.
#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "supervisor/launch/launcher_state.h"
#include "supervisor/launch/summary_faults.h"

namespace geops::supervisor::launch_detail {

bool Launcher::WorkerRunning(int site, int worker) const {
  const WorkerSlot& slot = workers_[static_cast<size_t>(site)][static_cast<size_t>(worker)];
  return slot.id >= 0 && pm_->live(slot.id) && roles_[static_cast<size_t>(slot.id)].killed_by < 0;
}

void Launcher::CheckFaults(int site) {
  if (phase_ != Phase::kTraining || faults_.size() == 0) return;
  std::vector<std::optional<int64_t>> clocks;
  for (int w = 0; w < static_cast<int>(workers_[static_cast<size_t>(site)].size()); ++w) {
    if (WorkerRunning(site, w)) clocks.push_back(workers_[static_cast<size_t>(site)][static_cast<size_t>(w)].reported);
  }
  if (std::optional<int> due = faults_.Due(site, clocks)) FireFault(*due);
}

void Launcher::FireFault(int fault) {
  FaultRecord& rec = faults_.at(fault);
  const config::FaultSpec& f = rec.spec;
  const int site = f.site_index;
  std::vector<int> targets;
  for (int i = 0; i < o_.topology.sites[static_cast<size_t>(site)].shards; ++i) {
    if (f.kind == "kill-shard" && i != f.shard) continue;
    const int id = shard_ids_[static_cast<size_t>(site)][static_cast<size_t>(i)];
    if (id >= 0 && pm_->live(id) && roles_[static_cast<size_t>(id)].killed_by < 0) targets.push_back(id);
  }
  int64_t slowest = -1;
  for (int w = 0; w < static_cast<int>(workers_[static_cast<size_t>(site)].size()); ++w) {
    if (!WorkerRunning(site, w)) continue;
    const WorkerSlot& slot = workers_[static_cast<size_t>(site)][static_cast<size_t>(w)];
    const int64_t c = slot.reported.value_or(-1);
    rec.worker_clocks[pm_->name(slot.id)] = c;
    slowest = slowest < 0 ? c : std::min(slowest, c);
    if (f.kind != "kill-shard") targets.push_back(slot.id);
  }
  rec.clock_observed = slowest;
  rec.killed_unix = UnixNow();
  rec.killed_t = Now();
  rec.state = f.restarts() ? FaultState::kDown : FaultState::kStaysDown;
  if (!f.restarts()) rec.note = "stays down: no restart_after_s";
  nlohmann::json pids = nlohmann::json::array(), names = nlohmann::json::array();
  for (int id : targets) {
    ChildRole& role = roles_[static_cast<size_t>(id)];
    role.killed_by = fault;
    FaultVictim v;
    v.process = pm_->name(id);
    v.shard = role.shard;
    v.index = role.index;
    v.pid = pm_->pid(id);
    v.process_id = id;
    rec.victims.push_back(std::move(v));
    pids.push_back(pm_->pid(id));
    names.push_back(pm_->name(id));
  }
  rec.pending_exits = static_cast<int>(targets.size());
  const int signum = f.graceful() ? SIGTERM : SIGKILL;
  const char* signal_name = f.graceful() ? "SIGTERM" : "SIGKILL";
  LogEvent({{"event", "fault_injected"},
            {"signal", signal_name},
            {"fault", fault},
            {"kind", f.kind},
            {"site", f.site},
            {"shard", f.shard >= 0 ? nlohmann::json(f.shard) : nlohmann::json(nullptr)},
            {"at_clock", f.at_clock},
            {"clock_observed", slowest},
            {"worker_clocks", rec.worker_clocks},
            {"processes", names},
            {"pids", pids},
            {"time_unix", rec.killed_unix},
            {"restart_after_s", f.restarts() ? nlohmann::json(f.restart_after_s) : nlohmann::json(nullptr)}});
  char buf[256];
  std::snprintf(buf, sizeof(buf), "fault %d: %s %s at clock %lld: %s to %zu process(es)", fault, f.kind.c_str(),
                (f.site + (f.shard >= 0 ? " shard " + std::to_string(f.shard) : "")).c_str(),
                static_cast<long long>(slowest), signal_name, targets.size());
  std::string message = buf;
  if (f.restarts()) {
    std::snprintf(buf, sizeof(buf), "; restart in %g s", f.restart_after_s);
    message += buf;
  } else {
    message += "; not restarted";
  }
  display_.Message(message);
  for (int id : targets) {
    Status s = pm_->Signal(id, signum);
    if (!s.ok()) {
      display_.Message("geops launch: fault " + std::to_string(fault) + ": " + s.message(), true);
      BeginStop("failed", s.message());
      return;
    }
  }
  if (f.graceful()) {
    // A planned stop gets the grace the launcher gives its own children at
    // the end of a run; what still runs after it is SIGKILLed (OnStopGrace).
    uv_update_time(&loop_);
    uv_timer_start(&fault_timers_[static_cast<size_t>(fault)].grace, OnStopGraceCb, ToMs(o_.stop_timeout_seconds),
                   0);
  }
  if (f.restarts()) {
    uv_update_time(&loop_);  // the delay counts from now, not from the start of this loop iteration
    uv_timer_start(&fault_timers_[static_cast<size_t>(fault)].timer, OnFaultTimerCb, ToMs(f.restart_after_s), 0);
  }
}

void Launcher::OnVictimExit(int id, bool planned, const ProcessExit& exit) {
  FaultRecord& rec = faults_.at(roles_[static_cast<size_t>(id)].killed_by);
  for (FaultVictim& v : rec.victims) {
    if (v.process_id != id) continue;
    if (!planned) v.finished_before_kill = true;
    v.exit = exit.Describe();
    v.exited_t = Now();
    if (rec.spec.graceful()) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), "fault %d: %s %s %.2f s after SIGTERM (%s)", rec.index, v.process.c_str(),
                    v.killed_after_grace ? "killed" : "stopped", *v.exited_t - rec.killed_t, v.exit.c_str());
      display_.Message(buf);
    }
  }
  if (--rec.pending_exits == 0) uv_timer_stop(&fault_timers_[static_cast<size_t>(rec.index)].grace);
  MaybeRestart(rec.index);
}

void Launcher::OnStopGrace(int fault) {
  if (phase_ != Phase::kTraining) return;  // stopping: the process manager has them
  FaultRecord& rec = faults_.at(fault);
  for (FaultVictim& v : rec.victims) {
    if (v.exited_t || !pm_->live(v.process_id)) continue;
    v.killed_after_grace = true;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", o_.stop_timeout_seconds);
    display_.Message("warning: fault " + std::to_string(fault) + ": " + v.process + " did not stop within " + buf +
                         " s of SIGTERM; SIGKILL",
                     true);
    Status s = pm_->Signal(v.process_id, SIGKILL);
    if (!s.ok()) {
      display_.Message("geops launch: fault " + std::to_string(fault) + ": " + s.message(), true);
      BeginStop("failed", s.message());
      return;
    }
  }
}

void Launcher::OnFaultTimer(int fault) {
  if (phase_ != Phase::kTraining) return;
  FaultRecord& rec = faults_.at(fault);
  if (rec.state == FaultState::kDown) {
    rec.delay_elapsed = true;
    MaybeRestart(fault);
  } else if (rec.state == FaultState::kRestarting) {
    std::string missing;
    for (const FaultVictim& v : rec.victims) {
      if (v.shard && v.restarted_id >= 0 && !roles_[static_cast<size_t>(v.restarted_id)].address) {
        missing += (missing.empty() ? "" : ", ") + v.process;
      }
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", o_.listen_timeout_seconds);
    const std::string what = "restarted shards not listening after " + std::string(buf) + " s: " + missing;
    display_.Message("geops launch: " + what, true);
    BeginStop("failed", what);
  }
}

void Launcher::MaybeRestart(int fault) {
  FaultRecord& rec = faults_.at(fault);
  if (phase_ != Phase::kTraining || rec.state != FaultState::kDown || !rec.delay_elapsed || rec.pending_exits > 0) {
    return;
  }
  if (rec.spec.kind == "wipe-disk") {
    Result<std::vector<std::string>> wiped = WipeShardStores(o_.topology, rec.spec.site_index, o_.out_dir);
    if (!wiped.ok()) {
      rec.note = wiped.status().message();
      display_.Message("geops launch: fault " + std::to_string(fault) + ": " + wiped.status().message(), true);
      BeginStop("failed", wiped.status().message());
      return;
    }
    rec.wiped_dirs = *wiped;
    LogEvent({{"event", "disk_wiped"}, {"fault", fault}, {"site", rec.spec.site}, {"dirs", rec.wiped_dirs},
              {"time_unix", UnixNow()}});
  }
  rec.state = FaultState::kRestarting;
  rec.restarted_unix = UnixNow();
  rec.restarted_t = Now();
  int shards = 0;
  for (size_t k = 0; k < rec.victims.size(); ++k) {
    if (!rec.victims[k].shard) continue;
    const ChildRole& old = roles_[static_cast<size_t>(rec.victims[k].process_id)];
    ChildRole role;
    role.shard = true;
    role.site = old.site;
    role.index = old.index;
    role.argv = old.argv;
    role.env = old.env;
    role.cwd = old.cwd;
    role.restart_of = fault;
    const int id = SpawnChild(rec.victims[k].process, std::move(role), /*restart=*/true);
    if (id < 0) return;
    FaultVictim& v = faults_.at(fault).victims[k];
    v.restarted_id = id;
    v.restarted_pid = pm_->pid(id);
    ++shards;
    LogEvent({{"event", "process_restarted"}, {"fault", fault}, {"process", v.process}, {"pid", v.restarted_pid},
              {"old_pid", v.pid}, {"time_unix", UnixNow()}});
  }
  if (shards == 0) {
    RespawnWorkers(fault);
    return;
  }
  display_.Message("fault " + std::to_string(fault) + ": restarted " + std::to_string(shards) + " shard(s) of " +
                   rec.spec.site + "; waiting for them to listen");
  uv_timer_start(&fault_timers_[static_cast<size_t>(fault)].timer, OnFaultTimerCb, ToMs(o_.listen_timeout_seconds),
                 0);
}

void Launcher::OnRestartedShardListening(int id) {
  const int fault = roles_[static_cast<size_t>(id)].restart_of;
  FaultRecord& rec = faults_.at(fault);
  if (phase_ != Phase::kTraining || rec.state != FaultState::kRestarting) return;
  for (const FaultVictim& v : rec.victims) {
    if (v.shard && (v.restarted_id < 0 || !roles_[static_cast<size_t>(v.restarted_id)].address)) return;
  }
  uv_timer_stop(&fault_timers_[static_cast<size_t>(fault)].timer);
  RespawnWorkers(fault);
}

void Launcher::RespawnWorkers(int fault) {
  int workers = 0;
  for (size_t k = 0; k < faults_.at(fault).victims.size(); ++k) {
    FaultVictim& victim = faults_.at(fault).victims[k];
    if (victim.shard || victim.finished_before_kill) continue;
    const ChildRole& old = roles_[static_cast<size_t>(victim.process_id)];
    ChildRole role;
    role.site = old.site;
    role.index = old.index;
    role.argv = old.argv;
    role.env = old.env;
    role.cwd = old.cwd;
    role.restart_of = fault;
    MarkTakeover(&role);  // its previous process was reaped
    const std::string name = victim.process;
    const int id = SpawnChild(name, std::move(role), /*restart=*/true);
    if (id < 0) return;
    FaultVictim& v = faults_.at(fault).victims[k];
    v.restarted_id = id;
    v.restarted_pid = pm_->pid(id);
    stats_.OnWorkerRestarted(roles_[static_cast<size_t>(id)].site, roles_[static_cast<size_t>(id)].index);
    ++workers;
    LogEvent({{"event", "process_restarted"}, {"fault", fault}, {"process", v.process}, {"pid", v.restarted_pid},
              {"old_pid", v.pid}, {"time_unix", UnixNow()}});
  }
  FaultRecord& rec = faults_.at(fault);
  rec.state = FaultState::kRecovered;
  rec.recovered_t = Now();
  char buf[200];
  std::snprintf(buf, sizeof(buf), "fault %d: %s back %.2f s after the kill (%d worker(s) restarted)", fault,
                rec.spec.site.c_str(), rec.recovered_t.value_or(0) - rec.killed_t, workers);
  display_.Message(buf);
  CheckFaults(rec.spec.site_index);
  MaybeFinish();
}

void Launcher::OnFaultTimerCb(uv_timer_t* t) {
  auto* ft = static_cast<FaultTimer*>(t->data);
  ft->launcher->OnFaultTimer(ft->fault);
}

void Launcher::OnStopGraceCb(uv_timer_t* t) {
  auto* ft = static_cast<FaultTimer*>(t->data);
  ft->launcher->OnStopGrace(ft->fault);
}

}  // namespace geops::supervisor::launch_detail
