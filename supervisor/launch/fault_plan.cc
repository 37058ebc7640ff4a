#include "supervisor/launch/fault_plan.h"

#include <chrono>
#include <filesystem>
#include <system_error>

#include "storage/store_format.h"  // kMarkerFile only (a constant; no RocksDB)

namespace geops::supervisor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json OrNull(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Why `dir` must not be deleted, or "" when it may be.
std::string RefuseToWipe(const fs::path& dir, const std::string& expected_name) {
  if (dir.filename().string() != expected_name) {
    return dir.string() + " is not named " + expected_name;
  }
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return "cannot look at " + dir.string() + ": " + ec.message();
  if (!fs::exists(st)) return "";
  if (fs::is_symlink(st)) return dir.string() + " is a symbolic link";
  if (!fs::is_directory(st)) return dir.string() + " is not a directory";
  fs::directory_iterator it(dir, ec);
  if (ec) return "cannot list " + dir.string() + ": " + ec.message();
  if (it == fs::directory_iterator()) return "";
  if (!fs::is_regular_file(fs::symlink_status(dir / storage::format::kMarkerFile, ec))) {
    return dir.string() + " is not a geops shard store (no " + storage::format::kMarkerFile + " file)";
  }
  return "";
}

}  // namespace

const char* FaultStateName(FaultState state) {
  switch (state) {
    case FaultState::kWaiting:
      return "waiting";
    case FaultState::kDown:
      return "down";
    case FaultState::kRestarting:
      return "restarting";
    case FaultState::kRecovered:
      return "recovered";
    case FaultState::kStaysDown:
      return "stays-down";
    case FaultState::kCancelled:
      return "cancelled";
  }
  return "?";
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

FaultPlan::FaultPlan(const config::Topology& topology) {
  for (size_t i = 0; i < topology.faults.size(); ++i) {
    FaultRecord r;
    r.spec = topology.faults[i];
    r.index = static_cast<int>(i);
    records_.push_back(std::move(r));
  }
}

std::optional<int> FaultPlan::Due(int site, const std::vector<std::optional<int64_t>>& live_clocks) const {
  if (live_clocks.empty()) return std::nullopt;
  std::optional<int64_t> slowest;
  for (const auto& c : live_clocks) {
    if (!c) return std::nullopt;  // a live worker that has not reported anything yet
    slowest = slowest ? std::min(*slowest, *c) : *c;
  }
  for (const FaultRecord& r : records_) {
    if (r.spec.site_index == site && r.in_progress()) return std::nullopt;
  }
  for (const FaultRecord& r : records_) {
    if (r.spec.site_index == site && !r.fired() && *slowest >= r.spec.at_clock) return r.index;
  }
  return std::nullopt;
}

bool FaultPlan::RestartPending() const {
  for (const FaultRecord& r : records_) {
    if (r.in_progress()) return true;
  }
  return false;
}

void FaultPlan::EndRun() {
  for (FaultRecord& r : records_) {
    if (r.in_progress()) {
      r.state = FaultState::kCancelled;
      if (r.note.empty()) r.note = "the run ended before the restart finished";
    } else if (r.state == FaultState::kWaiting && r.note.empty()) {
      r.note = "never fired: the workers of " + r.spec.site + " did not all report clock " +
               std::to_string(r.spec.at_clock) + " while running";
    }
  }
}

json FaultPlan::ToJson() const {
  json out = json::array();
  for (const FaultRecord& r : records_) {
    json victims = json::array();
    json pids = json::array(), restarted_pids = json::array(), resumed = json::object(), exits = json::object();
    for (const FaultVictim& v : r.victims) {
      victims.push_back(v.process);
      pids.push_back(v.pid);
      if (v.restarted_pid) restarted_pids.push_back(v.restarted_pid);
      if (v.resumed_clock) resumed[v.process] = *v.resumed_clock;
      exits[v.process] = {{"exit", v.exit.empty() ? json(nullptr) : json(v.exit)},
                          {"seconds", v.exited_t ? json(*v.exited_t - r.killed_t) : json(nullptr)},
                          {"killed_after_grace", v.killed_after_grace}};
    }
    json f = {{"index", r.index},
              {"kind", r.spec.kind},
              {"site", r.spec.site},
              {"shard", r.spec.shard >= 0 ? json(r.spec.shard) : json(nullptr)},
              {"at_clock", r.spec.at_clock},
              {"restart_after_s", r.spec.restarts() ? json(r.spec.restart_after_s) : json(nullptr)},
              {"fired", r.fired()},
              {"state", FaultStateName(r.state)}};
    if (r.fired()) {
      f["killed_unix"] = r.killed_unix;
      f["killed_launcher_t"] = r.killed_t;
      f["clock_observed"] = r.clock_observed;
      f["worker_clocks"] = r.worker_clocks;
      f["processes"] = victims;
      f["pids"] = pids;
      f["restarted_unix"] = OrNull(r.restarted_unix);
      f["restarted_launcher_t"] = OrNull(r.restarted_t);
      f["recovered_launcher_t"] = OrNull(r.recovered_t);
      f["restarted_pids"] = restarted_pids;
      f["resumed_clocks"] = resumed;
      f["exits"] = exits;
      if (r.spec.kind == "wipe-disk") f["wiped_dirs"] = r.wiped_dirs;
    }
    f["note"] = r.note.empty() ? json(nullptr) : json(r.note);
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<std::string>> WipeShardStores(const config::Topology& topology, int site, const std::string& out_dir) {
  if (site < 0 || site >= static_cast<int>(topology.sites.size())) {
    return InvalidArgumentError("wipe: no site " + std::to_string(site));
  }
  const config::SiteSpec& s = topology.sites[static_cast<size_t>(site)];
  std::vector<fs::path> dirs;
  for (int i = 0; i < s.shards; ++i) {
    const std::string dir = topology.ShardDataDir(site, i, out_dir);
    if (dir.empty()) {
      return FailedPreconditionError("wipe: site " + s.name + " keeps its shards in memory (no [storage] data_dir)");
    }
    std::error_code ec;
    fs::path p = fs::absolute(dir, ec).lexically_normal();
    if (ec) return FailedPreconditionError("wipe: cannot resolve " + dir + ": " + ec.message());
    if (!p.has_filename()) p = p.parent_path();
    const std::string why = RefuseToWipe(p, s.name + "-shard-" + std::to_string(i));
    if (!why.empty()) return FailedPreconditionError("wipe: refusing to delete " + p.string() + ": " + why);
    dirs.push_back(p);
  }
  std::vector<std::string> removed;
  for (const fs::path& p : dirs) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    fs::remove_all(p, ec);
    if (ec) return UnavailableError("wipe: cannot delete " + p.string() + ": " + ec.message());
    removed.push_back(p.string());
  }
  return removed;
}

}  // namespace geops::supervisor
