// OptionsFromTopology and OptionsFromEnvironment (include/geops/options.h):
// the worker's settings from the same topology file and parser (config/topology.h)
// that `geops site` uses, so that both sides agree on every default.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

#include "client/throw_status.h"
#include "config/client_options.h"
#include "config/tls_options.h"
#include "config/topology.h"
#include "geops/options.h"

namespace geops::client {
namespace {

// The site's index: `name`, or the only site when `name` is empty.
int PickSite(const config::Topology& t, const std::string& name) {
  if (!name.empty()) return ValueOrThrow(t.FindSite(name));
  if (t.sites.size() != 1) {
    ThrowIfError(InvalidArgumentError(t.path + " has " + std::to_string(t.sites.size()) +
                                      " sites: name the one this worker belongs to"));
  }
  return 0;
}

// Integer environment variable `name`, or `fallback` when unset or empty.
int64_t IntFromEnv(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  const std::string s(text);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) {
    ThrowIfError(InvalidArgumentError(std::string(name) + "='" + s + "' is not an integer"));
  }
  return value;
}

std::string StringFromEnv(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr ? std::string() : std::string(text);
}

// "a:1,b:2" -> {"a:1", "b:2"}; empty entries are an error.
std::vector<std::string> SplitShards(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) ThrowIfError(InvalidArgumentError("GEOPS_SHARDS='" + list + "' has an empty address"));
    out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

}  // namespace

Options OptionsFromTopology(const std::string& topology_path, const std::string& site, int worker) {
  const config::Topology t = ValueOrThrow(config::LoadTopology(topology_path));
  const config::SiteSpec& s = t.sites[PickSite(t, site)];
  if (worker < 0 || worker >= s.workers) {
    ThrowIfError(InvalidArgumentError("worker " + std::to_string(worker) + " is not a worker of site '" + s.name +
                                      "', which has " + std::to_string(s.workers)));
  }
  Options o;
  o.worker = worker;
  if (s.base_port != 0) {
    for (int i = 0; i < s.shards; ++i) o.shards.push_back(s.host + ":" + std::to_string(s.base_port + i));
  }
  // The settings `geops worker` and the Python package derive, derived once.
  const WorkerClientOptions w = config::BuildClientOptions(t, worker);
  o.staleness = w.staleness;
  o.rpc_timeout_ms = w.rpc_timeout_ms;
  o.retry_window_ms = w.retry_window_ms;
  o.heartbeat_ms = w.heartbeat_ms;
  o.auth_token = w.auth_token;
  o.chunk_bytes = t.chunk_kib * 1024;
  o.clocks = t.clocks;
  const rpc::TlsOptions tls = config::WorkerTls(t, PickSite(t, site), worker);
  o.tls_ca_file = tls.ca_file;
  o.tls_cert_file = tls.cert_file;
  o.tls_key_file = tls.key_file;
  o.tls_expect_peer = tls.expect_peer;
  return o;
}

Options OptionsFromEnvironment() {
  const int worker = static_cast<int>(IntFromEnv("GEOPS_WORKER", 0));
  const std::string topology = StringFromEnv("GEOPS_TOPOLOGY");
  Options o;
  if (!topology.empty()) {
    o = OptionsFromTopology(topology, StringFromEnv("GEOPS_SITE"), worker);
  } else {
    o.worker = worker;
  }
  const std::string shards = StringFromEnv("GEOPS_SHARDS");
  if (!shards.empty()) o.shards = SplitShards(shards);
  o.clocks = IntFromEnv("GEOPS_CLOCKS", o.clocks);
  return o;
}

}  // namespace geops::client
