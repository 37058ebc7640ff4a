// ConnectionServer: serves Thrift connections without a thread per idle
// connection (the shard's LAN port and the mirror port).
//
// Thrift's TThreadedServer gives every connection a thread that blocks
// reading its next request, so a thousand idle sockets held a thousand
// threads and, at the connection limit, left a legitimate worker waiting in
// the accept backlog. Here an idle connection is only a file descriptor in
// an epoll set: when a request starts to arrive the connection goes to a
// pool of threads, which reads the frame (within the frame deadline,
// framed_transport.h), runs the handler (which may wait, e.g. a read held
// for the clock) and writes the reply, then hands the connection back to
// epoll. The pool grows with the requests in progress, up to
// max_active_requests; open connections are capped at max_connections,
// beyond which a new one is accepted and closed at once (logged, counted).
//
// One processor (handler) per connection, made at accept, as with
// TThreadedServer, so identities bound to a connection (TLS) stay bound.
//
// Thread-safety: serve() runs on one thread; stop() and the counters may be
// called from any.
#ifndef GEOPS_THRIFT_CONNECTION_SERVER_H_
#define GEOPS_THRIFT_CONNECTION_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TProcessor.h>
#include <thrift/protocol/TProtocol.h>
#include <thrift/transport/TTransport.h>

#include "thrift/counting_socket.h"

namespace geops::rpc {

class ConnectionServer {
 public:
  struct Limits {
    int64_t max_connections = 10000;     // open at once
    int64_t max_active_requests = 1024;  // requests in progress at once (pool threads)
    int64_t idle_timeout_ms = 0;         // close a connection silent this long; 0 = never
  };

  // `listener` is already listening. `name` prefixes the log lines;
  // `thread_tag` names the poller and the pool threads (`<tag>-poll`,
  // `<tag>-work`, as top -H shows them).
  ConnectionServer(std::shared_ptr<apache::thrift::TProcessorFactory> processors,
                   std::shared_ptr<ListenSocket> listener,
                   std::shared_ptr<apache::thrift::transport::TTransportFactory> transports,
                   std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols, Limits limits,
                   std::string name, std::string thread_tag = "rpc");
  ~ConnectionServer();
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  // Accepts and serves until stop(); returns once every request in progress
  // has finished and every connection is closed. Throws
  // TTransportException when epoll cannot be set up.
  void serve();
  // Stops accepting, closes idle connections and interrupts reads in
  // progress; requests inside a handler finish by their own deadline.
  void stop();

  int64_t connections() const { return open_.load(std::memory_order_relaxed); }
  int64_t active_requests() const { return active_.load(std::memory_order_relaxed); }
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  struct Connection;

  void Accepted(std::shared_ptr<apache::thrift::transport::TTransport> client);
  void PollLoop();
  void WorkerLoop();
  // Serves requests of `c` while they are already there; false when the
  // connection ended (closed by the peer, broken, or refused a frame).
  bool Handle(Connection& c);
  void Rearm(const std::shared_ptr<Connection>& c);
  void Close(const std::shared_ptr<Connection>& c);  // REQUIRES: mu_ held
  void CloseIdle(int64_t now_ms);

  const std::shared_ptr<apache::thrift::TProcessorFactory> processors_;
  const std::shared_ptr<ListenSocket> listener_;
  const std::shared_ptr<apache::thrift::transport::TTransportFactory> transports_;
  const std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols_;
  const Limits limits_;
  const std::string name_;
  const std::string thread_tag_;

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: wakes the poller at stop

  std::atomic<int64_t> open_{0};
  std::atomic<int64_t> active_{0};
  std::atomic<int64_t> refused_{0};

  std::mutex mu_;
  std::condition_variable work_cv_;  // a connection is queued, or stopping
  std::condition_variable idle_cv_;  // a request finished
  bool stopping_ = false;                                // GUARDED_BY(mu_)
  std::map<uint64_t, std::shared_ptr<Connection>> by_id_;  // GUARDED_BY(mu_): every open connection
  std::deque<std::shared_ptr<Connection>> ready_;        // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;                     // GUARDED_BY(mu_)
  int64_t idle_workers_ = 0;                             // GUARDED_BY(mu_)
  std::thread poller_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_CONNECTION_SERVER_H_
