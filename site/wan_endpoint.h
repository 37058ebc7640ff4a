// WanEndpoint: one shard's whole WAN side in a site process, wired: the
// ShapedTransport (link models + Thrift mirror channels to the peers), the
// Replicator (attached to the shard as its tap and read gate) and the
// MirrorService that receives the peers' messages, which the endpoint
// either starts itself or is given, already listening (a site whose model
// its workers bring starts its mirror service before it has a shard).
// Peers' mirror addresses may be filled into peers() after Start(); until
// then messages wait.
//
// Start() attaches the replicator to the shard, so call it before the shard
// serves any worker (no local update may go untapped).
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_SITE_WAN_ENDPOINT_H_
#define GEOPS_SITE_WAN_ENDPOINT_H_

#include <memory>
#include <vector>

#include "common/deadline.h"
#include "common/model_spec.h"
#include "common/status.h"
#include "datacenter/shard.h"
#include "thrift/mirror_address_book.h"
#include "thrift/mirror_identity.h"
#include "thrift/mirror_service.h"
#include "thrift/thrift_options.h"
#include "wan/link/shaped_transport.h"
#include "wan/replication/replicator.h"
#include "wan/wan_options.h"

namespace geops::site {

struct WanEndpointOptions {
  rpc::MirrorIdentity self;                   // this site, shard and model
  std::vector<wan::PeerLink> links;      // one per peer site: the directed link towards it
  wan::WanOptions wan;
  wan::ShapedTransportOptions shaping;
  rpc::PsServerOptions mirror_server;         // where the mirror service listens, when the endpoint starts it
  rpc::ThriftClientOptions client;            // towards the peers' mirror services
};

class WanEndpoint {
 public:
  // `spec` and `shard` must outlive the endpoint. `service`: a mirror
  // service already listening for this shard (it must outlive the
  // endpoint); null starts one on options.mirror_server. Errors of the
  // parts (bad options: InvalidArgument; the mirror port: Unavailable).
  static Result<std::unique_ptr<WanEndpoint>> Start(const ModelSpec* spec, datacenter::Shard* shard,
                                                    WanEndpointOptions options, rpc::MirrorService* service = nullptr);
  // Detaches from the shard and the mirror service and stops everything
  // (the service too, if the endpoint started it).
  ~WanEndpoint();

  rpc::MirrorAddressBook* peers() { return service_->peers(); }
  rpc::HostPort mirror_address() const { return service_->address(); }
  wan::Replicator* replicator() { return replicator_.get(); }
  const wan::ShapedTransport* transport() const { return transport_.get(); }
  wan::ShapedTransport* transport() { return transport_.get(); }

  // Waits until this shard's final updates have been acknowledged by every
  // peer and every peer's final updates have landed here (so stopping loses
  // nothing a peer still needs), or the deadline: DeadlineExceeded naming
  // what is missing.
  Status WaitSettled(Deadline deadline);

 private:
  WanEndpoint() = default;

  datacenter::Shard* shard_ = nullptr;
  std::unique_ptr<rpc::MirrorService> own_service_;  // when Start was given none
  rpc::MirrorService* service_ = nullptr;
  std::unique_ptr<wan::ShapedTransport> transport_;
  std::unique_ptr<wan::Replicator> replicator_;
  bool receiving_ = false;  // the replicator is in the service's slot
};

}  // namespace geops::site

#endif  // GEOPS_SITE_WAN_ENDPOINT_H_
