// Static link matrices from measured grids: Skyplane, DT-FM, Pantheon.
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "wan/link/csv_reader.h"
#include "wan/link/trace.h"

namespace geops::wan {
namespace {

// "a, b, c, ... (N in all)" from a sorted set, for NotFound messages.
std::string SomeNames(const std::set<std::string>& names, size_t max_shown = 8) {
  std::string out;
  size_t i = 0;
  for (const std::string& n : names) {
    if (i++ == max_shown) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + n;
  }
  return out + " (" + std::to_string(names.size()) + " in all)";
}

Status CheckRegions(const std::string& path, const std::vector<std::string>& regions,
                    const std::set<std::string>& known) {
  if (regions.size() < 2) {
    return InvalidArgumentError(path + ": choose at least 2 regions, got " +
                                std::to_string(regions.size()));
  }
  std::set<std::string> seen;
  for (const std::string& r : regions) {
    if (!seen.insert(r).second)
      return InvalidArgumentError(path + ": region '" + r + "' chosen twice");
    if (!known.count(r)) {
      return NotFoundError(path + ": unknown region '" + r +
                           "'; known regions: " + SomeNames(known));
    }
  }
  return Status::Ok();
}

struct Mean {
  double sum = 0;
  double connections = 0;
  int n = 0;
};

using PairKey = std::tuple<std::string, std::string, std::string, std::string>;

}  // namespace

Result<TraceSet> LoadSkyplane(const std::string& dir, const std::vector<std::string>& regions,
                              const SkyplaneOptions& options) {
  const std::string tp_path = (std::filesystem::path(dir) / "throughput.csv").string();
  const std::string lat_path = (std::filesystem::path(dir) / "latency.csv").string();
  GEOPS_ASSIGN_OR_RETURN(
      CsvTable tp, CsvTable::Read(tp_path, {"src_region", "src_tier", "dst_region", "dst_tier",
                                            "iperf3_connections", "throughput_received"}));
  std::map<PairKey, Mean> throughput;
  std::set<std::string> known;
  for (const CsvRow& row : tp.rows()) {
    GEOPS_ASSIGN_OR_RETURN(double conns, tp.Number(row, "iperf3_connections"));
    GEOPS_ASSIGN_OR_RETURN(double bps, tp.Number(row, "throughput_received"));
    if (!(conns >= 1)) return LineError(tp_path, row.line, "iperf3_connections must be >= 1");
    if (bps < 0) return LineError(tp_path, row.line, "throughput_received is negative");
    const std::string& src = tp.Text(row, "src_region");
    const std::string& dst = tp.Text(row, "dst_region");
    if (src.empty() || dst.empty()) return LineError(tp_path, row.line, "empty region name");
    known.insert(src);
    known.insert(dst);
    Mean& m = throughput[{src, tp.Text(row, "src_tier"), dst, tp.Text(row, "dst_tier")}];
    m.sum += bps;
    m.connections += conns;
    ++m.n;
  }
  GEOPS_ASSIGN_OR_RETURN(
      CsvTable lat, CsvTable::Read(lat_path, {"src_region", "src_tier", "dst_region", "dst_tier",
                                              "min_rtt", "avg_rtt"}));
  std::map<PairKey, double> rtt_ms;
  const char* rtt_column = options.use_min_rtt ? "min_rtt" : "avg_rtt";
  for (const CsvRow& row : lat.rows()) {
    GEOPS_ASSIGN_OR_RETURN(double rtt, lat.Number(row, rtt_column));
    if (rtt < 0) return LineError(lat_path, row.line, std::string(rtt_column) + " is negative");
    rtt_ms[{lat.Text(row, "src_region"), lat.Text(row, "src_tier"), lat.Text(row, "dst_region"),
            lat.Text(row, "dst_tier")}] = rtt;
  }
  GEOPS_RETURN_IF_ERROR(CheckRegions(tp_path, regions, known));
  TraceSet set;
  const std::string& st = options.src_tier;
  const std::string& dt = options.dst_tier;
  for (const std::string& a : regions) {
    for (const std::string& b : regions) {
      if (a == b) continue;
      auto t = throughput.find({a, st, b, dt});
      if (t == throughput.end()) {
        return NotFoundError(tp_path + ": no throughput measured from " + a + " (" + st + ") to " +
                             b + " (" + dt + ")");
      }
      auto r = rtt_ms.find({a, st, b, dt});
      if (r == rtt_ms.end()) r = rtt_ms.find({b, dt, a, st});
      if (r == rtt_ms.end()) {
        return NotFoundError(lat_path + ": no RTT measured between " + a + " and " + b);
      }
      const Mean& m = t->second;
      double bps = m.sum / m.n;
      if (options.bandwidth == SkyplaneOptions::Bandwidth::kPerConnection) {
        bps /= m.connections / m.n;
      }
      set.Set(a, b, LinkSchedule::Constant(bps, r->second / 2 * 1e-3));
    }
  }
  return set;
}

Result<TraceSet> LoadDtfm(const std::string& path, const std::vector<std::string>& regions,
                          const DtfmOptions& options) {
  GEOPS_ASSIGN_OR_RETURN(
      CsvTable t, CsvTable::Read(path, {"region_a", "region_b", "delay_ms", "bandwidth_gbps"}));
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> pairs;
  std::set<std::string> known;
  for (const CsvRow& row : t.rows()) {
    GEOPS_ASSIGN_OR_RETURN(double delay_ms, t.Number(row, "delay_ms"));
    GEOPS_ASSIGN_OR_RETURN(double gbps, t.Number(row, "bandwidth_gbps"));
    const std::string& a = t.Text(row, "region_a");
    const std::string& b = t.Text(row, "region_b");
    if (a.empty() || b.empty() || a == b) {
      return LineError(path, row.line, "regions must be two distinct non-empty names");
    }
    if (delay_ms < 0 || gbps < 0) return LineError(path, row.line, "negative delay or bandwidth");
    if (pairs.count({b, a}) ||
        !pairs.emplace(std::make_pair(a, b), std::make_pair(delay_ms, gbps)).second) {
      return LineError(path, row.line, "pair " + a + "-" + b + " listed twice");
    }
    known.insert(a);
    known.insert(b);
  }
  GEOPS_RETURN_IF_ERROR(CheckRegions(path, regions, known));
  TraceSet set;
  for (const std::string& a : regions) {
    for (const std::string& b : regions) {
      if (a == b) continue;
      auto it = pairs.find({a, b});
      if (it == pairs.end()) it = pairs.find({b, a});
      if (it == pairs.end()) return NotFoundError(path + ": no entry for " + a + "-" + b);
      double one_way_ms = options.delay_is_rtt ? it->second.first / 2 : it->second.first;
      set.Set(a, b, LinkSchedule::Constant(it->second.second * 1e9, one_way_ms * 1e-3));
    }
  }
  return set;
}

Result<PantheonLink> LoadPantheonScenario(const std::string& path, int scenario,
                                          bool use_trace_file) {
  GEOPS_ASSIGN_OR_RETURN(
      CsvTable t, CsvTable::Read(path, {"scenario", "real_path", "link_rate_mbps",
                                        "link_trace_file", "one_way_delay_ms", "uplink_loss_rate",
                                        "uplink_droptail_queue_packets"}));
  std::set<std::string> known;
  const CsvRow* found = nullptr;
  PantheonLink link;
  for (const CsvRow& row : t.rows()) {
    int64_t id = 0;
    int64_t queue = 0;
    if (!ParseInt64(t.Text(row, "scenario"), &id)) {
      return LineError(path, row.line,
                       "scenario '" + t.Text(row, "scenario") + "' is not a number");
    }
    if (!ParseInt64(t.Text(row, "uplink_droptail_queue_packets"), &queue)) {
      return LineError(path, row.line,
                       "uplink_droptail_queue_packets is not a non-negative integer");
    }
    GEOPS_ASSIGN_OR_RETURN(double mbps, t.Number(row, "link_rate_mbps"));
    GEOPS_ASSIGN_OR_RETURN(double delay_ms, t.Number(row, "one_way_delay_ms"));
    GEOPS_ASSIGN_OR_RETURN(double loss, t.Number(row, "uplink_loss_rate"));
    if (mbps < 0 || delay_ms < 0 || loss < 0 || loss > 1) {
      return LineError(path, row.line, "rate, delay or loss out of range");
    }
    known.insert(std::to_string(id));
    if (id == scenario && found == nullptr) {
      found = &row;
      link.scenario = scenario;
      link.real_path = t.Text(row, "real_path");
      link.schedule = LinkSchedule::Constant(mbps * 1e6, delay_ms * 1e-3);
      link.uplink_loss_rate = loss;
      link.queue_packets = queue;
    }
  }
  if (found == nullptr) {
    return NotFoundError(path + ": no scenario " + std::to_string(scenario) +
                         "; scenarios: " + SomeNames(known));
  }
  if (use_trace_file) {
    const std::string trace =
        (std::filesystem::path(path).parent_path() / t.Text(*found, "link_trace_file")).string();
    MahimahiOptions mm;
    mm.delay_s = link.schedule.DelayAt(0);
    Result<LinkSchedule> s = LoadMahimahi(trace, mm);
    if (!s.ok()) {
      return s.status().WithContext(path + ":" + std::to_string(found->line) +
                                    ": trace file of scenario " + std::to_string(scenario));
    }
    link.schedule = std::move(s).value();
  }
  return link;
}

}  // namespace geops::wan
