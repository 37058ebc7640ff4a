// MirrorClient: one TCP connection from a shard to the same shard of another
// site, speaking the WAN IDL (mirror.thrift). A sender keeps two: the bulk
// lane (PushBatch, ReportClock, in order) and the priority lane (Notice,
// Heartbeat).
//
// Every call is bounded: connecting by connect_timeout_ms, sending and
// waiting for the reply by rpc_timeout_ms. The receiver's refusals come back
// with their code and message (a bad batch is InvalidArgument or DataLoss:
// do not resend it as is; ResourceExhausted: resend later). Anything that
// leaves the connection in an unknown state closes it and returns
// Unavailable; the next call reconnects. Batches are idempotent by
// (origin, seq), so any call may be retried as is.
//
// Thread-safety: a client is used by one thread at a time; the byte
// counters may be read from any thread.
#ifndef GEOPS_THRIFT_MIRROR_CLIENT_H_
#define GEOPS_THRIFT_MIRROR_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "common/model_spec.h"
#include "common/status.h"
#include "thrift/client_socket.h"
#include "thrift/counting_socket.h"
#include "thrift/host_port.h"
#include "thrift/mirror_identity.h"
#include "thrift/thrift_options.h"
#include "wan/wan_transport.h"

namespace geops::rpc {

namespace gen {
class MirrorClient;
class PushBatchRequest;
}  // namespace gen
class BoundedBinaryProtocol;
class FramedTransport;

class MirrorClient {
 public:
  // `self` identifies the sender (origin site, shard, model). InvalidArgument
  // for bad options or address. Does not connect: the first call does.
  static Result<std::unique_ptr<MirrorClient>> Create(HostPort address, MirrorIdentity self,
                                                      const ThriftClientOptions& options);
  ~MirrorClient();
  MirrorClient(const MirrorClient&) = delete;
  MirrorClient& operator=(const MirrorClient&) = delete;

  // OK: the peer applied the batch (now or before). Unavailable while it
  // waits for earlier batches: send it again.
  Result<wan::BatchAck> PushBatch(const wan::WanBatch& batch);
  // PushBatch in two halves, so that several batches travel on the
  // connection at once (wan::PeerChannel, "pipelined"): BeginPushBatch
  // sends the request, EndPushBatch reads the reply of the oldest begun,
  // in order (the server answers a connection's requests in order). Any
  // error closes the connection and forgets every batch in flight, as does
  // AbandonPushes(); other calls need none in flight (FailedPrecondition).
  Status BeginPushBatch(const wan::WanBatch& batch);
  Result<wan::BatchAck> EndPushBatch();
  void AbandonPushes();
  // Asks the peer to carry `batch` (this site's) on to site `dest`, and
  // waits for dest's answer through it (at most timeout_ms there).
  Result<wan::BatchAck> RelayBatch(SiteId dest, const wan::WanBatch& batch, int64_t timeout_ms);
  size_t pushes_in_flight() const { return in_flight_.size(); }
  Status ReportClock(const wan::WanClockReport& report);
  Status Notice(const wan::WanNotice& notice);
  // The peer's identity; FailedPrecondition when it serves another shard or
  // model.
  // `incarnation`: this shard's store incarnation (0: not known yet).
  Result<MirrorIdentity> Heartbeat(uint64_t incarnation = 0);
  // The model the peer serves or has fixed (names, shapes, initial-value
  // checksums, chunk size); nullopt while none of its workers registered
  // one. InvalidArgument for a reply that is not a valid schema.
  Result<std::optional<ModelSpec>> Schema();
  // One page of the peer's outer-step state for this site, incarnation
  // `incarnation` (WanReceiver::OnOuterState). InvalidArgument for a reply
  // whose keys and values do not pair up.
  Result<wan::OuterStatePage> OuterState(uint64_t incarnation, uint64_t snapshot, int32_t page);

  const HostPort& address() const { return address_; }
  // Exact socket bytes, all connections of this client together.
  int64_t bytes_sent() const { return counters_->sent.load(std::memory_order_relaxed); }
  int64_t bytes_received() const { return counters_->received.load(std::memory_order_relaxed); }

 private:
  MirrorClient(HostPort address, MirrorIdentity self, const ThriftClientOptions& options);
  template <typename Call>
  Status Invoke(const char* name, Call&& call);
  Status EnsureConnected();
  void Disconnect();
  // The request for `batch`: this site's, or another's that it relays.
  gen::PushBatchRequest PushRequest(const wan::WanBatch& batch) const;

  const HostPort address_;
  const MirrorIdentity self_;
  const ThriftClientOptions options_;
  const std::shared_ptr<ByteCounters> counters_;
  ClientSocket socket_;
  std::unique_ptr<gen::MirrorClient> stub_;  // on socket_'s current connection
  std::deque<int64_t> in_flight_;            // seqs of the batches begun on it, oldest first
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_CLIENT_H_
