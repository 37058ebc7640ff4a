#include "thrift/peer_identity.h"

#include <charconv>
#include <string_view>

namespace geops::rpc {
namespace {

constexpr std::string_view kSitePrefix = "geops://site/";
constexpr std::string_view kWorkerPrefix = "geops://worker/";

std::string Claimed(const std::string& uri) {
  return uri.empty() ? std::string("a certificate with no geops identity") : "certificate '" + uri + "'";
}

}  // namespace

std::string SiteIdentityUri(const std::string& site) { return std::string(kSitePrefix) + site; }

std::string WorkerIdentityUri(const std::string& site, int32_t worker) {
  return std::string(kWorkerPrefix) + site + "/" + std::to_string(worker);
}

Result<PeerIdentity> ParsePeerIdentity(const std::string& uri) {
  PeerIdentity id;
  id.uri = uri;
  std::string_view rest(uri);
  if (rest.substr(0, kSitePrefix.size()) == kSitePrefix) {
    rest.remove_prefix(kSitePrefix.size());
    if (rest.empty() || rest.find('/') != std::string_view::npos) {
      return InvalidArgumentError("'" + uri + "' is not a geops site identity (geops://site/NAME)");
    }
    id.kind = PeerIdentity::Kind::kSite;
    id.site = std::string(rest);
    return id;
  }
  if (rest.substr(0, kWorkerPrefix.size()) == kWorkerPrefix) {
    rest.remove_prefix(kWorkerPrefix.size());
    const size_t slash = rest.rfind('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == rest.size()) {
      return InvalidArgumentError("'" + uri + "' is not a geops worker identity (geops://worker/SITE/INDEX)");
    }
    std::string_view index = rest.substr(slash + 1);
    int32_t worker = -1;
    auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), worker);
    if (ec != std::errc() || end != index.data() + index.size() || worker < 0) {
      return InvalidArgumentError("'" + uri + "' names no worker index");
    }
    id.kind = PeerIdentity::Kind::kWorker;
    id.site = std::string(rest.substr(0, slash));
    id.worker = worker;
    return id;
  }
  return InvalidArgumentError("'" + uri + "' is not a geops identity");
}

Status CheckWorkerIdentity(const std::string& uri, const std::string& peer, const PeerNames& names,
                           int32_t worker, const char* call) {
  const std::string site = names.known() ? names.self_name() : std::string("?");
  Result<PeerIdentity> id = ParsePeerIdentity(uri);
  if (id.ok() && id->site == site) {
    if (id->kind == PeerIdentity::Kind::kSite) return Status::Ok();
    if (worker < 0 || id->worker == worker) return Status::Ok();
  }
  std::string claim = worker >= 0 ? "worker " + std::to_string(worker) + " of site " + site : "site " + site;
  return PermissionDeniedError(std::string(call) + " from " + peer + " with " + Claimed(uri) + " refused: it acts for " +
                               claim + ", which that certificate may not");
}

Status CheckSiteIdentity(const std::string& uri, const std::string& peer, const PeerNames& names, int32_t origin,
                         const char* call) {
  if (origin < 0 || origin >= static_cast<int32_t>(names.sites.size())) {
    return InvalidArgumentError(std::string(call) + " from " + peer + " claims origin site " + std::to_string(origin) +
                                ", which is not in the topology (" + std::to_string(names.sites.size()) + " sites)");
  }
  const std::string& claimed = names.sites[static_cast<size_t>(origin)];
  Result<PeerIdentity> id = ParsePeerIdentity(uri);
  if (id.ok() && id->kind == PeerIdentity::Kind::kSite && id->site == claimed) return Status::Ok();
  return PermissionDeniedError(std::string(call) + " from " + peer + " with " + Claimed(uri) +
                               " refused: it speaks for site " + std::to_string(origin) + " (" + claimed +
                               "), which that certificate may not");
}

}  // namespace geops::rpc
