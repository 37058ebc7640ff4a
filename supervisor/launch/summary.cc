#include "supervisor/launch/summary.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "supervisor/launch/child_event.h"
#include "supervisor/launch/summary_faults.h"
#include "supervisor/launch/summary_wan.h"

namespace geops::supervisor {
namespace {

using nlohmann::json;

json OrNull(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return Fixed(b, u == 0 ? 0 : 1) + " " + units[u];
}

std::string Pad(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

// CPU seconds summed over the worker and shard processes that reported
// theirs at exit (null where none did): what the machine spent on
// training, and on serving and replicating the model.
json CpuSeconds(const std::vector<json>& finals, const std::vector<json>& shard_stats) {
  auto sum = [](const std::vector<json>& events) -> std::optional<double> {
    std::optional<double> total;
    for (const json& e : events) {
      if (auto c = NumberField(e, "cpu_seconds"); c && *c >= 0) total = total.value_or(0) + *c;
    }
    return total;
  };
  return {{"workers", OrNull(sum(finals))}, {"shards", OrNull(sum(shard_stats))}};
}

}  // namespace

json BuildSummary(const config::Topology& topology, const LaunchStats& stats, const LaunchOutcome& outcome) {
  std::vector<json> finals = stats.FinalEvents();
  double loss_sum = 0;
  int loss_n = 0;
  double lan = 0;
  double examples = 0;
  std::optional<int64_t> staleness;
  std::optional<double> accuracy, test_loss, counter_expected, counter_error;
  for (const json& f : finals) {
    if (auto l = NumberField(f, "final_loss")) {
      loss_sum += *l;
      ++loss_n;
    }
    lan += NumberField(f, "lan_bytes_sent").value_or(0) + NumberField(f, "lan_bytes_received").value_or(0);
    examples += NumberField(f, "examples").value_or(0);
    if (auto s = IntField(f, "max_staleness_observed")) staleness = std::max(staleness.value_or(*s), *s);
    if (!accuracy) accuracy = NumberField(f, "test_accuracy");
    if (!test_loss) test_loss = NumberField(f, "test_loss");
    if (!counter_expected) counter_expected = NumberField(f, "counter_expected");
    if (auto e = NumberField(f, "counter_max_abs_error")) counter_error = std::max(counter_error.value_or(*e), *e);
  }
  if (!accuracy) accuracy = stats.latest_test_accuracy();
  if (!test_loss) test_loss = stats.latest_test_loss();

  std::optional<double> wall;
  if (outcome.workers_started_t) {
    double end = outcome.workers_ended_t.value_or(outcome.launcher_seconds);
    wall = std::max(0.0, end - *outcome.workers_started_t);
  }
  std::optional<double> time_to_target;
  if (stats.target_reached_t() && outcome.workers_started_t) {
    time_to_target = std::max(0.0, *stats.target_reached_t() - *outcome.workers_started_t);
  }

  json s = json::object();
  s["topology"] = topology.name;
  s["workload"] = topology.workload;
  s["sites"] = topology.sites.size();
  s["workers"] = topology.total_workers();
  s["clocks"] = topology.clocks;
  s["wall_seconds"] = OrNull(wall);
  s["final_loss"] = loss_n > 0 ? json(loss_sum / loss_n) : json(nullptr);
  s["test_accuracy"] = OrNull(accuracy);
  s["test_loss"] = OrNull(test_loss);
  s["lan_bytes"] = static_cast<uint64_t>(lan);
  s["wan_bytes"] = 0;
  s["max_staleness_observed"] = staleness ? json(*staleness) : json(nullptr);
  s["counter_expected"] = OrNull(counter_expected);
  s["counter_max_abs_error"] = OrNull(counter_error);
  s["time_to_target_seconds"] = OrNull(time_to_target);
  s["target_accuracy"] = topology.target_accuracy;
  s["examples"] = static_cast<uint64_t>(examples);
  s["examples_per_second"] = wall && *wall > 0 ? json(examples / *wall) : json(nullptr);
  s["per_worker"] = finals;
  s["shard_stats"] = stats.shard_stats();
  s["cpu_seconds"] = CpuSeconds(finals, stats.shard_stats());
  s["exit"] = outcome.exit;
  s["failure"] = outcome.failure.empty() ? json(nullptr) : json(outcome.failure);
  s["interrupted"] = outcome.exit == "interrupted";
  s["launcher_seconds"] = outcome.launcher_seconds;
  AddWanSummary(topology, stats, &s);
  return s;
}

Status WriteJsonAtomically(const std::string& path, const json& value) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return UnavailableError("cannot write " + tmp + ": " + std::strerror(errno));
    out << value.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return UnavailableError("cannot write " + tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return UnavailableError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return Status::Ok();
}

std::string FormatSummaryTable(const config::Topology& topology, const json& summary) {
  struct Row {
    int workers = 0;
    int64_t clocks = 0;
    double loss_sum = 0;
    int loss_n = 0;
    double examples = 0;
    double lan = 0;
  };
  std::map<std::string, Row> rows;
  const json& per_worker = summary.contains("per_worker") ? summary["per_worker"] : json::array();
  for (const json& f : per_worker) {
    Row& r = rows[StringField(f, "site").value_or("?")];
    ++r.workers;
    r.clocks = std::max(r.clocks, IntField(f, "clocks").value_or(0));
    if (auto l = NumberField(f, "final_loss")) {
      r.loss_sum += *l;
      ++r.loss_n;
    }
    r.examples += NumberField(f, "examples").value_or(0);
    r.lan += NumberField(f, "lan_bytes_sent").value_or(0) + NumberField(f, "lan_bytes_received").value_or(0);
  }
  std::optional<double> wall = NumberField(summary, "wall_seconds");
  std::string out;
  size_t w = 4;
  for (const config::SiteSpec& s : topology.sites) w = std::max(w, s.name.size());
  out += Pad("site", w, false) + "  reports  " + Pad("clocks", 7, true) + "  " + Pad("final loss", 10, true) +
         "  " + Pad("examples/s", 11, true) + "  " + Pad("LAN traffic", 11, true) + "\n";
  for (const config::SiteSpec& s : topology.sites) {
    const Row& r = rows[s.name];
    std::string rep = std::to_string(r.workers) + "/" + std::to_string(s.workers);
    std::string eps = wall && *wall > 0 ? Fixed(r.examples / *wall, 1) : "-";
    out += Pad(s.name, w, false) + "  " + Pad(rep, 7, true) + "  " + Pad(std::to_string(r.clocks), 7, true) +
           "  " + Pad(r.loss_n ? Fixed(r.loss_sum / r.loss_n, 4) : "-", 10, true) + "  " + Pad(eps, 11, true) +
           "  " + Pad(Bytes(r.lan), 11, true) + "\n";
  }
  if (auto acc = NumberField(summary, "test_accuracy")) {
    out += "test accuracy " + Fixed(*acc, 4);
    if (auto tl = NumberField(summary, "test_loss")) out += ", test loss " + Fixed(*tl, 4);
    if (auto tt = NumberField(summary, "time_to_target_seconds")) {
      out += "; target " + Fixed(topology.target_accuracy, 3) + " reached after " + Fixed(*tt, 1) + " s";
    } else {
      out += "; target " + Fixed(topology.target_accuracy, 3) + " not reached";
    }
    out += "\n";
  }
  if (auto err = NumberField(summary, "counter_max_abs_error")) {
    out += "counter max abs error " + Fixed(*err, 6);
    if (auto e = NumberField(summary, "counter_expected")) out += " (expected value " + Fixed(*e, 3) + ")";
    out += "\n";
  }
  out += "wall " + (wall ? Fixed(*wall, 1) + " s" : std::string("-"));
  if (auto eps = NumberField(summary, "examples_per_second")) out += ", " + Fixed(*eps, 1) + " examples/s";
  out += ", LAN " + Bytes(NumberField(summary, "lan_bytes").value_or(0));
  if (auto st = IntField(summary, "max_staleness_observed")) out += ", max staleness " + std::to_string(*st);
  out += "\n";
  if (summary.contains("cpu_seconds") && summary["cpu_seconds"].is_object()) {
    const json& cpu = summary["cpu_seconds"];
    auto workers = NumberField(cpu, "workers"), shards = NumberField(cpu, "shards");
    if (workers || shards) {
      out += "CPU: workers " + (workers ? Fixed(*workers, 1) + " s" : std::string("-")) + ", shards " +
             (shards ? Fixed(*shards, 1) + " s" : std::string("-")) + "\n";
    }
  }
  out += FormatWanSummary(summary);
  out += FormatFaultSummary(summary);
  if (summary.contains("supervision") && summary["supervision"].is_object()) {
    const json& sup = summary["supervision"];
    const int64_t total = IntField(sup, "restarts_total").value_or(0);
    if (total > 0 && sup.contains("restarts") && sup["restarts"].is_array()) {
      out += "restarts: " + std::to_string(total) + " of processes that died on their own:";
      for (const json& r : sup["restarts"]) {
        out += " " + StringField(r, "process").value_or("?") + " (" + StringField(r, "reason").value_or("?");
        if (auto c = IntField(r, "resumed_clock")) out += ", resumed at clock " + std::to_string(*c);
        if (auto d = NumberField(r, "down_seconds")) out += ", down " + Fixed(*d, 1) + " s";
        out += ")";
      }
      out += "\n";
    }
  }
  out += "exit: " + StringField(summary, "exit").value_or("?");
  if (auto f = StringField(summary, "failure")) out += " (" + *f + ")";
  out += "\n";
  return out;
}

}  // namespace geops::supervisor
