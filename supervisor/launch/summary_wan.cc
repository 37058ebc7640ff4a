#include "supervisor/launch/summary_wan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "supervisor/launch/child_event.h"

namespace geops::supervisor {
namespace {

using nlohmann::json;

double Num(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<double>();
}

struct LinkTotals {
  double wire = 0, payload = 0, batches = 0, offered = 0, achieved = 0;
  double relayed = 0;    // batches for dst that a third site carried
  double forwarded = 0;  // batches of third sites that src carried to dst
};

}  // namespace

void AddWanSummary(const config::Topology& t, const LaunchStats& stats, json* s) {
  // Per-site final reports of the evaluators.
  json acc_by_site = json::object(), err_by_site = json::object();
  std::optional<double> min_acc, max_err;
  for (const json& f : stats.FinalEvents()) {
    const std::string site = StringField(f, "site").value_or("?");
    if (auto a = NumberField(f, "test_accuracy")) {
      acc_by_site[site] = *a;
      min_acc = std::min(min_acc.value_or(*a), *a);
    }
    if (auto e = NumberField(f, "counter_max_abs_error")) {
      err_by_site[site] = *e;
      max_err = std::max(max_err.value_or(*e), *e);
    }
  }
  (*s)["test_accuracy_by_site"] = acc_by_site;
  (*s)["counter_max_abs_error_by_site"] = err_by_site;
  if (min_acc) (*s)["test_accuracy"] = *min_acc;
  if (max_err) (*s)["counter_max_abs_error"] = *max_err;
  if (!t.multi_site()) {
    (*s)["wan_mode"] = nullptr;
    (*s)["wan_bytes"] = 0;
    (*s)["wan_payload_bytes"] = 0;
    (*s)["wan_drain_payload_bytes"] = 0;
    (*s)["wan_bytes_by_link"] = json::object();
    (*s)["wan_links"] = json::object();
    (*s)["barrier_wait_seconds"] = 0.0;
    (*s)["final_wait_seconds"] = 0.0;
    (*s)["max_site_drift_clocks"] = 0;
    (*s)["max_drift_bound_clocks"] = 0;
    return;
  }
  std::map<std::string, LinkTotals> links;
  double barrier = 0, final_wait = 0, wire_total = 0, payload_total = 0, drain_total = 0;
  int64_t drift = 0, bound = -1;
  for (const json& e : stats.shard_stats()) {
    if (!e.contains("wan") || !e["wan"].is_object()) continue;
    const json& w = e["wan"];
    if (w.contains("links") && w["links"].is_array()) {
      for (const json& l : w["links"]) {
        LinkTotals& lt = links[StringField(l, "src").value_or("?") + "->" + StringField(l, "dst").value_or("?")];
        lt.wire += Num(l, "wire_bytes");
        lt.payload += Num(l, "bytes_delivered");
        lt.batches += Num(l, "batches");
        lt.offered += Num(l, "offered_bps");  // each shard's link has its share: the sum is the link
        lt.achieved += Num(l, "achieved_bps");
        lt.relayed += Num(l, "relayed");
        lt.forwarded += Num(l, "forwarded");
        wire_total += Num(l, "wire_bytes");
        payload_total += Num(l, "bytes_delivered");
      }
    }
    drain_total += Num(w, "drain_payload_bytes");
    if (w.contains("gate")) {
      barrier += Num(w["gate"], "drift_wait_seconds") + Num(w["gate"], "notice_wait_seconds") +
                 Num(w["gate"], "outer_wait_seconds");
      final_wait += Num(w["gate"], "final_wait_seconds");
      drift = std::max<int64_t>(drift, static_cast<int64_t>(Num(w["gate"], "max_drift_clocks")));
      if (w["gate"].contains("max_bound_clocks")) {
        bound = std::max<int64_t>(bound, static_cast<int64_t>(Num(w["gate"], "max_bound_clocks")));
      }
    }
  }
  json by_link = json::object(), detail = json::object();
  for (const auto& [name, lt] : links) {
    by_link[name] = static_cast<uint64_t>(lt.wire);
    detail[name] = {{"wire_bytes", static_cast<uint64_t>(lt.wire)},
                    {"payload_bytes", static_cast<uint64_t>(lt.payload)},
                    {"batches", static_cast<uint64_t>(lt.batches)},
                    {"offered_bps", lt.offered},
                    {"achieved_bps", lt.achieved},
                    {"relayed_batches", static_cast<uint64_t>(lt.relayed)},
                    {"forwarded_batches", static_cast<uint64_t>(lt.forwarded)},
                    {"utilization", lt.offered > 0 ? json(lt.achieved / lt.offered) : json(nullptr)}};
  }
  (*s)["wan_mode"] = t.wan.mode;
  (*s)["wan_bytes"] = static_cast<uint64_t>(wire_total);
  (*s)["wan_bytes_by_link"] = by_link;
  (*s)["wan_links"] = detail;
  // The final drain's share of what the links carried (payload: batches as encoded).
  (*s)["wan_payload_bytes"] = static_cast<uint64_t>(payload_total);
  (*s)["wan_drain_payload_bytes"] = static_cast<uint64_t>(drain_total);
  (*s)["barrier_wait_seconds"] = barrier;
  (*s)["final_wait_seconds"] = final_wait;
  (*s)["max_site_drift_clocks"] = drift;
  (*s)["max_drift_bound_clocks"] = bound;
}

std::string FormatWanSummary(const json& s) {
  if (!s.contains("wan_mode") || !s["wan_mode"].is_string()) return "";
  char buf[256];
  const auto bound = static_cast<long long>(Num(s, "max_drift_bound_clocks"));
  const std::string bound_text = bound < 0 ? "no bound" : "bound " + std::to_string(bound);
  std::snprintf(buf, sizeof(buf), "WAN %s: %.2f MB on %zu links, barrier wait %.1f s, max drift %lld clocks (%s)\n",
                s["wan_mode"].get<std::string>().c_str(), Num(s, "wan_bytes") / 1e6,
                s.contains("wan_bytes_by_link") ? s["wan_bytes_by_link"].size() : size_t{0},
                Num(s, "barrier_wait_seconds"), static_cast<long long>(Num(s, "max_site_drift_clocks")),
                bound_text.c_str());
  std::string out = buf;
  if (Num(s, "wan_payload_bytes") > 0) {
    std::snprintf(buf, sizeof(buf), "WAN final drain: %.2f MB of %.2f MB of batches (%.1f%%)\n",
                  Num(s, "wan_drain_payload_bytes") / 1e6, Num(s, "wan_payload_bytes") / 1e6,
                  100.0 * Num(s, "wan_drain_payload_bytes") / Num(s, "wan_payload_bytes"));
    out += buf;
  }
  if (s.contains("test_accuracy_by_site") && s["test_accuracy_by_site"].size() > 1) {
    out += "accuracy by site:";
    for (const auto& [site, a] : s["test_accuracy_by_site"].items()) {
      std::snprintf(buf, sizeof(buf), " %s %.4f", site.c_str(), a.is_number() ? a.get<double>() : 0.0);
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace geops::supervisor
