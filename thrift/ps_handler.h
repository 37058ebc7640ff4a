// PsHandler: the server side of the LAN IDL for one connection. It turns each
// Thrift request into a call on a datacenter::ShardHost (schema calls) or on
// the shard it serves (everything else; Unavailable while a client-defined
// model is not in yet) and the result back into a reply, and PsHandlerFactory makes one handler per accepted connection
// (the place for per-connection state such as the peer and, later, whether
// it authenticated).
//
// Every request is checked before it reaches the shard where the wire allows
// what the core's types cannot: a binary payload must be a whole number of
// float32 and exactly as long as its chunks, a read's reply must fit the
// batch bound, a wait must not be negative. The shard then validates the
// rest. Any refusal, and any exception from below (bad_alloc ->
// ResourceExhausted, anything else -> Internal), becomes a GeopsError reply
// and one log line naming the peer; nothing escapes as a crash.
//
// Thread-safety: a handler serves one connection, so one thread at a time;
// many handlers call the (thread-safe) shard concurrently. The factory may be
// used from any thread.
#ifndef GEOPS_THRIFT_PS_HANDLER_H_
#define GEOPS_THRIFT_PS_HANDLER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "datacenter/shard_host.h"
#include "thrift/bounded_protocol.h"
#include "thrift/counting_socket.h"
#include "thrift/peer_identity.h"
#include "gen-cpp/ParameterServer.h"

namespace geops::rpc {

class PsHandler : public gen::ParameterServerIf {
 public:
  // REQUIRES: `host` outlives the handler. `peer` names the client in logs.
  // `wire` is the connection's socket (on TLS, every call is checked against
  // its certificate: thrift/peer_identity.h; null or plaintext: unchecked),
  // `names` the deployment's sites for those checks.
  PsHandler(datacenter::ShardHost* host, std::string peer, WireSocket* wire = nullptr,
            std::shared_ptr<const PeerNames> names = nullptr);

  // Payloads by the zero-copy paths of the connection's protocols
  // (bounded_protocol.h): an update or initial values applied from the
  // frame they arrived in (`in` made with borrowing on), a read reply sent
  // from a buffer the connection keeps (FramedTransport::ExternalScratch).
  // Null: through the strings. REQUIRES: both outlive the handler.
  void ZeroCopyThrough(BoundedBinaryProtocol* in, BoundedBinaryProtocol* out) {
    in_ = in;
    out_ = out;
  }

  void registerSchema(gen::SchemaReply& reply, const gen::SchemaRequest& req) override;
  void initValues(gen::InitValuesReply& reply, const gen::InitValuesRequest& req) override;
  void registerWorker(gen::RegisterReply& reply, const gen::RegisterRequest& req) override;
  void read(gen::ReadReply& reply, const gen::ReadRequest& req) override;
  void readChanged(gen::ReadChangedReply& reply, const gen::ReadChangedRequest& req) override;
  void update(gen::UpdateReply& reply, const gen::UpdateRequest& req) override;
  void clock(gen::ClockReply& reply, const gen::ClockRequest& req) override;
  void heartbeat(int32_t worker_id, int64_t session_id) override;
  void status(gen::ShardStatus& reply) override;
  void replicaSummary(gen::ReplicaSummary& reply) override;

 private:
  // Runs `body` (returning Status); on failure or exception logs and throws
  // the GeopsError that the generated processor sends as the reply.
  template <typename Body>
  void Serve(std::string_view call, Body&& body);

  // The shard, or the host's NotReady() error while the model is not in.
  Result<datacenter::Shard*> ServingShard() const;
  // OK when the connection may act for `worker` (< 0: for its site), on TLS.
  Status CheckActsFor(int32_t worker, const char* call) const;
  Status DoRead(datacenter::Shard* shard, gen::ReadReply& reply, const gen::ReadRequest& req);
  Status DoUpdate(datacenter::Shard* shard, gen::UpdateReply& reply, const gen::UpdateRequest& req);
  Status DoInitValues(gen::InitValuesReply& reply, const gen::InitValuesRequest& req);
  // The float32 values of binary field `field` of the request: borrowed
  // from the frame, or from the string (copied into `*copy` when misaligned).
  // InvalidArgument, naming `what`, when not a whole number of float32.
  Result<std::span<const float>> FloatsOf(const std::string& field, std::vector<float>* copy,
                                          const char* what) const;

  datacenter::ShardHost* const host_;
  const std::string peer_;
  WireSocket* const wire_;
  const std::shared_ptr<const PeerNames> names_;
  // The shard of the call in progress once it was handed over (the shard
  // counts its own refusals); Serve counts the others in the shard.
  datacenter::Shard* handed_to_ = nullptr;
  BoundedBinaryProtocol* in_ = nullptr;
  BoundedBinaryProtocol* out_ = nullptr;
};

class PsHandlerFactory : public gen::ParameterServerIfFactory {
 public:
  // REQUIRES: `host` outlives every handler made.
  PsHandlerFactory(datacenter::ShardHost* host, std::shared_ptr<const PeerNames> names)
      : host_(host), names_(std::move(names)) {}

  gen::ParameterServerIf* getHandler(const apache::thrift::TConnectionInfo& info) override;
  void releaseHandler(gen::ParameterServerIf* handler) override;

 private:
  datacenter::ShardHost* const host_;
  const std::shared_ptr<const PeerNames> names_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_PS_HANDLER_H_
