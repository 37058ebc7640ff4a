#include "thrift/mirror_handler.h"

#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "thrift/counting_socket.h"
#include "thrift/error_convert.h"
#include "thrift/guarded_call.h"
#include "thrift/type_convert.h"

namespace geops::rpc {
namespace {

spdlog::level::level_enum LogLevel(StatusCode code) {
  switch (code) {
    case StatusCode::kInternal:
    case StatusCode::kDataLoss:
    case StatusCode::kUnknown:
      return spdlog::level::err;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      return spdlog::level::info;
    default:
      return spdlog::level::warn;
  }
}

}  // namespace

MirrorHandler::MirrorHandler(wan::WanReceiver* receiver, MirrorIdentity self, std::shared_ptr<MirrorModelInfo> model,
                             std::string peer, WireSocket* wire, std::shared_ptr<const PeerNames> names)
    : receiver_(receiver),
      self_(self),
      model_(std::move(model)),
      peer_(std::move(peer)),
      wire_(wire),
      names_(names != nullptr ? std::move(names) : std::make_shared<const PeerNames>()) {}

template <typename Body>
void MirrorHandler::Serve(std::string_view call, Body&& body) {
  const Status status = GuardedCall(call, std::forward<Body>(body));
  if (status.ok()) return;
  spdlog::log(LogLevel(status.code()), "mirror site {} shard {}: {} from {} refused: {}", self_.site, self_.shard,
              call, peer_, status.ToString());
  throw ToGeopsError(status);
}

Status MirrorHandler::CheckSender(int32_t origin, int32_t shard_id, const char* call) const {
  if (shard_id != self_.shard) {
    return FailedPreconditionError("mirror of shard " + std::to_string(shard_id) + " connected to shard " +
                                   std::to_string(self_.shard) + " of site " + std::to_string(self_.site) +
                                   "; shard i of a site mirrors shard i of the others");
  }
  if (origin == self_.site || origin < 0) {
    return InvalidArgumentError("message claims origin site " + std::to_string(origin) + ", this is site " +
                                std::to_string(self_.site));
  }
  if (wire_ != nullptr && wire_->secure()) {
    return CheckSiteIdentity(wire_->PeerIdentity(), peer_, *names_, origin, call);
  }
  if (!names_->sites.empty() && origin >= static_cast<int32_t>(names_->sites.size())) {
    return InvalidArgumentError(std::string(call) + " claims origin site " + std::to_string(origin) +
                                ", which is not in the topology (" + std::to_string(names_->sites.size()) + " sites)");
  }
  return Status::Ok();
}

Status MirrorHandler::CheckSite(int32_t site, const char* what, const char* call) const {
  if (site < 0 || site == self_.site) {
    return InvalidArgumentError(std::string(call) + ": " + what + " site " + std::to_string(site) +
                                " is not another site (this is site " + std::to_string(self_.site) + ")");
  }
  if (!names_->sites.empty() && site >= static_cast<int32_t>(names_->sites.size())) {
    return InvalidArgumentError(std::string(call) + ": " + what + " site " + std::to_string(site) +
                                " is not in the topology (" + std::to_string(names_->sites.size()) + " sites)");
  }
  return Status::Ok();
}

Status MirrorHandler::CheckPushSender(const gen::PushBatchRequest& req) const {
  if (!req.__isset.relayed_by) return CheckSender(req.origin, req.shard_id, "pushBatch");
  // A relayed batch: the connection is the relaying site's, and the origin
  // a third site whose own link to this one is out.
  GEOPS_RETURN_IF_ERROR(CheckSender(req.relayed_by, req.shard_id, "pushBatch (relayed)"));
  GEOPS_RETURN_IF_ERROR(CheckSite(req.origin, "origin", "pushBatch (relayed)"));
  if (req.origin == req.relayed_by) {
    return InvalidArgumentError("pushBatch: site " + std::to_string(req.origin) + " claims to relay its own batch");
  }
  if (!receiver_->AcceptsRelayed()) {
    return FailedPreconditionError("site " + std::to_string(req.relayed_by) + " relays a batch of site " +
                                   std::to_string(req.origin) + ", but this site does not take relayed batches "
                                   "([wan] relay_after_ms is 0 here)");
  }
  return Status::Ok();
}

Result<wan::WanBatch> MirrorHandler::BatchOf(const gen::PushBatchRequest& req, const char* call) {
  if (req.seq <= 0) return InvalidArgumentError(std::string(call) + ": seq must be >= 1, got " + std::to_string(req.seq));
  if (req.clock < 0) return InvalidArgumentError(std::string(call) + ": clock must be >= 0");
  wan::WanBatch batch;
  batch.origin = req.origin;
  batch.seq = static_cast<uint64_t>(req.seq);
  batch.clock = req.clock;
  batch.payload.assign(req.payload.begin(), req.payload.end());
  batch.incarnation = static_cast<uint64_t>(req.incarnation);
  batch.dest_incarnation = static_cast<uint64_t>(req.dest_incarnation);
  if (req.__isset.report) {
    if (req.report.clock < 0) {
      return InvalidArgumentError(std::string(call) + ": the clock report riding with batch " +
                                  std::to_string(req.seq) + " has negative clock " + std::to_string(req.report.clock));
    }
    batch.report = wan::RidingReport{req.report.clock, req.report.drained};
  }
  return batch;
}

void MirrorHandler::relayBatch(gen::PushBatchReply& reply, const gen::RelayBatchRequest& req) {
  Serve("relayBatch", [&]() -> Status {
    if (req.batch.__isset.relayed_by) {
      return InvalidArgumentError("relayBatch: a site asks only for its own batches to be relayed, and once (this "
                                  "one of site " + std::to_string(req.batch.origin) + " names relay site " +
                                  std::to_string(req.batch.relayed_by) + " already)");
    }
    GEOPS_RETURN_IF_ERROR(CheckSender(req.batch.origin, req.batch.shard_id, "relayBatch"));
    GEOPS_RETURN_IF_ERROR(CheckSite(req.dest, "destination", "relayBatch"));
    if (req.dest == req.batch.origin) {
      return InvalidArgumentError("relayBatch: site " + std::to_string(req.dest) + " asks for its own batch back");
    }
    if (req.timeout_ms < 1 || req.timeout_ms > kMaxRelayWaitMs) {
      return InvalidArgumentError("relayBatch: timeout_ms must be in [1, " + std::to_string(kMaxRelayWaitMs) +
                                  "], got " + std::to_string(req.timeout_ms));
    }
    GEOPS_ASSIGN_OR_RETURN(wan::WanBatch batch, BatchOf(req.batch, "relayBatch"));
    GEOPS_ASSIGN_OR_RETURN(wan::BatchAck ack, receiver_->OnRelay(req.dest, batch, req.timeout_ms));
    reply.seq = req.batch.seq;
    if (!ack.quarantined.empty()) reply.__set_quarantined(std::move(ack.quarantined));
    return Status::Ok();
  });
}

void MirrorHandler::pushBatch(gen::PushBatchReply& reply, const gen::PushBatchRequest& req) {
  Serve("pushBatch", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckPushSender(req));
    GEOPS_ASSIGN_OR_RETURN(wan::WanBatch batch, BatchOf(req, "pushBatch"));
    std::string report_refused;
    GEOPS_RETURN_IF_ERROR(wan::DeliverBatch(*receiver_, batch, &report_refused));
    if (!report_refused.empty()) {
      spdlog::warn("mirror: the clock report riding with batch {} of site {} was not taken: {}", batch.seq,
                   batch.origin, report_refused);
    }
    reply.seq = req.seq;
    std::string quarantined = receiver_->QuarantineOf(batch.origin, batch.seq);
    if (!quarantined.empty()) {
      reply.__set_quarantined(std::move(quarantined));
    }
    return Status::Ok();
  });
}

