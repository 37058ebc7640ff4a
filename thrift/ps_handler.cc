#include "thrift/ps_handler.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/deadline.h"
#include "datacenter/replica_summary.h"
#include "thrift/counting_socket.h"
#include "thrift/error_convert.h"
#include "thrift/guarded_call.h"
#include "thrift/peer_identity.h"
#include "thrift/type_convert.h"

namespace geops::rpc {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire carries little-endian float32; a big-endian host would need swapping");

bool IsFloatAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(float) == 0;
}

// The float32 values of `raw`: in place when aligned (the usual case), else
// copied into `*copy`. InvalidArgument when not a whole number of float32.
Result<std::span<const float>> FloatsOfBytes(std::span<const uint8_t> raw, std::vector<float>* copy,
                                             const char* what) {
  if (raw.size() % sizeof(float) != 0) {
    return InvalidArgumentError(std::string(what) + ": payload is " + std::to_string(raw.size()) +
                                " bytes, not a whole number of float32");
  }
  const size_t n = raw.size() / sizeof(float);
  if (IsFloatAligned(raw.data())) return std::span<const float>(reinterpret_cast<const float*>(raw.data()), n);
  copy->resize(n);
  if (n > 0) std::memcpy(copy->data(), raw.data(), raw.size());
  return std::span<const float>(*copy);
}

// How loudly a refusal is logged: bad input and bugs are warnings/errors;
// waits that ran out and retries are routine.
spdlog::level::level_enum LogLevel(StatusCode code) {
  switch (code) {
    case StatusCode::kInternal:
    case StatusCode::kDataLoss:
    case StatusCode::kUnknown:
      return spdlog::level::err;
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
      return spdlog::level::info;
    default:
      return spdlog::level::warn;
  }
}

}  // namespace

PsHandler::PsHandler(datacenter::ShardHost* host, std::string peer, WireSocket* wire,
                     std::shared_ptr<const PeerNames> names)
    : host_(host),
      peer_(std::move(peer)),
      wire_(wire),
      names_(names != nullptr ? std::move(names) : std::make_shared<const PeerNames>()) {}

Result<std::span<const float>> PsHandler::FloatsOf(const std::string& field, std::vector<float>* copy,
                                                   const char* what) const {
  if (in_ != nullptr) {
    if (std::optional<std::span<const uint8_t>> borrowed = in_->Borrowed(&field)) {
      return FloatsOfBytes(*borrowed, copy, what);
    }
  }
  return FloatsOfBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(field.data()), field.size()),
                       copy, what);
}

Result<datacenter::Shard*> PsHandler::ServingShard() const {
  datacenter::Shard* shard = host_->shard();
  if (shard == nullptr) return host_->NotReady();
  return shard;
}

template <typename Body>
void PsHandler::Serve(std::string_view call, Body&& body) {
  handed_to_ = nullptr;
  const Status status = GuardedCall(call, std::forward<Body>(body));
  if (status.ok()) return;
  // A refusal made here, before the shard had the call, counts in the
  // shard's requests_rejected too (the shard counts its own).
  if (handed_to_ == nullptr) {
    if (datacenter::Shard* shard = host_->shard()) shard->CountRefused(status.code());
  }
  spdlog::log(LogLevel(status.code()), "shard {}: {} from {} refused: {}",
              host_->options().shard_id, call, peer_, status.ToString());
  throw ToGeopsError(status);
}

Status PsHandler::CheckActsFor(int32_t worker, const char* call) const {
  if (wire_ == nullptr || !wire_->secure()) return Status::Ok();
  return CheckWorkerIdentity(wire_->PeerIdentity(), peer_, *names_, worker, call);
}

void PsHandler::registerWorker(gen::RegisterReply& reply, const gen::RegisterRequest& req) {
  Serve("registerWorker", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(req.worker_id, "registerWorker"));
    if (req.holder.size() > kMaxHolderBytes) {
      return InvalidArgumentError("registerWorker: the holder's name is " + std::to_string(req.holder.size()) +
                                  " bytes, over " + std::to_string(kMaxHolderBytes));
    }
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    handed_to_ = shard;
    GEOPS_ASSIGN_OR_RETURN(
        RegisterReply r,
        shard->RegisterWorker(req.worker_id, static_cast<uint64_t>(req.model_fingerprint), req.auth_token,
                              WorkerSession{static_cast<uint64_t>(req.session_id), req.holder, req.takeover}));
    reply = ToThrift(r);
    return Status::Ok();
  });
}

