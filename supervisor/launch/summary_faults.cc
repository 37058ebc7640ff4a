#include "supervisor/launch/summary_faults.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/launch/child_event.h"

namespace geops::supervisor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A shard's metrics file of this run, or nullopt with *why saying what is wrong.
std::optional<json> ReadShardMetrics(const std::string& out_dir, const std::string& process, double launch_start_unix,
                                     std::string* why) {
  const fs::path path = fs::path(out_dir) / "metrics" / (process + ".json");
  std::error_code ec;
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) {
    *why = "no " + path.string();
    return std::nullopt;
  }
  const double written_unix =
      std::chrono::duration<double>(std::chrono::file_clock::to_sys(mtime).time_since_epoch()).count();
  if (written_unix + 1.0 < launch_start_unix) {
    *why = path.string() + " is older than this launch";
    return std::nullopt;
  }
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    *why = path.string() + " is not a JSON object";
    return std::nullopt;
  }
  return doc;
}

// The site a wan.peers[i].peer names: a site name or a site index.
std::string PeerSiteName(const config::Topology& t, const json& peer) {
  if (peer.is_string()) return peer.get<std::string>();
  if (peer.is_number_integer()) {
    const int64_t id = peer.get<int64_t>();
    if (id >= 0 && id < static_cast<int64_t>(t.sites.size())) return t.sites[static_cast<size_t>(id)].name;
  }
  return "";
}

void AddNote(std::string* notes, const std::string& note) {
  if (!notes->empty()) *notes += "; ";
  *notes += note;
}

// The shard processes of every site but `site` (the survivors of a fault
// there), in site and shard order.
std::vector<std::string> SurvivingShards(const config::Topology& t, int site) {
  std::vector<std::string> out;
  for (int s = 0; s < static_cast<int>(t.sites.size()); ++s) {
    if (s == site) continue;
    for (int i = 0; i < t.sites[static_cast<size_t>(s)].shards; ++i) {
      out.push_back(t.sites[static_cast<size_t>(s)].name + "-shard-" + std::to_string(i));
    }
  }
  return out;
}

// The earliest detection, by a shard of another site, of `site` going
// silent within [from_unix, until_unix); nullopt with a note when none.
std::optional<double> FirstDetection(const config::Topology& t, int site, double from_unix, double until_unix,
                                     const std::string& out_dir, double launch_start_unix, std::string* notes) {
  if (!t.multi_site()) {
    AddNote(notes, "detect_seconds: a one-site topology has no other site to notice the failure");
    return std::nullopt;
  }
  const std::string& name = t.sites[static_cast<size_t>(site)].name;
  std::optional<double> first;
  int files = 0, with_events = 0;
  std::string missing;
  for (const std::string& process : SurvivingShards(t, site)) {
    std::string why;
    std::optional<json> m = ReadShardMetrics(out_dir, process, launch_start_unix, &why);
    if (!m) {
      missing += (missing.empty() ? "" : ", ") + why;
      continue;
    }
    ++files;
    const json* peers = nullptr;
    if (m->contains("wan") && (*m)["wan"].is_object() && (*m)["wan"].contains("peers") &&
        (*m)["wan"]["peers"].is_array()) {
      peers = &(*m)["wan"]["peers"];
    }
    if (peers == nullptr) continue;
    for (const json& p : *peers) {
      if (!p.is_object() || !p.contains("peer") || PeerSiteName(t, p["peer"]) != name) continue;
      if (!p.contains("down_events") || !p["down_events"].is_array()) continue;
      ++with_events;
      for (const json& e : p["down_events"]) {
        std::optional<double> detected = NumberField(e, "detected_unix");
        if (!detected || *detected < from_unix || *detected >= until_unix) continue;
        first = std::min(first.value_or(*detected), *detected);
      }
    }
  }
  if (!first) {
    std::string why = "detect_seconds: ";
    if (files == 0) {
      why += "no surviving shard's metrics file (" + missing + ")";
    } else if (with_events == 0) {
      why += "the surviving shards' metrics have no wan.peers[].down_events for " + name;
    } else {
      why += "no down_events entry for " + name + " detected after the kill";
    }
    AddNote(notes, why);
  }
  return first;
}

