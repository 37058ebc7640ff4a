// Histogram: a lock-free distribution of durations in seconds, for waits
// and latencies that operators watch (SSP read waits, the WAN drift bound,
// store commits). Fixed bucket bounds shared by every histogram, so the
// exporter (metrics/metrics_endpoint) publishes them as Prometheus histograms
// without the core knowing Prometheus.
//
// Thread-safety: Observe and Snapshot may be called from any thread; a
// snapshot taken while others observe may be off by the samples in flight.
#ifndef GEOPS_COMMON_HISTOGRAM_H_
#define GEOPS_COMMON_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace geops {

struct HistogramSnapshot {
  std::vector<double> upper_bounds;  // seconds, increasing; +Inf is implied after the last
  std::vector<uint64_t> counts;      // per bucket, not cumulative; one more than upper_bounds (+Inf)
  uint64_t count = 0;
  double sum_seconds = 0;
};

class Histogram {
 public:
  // 100 us to 60 s, about x2.5 apart, then +Inf.
  static constexpr std::array<double, 15> kUpperBounds = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
                                                          0.05, 0.1,    0.25,   0.5,  1.0,    5.0,  60.0};

  // Negative and NaN samples count as 0.
  void Observe(double seconds);
  HistogramSnapshot Snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kUpperBounds.size() + 1> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace geops

#endif  // GEOPS_COMMON_HISTOGRAM_H_
