#include "thrift/ps_client.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "gen-cpp/ParameterServer.h"
#include "thrift/bounded_protocol.h"
#include "thrift/error_convert.h"
#include "thrift/framed_transport.h"
#include "thrift/type_convert.h"

namespace geops::rpc {
namespace {

// Envelope of one message around its payload: method name, sequence id,
// field headers, the other scalars. Generous; only used to refuse a frame
// that could not fit before building it.
constexpr int64_t kEnvelopeBytes = 512;
constexpr int64_t kBytesPerKey = 8;

std::span<const uint8_t> AsBytes(std::span<const float> values) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes());
}

void PackKeysInto(std::span<const ChunkKey> keys, std::vector<int64_t>* out) {
  out->clear();
  out->reserve(keys.size());
  for (const ChunkKey& k : keys) out->push_back(static_cast<int64_t>(k.Packed()));
}

}  // namespace

// Clears the protocol's zero-copy hooks when a call is over, however it ends.
class HookGuard {
 public:
  explicit HookGuard(BoundedBinaryProtocol* protocol) : protocol_(protocol) {}
  ~HookGuard() {
    if (protocol_ != nullptr) protocol_->ClearHooks();
  }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;

 private:
  BoundedBinaryProtocol* protocol_;
};

struct ReusedMessages {
  gen::ReadRequest read_request;
  gen::ReadReply read_reply;
  gen::UpdateRequest update_request;
};

Result<std::unique_ptr<ThriftShardConnection>> ThriftShardConnection::Create(
    HostPort address, const ThriftClientOptions& options, std::shared_ptr<const ModelSpec> spec) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (address.host.empty() || address.port < 1 || address.port > 65535) {
    return InvalidArgumentError("cannot connect to '" + address.ToString() +
                                "': need a host and a port in [1, 65535]");
  }
  return std::unique_ptr<ThriftShardConnection>(
      new ThriftShardConnection(std::move(address), options, std::move(spec)));
}

ThriftShardConnection::ThriftShardConnection(HostPort address, const ThriftClientOptions& options,
                                             std::shared_ptr<const ModelSpec> spec)
    : address_(std::move(address)),
      options_(options),
      spec_(std::move(spec)),
      counters_(std::make_shared<ByteCounters>()),
      socket_(address_, options_, counters_),
      messages_(std::make_unique<ReusedMessages>()) {}

ThriftShardConnection::~ThriftShardConnection() { Disconnect(); }

bool ThriftShardConnection::connected() const { return stub_ != nullptr && socket_.is_open(); }

worker::TransferStats ThriftShardConnection::stats() const {
  worker::TransferStats s;
  s.bytes_sent = counters_->sent.load(std::memory_order_relaxed);
  s.bytes_received = counters_->received.load(std::memory_order_relaxed);
  s.calls = calls_.load(std::memory_order_relaxed);
  s.retries = reconnects_.load(std::memory_order_relaxed);
  return s;
}

Status ThriftShardConnection::EnsureConnected() {
  if (connected()) return Status::Ok();
  Disconnect();
  if (ever_connected_) reconnects_.fetch_add(1, std::memory_order_relaxed);
  GEOPS_RETURN_IF_ERROR(socket_.Open(address_.ToString()));
  ever_connected_ = true;
  recv_timeout_ms_ = static_cast<int>(options_.rpc_timeout_ms);
  stub_ = std::make_unique<gen::ParameterServerClient>(socket_.protocol());
  return Status::Ok();
}

void ThriftShardConnection::Disconnect() {
  stub_.reset();
  socket_.Close();
}

template <typename Call>
Status ThriftShardConnection::Invoke(const char* name, int64_t server_wait_ms, Call&& call) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  GEOPS_RETURN_IF_ERROR(EnsureConnected());
  const int64_t wait = std::min<int64_t>(options_.rpc_timeout_ms + std::max<int64_t>(server_wait_ms, 0),
                                         std::numeric_limits<int32_t>::max() / 2);
  if (wait != recv_timeout_ms_) {
    socket_.socket().setRecvTimeout(static_cast<int>(wait));
    recv_timeout_ms_ = static_cast<int>(wait);
  }
  try {
    call(*stub_);
    return Status::Ok();
  } catch (...) {
    CaughtError e = StatusFromCurrentException(std::string(name) + " on " + address_.ToString());
    if (e.connection_broken) Disconnect();
    return e.status;
  }
}