void PsHandler::read(gen::ReadReply& reply, const gen::ReadRequest& req) {
  Serve("read", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(req.worker_id, "read"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    return DoRead(shard, reply, req);
  });
}

Status PsHandler::DoRead(datacenter::Shard* shard, gen::ReadReply& reply, const gen::ReadRequest& req) {
  if (req.deadline_ms < 0) {
    return InvalidArgumentError("read deadline_ms must be >= 0, got " + std::to_string(req.deadline_ms));
  }
  std::vector<ChunkKey> keys = UnpackKeys(req.chunk_keys);
  // The shard's own checks, before the reply buffer is sized from the keys.
  int64_t elements = 0;
  GEOPS_RETURN_IF_ERROR(shard->CheckReadKeys(keys, &elements));
  const auto n = static_cast<size_t>(elements);
  const int64_t wait_ms = std::min(req.deadline_ms, shard->options().max_read_wait_ms);
  const Deadline deadline = Deadline::InMs(wait_ms);
  handed_to_ = shard;
  if (out_ == nullptr) {  // through the reply's string
    reply.values.resize(n * sizeof(float));
    std::vector<float> bounce(n);
    GEOPS_ASSIGN_OR_RETURN(ReadReply r, shard->Read(req.worker_id, req.clock, req.staleness, keys,
                                                     bounce.data(), deadline));
    if (n > 0) std::memcpy(reply.values.data(), bounce.data(), n * sizeof(float));
    reply.shard_clock = r.shard_clock;
    return Status::Ok();
  }
  // The shard writes into a buffer the connection's transport keeps, which
  // the protocol then sends as the reply's values without another copy.
  std::span<uint8_t> scratch = out_->OutgoingScratch(n * sizeof(float));
  float* values = reinterpret_cast<float*>(scratch.data());  // new[]: aligned for any scalar
  GEOPS_ASSIGN_OR_RETURN(ReadReply r,
                         shard->Read(req.worker_id, req.clock, req.staleness, keys, values, deadline));
  reply.values.clear();
  out_->SubstituteOutgoing(&reply.values, scratch);
  reply.shard_clock = r.shard_clock;
  return Status::Ok();
}

void PsHandler::readChanged(gen::ReadChangedReply& reply, const gen::ReadChangedRequest& req) {
  Serve("readChanged", [&]() -> Status {
    const gen::ReadRequest& read = req.request;
    GEOPS_RETURN_IF_ERROR(CheckActsFor(read.worker_id, "readChanged"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    if (read.deadline_ms < 0) {
      return InvalidArgumentError("read deadline_ms must be >= 0, got " + std::to_string(read.deadline_ms));
    }
    std::vector<ChunkKey> keys = UnpackKeys(read.chunk_keys);
    const Deadline deadline = Deadline::InMs(std::min(read.deadline_ms, shard->options().max_read_wait_ms));
    handed_to_ = shard;
    ChangedValues changed;
    GEOPS_ASSIGN_OR_RETURN(ReadReply r, shard->ReadChanged(read.worker_id, read.clock, read.staleness, keys,
                                                           static_cast<uint64_t>(req.since), &changed, deadline));
    reply.shard_clock = r.shard_clock;
    reply.read_id = static_cast<int64_t>(changed.read_id);
    reply.runs.assign(reinterpret_cast<const char*>(changed.runs.data()), changed.runs.size() * sizeof(uint32_t));
    reply.values.assign(reinterpret_cast<const char*>(changed.values.data()),
                        changed.values.size() * sizeof(float));
    return Status::Ok();
  });
}

void PsHandler::update(gen::UpdateReply& reply, const gen::UpdateRequest& req) {
  Serve("update", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(req.worker_id, "update"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    return DoUpdate(shard, reply, req);
  });
}

Status PsHandler::DoUpdate(datacenter::Shard* shard, gen::UpdateReply& reply,
                           const gen::UpdateRequest& req) {
  // The handler converts (bytes to floats, keys to ChunkKeys); the shard
  // checks everything else (BatchValidator), in the same words over any
  // transport.
  std::vector<float> copy;
  GEOPS_ASSIGN_OR_RETURN(std::span<const float> values, FloatsOf(req.values, &copy, "update batch"));
  std::vector<ChunkKey> keys = UnpackKeys(req.chunk_keys);
  handed_to_ = shard;
  GEOPS_ASSIGN_OR_RETURN(UpdateReply r, shard->Update(req.worker_id, req.clock, keys, values, req.part));
  reply.applied = r.applied;
  reply.shard_clock = r.shard_clock;
  if (req.then_clock) {  // the clock's last part: advance as clock() would (see the IDL)
    GEOPS_ASSIGN_OR_RETURN(Clock c, shard->AdvanceClock(req.worker_id, req.clock + 1, req.finished));
    reply.shard_clock = c;
    reply.clocked = true;
  }
  return Status::Ok();
}

void PsHandler::clock(gen::ClockReply& reply, const gen::ClockRequest& req) {
  Serve("clock", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(req.worker_id, "clock"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    handed_to_ = shard;
    GEOPS_ASSIGN_OR_RETURN(Clock c, shard->AdvanceClock(req.worker_id, req.clock, req.finished));
    reply.shard_clock = c;
    return Status::Ok();
  });
}

void PsHandler::heartbeat(int32_t worker_id, int64_t session_id) {
  Serve("heartbeat", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(worker_id, "heartbeat"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    handed_to_ = shard;
    return shard->Heartbeat(worker_id, static_cast<uint64_t>(session_id));
  });
}

void PsHandler::status(gen::ShardStatus& reply) {
  Serve("status", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(-1, "status"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    reply = ToThrift(shard->GetStatus());
    return Status::Ok();
  });
}

void PsHandler::replicaSummary(gen::ReplicaSummary& reply) {
  Serve("replicaSummary", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(-1, "replicaSummary"));
    GEOPS_ASSIGN_OR_RETURN(datacenter::Shard * shard, ServingShard());
    GEOPS_ASSIGN_OR_RETURN(ReplicaSummary summary, datacenter::SummarizeReplica(*shard));
    reply = ToThrift(summary);
    return Status::Ok();
  });
}

