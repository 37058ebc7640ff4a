#include "thrift/mirror_service.h"

#include "thrift/mirror_client.h"
#include "thrift/mirror_handler.h"
#include "thrift/mirror_server.h"

namespace geops::rpc {

MirrorService::MirrorService(MirrorServiceOptions options)
    : options_(std::move(options)),
      slot_("site " + std::to_string(options_.self.site) + " shard " + std::to_string(options_.self.shard)),
      model_(std::make_shared<MirrorModelInfo>()) {
  model_->fingerprint.store(options_.self.model_fingerprint, std::memory_order_release);
  model_->schema = options_.schema;
  model_->on_conflict = options_.on_conflict;
}

Result<std::unique_ptr<MirrorService>> MirrorService::Start(MirrorServiceOptions options) {
  std::unique_ptr<MirrorService> s(new MirrorService(std::move(options)));
  GEOPS_ASSIGN_OR_RETURN(s->server_, MirrorServer::Start(&s->slot_, s->options_.self, s->options_.server, s->model_));
  return s;
}

HostPort MirrorService::address() const { return server_->address(); }

void MirrorService::SetModelFingerprint(uint64_t fingerprint) {
  model_->fingerprint.store(fingerprint, std::memory_order_release);
}

Status MirrorService::Stop(Deadline deadline) { return server_->Stop(deadline); }

MirrorService::~MirrorService() {
  if (server_) server_->Stop(Deadline::InMs(10000)).IgnoreError();
}

Result<std::optional<ModelSpec>> MirrorService::FetchPeerSchema(SiteId peer) const {
  std::optional<HostPort> address = book_.Find(peer);
  if (!address) return UnavailableError("the mirror address of site " + std::to_string(peer) + " is not known yet");
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<MirrorClient> client,
                         MirrorClient::Create(*address, options_.self, ForMirrorPeer(options_.client, peer)));
  return client->Schema();
}

}  // namespace geops::rpc
