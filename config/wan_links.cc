#include "config/wan_links.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "wan/link/trace.h"

namespace geops::config {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Pad(const std::string& s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

Result<std::vector<EffectiveLink>> StaticLinks(const Topology& t) {
  std::map<std::pair<std::string, std::string>, const LinkSpec*> by_pair;
  for (const LinkSpec& l : t.links) by_pair[{l.src, l.dst}] = &l;
  std::vector<EffectiveLink> out;
  for (int a = 0; a < static_cast<int>(t.sites.size()); ++a) {
    for (int b = 0; b < static_cast<int>(t.sites.size()); ++b) {
      if (a == b) continue;
      const std::string& sa = t.sites[a].name;
      const std::string& sb = t.sites[b].name;
      auto it = by_pair.find({sa, sb});
      if (it == by_pair.end()) it = by_pair.find({sb, sa});
      if (it == by_pair.end()) {
        return NotFoundError(t.path + ": no [[links]] entry between sites " + sa + " and " + sb);
      }
      out.push_back({a, b, wan::LinkSchedule::Constant(it->second->bandwidth_mbps * 1e6, it->second->delay_ms * 1e-3)});
    }
  }
  return out;
}

Result<std::vector<EffectiveLink>> FromTraceSet(const Topology& t, const wan::TraceSet& set,
                                                const std::vector<std::string>& names) {
  std::vector<EffectiveLink> out;
  for (int a = 0; a < static_cast<int>(t.sites.size()); ++a) {
    for (int b = 0; b < static_cast<int>(t.sites.size()); ++b) {
      if (a == b) continue;
      GEOPS_ASSIGN_OR_RETURN(const wan::LinkSchedule* s, set.Find(names[a], names[b]));
      out.push_back({a, b, *s});
    }
  }
  return out;
}

}  // namespace

Result<std::vector<EffectiveLink>> BuildLinks(const Topology& t) {
  std::vector<EffectiveLink> links;
  const WanSpec& w = t.wan;
  if (w.links == "static") {
    GEOPS_ASSIGN_OR_RETURN(links, StaticLinks(t));
  } else if (w.links == "skyplane") {
    std::vector<std::string> regions;
    for (const SiteSpec& s : t.sites) {
      if (s.region.empty()) {
        return InvalidArgumentError(t.path + ": site " + s.name + " needs a region (e.g. \"aws:us-east-1\") with " +
                                    "wan.links = \"skyplane\"");
      }
      regions.push_back(s.region);
    }
    wan::SkyplaneOptions so;
    so.bandwidth = w.skyplane_bandwidth == "aggregate" ? wan::SkyplaneOptions::Bandwidth::kAggregate
                                                       : wan::SkyplaneOptions::Bandwidth::kPerConnection;
    GEOPS_ASSIGN_OR_RETURN(wan::TraceSet set, wan::LoadSkyplane(t.Resolve(w.trace_dir), regions, so));
    GEOPS_ASSIGN_OR_RETURN(links, FromTraceSet(t, set, regions));
  } else {
    GEOPS_ASSIGN_OR_RETURN(wan::TraceSet set, wan::LoadGeopsCsv(t.Resolve(w.trace_file)));
    std::vector<std::string> names;
    for (const SiteSpec& s : t.sites) names.push_back(s.name);
    GEOPS_ASSIGN_OR_RETURN(links, FromTraceSet(t, set, names));
  }
  if (w.bandwidth_scale != 1.0) {
    for (EffectiveLink& l : links) {
      std::vector<wan::LinkSegment> segs = l.schedule.segments();
      for (wan::LinkSegment& s : segs) s.bandwidth_bps *= w.bandwidth_scale;
      GEOPS_ASSIGN_OR_RETURN(l.schedule, wan::LinkSchedule::Create(std::move(segs), l.schedule.loop_period_s()));
    }
  }
  if (!w.variation.empty()) {
    for (size_t i = 0; i < links.size(); ++i) {
      EffectiveLink& l = links[i];
      wan::MahimahiOptions mo;
      mo.mean_bandwidth_bps = l.schedule.BandwidthAt(0);
      mo.delay_s = l.schedule.DelayAt(0);
      mo.bin_s = w.variation_bin_s;
      mo.offset_s = static_cast<double>(i) * w.variation_stagger_s;
      Result<wan::LinkSchedule> varied = wan::LoadMahimahi(t.Resolve(w.variation), mo);
      if (!varied.ok()) return varied.status().WithContext(t.path + ": wan.variation");
      l.schedule = std::move(varied).value();
    }
  }
  return links;
}

Result<wan::LinkSchedule> ShardShareOf(const wan::LinkSchedule& site_link, int shards) {
  if (shards < 1) return InvalidArgumentError("a site needs at least one shard, got " + std::to_string(shards));
  std::vector<wan::LinkSegment> seg = site_link.segments();
  for (wan::LinkSegment& x : seg) x.bandwidth_bps /= shards;
  return wan::LinkSchedule::Create(std::move(seg), site_link.loop_period_s());
}

Result<wan::WanOptions> BuildWanOptions(const Topology& t) {
  const WanSpec& w = t.wan;
  wan::WanOptions o;
  GEOPS_ASSIGN_OR_RETURN(o.mode, wan::ParseWanMode(w.mode));
  GEOPS_ASSIGN_OR_RETURN(o.codec, wan::ParseValueCodec(w.codec));
  o.staleness_ds = w.staleness_ds;
  o.max_drift_allowance = w.max_drift_allowance;
  o.max_hold_clocks = w.max_hold_clocks;
  o.threshold.initial = w.threshold;
  o.threshold.floor = w.threshold_floor;
  if (w.threshold_follows_lr && t.final_learning_rate >= 0) {
    o.threshold.lr_clocks = t.clocks;
    o.threshold.final_lr_ratio = t.final_learning_rate / t.learning_rate;
  }
  o.threshold.settle_clocks = w.threshold_settle_clocks;
  o.threshold.last_clock = t.clocks;
  o.value_floor = static_cast<float>(w.value_floor);
  o.compress = w.compress;
  o.averaging_period = w.averaging_period;
  o.outer_fragments = w.outer_fragments;
  o.outer_lr = w.outer_lr;
  o.outer_momentum = w.outer_momentum;
  o.outer_nesterov = w.outer_nesterov;
  o.outer_overlap = w.outer_overlap;
  o.outer_average_last = w.outer_average_last;
  o.max_inflight_batches = w.max_inflight_batches;
  o.max_queue_seconds = w.max_queue_ms * 1e-3;
  o.backlog_revisit = w.backlog_revisit;
  o.notice_min_seconds = w.notice_min_ms * 1e-3;
  o.selective_barrier = w.selective_barrier;
  o.tie_reports = w.tie_reports;
  o.report_every_clocks = w.report_every_clocks;
  o.target_utilization = w.target_utilization;
  o.tie_backlog = w.tie_backlog;
  o.tie_backlog_clocks = w.tie_backlog_clocks;
  o.tie_backlog_last_clocks = w.tie_backlog_last_clocks;
  o.fresh_first = w.fresh_first;
  o.notice_timeout_ms = w.notice_timeout_ms;
  o.peer_lease_ms = w.peer_lease_ms;
  GEOPS_RETURN_IF_ERROR(o.Validate());
  return o;
}

std::string FormatLinkTable(const Topology& t, const std::vector<EffectiveLink>& links, int64_t model_bytes) {
  size_t w = 4;
  for (const SiteSpec& s : t.sites) w = std::max(w, s.name.size());
  std::string out = "links of " + t.name + " (wan.links = " + t.wan.links +
                    (t.wan.variation.empty() ? "" : ", varying like " + t.wan.variation) + ", time_scale " +
                    Fixed(t.wan.time_scale, 3) + "):\n";
  out += Pad("src", w, false) + "  " + Pad("dst", w, false) + "  " + Pad("Mbit/s", 9, true) + "  " +
         Pad("min", 8, true) + "  " + Pad("max", 8, true) + "  " + Pad("delay ms", 8, true) + "  " +
         Pad("per shard", 9, true) + "  " + Pad("model s", 8, true) + "\n";
  for (const EffectiveLink& l : links) {
    const std::vector<wan::LinkSegment>& seg = l.schedule.segments();
    double lo = seg[0].bandwidth_bps, hi = lo;
    for (const wan::LinkSegment& s : seg) {
      lo = std::min(lo, s.bandwidth_bps);
      hi = std::max(hi, s.bandwidth_bps);
    }
    const double horizon = l.schedule.horizon_s();
    const double mean = horizon > 0 ? l.schedule.MeanBandwidth(0, horizon) : seg[0].bandwidth_bps;
    const int shards = t.sites[l.src].shards;
    const double model_s = mean > 0 ? static_cast<double>(model_bytes) * 8.0 / mean : 0;
    const std::string model_cell = model_bytes > 0 ? Fixed(model_s, 3) : "-";
    out += Pad(t.sites[l.src].name, w, false) + "  " + Pad(t.sites[l.dst].name, w, false) + "  " +
           Pad(Fixed(mean / 1e6, 1), 9, true) + "  " + Pad(Fixed(lo / 1e6, 1), 8, true) + "  " +
           Pad(Fixed(hi / 1e6, 1), 8, true) + "  " + Pad(Fixed(l.schedule.DelayAt(0) * 1e3, 1), 8, true) + "  " +
           Pad(Fixed(mean / 1e6 / shards, 1), 9, true) + "  " + Pad(model_cell, 8, true) + "\n";
  }
  out += "(Mbit/s: mean over the trace; per shard: each shard's link gets 1/shards of it; model s: one fp32 copy "
         "of the model, " +
         (model_bytes > 0 ? Fixed(static_cast<double>(model_bytes) / 1e6, 2) + " MB, at the mean rate)\n"
                          : std::string("unknown here: the workers bring their own model (workload \"client\"))\n"));
  return out;
}

}  // namespace geops::config
