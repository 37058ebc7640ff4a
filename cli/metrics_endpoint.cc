#include "cli/metrics_endpoint.h"

#include <exception>
#include <limits>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

namespace geops::cli {

prometheus::ClientMetric& MetricsBuilder::Add(const std::string& name, const std::string& help,
                                              prometheus::MetricType type, const Labels& labels) {
  prometheus::MetricFamily* family = nullptr;
  for (prometheus::MetricFamily& f : families_) {
    if (f.name == name) family = &f;
  }
  if (family == nullptr) {
    families_.push_back(prometheus::MetricFamily{name, help, type, {}});
    family = &families_.back();
  }
  prometheus::ClientMetric& m = family->metric.emplace_back();
  for (const auto& [k, v] : common_) m.label.push_back({k, v});
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  return m;
}

void MetricsBuilder::Counter(const std::string& name, const std::string& help, double value, const Labels& labels) {
  Add(name, help, prometheus::MetricType::Counter, labels).counter.value = value;
}

void MetricsBuilder::Gauge(const std::string& name, const std::string& help, double value, const Labels& labels) {
  Add(name, help, prometheus::MetricType::Gauge, labels).gauge.value = value;
}

void MetricsBuilder::Histogram(const std::string& name, const std::string& help, const HistogramSnapshot& h,
                               const Labels& labels) {
  prometheus::ClientMetric& m = Add(name, help, prometheus::MetricType::Histogram, labels);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum_seconds;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.upper_bounds.size() && i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    m.histogram.bucket.push_back({cumulative, h.upper_bounds[i]});
  }
  m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
}

class MetricsEndpoint::Source : public prometheus::Collectable {
 public:
  explicit Source(MetricsEndpoint::CollectFn collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  MetricsEndpoint::CollectFn collect_;
};

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port, CollectFn collect) {
  if (port < 0 || port > 65535) return InvalidArgumentError("metrics port " + std::to_string(port) + " out of range");
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->host_ = host;
  e->source_ = std::make_shared<Source>(std::move(collect));
  const std::string bind = host + ":" + std::to_string(port);
  try {
    // One listening thread is plenty: Prometheus scrapes every few seconds.
    e->exposer_ = std::make_unique<prometheus::Exposer>(bind, 2);
  } catch (const std::exception& ex) {
    return UnavailableError("cannot serve metrics on " + bind + ": " + ex.what());
  }
  e->exposer_->RegisterCollectable(e->source_);
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty()) return UnavailableError("cannot serve metrics on " + bind + ": not listening");
  e->port_ = ports.front();
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (exposer_) exposer_->RemoveCollectable(source_);
  exposer_.reset();
}

}  // namespace geops::cli
