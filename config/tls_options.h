// The mutual-TLS options a topology implies for each geops process: the
// files `geops certs` wrote under [security] certs (certs/cert_authority.h has
// the layout), the site names the identity checks need, and the servers'
// [server] limits. Every function
// returns disabled options (empty paths) when the topology has no certs.
// Pure functions of a Topology; thread-compatible.
#ifndef GEOPS_CONFIG_TLS_OPTIONS_H_
#define GEOPS_CONFIG_TLS_OPTIONS_H_

#include "config/topology.h"
#include "thrift/peer_identity.h"
#include "thrift/thrift_options.h"

namespace geops::config {

// A shard of site `site`: serving (LAN and mirror) and connecting to its
// peers' mirrors (site_names set, so each connection expects its peer).
rpc::TlsOptions SiteTls(const Topology& topology, int site);
// Worker `worker` of site `site`, connecting to that site's shards.
rpc::TlsOptions WorkerTls(const Topology& topology, int site, int worker);
// The sites of the deployment and `site`, for a server's identity checks.
rpc::PeerNames PeerNamesOf(const Topology& topology, int site);
// A port of a shard of `site` (LAN or mirror): its host, TLS, identity
// checks and the [server] limits; the caller sets the port.
rpc::PsServerOptions ServerOptionsOf(const Topology& topology, int site);

}  // namespace geops::config

#endif  // GEOPS_CONFIG_TLS_OPTIONS_H_
