// PsServer: serves one datacenter::Shard to the workers of its site over TCP,
// with the LAN IDL (parameter_server.thrift), the framed transport of
// framed_transport.h and the bounded binary protocol of bounded_protocol.h.
//
// Connections wait for requests in epoll, not in a thread each
// (connection_server.h), with one PsHandler per connection. A request the shard refuses gets a GeopsError reply and a log
// line; the connection stays. A connection lives until the client closes it,
// its idle timeout passes, a frame is refused (oversized, or a length that
// does not fit its frame: logged, the connection is closed, other clients
// are unaffected), or the server stops.
//
// Lifecycle: Start() binds and serves; Stop() stops accepting, interrupts
// every connection blocked on the network, and waits for calls in flight; a
// Read waiting in the shard for the clock finishes when its own deadline
// (bounded by ShardOptions::max_read_wait_ms) passes. The destructor stops
// the server and waits for those calls.
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_THRIFT_PS_SERVER_H_
#define GEOPS_THRIFT_PS_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "common/deadline.h"
#include "common/status.h"
#include "datacenter/shard.h"
#include "datacenter/shard_host.h"
#include "thrift/byte_counters.h"
#include "thrift/host_port.h"
#include "thrift/thrift_options.h"

namespace geops::rpc {

class ConnectionServer;  // thrift/connection_server.h

class PsServer {
 public:
  // Binds options.host:options.port, then serves `shard` on background
  // threads and returns. InvalidArgument when options do not validate or
  // `shard` is null; Unavailable naming the address when it cannot be bound
  // (in use, no such interface). REQUIRES: `shard` outlives the server.
  static Result<std::unique_ptr<PsServer>> Start(datacenter::Shard* shard,
                                                 const PsServerOptions& options);
  // The same for a host (datacenter/shard_host.h), whose shard may come
  // later (a client-defined model). REQUIRES: `host` outlives the server.
  static Result<std::unique_ptr<PsServer>> Start(datacenter::ShardHost* host,
                                                 const PsServerOptions& options);
  ~PsServer();

  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  // Stops serving. OK once every connection thread has ended; if a call is
  // still inside the shard at `deadline`, DeadlineExceeded (the server no
  // longer accepts or reads; a later Stop or the destructor waits again).
  Status Stop(Deadline deadline);

  // The bound port (the chosen one when options.port was 0).
  int port() const { return port_; }
  // host:port as bound.
  HostPort address() const { return HostPort{options_.host, port_}; }

  // Bytes moved on all connections so far, framing included.
  int64_t bytes_sent() const { return counters_->sent.load(std::memory_order_relaxed); }
  int64_t bytes_received() const { return counters_->received.load(std::memory_order_relaxed); }
  // Connections open now.
  int64_t connections() const;
  // Connections closed at accept because max_connections were open.
  int64_t connections_refused() const;

 private:
  static Result<std::unique_ptr<PsServer>> Start(datacenter::ShardHost* host,
                                                 const PsServerOptions& options,
                                                 std::unique_ptr<datacenter::ShardHost> owned);
  PsServer(datacenter::ShardHost* host, std::unique_ptr<datacenter::ShardHost> owned_host,
           const PsServerOptions& options, int port, std::shared_ptr<ByteCounters> counters,
           std::shared_ptr<ConnectionServer> server);
  void ServeLoop();

  datacenter::ShardHost* const host_;
  const std::unique_ptr<datacenter::ShardHost> owned_host_;  // when started over a bare shard
  const PsServerOptions options_;
  const int port_;
  const std::shared_ptr<ByteCounters> counters_;
  const std::shared_ptr<ConnectionServer> server_;

  std::mutex mu_;
  std::condition_variable serve_done_cv_;
  bool stopping_ = false;    // GUARDED_BY(mu_)
  bool serve_done_ = false;  // GUARDED_BY(mu_)
  std::thread serve_thread_;  // joined under mu_ once serve_done_
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_PS_SERVER_H_
