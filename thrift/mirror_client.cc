#include "thrift/mirror_client.h"

#include <chrono>
#include <random>

#include "gen-cpp/Mirror.h"
#include "thrift/bounded_protocol.h"
#include "thrift/error_convert.h"
#include "thrift/framed_transport.h"
#include "thrift/type_convert.h"

namespace geops::rpc {
namespace {

// Envelope of a pushBatch around its payload; for refusing oversized frames
// before building them.
constexpr int64_t kEnvelopeBytes = 256;

// This process's start id, which heartbeats carry: different at every start
// (random, never 0), so a peer can tell a restart from a reconnection.
uint64_t ProcessBootId() {
  static const uint64_t id = [] {
    std::random_device rd;
    const uint64_t v = (uint64_t{rd()} << 32) ^ rd() ^
                       static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    return v == 0 ? 1 : v;
  }();
  return id;
}

}  // namespace

Result<std::unique_ptr<MirrorClient>> MirrorClient::Create(HostPort address, MirrorIdentity self,
                                                           const ThriftClientOptions& options) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (address.host.empty() || address.port < 1 || address.port > 65535) {
    return InvalidArgumentError("cannot connect to mirror '" + address.ToString() +
                                "': need a host and a port in [1, 65535]");
  }
  return std::unique_ptr<MirrorClient>(new MirrorClient(std::move(address), self, options));
}

MirrorClient::MirrorClient(HostPort address, MirrorIdentity self, const ThriftClientOptions& options)
    : address_(std::move(address)),
      self_(self),
      options_(options),
      counters_(std::make_shared<ByteCounters>()),
      socket_(address_, options_, counters_) {}

MirrorClient::~MirrorClient() { Disconnect(); }

Status MirrorClient::EnsureConnected() {
  if (stub_ != nullptr && socket_.is_open()) return Status::Ok();
  Disconnect();
  GEOPS_RETURN_IF_ERROR(socket_.Open("mirror " + address_.ToString()));
  stub_ = std::make_unique<gen::MirrorClient>(socket_.protocol());
  return Status::Ok();
}

void MirrorClient::Disconnect() {
  in_flight_.clear();
  stub_.reset();
  socket_.Close();
}

template <typename Call>
Status MirrorClient::Invoke(const char* name, Call&& call) {
  if (!in_flight_.empty()) {
    return FailedPreconditionError(std::string(name) + " to mirror " + address_.ToString() + " with " +
                                   std::to_string(in_flight_.size()) + " batches in flight on the connection");
  }
  GEOPS_RETURN_IF_ERROR(EnsureConnected());
  try {
    call(*stub_);
    return Status::Ok();
  } catch (...) {
    CaughtError e = StatusFromCurrentException(std::string(name) + " to mirror " + address_.ToString());
    if (e.connection_broken) Disconnect();
    return e.status;
  }
}

gen::PushBatchRequest MirrorClient::PushRequest(const wan::WanBatch& batch) const {
  gen::PushBatchRequest req;
  // Another site's batch that this site relays (ShapedTransport::Forward)
  // names its origin; every other batch is this site's own.
  req.origin = batch.relayed ? batch.origin : self_.site;
  if (batch.relayed) req.__set_relayed_by(self_.site);
  req.shard_id = self_.shard;
  req.seq = static_cast<int64_t>(batch.seq);
  req.clock = batch.clock;
  req.payload.assign(batch.payload.begin(), batch.payload.end());
  req.incarnation = static_cast<int64_t>(batch.incarnation);
  req.dest_incarnation = static_cast<int64_t>(batch.dest_incarnation);
  if (batch.report) {
    gen::RidingReport report;
    report.clock = batch.report->clock;
    report.drained = batch.report->drained;
    req.__set_report(report);
  }
  return req;
}

Result<wan::BatchAck> MirrorClient::RelayBatch(SiteId dest, const wan::WanBatch& batch, int64_t timeout_ms) {
  if (static_cast<int64_t>(batch.payload.size()) + kEnvelopeBytes > options_.transport.max_frame_bytes) {
    return ResourceExhaustedError("a WAN batch of " + std::to_string(batch.payload.size()) +
                                  " bytes exceeds max_frame_bytes " + std::to_string(options_.transport.max_frame_bytes));
  }
  gen::RelayBatchRequest req;
  req.dest = dest;
  req.batch = PushRequest(batch);
  req.timeout_ms = timeout_ms;
  gen::PushBatchReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("relayBatch", [&](gen::MirrorClient& stub) { stub.relayBatch(reply, req); }));
  if (reply.seq != static_cast<int64_t>(batch.seq)) {
    Disconnect();
    return InternalError("mirror " + address_.ToString() + " acknowledged relayed seq " + std::to_string(reply.seq) +
                         " for seq " + std::to_string(batch.seq));
  }
  wan::BatchAck ack;
  ack.seq = batch.seq;
  if (reply.__isset.quarantined) ack.quarantined = reply.quarantined;
  return ack;
}

Result<wan::BatchAck> MirrorClient::PushBatch(const wan::WanBatch& batch) {
  GEOPS_RETURN_IF_ERROR(BeginPushBatch(batch));
  return EndPushBatch();
}

Status MirrorClient::BeginPushBatch(const wan::WanBatch& batch) {
  if (static_cast<int64_t>(batch.payload.size()) + kEnvelopeBytes > options_.transport.max_frame_bytes) {
    return ResourceExhaustedError("a WAN batch of " + std::to_string(batch.payload.size()) +
                                  " bytes exceeds max_frame_bytes " + std::to_string(options_.transport.max_frame_bytes));
  }
  gen::PushBatchRequest req = PushRequest(batch);
  GEOPS_RETURN_IF_ERROR(EnsureConnected());
  try {
    stub_->send_pushBatch(req);
  } catch (...) {
    // A request half written leaves the connection unusable.
    Disconnect();
    return StatusFromCurrentException("pushBatch to mirror " + address_.ToString()).status;
  }
  in_flight_.push_back(req.seq);
  return Status::Ok();
}

