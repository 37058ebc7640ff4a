#include "wan/link/trace.h"

#include <set>

#include "wan/link/csv_reader.h"

namespace geops::wan {

void TraceSet::Set(const std::string& src, const std::string& dst, LinkSchedule schedule) {
  links_.insert_or_assign(std::make_pair(src, dst), std::move(schedule));
}

Result<const LinkSchedule*> TraceSet::Find(const std::string& src, const std::string& dst) const {
  auto it = links_.find(std::make_pair(src, dst));
  if (it != links_.end()) return &it->second;
  std::string known;
  int shown = 0;
  for (const auto& [k, v] : links_) {
    if (shown++ == 8) {
      known += ", ...";
      break;
    }
    known += (known.empty() ? "" : ", ") + k.first + "->" + k.second;
  }
  return NotFoundError("no link " + src + "->" + dst + " in the trace (" +
                       std::to_string(links_.size()) + " links: " + known + ")");
}

std::vector<std::string> TraceSet::Sites() const {
  std::set<std::string> s;
  for (const auto& [k, v] : links_) {
    s.insert(k.first);
    s.insert(k.second);
  }
  return {s.begin(), s.end()};
}

Result<TraceSet> LoadGeopsCsv(const std::string& path) {
  GEOPS_ASSIGN_OR_RETURN(
      CsvTable t, CsvTable::Read(path, {"time_s", "src", "dst", "bandwidth_mbps", "delay_ms"}));
  std::map<std::pair<std::string, std::string>, std::vector<LinkSegment>> per_link;
  for (const CsvRow& row : t.rows()) {
    GEOPS_ASSIGN_OR_RETURN(double time_s, t.Number(row, "time_s"));
    GEOPS_ASSIGN_OR_RETURN(double mbps, t.Number(row, "bandwidth_mbps"));
    GEOPS_ASSIGN_OR_RETURN(double delay_ms, t.Number(row, "delay_ms"));
    const std::string& src = t.Text(row, "src");
    const std::string& dst = t.Text(row, "dst");
    if (src.empty() || dst.empty()) return LineError(path, row.line, "empty src or dst");
    if (src == dst) return LineError(path, row.line, "src and dst are both '" + src + "'");
    if (time_s < 0) return LineError(path, row.line, "time_s is negative");
    if (mbps < 0) return LineError(path, row.line, "bandwidth_mbps is negative");
    if (delay_ms < 0) return LineError(path, row.line, "delay_ms is negative");
    std::vector<LinkSegment>& segs = per_link[{src, dst}];
    if (!segs.empty() && !(time_s > segs.back().start_s)) {
      return LineError(path, row.line,
                       "time_s " + std::to_string(time_s) + " is not after the previous row of " +
                           src + "->" + dst + " (" + std::to_string(segs.back().start_s) + ")");
    }
    segs.push_back(LinkSegment{time_s, mbps * 1e6, delay_ms * 1e-3});
  }
  if (per_link.empty()) return LineError(path, 1, "no links in the file");
  TraceSet set;
  for (auto& [k, segs] : per_link) {
    segs.front().start_s = 0;  // the first values also hold before their time
    GEOPS_ASSIGN_OR_RETURN(LinkSchedule s, LinkSchedule::Create(std::move(segs)));
    set.Set(k.first, k.second, std::move(s));
  }
  return set;
}

}  // namespace geops::wan
