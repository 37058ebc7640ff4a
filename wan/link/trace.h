// WAN traces: where link schedules come from. A TraceSet maps each directed
// link (source site, destination site) to a LinkSchedule. Loaders:
//
//  * geops CSV, `time_s,src,dst,bandwidth_mbps,delay_ms` (one-way delay),
//    piecewise constant per directed link (LoadGeopsCsv).
//  * Static matrices built from measured grids by choosing regions:
//    Skyplane inter-cloud iperf3/ping grids (LoadSkyplane), the DT-FM AWS
//    10-region table (LoadDtfm), and the Pantheon calibrated emulators
//    (LoadPantheonScenario).
//  * Mahimahi packet-delivery traces, turned into a looping bandwidth
//    schedule scaled to a chosen mean (LoadMahimahi).
//
// Every loader reports a malformed file as InvalidArgument "path:LINE: ..."
// and a missing file or an unknown region as NotFound (listing some valid
// names). Units inside geops: bits per second and seconds.
//
// Thread-safety: loaders are pure functions; TraceSet is a thread-compatible
// value (const access from many threads is safe).
#ifndef GEOPS_WAN_LINK_TRACE_H_
#define GEOPS_WAN_LINK_TRACE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "wan/link/link_schedule.h"

namespace geops::wan {

class TraceSet {
 public:
  // Adds or replaces the directed link src -> dst.
  void Set(const std::string& src, const std::string& dst, LinkSchedule schedule);
  // NotFound naming the link and listing the links present.
  Result<const LinkSchedule*> Find(const std::string& src, const std::string& dst) const;

  const std::map<std::pair<std::string, std::string>, LinkSchedule>& links() const {
    return links_;
  }
  // Every site that is the source or destination of a link, sorted.
  std::vector<std::string> Sites() const;
  size_t size() const { return links_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, LinkSchedule> links_;
};

// geops CSV: header `time_s,src,dst,bandwidth_mbps,delay_ms` (columns may
// come in any order; extra columns are ignored), one row per change of one
// directed link. Per link, times must be strictly increasing; the first
// row's values also hold before its time. The last row lasts forever.
Result<TraceSet> LoadGeopsCsv(const std::string& path);

// Skyplane grids in `dir` (throughput.csv and latency.csv of the Skyplane
// profiles). Bandwidth is iperf3's throughput_received, bits/s, measured as
// the SUM over iperf3_connections (64) parallel TCP connections between large
// VMs: an upper bound of what one flow gets. kAggregate uses it as is;
// kPerConnection divides it by iperf3_connections (a pessimistic single-flow
// estimate). Repeated measurements of a pair are averaged. One-way delay is
// half of the pair's ping RTT (avg_rtt, or min_rtt), from latency.csv, in the
// reverse direction when the forward one was not measured.
struct SkyplaneOptions {
  enum class Bandwidth { kAggregate, kPerConnection };
  Bandwidth bandwidth = Bandwidth::kAggregate;
  bool use_min_rtt = false;          // false: avg_rtt
  std::string src_tier = "PREMIUM";  // network tier; STANDARD exists for GCP only
  std::string dst_tier = "PREMIUM";
};
// `regions` like "aws:us-east-1"; every ordered pair of distinct regions
// becomes a link named by the region names.
Result<TraceSet> LoadSkyplane(const std::string& dir, const std::vector<std::string>& regions,
                              const SkyplaneOptions& options = {});

// DT-FM `region_a,region_b,delay_ms,bandwidth_gbps` (symmetric, one row per
// unordered pair; city names such as "Virginia"). The source does not say
// whether delay_ms is one-way or round trip; its values match AWS round-trip
// times, so by default the one-way delay is delay_ms / 2.
struct DtfmOptions {
  bool delay_is_rtt = true;  // false: use delay_ms as the one-way delay
};
Result<TraceSet> LoadDtfm(const std::string& path, const std::vector<std::string>& regions,
                          const DtfmOptions& options = {});

// One Pantheon calibrated emulator (calibrated_emulators.csv): a bottleneck
// of link_rate_mbps with one_way_delay_ms. With use_trace_file, the
// scenario's Mahimahi trace (next to the CSV) supplies the bandwidth over
// time at its own rate (NotFound when that trace was not copied). Loss and
// queue size are reported, not modelled.
struct PantheonLink {
  int scenario = 0;
  std::string real_path;  // e.g. "Nepal to AWS India"
  LinkSchedule schedule;
  double uplink_loss_rate = 0;
  int64_t queue_packets = 0;
};
Result<PantheonLink> LoadPantheonScenario(const std::string& path, int scenario,
                                          bool use_trace_file = false);

// Mahimahi trace: one integer per line, a millisecond at which one 1500-byte
// packet may be delivered (repeats = several packets). Packets are counted in
// bins of bin_s; each bin becomes a segment, equal neighbours merged. The
// schedule loops with the trace's last timestamp as period (as Mahimahi
// replays it) and is scaled so its mean over one period equals
// mean_bandwidth_bps (0 keeps the trace's own rate).
struct MahimahiOptions {
  double mean_bandwidth_bps = 0;  // >= 0; 0 = unscaled
  double delay_s = 0;             // one-way delay added to every segment, >= 0
  double bin_s = 0.1;             // segment width, > 0
  // Start the replay this far into the trace (it wraps round at its end),
  // so links that share one trace need not fade out together, >= 0.
  double offset_s = 0;
};
Result<LinkSchedule> LoadMahimahi(const std::string& path, const MahimahiOptions& options = {});

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_TRACE_H_
