// WanEndpoint: one shard's whole WAN side in a site process, wired: the
// ShapedTransport (link models + Thrift mirror channels to the peers), the
// Replicator (attached to the shard as its tap and read gate) and the
// MirrorServer that receives the peers' messages. Peers' mirror addresses
// may be filled into peers() after Start(); until then messages wait.
//
// Start() attaches the replicator to the shard, so call it before the shard
// serves any worker (no local update may go untapped).
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_THRIFT_WAN_ENDPOINT_H_
#define GEOPS_THRIFT_WAN_ENDPOINT_H_

#include <memory>
#include <vector>

#include "common/deadline.h"
#include "common/model_spec.h"
#include "common/status.h"
#include "datacenter/shard.h"
#include "thrift/mirror_channel.h"
#include "thrift/mirror_identity.h"
#include "thrift/mirror_server.h"
#include "thrift/thrift_options.h"
#include "wan/replicator.h"
#include "wan/shaped_transport.h"
#include "wan/wan_options.h"

namespace geops::rpc {

struct WanEndpointOptions {
  MirrorIdentity self;                   // this site, shard and model
  std::vector<wan::PeerLink> links;      // one per peer site: the directed link towards it
  wan::WanOptions wan;
  wan::ShapedTransportOptions shaping;
  PsServerOptions mirror_server;         // where the mirror service listens
  ThriftClientOptions client;            // towards the peers' mirror services
};

class WanEndpoint {
 public:
  // `spec` and `shard` must outlive the endpoint. Errors of the parts
  // (bad options: InvalidArgument; the mirror port: Unavailable).
  static Result<std::unique_ptr<WanEndpoint>> Start(const ModelSpec* spec, datacenter::Shard* shard,
                                                    WanEndpointOptions options);
  // Detaches from the shard and stops everything.
  ~WanEndpoint();

  MirrorAddressBook* peers() { return &book_; }
  HostPort mirror_address() const { return server_->address(); }
  wan::Replicator* replicator() { return replicator_.get(); }
  const wan::ShapedTransport* transport() const { return transport_.get(); }

  // Waits until this shard's final updates have been acknowledged by every
  // peer and every peer's final updates have landed here (so stopping loses
  // nothing a peer still needs), or the deadline: DeadlineExceeded naming
  // what is missing.
  Status WaitSettled(Deadline deadline);

 private:
  WanEndpoint() = default;

  datacenter::Shard* shard_ = nullptr;
  MirrorAddressBook book_;
  std::unique_ptr<wan::ShapedTransport> transport_;
  std::unique_ptr<wan::Replicator> replicator_;
  std::unique_ptr<MirrorServer> server_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_WAN_ENDPOINT_H_