void MirrorHandler::notice(const gen::NoticeRequest& req) {
  Serve("notice", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckSender(req.origin, req.shard_id, "notice"));
    if (req.seq <= 0) return InvalidArgumentError("notice: seq must be >= 1");
    if (static_cast<int64_t>(req.chunk_keys.size()) > kMaxNoticeKeys) {
      return ResourceExhaustedError("notice names " + std::to_string(req.chunk_keys.size()) + " chunks, at most " +
                                    std::to_string(kMaxNoticeKeys));
    }
    if (req.timeout_ms < 1) return InvalidArgumentError("notice: timeout_ms must be >= 1");
    wan::WanNotice n;
    n.origin = req.origin;
    n.seq = static_cast<uint64_t>(req.seq);
    n.keys = UnpackKeys(req.chunk_keys);
    n.timeout_ms = req.timeout_ms;
    n.incarnation = static_cast<uint64_t>(req.incarnation);
    n.dest_incarnation = static_cast<uint64_t>(req.dest_incarnation);
    return receiver_->OnNotice(n);
  });
}

void MirrorHandler::reportClock(const gen::ClockReportRequest& req) {
  Serve("reportClock", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckSender(req.origin, req.shard_id, "reportClock"));
    if (req.clock < 0 || req.last_seq < 0) return InvalidArgumentError("reportClock: negative clock or seq");
    return receiver_->OnClock(wan::WanClockReport{req.origin, req.clock, static_cast<uint64_t>(req.last_seq),
                                                  req.drained, static_cast<uint64_t>(req.incarnation),
                                                  static_cast<uint64_t>(req.dest_incarnation)});
  });
}

