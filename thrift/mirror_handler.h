// MirrorHandler: the server side of the WAN IDL (mirror.thrift) for one
// connection. It checks each request's identity (the receiver's own shard
// index, a site other than its own, the same model) and bounds (a notice's
// key count), turns it into a core message (wan/wan_transport.h) and hands
// it to the shard's WanReceiver. A batch relayed by a third site is checked
// against the relaying site's identity and taken only where the receiver
// takes relayed batches; a relay call goes to the receiver's OnRelay. Any
// refusal, and any exception from below (bad_alloc -> ResourceExhausted,
// anything else -> Internal), becomes a GeopsError reply and one log line
// naming the peer; nothing escapes as a crash.
//
// Thread-safety: a handler serves one connection, so one thread at a time;
// many handlers call the (thread-safe) receiver concurrently.
#ifndef GEOPS_THRIFT_MIRROR_HANDLER_H_
#define GEOPS_THRIFT_MIRROR_HANDLER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/model_spec.h"
#include "common/status.h"
#include "thrift/counting_socket.h"
#include "thrift/peer_identity.h"
#include "gen-cpp/Mirror.h"
#include "thrift/mirror_identity.h"
#include "wan/wan_transport.h"

namespace geops::rpc {

// Most chunk keys one notice may name.
inline constexpr int64_t kMaxNoticeKeys = int64_t{1} << 22;
// Longest a relay call may ask this site to wait for the destination, ms.
inline constexpr int64_t kMaxRelayWaitMs = 60000;

// What a mirror service knows of its shard's model, shared by its handlers.
// A site whose workers bring the model starts its mirror service before the
// model is fixed: the fingerprint is 0 (heartbeats unchecked) until it is.
struct MirrorModelInfo {
  std::atomic<uint64_t> fingerprint{0};
  // The model fixed or served (schema only), nullopt while none is. Empty
  // (a server that serves no client-defined model): `schema` answers that
  // no model is fixed. Set before the server starts.
  std::function<std::optional<ModelSpec>()> schema;
  // Called (from a handler thread) when a peer's heartbeat names another
  // model than this shard's: two sites fixed different client-defined
  // models. Set before the server starts; may be empty.
  std::function<void(SiteId peer, uint64_t their_fingerprint)> on_conflict;
};

class MirrorHandler : public gen::MirrorIf {
 public:
  // REQUIRES: `receiver` outlives the handler. `peer` names the client in logs.
  // `wire` is the connection's socket: on TLS every message must come from
  // the site its certificate names (thrift/peer_identity.h). `names`: the
  // deployment's sites; when known, origins outside them are refused.
  MirrorHandler(wan::WanReceiver* receiver, MirrorIdentity self, std::shared_ptr<MirrorModelInfo> model,
                std::string peer, WireSocket* wire = nullptr, std::shared_ptr<const PeerNames> names = nullptr);

  void pushBatch(gen::PushBatchReply& reply, const gen::PushBatchRequest& req) override;
  void relayBatch(gen::PushBatchReply& reply, const gen::RelayBatchRequest& req) override;
  void notice(const gen::NoticeRequest& req) override;
  void reportClock(const gen::ClockReportRequest& req) override;
  void heartbeat(gen::MirrorHeartbeatReply& reply, const gen::MirrorHeartbeat& req) override;
  void schema(gen::MirrorSchemaReply& reply, const gen::MirrorSchemaRequest& req) override;
  void outerState(gen::OuterStateReply& reply, const gen::OuterStateRequest& req) override;

 private:
  template <typename Body>
  void Serve(std::string_view call, Body&& body);
  Status CheckSender(int32_t origin, int32_t shard_id, const char* call) const;
  // A pushBatch's sender: its origin, or the site relaying it, which must
  // be a third site and is checked in its place.
  Status CheckPushSender(const gen::PushBatchRequest& req) const;
  // The request's batch, checked (seq, clock) and converted.
  static Result<wan::WanBatch> BatchOf(const gen::PushBatchRequest& req, const char* call);
  Status CheckSite(int32_t site, const char* what, const char* call) const;

  wan::WanReceiver* const receiver_;
  const MirrorIdentity self_;
  const std::shared_ptr<MirrorModelInfo> model_;
  const std::string peer_;
  WireSocket* const wire_;
  const std::shared_ptr<const PeerNames> names_;
};

class MirrorHandlerFactory : public gen::MirrorIfFactory {
 public:
  MirrorHandlerFactory(wan::WanReceiver* receiver, MirrorIdentity self, std::shared_ptr<MirrorModelInfo> model,
                       std::shared_ptr<const PeerNames> names = nullptr)
      : receiver_(receiver), self_(self), model_(std::move(model)), names_(std::move(names)) {}
  gen::MirrorIf* getHandler(const apache::thrift::TConnectionInfo& info) override;
  void releaseHandler(gen::MirrorIf* handler) override;

 private:
  wan::WanReceiver* const receiver_;
  const MirrorIdentity self_;
  const std::shared_ptr<MirrorModelInfo> model_;
  const std::shared_ptr<const PeerNames> names_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_HANDLER_H_
