#include "thrift/wan_endpoint.h"

namespace geops::rpc {

Result<std::unique_ptr<WanEndpoint>> WanEndpoint::Start(const ModelSpec* spec, datacenter::Shard* shard,
                                                        WanEndpointOptions options) {
  if (spec == nullptr || shard == nullptr) return InvalidArgumentError("WanEndpoint needs a model and a shard");
  std::unique_ptr<WanEndpoint> e(new WanEndpoint());
  e->shard_ = shard;
  std::vector<SiteId> peers;
  for (const wan::PeerLink& l : options.links) peers.push_back(l.peer);
  GEOPS_ASSIGN_OR_RETURN(e->transport_,
                         wan::ShapedTransport::Start(options.links, options.shaping,
                                                     MirrorChannelFactory(&e->book_, options.self, options.client)));
  wan::ReplicatorConfig rc;
  rc.site = options.self.site;
  rc.shard = options.self.shard;
  rc.peers = peers;
  rc.options = options.wan;
  GEOPS_ASSIGN_OR_RETURN(e->replicator_, wan::Replicator::Create(spec, rc, shard, e->transport_.get()));
  e->book_.SetIncarnation(e->replicator_->incarnation());
  GEOPS_ASSIGN_OR_RETURN(e->server_, MirrorServer::Start(e->replicator_.get(), options.self, options.mirror_server));
  shard->AttachReplication(e->replicator_.get(), e->replicator_->gate());
  e->replicator_->Start();
  return e;
}

WanEndpoint::~WanEndpoint() {
  if (server_) server_->Stop(Deadline::InMs(10000)).IgnoreError();
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

}  // namespace geops::rpc