std::optional<int64_t> ThriftShardConnection::PayloadBytes(std::span<const ChunkKey> keys) const {
  if (spec_ == nullptr) return std::nullopt;
  int64_t elements = 0;
  for (const ChunkKey& k : keys) {
    if (!spec_->HasChunk(k)) return std::nullopt;
    elements += spec_->ChunkElements(k);
  }
  return elements * int64_t{sizeof(float)};
}

Status ThriftShardConnection::CheckValuesFrame(std::span<const ChunkKey> keys, std::span<const float> values,
                                               const char* what) const {
  const int64_t frame = static_cast<int64_t>(values.size_bytes()) +
                        kBytesPerKey * static_cast<int64_t>(keys.size()) + kEnvelopeBytes;
  if (frame <= options_.transport.max_frame_bytes) return Status::Ok();
  return ResourceExhaustedError(std::string(what) + " of " + std::to_string(values.size_bytes()) +
                                " bytes exceeds max_frame_bytes " +
                                std::to_string(options_.transport.max_frame_bytes));
}

Result<RegisterReply> ThriftShardConnection::Register(WorkerId worker, uint64_t model_fingerprint,
                                                      const std::string& auth_token, const WorkerSession& session) {
  gen::RegisterRequest req;
  req.worker_id = worker;
  req.model_fingerprint = static_cast<int64_t>(model_fingerprint);
  req.auth_token = auth_token;
  req.session_id = static_cast<int64_t>(session.id);
  req.holder = session.holder;
  req.takeover = session.takeover;
  gen::RegisterReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("registerWorker", 0, [&](gen::ParameterServerClient& c) {
    c.registerWorker(reply, req);
  }));
  return FromThrift(reply);
}

Result<SchemaReply> ThriftShardConnection::RegisterSchema(WorkerId worker, const ModelSpec& spec,
                                                          const std::string& auth_token) {
  gen::SchemaRequest req;
  req.worker_id = worker;
  req.tables = SchemaToThrift(spec);
  req.chunk_bytes = spec.chunk_bytes();
  req.auth_token = auth_token;
  gen::SchemaReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("registerSchema", 0, [&](gen::ParameterServerClient& c) {
    c.registerSchema(reply, req);
  }));
  SchemaReply r;
  r.model_fingerprint = static_cast<uint64_t>(reply.model_fingerprint);
  r.missing = UnpackKeys(reply.missing_chunk_keys);
  return r;
}

Result<int64_t> ThriftShardConnection::InitValues(WorkerId worker, uint64_t model_fingerprint,
                                                  std::span<const ChunkKey> keys,
                                                  std::span<const float> values,
                                                  const std::string& auth_token) {
  GEOPS_RETURN_IF_ERROR(CheckValuesFrame(keys, values, "initial values"));
  gen::InitValuesRequest req;
  req.worker_id = worker;
  req.model_fingerprint = static_cast<int64_t>(model_fingerprint);
  req.chunk_keys = PackKeys(keys);
  req.auth_token = auth_token;
  gen::InitValuesReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("initValues", 0, [&](gen::ParameterServerClient& c) {
    HookGuard guard(socket_.protocol().get());
    socket_.protocol()->SubstituteOutgoing(&req.values, AsBytes(values));  // serialised from `values`
    c.initValues(reply, req);
  }));
  return int64_t{reply.missing_chunks};
}

