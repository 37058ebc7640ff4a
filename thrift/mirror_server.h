// MirrorServer: serves one shard's WAN receiver (a wan::WanReceiver, the
// shard's Replicator) to the same shard of the other sites over TCP, with
// the WAN IDL (mirror.thrift), the framed transport of framed_transport.h
// and the binary protocol; idle connections wait in epoll, not in a thread
// each (connection_server.h), with one MirrorHandler per connection. A refused frame closes only its own
// connection.
//
// Lifecycle: Start() binds and serves; Stop() stops accepting, interrupts
// every connection and waits for calls in flight (a receiver call never
// blocks for long). The destructor stops the server.
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_THRIFT_MIRROR_SERVER_H_
#define GEOPS_THRIFT_MIRROR_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "common/deadline.h"
#include "common/status.h"
#include "thrift/byte_counters.h"
#include "thrift/host_port.h"
#include "thrift/mirror_identity.h"
#include "thrift/thrift_options.h"
#include "wan/wan_transport.h"

namespace geops::rpc {

class ConnectionServer;  // thrift/connection_server.h
struct MirrorModelInfo;  // thrift/mirror_handler.h

class MirrorServer {
 public:
  // Binds options.host:options.port (0: any free port) and serves.
  // InvalidArgument for bad options or a null receiver; Unavailable naming
  // the address when it cannot be bound. REQUIRES: `receiver` outlives the
  // server.
  // `model` (optional) is what the handlers know of the shard's model; by
  // default a fixed one with self.model_fingerprint and no schema.
  static Result<std::unique_ptr<MirrorServer>> Start(wan::WanReceiver* receiver, MirrorIdentity self,
                                                     const PsServerOptions& options,
                                                     std::shared_ptr<MirrorModelInfo> model = nullptr);
  ~MirrorServer();
  MirrorServer(const MirrorServer&) = delete;
  MirrorServer& operator=(const MirrorServer&) = delete;

  // OK once every connection thread ended; DeadlineExceeded otherwise.
  Status Stop(Deadline deadline);

  int port() const { return port_; }
  HostPort address() const { return HostPort{host_, port_}; }
  int64_t bytes_sent() const { return counters_->sent.load(std::memory_order_relaxed); }
  int64_t bytes_received() const { return counters_->received.load(std::memory_order_relaxed); }

 private:
  MirrorServer(std::string host, int port, std::shared_ptr<ByteCounters> counters,
               std::shared_ptr<ConnectionServer> server)
      : host_(std::move(host)), port_(port), counters_(std::move(counters)), server_(std::move(server)) {}

  const std::string host_;
  const int port_;
  const std::shared_ptr<ByteCounters> counters_;
  const std::shared_ptr<ConnectionServer> server_;

  std::mutex mu_;
  std::condition_variable done_cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  bool done_ = false;      // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_SERVER_H_