// Disk loss: the last time a surviving shard had reset its streams to the
// new incarnation of `site` (wan.stream_resets in its metrics), at or after
// `from_unix` (the restart); nullopt with a note when some shard did not.
std::optional<double> LastStreamReset(const config::Topology& t, int site, double from_unix, const std::string& out_dir,
                                      double launch_start_unix, std::string* notes) {
  const std::string& name = t.sites[static_cast<size_t>(site)].name;
  std::optional<double> last;
  for (const std::string& process : SurvivingShards(t, site)) {
    std::string why;
    std::optional<json> m = ReadShardMetrics(out_dir, process, launch_start_unix, &why);
    std::optional<double> reset;
    if (m && m->contains("wan") && (*m)["wan"].is_object() && (*m)["wan"].contains("stream_resets") &&
        (*m)["wan"]["stream_resets"].is_array()) {
      for (const json& e : (*m)["wan"]["stream_resets"]) {
        if (!e.is_object() || !e.contains("peer") || PeerSiteName(t, e["peer"]) != name) continue;
        std::optional<double> at = NumberField(e, "reset_unix");
        if (at && *at >= from_unix) reset = std::min(reset.value_or(*at), *at);
      }
    }
    if (!reset) {
      AddNote(notes, "reset_seconds: " + (m ? process + " reports no stream reset for " + name : why));
      return std::nullopt;
    }
    last = std::max(last.value_or(*reset), *reset);
  }
  return last;
}

json Recovery(const config::Topology& t, const FaultPlan& plan, const FaultRecord& r, const std::string& out_dir,
              double launch_start_unix, const json& counter_errors) {
  std::string notes;
  // The next kill of the same site bounds this fault's detection window, and
  // a later restart of the same shard overwrites its metrics file.
  double until = std::numeric_limits<double>::infinity();
  for (const FaultRecord& o : plan.records()) {
    if (o.index != r.index && o.spec.site_index == r.spec.site_index && o.fired() && o.killed_unix > r.killed_unix) {
      until = std::min(until, o.killed_unix);
    }
  }
  std::optional<double> detected =
      FirstDetection(t, r.spec.site_index, r.killed_unix, until, out_dir, launch_start_unix, &notes);

  double catch_up = -std::numeric_limits<double>::infinity();  // valid when catch_up_complete
  std::optional<double> rejoin;  // avg, diloco disk loss: the last restarted shard's rejoin
  int64_t bytes = 0;      // valid when bytes_complete
  bool catch_up_complete = true, bytes_complete = true;
  int restarted_shards = 0;
  for (const FaultVictim& v : r.victims) {
    if (!v.shard || v.restarted_pid == 0) continue;
    ++restarted_shards;
    std::string why;
    std::optional<json> m = ReadShardMetrics(out_dir, v.process, launch_start_unix, &why);
    const json* rec = nullptr;
    if (m && m->contains("recovery") && (*m)["recovery"].is_object()) rec = &(*m)["recovery"];
    if (m && rec == nullptr) why = v.process + " metrics have no \"recovery\" object";
    std::optional<double> started = rec ? NumberField(*rec, "process_start_unix") : std::nullopt;
    if (rec != nullptr && started && *started >= until) {
      rec = nullptr;
      why = v.process + " metrics describe a later restart";
    }
    if (rec == nullptr) {
      AddNote(&notes, "catch-up: " + why);
      catch_up_complete = bytes_complete = false;
      continue;
    }
    if (std::optional<double> rejoined = NumberField(*rec, "rejoined_unix"); rejoined && r.restarted_unix) {
      rejoin = std::max(rejoin.value_or(0.0), *rejoined - *r.restarted_unix);
    }
    std::optional<double> caught_up = NumberField(*rec, "caught_up_unix");
    if (caught_up && r.restarted_unix) {
      catch_up = std::max(catch_up, *caught_up - *r.restarted_unix);
    } else {
      AddNote(&notes, "catch_up_seconds: " + v.process + " reports no caught_up_unix");
      catch_up_complete = false;
    }
    std::optional<int64_t> b = IntField(*rec, "catch_up_bytes");
    if (!b) AddNote(&notes, "bytes_transferred: " + v.process + " reports no catch_up_bytes");
    if (b) {
      bytes += *b;
    } else {
      bytes_complete = false;
    }
  }
  if (restarted_shards == 0) {
    AddNote(&notes, "no shard was restarted");
    catch_up_complete = bytes_complete = false;
  }

  // A wiped site of a multi-site run is bootstrapped by its peers: when had
  // every one of them reset its streams to it (asp and the like: taken the
  // old contributions back and queued its snapshot; avg and diloco: taken
  // in its merged state after it rejoined)?
  json reset_seconds = nullptr;
  if (r.spec.kind == "wipe-disk" && t.multi_site() && r.restarted_unix) {
    std::optional<double> last =
        LastStreamReset(t, r.spec.site_index, *r.restarted_unix, out_dir, launch_start_unix, &notes);
    if (last) reset_seconds = *last - *r.restarted_unix;
  }

  json out = {{"fault", r.index},
              {"site", r.spec.site},
              {"kind", r.spec.kind},
              {"shard", r.spec.shard >= 0 ? json(r.spec.shard) : json(nullptr)},
              {"killed_unix", r.killed_unix},
              {"restarted_unix", r.restarted_unix ? json(*r.restarted_unix) : json(nullptr)},
              {"detect_seconds", detected ? json(*detected - r.killed_unix) : json(nullptr)},
              {"catch_up_seconds", catch_up_complete ? json(catch_up) : json(nullptr)},
              {"reset_seconds", reset_seconds},
              {"rejoin_seconds", rejoin ? json(*rejoin) : json(nullptr)},
              {"bytes_transferred", bytes_complete ? json(bytes) : json(nullptr)},
              {"counter_max_abs_error_by_site", counter_errors},
              {"note", notes.empty() ? json(nullptr) : json(notes)}};
  return out;
}

}  // namespace