Result<ReadReply> ThriftShardConnection::Read(WorkerId worker, Clock clock, int64_t staleness,
                                              std::span<const ChunkKey> keys, float* out,
                                              int64_t deadline_ms) {
  if (deadline_ms < 0) {
    return InvalidArgumentError("read deadline_ms must be >= 0, got " + std::to_string(deadline_ms));
  }
  const std::optional<int64_t> expected = PayloadBytes(keys);
  if (expected && *expected + kEnvelopeBytes > options_.transport.max_frame_bytes) {
    return ResourceExhaustedError("a read of " + std::to_string(*expected) +
                                  " bytes exceeds max_frame_bytes " +
                                  std::to_string(options_.transport.max_frame_bytes));
  }
  gen::ReadRequest& req = messages_->read_request;
  req.worker_id = worker;
  req.clock = clock;
  req.staleness = staleness;
  PackKeysInto(keys, &req.chunk_keys);
  req.deadline_ms = deadline_ms;
  gen::ReadReply& reply = messages_->read_reply;
  bool landed_in_out = false;
  GEOPS_RETURN_IF_ERROR(Invoke("read", deadline_ms, [&](gen::ParameterServerClient& c) {
    HookGuard guard(socket_.protocol().get());
    if (expected) {
      socket_.protocol()->RedirectIncoming(
          &reply.values, std::span<uint8_t>(reinterpret_cast<uint8_t*>(out), static_cast<size_t>(*expected)));
    }
    c.read(reply, req);  // a landed reply laid out otherwise throws (bounded_protocol.h)
    landed_in_out = socket_.protocol()->incoming_redirected();
  }));
  ReadReply r;
  r.shard_clock = reply.shard_clock;
  if (landed_in_out) return r;
  // Only a reply of an unexpected length (or any, without a spec) gets here.
  const size_t got = reply.values.size();
  if (spec_ != nullptr && (!expected || static_cast<int64_t>(got) != *expected)) {
    return InternalError("read on " + address_.ToString() + ": reply carries " + std::to_string(got) +
                         " bytes for " + std::to_string(keys.size()) + " chunks that hold " +
                         (expected ? std::to_string(*expected) : "an unknown number of") +
                         " bytes here; do worker and shard run the same model?");
  }
  if (got % sizeof(float) != 0) {
    return InternalError("read on " + address_.ToString() + ": reply of " + std::to_string(got) +
                         " bytes is not a whole number of float32");
  }
  if (got > 0) std::memcpy(out, reply.values.data(), got);
  return r;
}

Result<ReadReply> ThriftShardConnection::ReadChanged(WorkerId worker, Clock clock, int64_t staleness,
                                                     std::span<const ChunkKey> keys, uint64_t since,
                                                     ChangedValues* out, int64_t deadline_ms) {
  if (deadline_ms < 0) {
    return InvalidArgumentError("read deadline_ms must be >= 0, got " + std::to_string(deadline_ms));
  }
  gen::ReadChangedRequest req;
  req.request.worker_id = worker;
  req.request.clock = clock;
  req.request.staleness = staleness;
  PackKeysInto(keys, &req.request.chunk_keys);
  req.request.deadline_ms = deadline_ms;
  req.since = static_cast<int64_t>(since);
  gen::ReadChangedReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("readChanged", deadline_ms, [&](gen::ParameterServerClient& c) {
    HookGuard guard(socket_.protocol().get());
    c.readChanged(reply, req);
  }));
  // Only the wire's shape is checked here; whether the runs fit the chunks
  // read is the caller's to check (PsClient::ScatterChanged), once.
  if (reply.runs.size() % (2 * sizeof(uint32_t)) != 0 || reply.values.size() % sizeof(float) != 0) {
    return InternalError("readChanged on " + address_.ToString() + ": runs of " + std::to_string(reply.runs.size()) +
                         " bytes or values of " + std::to_string(reply.values.size()) +
                         " bytes are not whole; do worker and shard run the same version?");
  }
  out->runs.resize(reply.runs.size() / sizeof(uint32_t));
  if (!reply.runs.empty()) std::memcpy(out->runs.data(), reply.runs.data(), reply.runs.size());
  out->values.resize(reply.values.size() / sizeof(float));
  if (!reply.values.empty()) std::memcpy(out->values.data(), reply.values.data(), reply.values.size());
  out->read_id = static_cast<uint64_t>(reply.read_id);
  ReadReply r;
  r.shard_clock = reply.shard_clock;
  return r;
}

Result<UpdateReply> ThriftShardConnection::Update(WorkerId worker, Clock clock,
                                                  std::span<const ChunkKey> keys,
                                                  std::span<const float> values, int32_t part) {
  return SendUpdate(worker, clock, keys, values, part, /*then_clock=*/false, /*finished=*/false);
}

Result<UpdateReply> ThriftShardConnection::UpdateThenClock(WorkerId worker, Clock clock,
                                                           std::span<const ChunkKey> keys,
                                                           std::span<const float> values, int32_t part,
                                                           bool finished) {
  return SendUpdate(worker, clock, keys, values, part, /*then_clock=*/true, finished);
}

