#include "config/tls_options.h"

#include <string>

namespace geops::config {
namespace {

std::vector<std::string> SiteNames(const Topology& t) {
  std::vector<std::string> names;
  for (const SiteSpec& s : t.sites) names.push_back(s.name);
  return names;
}

}  // namespace

rpc::TlsOptions SiteTls(const Topology& t, int site) {
  rpc::TlsOptions o;
  if (!t.tls()) return o;
  const std::string dir = t.CertsDir();
  const std::string& name = t.sites[static_cast<size_t>(site)].name;
  o.ca_file = dir + "/ca.pem";
  o.cert_file = dir + "/sites/" + name + ".pem";
  o.key_file = dir + "/sites/" + name + ".key";
  o.site_names = SiteNames(t);
  return o;
}

rpc::TlsOptions WorkerTls(const Topology& t, int site, int worker) {
  rpc::TlsOptions o;
  if (!t.tls()) return o;
  const std::string dir = t.CertsDir();
  const std::string& name = t.sites[static_cast<size_t>(site)].name;
  const std::string stem = dir + "/workers/" + name + "-worker-" + std::to_string(worker);
  o.ca_file = dir + "/ca.pem";
  o.cert_file = stem + ".pem";
  o.key_file = stem + ".key";
  o.expect_peer = rpc::SiteIdentityUri(name);
  return o;
}

rpc::PeerNames PeerNamesOf(const Topology& t, int site) {
  rpc::PeerNames names;
  names.sites = SiteNames(t);
  names.self = site;
  return names;
}

rpc::PsServerOptions ServerOptionsOf(const Topology& t, int site) {
  rpc::PsServerOptions o;
  o.host = t.sites[static_cast<size_t>(site)].host;
  o.tls = SiteTls(t, site);
  o.peers = PeerNamesOf(t, site);
  o.max_connections = t.server.max_connections;
  o.max_active_requests = t.server.max_active_requests;
  o.idle_timeout_ms = t.server.idle_timeout_ms;
  o.send_timeout_ms = t.server.send_timeout_ms;
  o.transport.frame_timeout_ms = t.server.frame_timeout_ms;
  return o;
}

}  // namespace geops::config