void AddFaultSummary(const config::Topology& topology, const FaultPlan& plan, const std::string& out_dir,
                     double launch_start_unix, json* summary) {
  (*summary)["faults"] = plan.ToJson();
  json counter_errors = summary->contains("counter_max_abs_error_by_site")
                            ? (*summary)["counter_max_abs_error_by_site"]
                            : json::object();
  json recoveries = json::array();
  for (const FaultRecord& r : plan.records()) {
    bool restarted = false;
    for (const FaultVictim& v : r.victims) restarted = restarted || v.restarted_pid != 0;
    if (!r.fired() || !restarted) continue;
    recoveries.push_back(Recovery(topology, plan, r, out_dir, launch_start_unix, counter_errors));
  }
  (*summary)["recoveries"] = recoveries;
}

std::string FormatFaultSummary(const json& summary) {
  if (!summary.contains("faults") || !summary["faults"].is_array()) return "";
  std::string out;
  for (const json& f : summary["faults"]) {
    char buf[512];
    const std::string kind = StringField(f, "kind").value_or("?");
    std::string target = StringField(f, "site").value_or("?");
    if (auto shard = IntField(f, "shard")) target += " shard " + std::to_string(*shard);
    std::snprintf(buf, sizeof(buf), "fault %lld %s %s at clock %lld: ",
                  static_cast<long long>(IntField(f, "index").value_or(-1)), kind.c_str(), target.c_str(),
                  static_cast<long long>(IntField(f, "at_clock").value_or(-1)));
    out += buf;
    if (!f.value("fired", false)) {
      out += "did not fire\n";
      continue;
    }
    const size_t killed = f.contains("pids") && f["pids"].is_array() ? f["pids"].size() : 0;
    const bool graceful = kind == "stop-site";
    std::snprintf(buf, sizeof(buf), "fired at clock %lld, %s %zu process(es), %s",
                  static_cast<long long>(IntField(f, "clock_observed").value_or(-1)),
                  graceful ? "stopped" : "killed", killed, StringField(f, "state").value_or("?").c_str());
    out += buf;
    if (graceful && f.contains("exits") && f["exits"].is_object()) {
      // How long the planned stop took, and whether every process made it.
      double slowest = 0;
      int forced = 0;
      for (const auto& [process, e] : f["exits"].items()) {
        slowest = std::max(slowest, NumberField(e, "seconds").value_or(0.0));
        forced += e.value("killed_after_grace", false) ? 1 : 0;
      }
      std::snprintf(buf, sizeof(buf), "; the last exited %.2f s after SIGTERM", slowest);
      out += buf;
      if (forced > 0) out += "; " + std::to_string(forced) + " SIGKILLed after the stop grace";
    }
    auto killed_unix = NumberField(f, "killed_unix");
    auto restarted_unix = NumberField(f, "restarted_unix");
    if (killed_unix && restarted_unix) {
      std::snprintf(buf, sizeof(buf), " (restarted %.2f s after the kill)", *restarted_unix - *killed_unix);
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace geops::supervisor
