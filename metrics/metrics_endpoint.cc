#include "metrics/metrics_endpoint.h"

#include <exception>
#include <limits>

#include <microhttpd.h>
#include <netdb.h>
#include <prometheus/text_serializer.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace geops::metrics {

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

namespace {

MHD_Result Respond(MHD_Connection* conn, unsigned status, const std::string& body, const char* type) {
  MHD_Response* r =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  const MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

// libmicrohttpd's request handler (MHD_AccessHandlerCallback).
MHD_Result Handle(void* cls, MHD_Connection* conn, const char* url, const char* method, const char* /*version*/,
                  const char* /*upload_data*/, size_t* upload_data_size, void** /*state*/) {
  const auto* e = static_cast<const MetricsEndpoint*>(cls);
  if (std::string_view(method) != "GET" && std::string_view(method) != "HEAD") {
    return Respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", "text/plain");
  }
  if (upload_data_size != nullptr && *upload_data_size != 0) *upload_data_size = 0;
  if (std::string_view(url) != "/metrics") return Respond(conn, MHD_HTTP_NOT_FOUND, "see /metrics\n", "text/plain");
  std::string body;
  try {
    body = e->Render();
  } catch (const std::exception& ex) {
    return Respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, std::string("collecting metrics failed: ") + ex.what() + "\n",
                   "text/plain");
  }
  return Respond(conn, MHD_HTTP_OK, body, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

std::string MetricsEndpoint::Render() const { return prometheus::TextSerializer().Serialize(collect_()); }

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port, CollectFn collect) {
  if (port < 0 || port > 65535) return InvalidArgumentError("metrics port " + std::to_string(port) + " out of range");
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0 || found == nullptr) {
    return UnavailableError("cannot serve metrics on " + where + ": " + gai_strerror(rc));
  }
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->host_ = host;
  e->collect_ = std::move(collect);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
  if (found->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  // One thread, a few connections at a time, and a short timeout: enough
  // for Prometheus, and a slow or idle client cannot hold the endpoint.
  e->daemon_ = MHD_start_daemon(flags, static_cast<uint16_t>(port), nullptr, nullptr, &Handle,
                                e.get(), MHD_OPTION_SOCK_ADDR, found->ai_addr, MHD_OPTION_CONNECTION_TIMEOUT,
                                10u, MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_END);
  freeaddrinfo(found);
  if (e->daemon_ == nullptr) {
    return UnavailableError("cannot serve metrics on " + where + ": " + std::strerror(errno));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(e->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  e->port_ = info != nullptr ? info->port : port;
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace geops::metrics