Result<UpdateReply> ThriftShardConnection::SendUpdate(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                                                      std::span<const float> values, int32_t part, bool then_clock,
                                                      bool finished) {
  GEOPS_RETURN_IF_ERROR(CheckValuesFrame(keys, values, "an update"));
  gen::UpdateRequest& req = messages_->update_request;
  req.worker_id = worker;
  req.clock = clock;
  req.__set_part(part);
  req.__set_then_clock(then_clock);
  req.__set_finished(finished);
  PackKeysInto(keys, &req.chunk_keys);
  req.values.clear();  // the payload is written from `values` directly
  gen::UpdateReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("update", 0, [&](gen::ParameterServerClient& c) {
    HookGuard guard(socket_.protocol().get());
    socket_.protocol()->SubstituteOutgoing(&req.values, AsBytes(values));
    c.update(reply, req);
  }));
  UpdateReply r;
  r.applied = reply.applied;
  r.shard_clock = reply.shard_clock;
  r.clocked = then_clock && reply.clocked;
  return r;
}

Result<Clock> ThriftShardConnection::AdvanceClock(WorkerId worker, Clock new_clock, bool finished) {
  gen::ClockRequest req;
  req.worker_id = worker;
  req.clock = new_clock;
  req.finished = finished;
  gen::ClockReply reply;
  GEOPS_RETURN_IF_ERROR(Invoke("clock", 0, [&](gen::ParameterServerClient& c) {
    c.clock(reply, req);
  }));
  return Clock{reply.shard_clock};
}

Status ThriftShardConnection::Heartbeat(WorkerId worker, uint64_t session) {
  return Invoke("heartbeat", 0,
                [&](gen::ParameterServerClient& c) { c.heartbeat(worker, static_cast<int64_t>(session)); });
}

Result<ShardStatus> ThriftShardConnection::GetStatus() {
  gen::ShardStatus reply;
  GEOPS_RETURN_IF_ERROR(Invoke("status", 0, [&](gen::ParameterServerClient& c) { c.status(reply); }));
  return FromThrift(reply);
}

Result<ReplicaSummary> ThriftShardConnection::GetReplicaSummary() {
  gen::ReplicaSummary reply;
  GEOPS_RETURN_IF_ERROR(Invoke("replicaSummary", 0, [&](gen::ParameterServerClient& c) { c.replicaSummary(reply); }));
  return FromThrift(reply);
}

Result<std::unique_ptr<ThriftShardConnectionFactory>> ThriftShardConnectionFactory::Create(
    const std::vector<std::string>& shards, const ThriftClientOptions& options,
    std::shared_ptr<const ModelSpec> spec) {
  std::vector<HostPort> parsed;
  parsed.reserve(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    Result<HostPort> hp = ParseHostPort(shards[i]);
    if (!hp.ok()) return hp.status().WithContext("shard " + std::to_string(i));
    parsed.push_back(std::move(hp).value());
  }
  return Create(std::move(parsed), options, std::move(spec));
}

Result<std::unique_ptr<ThriftShardConnectionFactory>> ThriftShardConnectionFactory::Create(
    std::vector<HostPort> shards, const ThriftClientOptions& options,
    std::shared_ptr<const ModelSpec> spec) {
  if (shards.empty()) return InvalidArgumentError("no shard addresses");
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].host.empty() || shards[i].port < 1 || shards[i].port > 65535) {
      return InvalidArgumentError("shard " + std::to_string(i) + " address '" + shards[i].ToString() +
                                  "' needs a host and a port in [1, 65535]");
    }
  }
  GEOPS_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<ThriftShardConnectionFactory>(
      new ThriftShardConnectionFactory(std::move(shards), options, std::move(spec)));
}

Result<std::unique_ptr<worker::ShardConnection>> ThriftShardConnectionFactory::Connect(ShardId shard) {
  if (shard < 0 || shard >= num_shards()) {
    return InvalidArgumentError("shard " + std::to_string(shard) + " outside [0, " +
                                std::to_string(num_shards()) + ")");
  }
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<ThriftShardConnection> c,
                         ThriftShardConnection::Create(shards_[shard], options_, spec_));
  return std::unique_ptr<worker::ShardConnection>(std::move(c));
}

}  // namespace geops::rpc
