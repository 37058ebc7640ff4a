#include "site/wan_endpoint.h"

#include "thrift/mirror_channel_factory.h"
#include "thrift/mirror_server.h"

namespace geops::site {

using rpc::MirrorChannelFactory;
using rpc::MirrorService;
using rpc::MirrorServiceOptions;

Result<std::unique_ptr<WanEndpoint>> WanEndpoint::Start(const ModelSpec* spec, datacenter::Shard* shard,
                                                        WanEndpointOptions options, MirrorService* service) {
  if (spec == nullptr || shard == nullptr) return InvalidArgumentError("WanEndpoint needs a model and a shard");
  std::unique_ptr<WanEndpoint> e(new WanEndpoint());
  if (service == nullptr) {
    MirrorServiceOptions so;
    so.self = options.self;
    so.server = options.mirror_server;
    so.client = options.client;
    GEOPS_ASSIGN_OR_RETURN(e->own_service_, MirrorService::Start(std::move(so)));
    service = e->own_service_.get();
  } else if (service->self().site != options.self.site || service->self().shard != options.self.shard) {
    return InvalidArgumentError("the mirror service given serves another site or shard");
  }
  e->service_ = service;
  std::vector<SiteId> peers;
  for (const wan::PeerLink& l : options.links) peers.push_back(l.peer);
  GEOPS_ASSIGN_OR_RETURN(e->transport_,
                         wan::ShapedTransport::Start(options.links, options.shaping,
                                                     MirrorChannelFactory(service->peers(), options.self, options.client)));
  wan::ReplicatorConfig rc;
  rc.site = options.self.site;
  rc.shard = options.self.shard;
  rc.peers = peers;
  rc.options = options.wan;
  GEOPS_ASSIGN_OR_RETURN(e->replicator_, wan::Replicator::Create(spec, rc, shard, e->transport_.get()));
  service->peers()->SetIncarnation(e->replicator_->incarnation());
  shard->AttachReplication(e->replicator_.get(), e->replicator_->gate());
  e->shard_ = shard;
  service->SetModelFingerprint(spec->Fingerprint());
  service->receiver_slot()->Set(e->replicator_->receiver());
  e->receiving_ = true;
  if (options.shaping.relay_after_ms > 0) service->receiver_slot()->SetForwarder(e->transport_.get());
  e->replicator_->Start();
  return e;
}

WanEndpoint::~WanEndpoint() {
  if (transport_) transport_->StopForwarding();  // relay calls in flight return at once
  if (own_service_) own_service_->Stop(Deadline::InMs(10000)).IgnoreError();
  if (receiving_) {
    service_->receiver_slot()->SetForwarder(nullptr);
    service_->receiver_slot()->Clear();  // waits for the calls in flight
  }
  if (shard_ != nullptr) shard_->AttachReplication(nullptr, nullptr);
  if (replicator_) replicator_->Stop();
  if (transport_) transport_->Stop();
}

Status WanEndpoint::WaitSettled(Deadline deadline) {
  if (!replicator_->WaitDrainAcknowledged(deadline)) {
    return DeadlineExceededError("this shard's final updates are not acknowledged by every peer yet");
  }
  if (!replicator_->WaitFinal(deadline)) {
    return DeadlineExceededError("the final updates of some peers have not landed yet");
  }
  // A peer that lost its store and came back meanwhile got a second drain.
  if (!replicator_->WaitDrainAcknowledged(deadline)) {
    return DeadlineExceededError("this shard's final updates are not acknowledged by every peer yet");
  }
  if (!transport_->WaitQuiet(deadline)) return DeadlineExceededError("WAN messages are still queued");
  return Status::Ok();
}

}  // namespace geops::site
