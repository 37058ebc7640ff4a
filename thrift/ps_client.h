// ThriftShardConnection: worker::ShardConnection over TCP to one PsServer,
// which ThriftShardConnectionFactory opens by shard id
// (thrift/shard_connection_factory.h, the header for code outside thrift/).
//
// Transport: a CountingSocket (exact byte counts), the per-frame-budget
// FramedTransport and the BoundedBinaryProtocol, sized by ThriftClientOptions.
// Payloads are not copied on the client: a push is serialised straight from
// the caller's floats and, with a spec, a pull lands straight in `out`.
// Every call is bounded: connecting by connect_timeout_ms, sending by
// rpc_timeout_ms, and each wait for the reply by rpc_timeout_ms plus the
// server-side wait the call allows (a Read's deadline_ms).
//
// Errors: the shard's own refusals come back with their code and message.
// Anything that leaves the connection in an unknown state (refused or lost
// connection, timeout, malformed reply) closes it and returns Unavailable:
// the call may or may not have reached the shard and can be retried as is
// (updates are idempotent by (worker, clock)). The next call reconnects.
// A frame past max_frame_bytes is refused before sending, or dropped on
// receipt, with ResourceExhausted.
//
// Thread-safety: a connection is used by one thread at a time; stats() may
// be called from any thread. The factory is immutable and thread-safe.
#ifndef GEOPS_THRIFT_PS_CLIENT_H_
#define GEOPS_THRIFT_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/model_spec.h"
#include "common/status.h"
#include "thrift/client_socket.h"
#include "thrift/counting_socket.h"
#include "thrift/host_port.h"
#include "thrift/shard_connection_factory.h"
#include "thrift/thrift_options.h"
#include "worker/shard_connection.h"

namespace geops::rpc {

namespace gen {
class ParameterServerClient;
}  // namespace gen
struct ReusedMessages;

class BoundedBinaryProtocol;
class FramedTransport;

class ThriftShardConnection : public worker::ShardConnection {
 public:
  // InvalidArgument when options do not validate or the port is not in
  // [1, 65535]. Does not connect: the first call does.
  // `spec` (recommended) lets the connection check each read reply's length
  // against the chunks asked for before it touches `out`, and refuse a read
  // too large for a frame before sending it. Without it the reply length is
  // trusted: the caller must make sure worker and shard share the model (the
  // fingerprint check of Register does).
  static Result<std::unique_ptr<ThriftShardConnection>> Create(
      HostPort address, const ThriftClientOptions& options,
      std::shared_ptr<const ModelSpec> spec = nullptr);
  ~ThriftShardConnection() override;

  Result<RegisterReply> Register(WorkerId worker, uint64_t model_fingerprint, const std::string& auth_token,
                                 const WorkerSession& session = {}) override;
  Result<SchemaReply> RegisterSchema(WorkerId worker, const ModelSpec& spec,
                                     const std::string& auth_token) override;
  // ResourceExhausted when the request would exceed max_frame_bytes (nothing sent).
  Result<int64_t> InitValues(WorkerId worker, uint64_t model_fingerprint, std::span<const ChunkKey> keys,
                             std::span<const float> values, const std::string& auth_token) override;
  // Besides the shard's errors: InvalidArgument for deadline_ms < 0;
  // ResourceExhausted when the reply would exceed max_frame_bytes (nothing
  // sent); Internal when, with a spec, the reply's length does not match
  // `keys` (model mismatch; `out` untouched). A reply of the expected size
  // is read from the socket straight into `out`: should it then prove
  // malformed, the call fails with Unavailable and `out` holds its bytes.
  Result<ReadReply> Read(WorkerId worker, Clock clock, int64_t staleness,
                         std::span<const ChunkKey> keys, float* out,
                         int64_t deadline_ms) override;
  // Unimplemented from a shard without `readChanged` (the caller reads
  // whole); Internal when the reply's runs or values are not whole u32
  // pairs and floats (whether they fit `keys` is the caller's check).
  Result<ReadReply> ReadChanged(WorkerId worker, Clock clock, int64_t staleness, std::span<const ChunkKey> keys,
                                uint64_t since, ChangedValues* out, int64_t deadline_ms) override;
  // ResourceExhausted when the request would exceed max_frame_bytes (nothing sent).
  Result<UpdateReply> Update(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                             std::span<const float> values, int32_t part) override;
  using ShardConnection::Update;
  Result<Clock> AdvanceClock(WorkerId worker, Clock new_clock, bool finished) override;
  // One `update` RPC with then_clock set.
  Result<UpdateReply> UpdateThenClock(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                                      std::span<const float> values, int32_t part, bool finished) override;
  Status Heartbeat(WorkerId worker, uint64_t session = 0) override;
  Result<ShardStatus> GetStatus() override;
  Result<ReplicaSummary> GetReplicaSummary() override;

  // bytes_*: exact socket bytes, all connections of this object together.
  // calls: calls attempted. retries: reconnections after a lost connection.
  worker::TransferStats stats() const override;

  const HostPort& address() const { return address_; }
  bool connected() const;

 private:
  ThriftShardConnection(HostPort address, const ThriftClientOptions& options,
                        std::shared_ptr<const ModelSpec> spec);
  Result<UpdateReply> SendUpdate(WorkerId worker, Clock clock, std::span<const ChunkKey> keys,
                                 std::span<const float> values, int32_t part, bool then_clock, bool finished);

  // Connects if needed, sets the reply timeout, runs `call` on the stub, and
  // converts whatever it throws. Closes the connection when it is broken.
  template <typename Call>
  Status Invoke(const char* name, int64_t server_wait_ms, Call&& call);
  Status EnsureConnected();
  // Drops the stub and the connection.
  void Disconnect();
  // ResourceExhausted ("<what> of N bytes exceeds max_frame_bytes") when a
  // request carrying `values` for `keys` would not fit in one frame.
  Status CheckValuesFrame(std::span<const ChunkKey> keys, std::span<const float> values,
                          const char* what) const;
  // Payload bytes of `keys`; nullopt without a spec or when it lacks a key.
  std::optional<int64_t> PayloadBytes(std::span<const ChunkKey> keys) const;

  const HostPort address_;
  const ThriftClientOptions options_;
  const std::shared_ptr<const ModelSpec> spec_;
  const std::shared_ptr<ByteCounters> counters_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> reconnects_{0};
  bool ever_connected_ = false;
  int recv_timeout_ms_ = -1;  // as last set on socket_

  ClientSocket socket_;
  std::unique_ptr<gen::ParameterServerClient> stub_;  // on socket_'s current connection
  // Request and reply objects kept across calls, so that large payloads
  // reuse their buffers instead of allocating (and faulting in) new ones.
  std::unique_ptr<ReusedMessages> messages_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_PS_CLIENT_H_
