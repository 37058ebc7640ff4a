// PeerIdentity: who a mutual-TLS connection is, read from the geops URI in
// its certificate (certs/cert_authority.h writes them):
//   geops://site/<site>               a site (its shards serve and mirror)
//   geops://worker/<site>/<index>     worker <index> of <site>
// and the checks the handlers make with it (docs/security.md): a LAN
// connection acts only for its own worker (its site's certificate may act
// for any of the site's workers: the site's own tools), a mirror connection
// speaks only for the site it is. Plaintext connections are not checked
// here (a topology bound beyond loopback refuses plaintext unless told
// `insecure = true`).
//
// Value types and pure functions; thread-compatible.
#ifndef GEOPS_THRIFT_PEER_IDENTITY_H_
#define GEOPS_THRIFT_PEER_IDENTITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace geops::rpc {

struct PeerIdentity {
  enum class Kind { kSite, kWorker };
  Kind kind = Kind::kSite;
  std::string site;
  int32_t worker = -1;  // kWorker only
  std::string uri;      // as in the certificate
};

// The identities `geops certs` writes into certificates.
std::string SiteIdentityUri(const std::string& site);
std::string WorkerIdentityUri(const std::string& site, int32_t worker);

// InvalidArgument naming `uri` when it is not one of the two forms above.
Result<PeerIdentity> ParsePeerIdentity(const std::string& uri);

// What a server knows to check identities: the sites of the deployment in
// topology order (a SiteId indexes it) and its own.
struct PeerNames {
  std::vector<std::string> sites;
  int32_t self = -1;

  bool known() const { return self >= 0 && self < static_cast<int32_t>(sites.size()); }
  const std::string& self_name() const { return sites[static_cast<size_t>(self)]; }
};

// LAN: may the connection `peer` (its address, for the message) with
// certificate `uri` act for worker `worker` of this site (`worker` < 0: a
// call that names no worker, allowed to any identity of this site)?
// PermissionDenied naming who connected and what it claimed.
Status CheckWorkerIdentity(const std::string& uri, const std::string& peer, const PeerNames& names,
                           int32_t worker, const char* call);

// WAN: may the connection speak for site `origin`? PermissionDenied unless
// its certificate is that site's; InvalidArgument for an origin outside the
// topology.
Status CheckSiteIdentity(const std::string& uri, const std::string& peer, const PeerNames& names, int32_t origin,
                         const char* call);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_PEER_IDENTITY_H_