void MirrorHandler::heartbeat(gen::MirrorHeartbeatReply& reply, const gen::MirrorHeartbeat& req) {
  Serve("heartbeat", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckSender(req.origin, req.shard_id, "heartbeat"));
    const uint64_t theirs = static_cast<uint64_t>(req.model_fingerprint);
    const uint64_t ours = model_->fingerprint.load(std::memory_order_acquire);
    if (theirs != 0 && ours != 0 && theirs != ours) {
      if (model_->on_conflict) model_->on_conflict(req.origin, theirs);
      return FailedPreconditionError("site " + std::to_string(req.origin) + " runs another model (fingerprint " +
                                     std::to_string(theirs) + ", here " + std::to_string(ours) +
                                     "); every site must train the same model from the same initial values");
    }
    GEOPS_RETURN_IF_ERROR(receiver_->OnHeartbeat(req.origin, static_cast<uint64_t>(req.incarnation)));
    if (req.boot != 0) receiver_->OnPeerBoot(req.origin, static_cast<uint64_t>(req.boot));
    reply.site = self_.site;
    reply.shard_id = self_.shard;
    reply.model_fingerprint = static_cast<int64_t>(ours);
    return Status::Ok();
  });
}

void MirrorHandler::schema(gen::MirrorSchemaReply& reply, const gen::MirrorSchemaRequest& req) {
  Serve("schema", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckSender(req.origin, req.shard_id, "schema"));
    std::optional<ModelSpec> spec = model_->schema ? model_->schema() : std::nullopt;
    reply.has_model = spec.has_value();
    if (spec) {
      reply.tables = SchemaToThrift(*spec);
      reply.chunk_bytes = spec->chunk_bytes();
      reply.model_fingerprint = static_cast<int64_t>(spec->Fingerprint());
    }
    return Status::Ok();
  });
}

void MirrorHandler::outerState(gen::OuterStateReply& reply, const gen::OuterStateRequest& req) {
  Serve("outerState", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckSender(req.origin, req.shard_id, "outerState"));
    if (req.snapshot < 0 || req.page < 0) {
      return InvalidArgumentError("outer state request for snapshot " + std::to_string(req.snapshot) + " page " +
                                  std::to_string(req.page));
    }
    GEOPS_ASSIGN_OR_RETURN(wan::OuterStatePage page,
                           receiver_->OnOuterState(req.origin, static_cast<uint64_t>(req.incarnation),
                                                   static_cast<uint64_t>(req.snapshot), req.page));
    reply.heard_incarnation = static_cast<int64_t>(page.heard_incarnation);
    reply.has_state = page.has_state;
    reply.joining = page.joining;
    reply.snapshot = static_cast<int64_t>(page.snapshot);
    reply.page = page.page;
    reply.pages = page.pages;
    reply.keys.reserve(page.records.size());
    reply.values.reserve(page.records.size());
    for (auto& [key, value] : page.records) {
      reply.keys.push_back(std::move(key));
      reply.values.push_back(std::move(value));
    }
    return Status::Ok();
  });
}

gen::MirrorIf* MirrorHandlerFactory::getHandler(const apache::thrift::TConnectionInfo& info) {
  auto* socket = dynamic_cast<WireSocket*>(info.transport.get());
  return new MirrorHandler(receiver_, self_, model_, socket != nullptr ? socket->PeerName() : std::string("unknown peer"),
                           socket, names_);
}

void MirrorHandlerFactory::releaseHandler(gen::MirrorIf* handler) { delete handler; }

}  // namespace geops::rpc
