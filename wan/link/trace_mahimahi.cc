// Mahimahi packet-delivery traces -> looping piecewise-constant schedules.
#include <algorithm>
#include <cmath>
#include <string_view>

#include "wan/link/csv_reader.h"
#include "wan/link/trace.h"

namespace geops::wan {
namespace {

constexpr double kPacketBits = 1500 * 8;

}  // namespace

Result<LinkSchedule> LoadMahimahi(const std::string& path, const MahimahiOptions& options) {
  if (!(options.mean_bandwidth_bps >= 0) || !std::isfinite(options.mean_bandwidth_bps)) {
    return InvalidArgumentError(path + ": mean_bandwidth_bps must be >= 0");
  }
  if (!(options.delay_s >= 0) || !std::isfinite(options.delay_s)) {
    return InvalidArgumentError(path + ": delay_s must be >= 0");
  }
  if (!(options.bin_s > 0) || !std::isfinite(options.bin_s)) {
    return InvalidArgumentError(path + ": bin_s must be > 0");
  }
  if (!(options.offset_s >= 0) || !std::isfinite(options.offset_s)) {
    return InvalidArgumentError(path + ": offset_s must be >= 0");
  }
  GEOPS_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  std::vector<int64_t> ms;
  ms.reserve(text.size() / 6);
  std::string_view rest(text);
  int line = 0;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view l = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line;
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t'))
      l.remove_suffix(1);
    while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
    if (l.empty()) continue;
    int64_t v = 0;
    if (!ParseInt64(l, &v) || v > (int64_t{1} << 40)) {
      return LineError(path, line,
                       "'" + std::string(l.substr(0, 40)) +
                           "' is not a millisecond timestamp (non-negative integer)");
    }
    if (!ms.empty() && v < ms.back()) {
      return LineError(path, line,
                       "timestamp " + std::to_string(v) + " is before the previous " +
                           std::to_string(ms.back()));
    }
    ms.push_back(v);
  }
  if (ms.empty()) return LineError(path, std::max(line, 1), "no packet timestamps");
  const int64_t period_ms = ms.back();
  if (period_ms <= 0) {
    return LineError(path, line, "the trace spans 0 ms; it needs a last timestamp > 0");
  }
  const double period_s = period_ms * 1e-3;
  const int64_t offset_ms = static_cast<int64_t>(std::llround(options.offset_s * 1e3)) % period_ms;
  if (offset_ms != 0) {
    // Rotate: the packet at offset_ms is delivered at 0, and what came
    // before the offset follows the trace's end.
    for (int64_t& t : ms) t = (t - offset_ms + period_ms) % period_ms;
    std::sort(ms.begin(), ms.end());
  }
  const double bin_ms = options.bin_s * 1e3;
  const size_t bins = static_cast<size_t>(std::ceil(period_ms / bin_ms));
  std::vector<double> counts(bins, 0.0);
  for (int64_t t : ms) {
    size_t b = std::min(bins - 1, static_cast<size_t>(static_cast<double>(t) / bin_ms));
    counts[b] += 1;
  }
  const double native_mean = static_cast<double>(ms.size()) * kPacketBits / period_s;
  const double scale =
      options.mean_bandwidth_bps > 0 ? options.mean_bandwidth_bps / native_mean : 1.0;
  std::vector<LinkSegment> segs;
  for (size_t b = 0; b < bins; ++b) {
    double start = b * options.bin_s;
    double end = std::min(period_s, (b + 1) * options.bin_s);
    if (!(end > start)) break;
    double bps = counts[b] * kPacketBits / (end - start) * scale;
    if (!segs.empty() && segs.back().bandwidth_bps == bps) continue;
    segs.push_back(LinkSegment{start, bps, options.delay_s});
  }
  Result<LinkSchedule> s = LinkSchedule::Create(std::move(segs), period_s);
  if (!s.ok()) return s.status().WithContext(path);
  return s;
}

}  // namespace geops::wan
