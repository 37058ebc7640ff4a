#include "site/site_mirror.h"

#include <algorithm>
#include <chrono>
#include <fstream>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "config/tls_options.h"
#include "thrift/host_port.h"

namespace geops::site {

using config::ServerOptionsOf;
using config::SiteTls;

using nlohmann::json;

Result<std::unique_ptr<SiteMirror>> SiteMirror::Start(const Topology& t, int site, int shard, SiteMirrorArgs args) {
  std::unique_ptr<SiteMirror> m(new SiteMirror());
  m->topology_ = &t;
  m->site_ = site;
  m->shard_ = shard;
  m->args_ = std::move(args);
  rpc::MirrorServiceOptions o;
  o.self = rpc::MirrorIdentity{site, shard, 0};
  o.server = ServerOptionsOf(t, site);
  const int base = t.sites[site].base_port;
  o.server.port = m->args_.mirror_port >= 0 ? m->args_.mirror_port : (base > 0 ? base + 1000 + shard : 0);
  o.client.rpc_timeout_ms = std::max<int64_t>(t.rpc_timeout_ms, 30000);
  o.client.connect_timeout_ms = std::min<int64_t>(o.client.connect_timeout_ms, 3000);
  o.client.tls = SiteTls(t, site);
  o.schema = m->args_.schema;
  SiteMirror* self = m.get();
  o.on_conflict = [self](SiteId peer, uint64_t theirs) { self->OnConflict(peer, theirs); };
  GEOPS_ASSIGN_OR_RETURN(m->service_, rpc::MirrorService::Start(std::move(o)));
  rpc::MirrorAddressBook* book = m->service_->peers();
  if (!m->args_.mirror_peers.empty()) {
    const std::string& list = m->args_.mirror_peers;
    size_t start = 0;
    while (start < list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      const std::string item = list.substr(start, comma - start);
      const size_t eq = item.find('=');
      if (eq == std::string::npos) return InvalidArgumentError("--mirror-peers: '" + item + "' is not site=host:port");
      GEOPS_ASSIGN_OR_RETURN(int peer, t.FindSite(item.substr(0, eq)));
      GEOPS_ASSIGN_OR_RETURN(rpc::HostPort hp, rpc::ParseHostPort(item.substr(eq + 1)));
      book->Set(peer, hp);
      start = comma + 1;
    }
  } else if (!m->args_.peers_file.empty()) {
    m->watcher_ = std::thread([self, path = m->args_.peers_file] {
      NameThisThread("peers-watch");
      self->WatchPeersFile(path);
    });
  } else if (base == 0) {
    return InvalidArgumentError("site " + t.sites[site].name + " has no base_port: pass --mirror-peers");
  } else {
    for (int p = 0; p < static_cast<int>(t.sites.size()); ++p) {
      if (p == site || t.sites[p].base_port == 0) continue;
      book->Set(p, rpc::HostPort{t.sites[p].host, t.sites[p].base_port + 1000 + shard});
    }
  }
  return m;
}

SiteMirror::~SiteMirror() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  service_.reset();
}

Status SiteMirror::ParsePeers(const json& doc) {
  if (!doc.is_object() || !doc.contains("mirrors") || !doc["mirrors"].is_object()) {
    return InvalidArgumentError("peers file has no \"mirrors\" object");
  }
  for (int p = 0; p < static_cast<int>(topology_->sites.size()); ++p) {
    if (p == site_) continue;
    const json& list = doc["mirrors"].value(topology_->sites[p].name, json());
    if (!list.is_array() || static_cast<int>(list.size()) <= shard_ || !list[shard_].is_string()) {
      return InvalidArgumentError("peers file lacks shard " + std::to_string(shard_) + " of site " +
                                  topology_->sites[p].name);
    }
    GEOPS_ASSIGN_OR_RETURN(rpc::HostPort hp, rpc::ParseHostPort(list[shard_].get<std::string>()));
    service_->peers()->Set(p, hp);
  }
  return Status::Ok();
}

void SiteMirror::WatchPeersFile(std::string path) {
  bool noted_other_run = false;
  while (!stop_) {
    std::ifstream in(path);
    if (in) {
      json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
      const std::string run = doc.is_object() ? doc.value("run_id", std::string()) : std::string();
      if (!args_.run_id.empty() && run != args_.run_id) {
        // Another run's file (a reused results folder): never its peers.
        if (!noted_other_run) {
          spdlog::warn("site {} shard {}: peers file {} is of run '{}', not this run '{}'; waiting for this run's",
                       topology_->sites[site_].name, shard_, path, run, args_.run_id);
          noted_other_run = true;
        }
        in.close();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      Status s = doc.is_discarded() ? InvalidArgumentError("peers file " + path + " is not JSON") : ParsePeers(doc);
      if (s.ok()) {
        spdlog::info("site {} shard {}: mirror peers known", topology_->sites[site_].name, shard_);
        return;
      }
      spdlog::error("site {} shard {}: {}", topology_->sites[site_].name, shard_, s.ToString());
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status SiteMirror::CompareWith(SiteId peer, const ModelSpec& ours, const ModelSpec& theirs) const {
  // "the model differs from the one site B trains: table 'w' has ..."
  return theirs.CheckSameSchema(ours, "site " + topology_->sites[peer].name + " trains");
}

Status SiteMirror::CheckPeersModel(const ModelSpec& proposal) const {
  for (int p = 0; p < static_cast<int>(topology_->sites.size()); ++p) {
    if (p == site_) continue;
    if (!service_->peers()->Find(p)) {
      // Only until the peers file is read: the worker retries.
      return UnavailableError("site " + topology_->sites[site_].name + " does not know the mirror address of site " +
                              topology_->sites[p].name + " yet, to compare the model with it");
    }
    Result<std::optional<ModelSpec>> theirs = service_->FetchPeerSchema(p);
    if (!theirs.ok()) {
      spdlog::info("site {} shard {}: cannot compare the model with site {} now ({}); heartbeats will",
                   topology_->sites[site_].name, shard_, topology_->sites[p].name, theirs.status().message());
      continue;
    }
    if (!theirs->has_value()) continue;
    GEOPS_RETURN_IF_ERROR(CompareWith(p, proposal, **theirs));
  }
  return Status::Ok();
}

void SiteMirror::OnConflict(SiteId peer, uint64_t their_fingerprint) {
  if (conflict_reported_.exchange(true)) return;
  std::optional<ModelSpec> ours = args_.schema ? args_.schema() : std::nullopt;
  Status why = FailedPreconditionError("site " + topology_->sites[peer].name + " trains another model (fingerprint " +
                                       std::to_string(their_fingerprint) + ") than site " +
                                       topology_->sites[site_].name);
  Result<std::optional<ModelSpec>> theirs = service_->FetchPeerSchema(peer);
  if (ours && theirs.ok() && theirs->has_value()) {
    Status diff = CompareWith(peer, *ours, **theirs);
    if (!diff.ok()) why = diff;
  }
  spdlog::error("site {} shard {}: {}", topology_->sites[site_].name, shard_, why.ToString());
  if (args_.on_conflict) args_.on_conflict(why);
}

}  // namespace geops::site
