// MirrorService: the receiving end of one shard's WAN side, started when the
// site process starts, whether or not its model is known yet: the mirror
// port (a MirrorServer over a wan::ReceiverSlot), the address book of the
// peers' mirror services, and what the handlers know of the model.
//
// A site whose workers bring the model (workload "client") has no shard, and
// so no Replicator, until its first worker's schema and values are in; its
// mirror service listens all the same, answering Unavailable to batches and
// heartbeats ("waiting for its model"), which the peers retry, and telling
// its fixed model to any peer that asks (`schema`), so that a site about to
// fix its own can compare. WanEndpoint plugs the Replicator in once the
// shard exists (receiver_slot()) and sets the model's fingerprint, from
// which point heartbeats of another model are refused and reported to
// on_conflict.
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_THRIFT_MIRROR_SERVICE_H_
#define GEOPS_THRIFT_MIRROR_SERVICE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/deadline.h"
#include "common/model_spec.h"
#include "common/status.h"
#include "thrift/host_port.h"
#include "thrift/mirror_address_book.h"
#include "thrift/mirror_identity.h"
#include "thrift/thrift_options.h"
#include "wan/replication/receiver_slot.h"

namespace geops::rpc {

class MirrorServer;     // thrift/mirror_server.h
struct MirrorModelInfo; // thrift/mirror_handler.h

struct MirrorServiceOptions {
  MirrorIdentity self;          // site and shard; model_fingerprint when the model is known at start
  PsServerOptions server;       // where the mirror service listens
  ThriftClientOptions client;   // for FetchPeerSchema
  std::function<std::optional<ModelSpec>()> schema;                     // see MirrorModelInfo
  std::function<void(SiteId peer, uint64_t their_fingerprint)> on_conflict;
};

class MirrorService {
 public:
  // Binds and serves. Errors of MirrorServer::Start.
  static Result<std::unique_ptr<MirrorService>> Start(MirrorServiceOptions options);
  ~MirrorService();

  MirrorAddressBook* peers() { return &book_; }
  HostPort address() const;
  wan::ReceiverSlot* receiver_slot() { return &slot_; }
  const MirrorIdentity& self() const { return options_.self; }
  const ThriftClientOptions& client_options() const { return options_.client; }
  void SetModelFingerprint(uint64_t fingerprint);

  // Asks `peer`'s mirror service for its model (one call, bounded by the
  // client options' deadlines). nullopt: the peer has none fixed yet.
  // Unavailable while its address is unknown or it does not answer.
  Result<std::optional<ModelSpec>> FetchPeerSchema(SiteId peer) const;

  // Stops accepting and waits for the calls in flight.
  Status Stop(Deadline deadline);

 private:
  explicit MirrorService(MirrorServiceOptions options);

  const MirrorServiceOptions options_;
  MirrorAddressBook book_;
  wan::ReceiverSlot slot_;
  std::shared_ptr<MirrorModelInfo> model_;
  std::unique_ptr<MirrorServer> server_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_SERVICE_H_