void PsHandler::registerSchema(gen::SchemaReply& reply, const gen::SchemaRequest& req) {
  Serve("registerSchema", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(req.worker_id, "registerSchema"));
    GEOPS_ASSIGN_OR_RETURN(ModelSpec proposal, SchemaFromThrift(req.tables, req.chunk_bytes));
    GEOPS_ASSIGN_OR_RETURN(SchemaReply r, host_->RegisterSchema(req.worker_id, proposal, req.auth_token));
    reply.model_fingerprint = static_cast<int64_t>(r.model_fingerprint);
    reply.missing_chunk_keys = PackKeys(r.missing);
    return Status::Ok();
  });
}

void PsHandler::initValues(gen::InitValuesReply& reply, const gen::InitValuesRequest& req) {
  Serve("initValues", [&]() -> Status {
    GEOPS_RETURN_IF_ERROR(CheckActsFor(req.worker_id, "initValues"));
    return DoInitValues(reply, req);
  });
}

Status PsHandler::DoInitValues(gen::InitValuesReply& reply, const gen::InitValuesRequest& req) {
  std::vector<float> copy;
  GEOPS_ASSIGN_OR_RETURN(std::span<const float> values, FloatsOf(req.values, &copy, "initial values"));
  GEOPS_ASSIGN_OR_RETURN(int64_t missing,
                         host_->InitValues(req.worker_id, static_cast<uint64_t>(req.model_fingerprint),
                                           UnpackKeys(req.chunk_keys), values, req.auth_token));
  reply.missing_chunks = missing;
  return Status::Ok();
}

gen::ParameterServerIf* PsHandlerFactory::getHandler(const apache::thrift::TConnectionInfo& info) {
  // The accepted socket is a CountingSocket (ListenSocket makes them); its
  // numeric peer name costs no DNS lookup.
  auto* socket = dynamic_cast<WireSocket*>(info.transport.get());
  auto* handler =
      new PsHandler(host_, socket != nullptr ? socket->PeerName() : std::string("unknown peer"), socket, names_);
  handler->ZeroCopyThrough(dynamic_cast<BoundedBinaryProtocol*>(info.input.get()),
                           dynamic_cast<BoundedBinaryProtocol*>(info.output.get()));
  return handler;
}

void PsHandlerFactory::releaseHandler(gen::ParameterServerIf* handler) { delete handler; }

}  // namespace geops::rpc
