// MetricsEndpoint: the Prometheus /metrics endpoint of one geops process
// (a `geops site` shard or a `geops worker`): prometheus-cpp's metric
// families in its text format, served over plain HTTP by libmicrohttpd on
// the address the topology gives ([[sites]] metrics_base_port;
// config/topology.h). (Not prometheus-cpp's own Exposer: its CivetWeb starts
// threads with 100 KiB stacks, which glibc refuses in a process that also
// loads cuBLAS, whose static TLS alone takes 94 KiB.)
//
// geops keeps its counters in its own stats structs (ShardStatus,
// ReplicatorStats, PsClientStats). At each scrape the endpoint calls the
// process's collect function, which turns a fresh snapshot of them into
// metric families (MetricsBuilder), so metrics cost nothing between
// scrapes and the hot paths carry no Prometheus types.
//
// Thread-safety: `collect` runs on the endpoint's thread, one scrape at a
// time; it must be safe to call from that thread until the endpoint is
// destroyed.
#ifndef GEOPS_METRICS_METRICS_ENDPOINT_H_
#define GEOPS_METRICS_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "common/histogram.h"
#include "common/status.h"

struct MHD_Daemon;

namespace geops::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Collects metric families by name; a family is created on first use.
class MetricsBuilder {
 public:
  // `common`: labels every sample gets (site, shard or worker).
  explicit MetricsBuilder(Labels common) : common_(std::move(common)) {}

  void Counter(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void Gauge(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void Histogram(const std::string& name, const std::string& help, const HistogramSnapshot& h,
                 const Labels& labels = {});

  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  prometheus::ClientMetric& Add(const std::string& name, const std::string& help, prometheus::MetricType type,
                                const Labels& labels);

  Labels common_;
  std::vector<prometheus::MetricFamily> families_;
};

class MetricsEndpoint {
 public:
  using CollectFn = std::function<std::vector<prometheus::MetricFamily>()>;

  // Listens on host:port (port 0: any free one) and serves /metrics.
  // Unavailable naming the address when it cannot listen.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port, CollectFn collect);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }
  // The metrics now, in Prometheus' text format (what GET /metrics answers).
  std::string Render() const;
  // "host:port", for service discovery.
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  MetricsEndpoint() = default;

  std::string host_;
  int port_ = 0;
  CollectFn collect_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace geops::metrics

#endif  // GEOPS_METRICS_METRICS_ENDPOINT_H_
