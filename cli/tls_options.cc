#include "cli/tls_options.h"

#include <string>

namespace geops::cli {
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

}  // namespace geops::cli