Result<wan::BatchAck> MirrorClient::EndPushBatch() {
  if (in_flight_.empty() || stub_ == nullptr) {
    return FailedPreconditionError("no batch in flight to mirror " + address_.ToString());
  }
  const int64_t seq = in_flight_.front();
  gen::PushBatchReply reply;
  try {
    stub_->recv_pushBatch(reply);
  } catch (...) {
    CaughtError e = StatusFromCurrentException("pushBatch to mirror " + address_.ToString());
    // A refusal (an application error in the reply) leaves the connection
    // in order; the caller abandons the batches behind it all the same.
    if (e.connection_broken) Disconnect();
    else in_flight_.pop_front();
    return e.status;
  }
  in_flight_.pop_front();
  if (reply.seq != seq) {
    Disconnect();
    return InternalError("mirror " + address_.ToString() + " acknowledged seq " + std::to_string(reply.seq) +
                         " for seq " + std::to_string(seq));
  }
  wan::BatchAck ack;
  ack.seq = static_cast<uint64_t>(seq);
  if (reply.__isset.quarantined) ack.quarantined = reply.quarantined;
  return ack;
}

void MirrorClient::AbandonPushes() {
  // Replies still on their way would answer the wrong requests: a fresh
  // connection for what comes next.
  if (!in_flight_.empty()) Disconnect();
}

Status MirrorClient::ReportClock(const wan::WanClockReport& report) {
  gen::ClockReportRequest req;
  req.origin = self_.site;
  req.shard_id = self_.shard;
  req.clock = report.clock;
  req.last_seq = static_cast<int64_t>(report.last_seq);
  req.drained = report.drained;
  req.incarnation = static_cast<int64_t>(report.incarnation);
  req.dest_incarnation = static_cast<int64_t>(report.dest_incarnation);
  return Invoke("reportClock", [&](gen::MirrorClient& c) { c.reportClock(req); });
}

Status MirrorClient::Notice(const wan::WanNotice& notice) {
  gen::NoticeRequest req;
  req.origin = self_.site;
  req.shard_id = self_.shard;
  req.seq = static_cast<int64_t>(notice.seq);
  req.chunk_keys = PackKeys(notice.keys);
  req.timeout_ms = notice.timeout_ms;
  req.incarnation = static_cast<int64_t>(notice.incarnation);
  req.dest_incarnation = static_cast<int64_t>(notice.dest_incarnation);
  return Invoke("notice", [&](gen::MirrorClient& c) { c.notice(req); });
}

Result<MirrorIdentity> MirrorClient::Heartbeat(uint64_t incarnation) {
  gen::MirrorHeartbeat req;
  req.origin = self_.site;
  req.shard_id = self_.shard;
  req.model_fingerprint = static_cast<int64_t>(self_.model_fingerprint);
  req.incarnation = static_cast<int64_t>(incarnation);
  req.boot = static_cast<int64_t>(ProcessBootId());
  gen::MirrorHeartbeatReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("heartbeat", [&](gen::MirrorClient& c) { c.heartbeat(reply, req); }));
  MirrorIdentity peer{reply.site, reply.shard_id, static_cast<uint64_t>(reply.model_fingerprint)};
  if (peer.shard != self_.shard) {
    return FailedPreconditionError("mirror " + address_.ToString() + " serves shard " + std::to_string(peer.shard) +
                                   ", expected shard " + std::to_string(self_.shard));
  }
  return peer;
}

Result<std::optional<ModelSpec>> MirrorClient::Schema() {
  gen::MirrorSchemaRequest req;
  req.origin = self_.site;
  req.shard_id = self_.shard;
  gen::MirrorSchemaReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("schema", [&](gen::MirrorClient& c) { c.schema(reply, req); }));
  if (!reply.has_model) return std::optional<ModelSpec>();
  Result<ModelSpec> spec = SchemaFromThrift(reply.tables, reply.chunk_bytes);
  if (!spec.ok()) {
    return InvalidArgumentError("mirror " + address_.ToString() + " sent a schema that is not valid: " +
                                spec.status().message());
  }
  return std::optional<ModelSpec>(std::move(spec).value());
}

Result<wan::OuterStatePage> MirrorClient::OuterState(uint64_t incarnation, uint64_t snapshot, int32_t page) {
  gen::OuterStateRequest req;
  req.origin = self_.site;
  req.shard_id = self_.shard;
  req.incarnation = static_cast<int64_t>(incarnation);
  req.snapshot = static_cast<int64_t>(snapshot);
  req.page = page;
  gen::OuterStateReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("outerState", [&](gen::MirrorClient& c) { c.outerState(reply, req); }));
  if (reply.keys.size() != reply.values.size() || reply.page < 0 || reply.pages < 0 ||
      (reply.has_state && reply.page >= reply.pages)) {
    return InvalidArgumentError("mirror " + address_.ToString() + " sent an outer state page that does not parse");
  }
  wan::OuterStatePage out;
  out.heard_incarnation = static_cast<uint64_t>(reply.heard_incarnation);
  out.has_state = reply.has_state;
  out.joining = reply.joining;
  out.snapshot = static_cast<uint64_t>(reply.snapshot);
  out.page = reply.page;
  out.pages = reply.pages;
  out.records.reserve(reply.keys.size());
  for (size_t i = 0; i < reply.keys.size(); ++i) out.records.emplace_back(std::move(reply.keys[i]), std::move(reply.values[i]));
  return out;
}

}  // namespace geops::rpc
