#include "thrift/ps_server.h"

#include <system_error>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "thrift/bounded_protocol.h"
#include "thrift/connection_server.h"
#include "thrift/ps_handler.h"
#include "thrift/server_listener.h"

namespace geops::rpc {


Result<std::unique_ptr<PsServer>> PsServer::Start(datacenter::Shard* shard,
                                                  const PsServerOptions& options) {
  if (shard == nullptr) return InvalidArgumentError("PsServer needs a shard");
  std::unique_ptr<datacenter::ShardHost> host = datacenter::ShardHost::Serving(shard);
  datacenter::ShardHost* raw = host.get();
  return Start(raw, options, std::move(host));
}

Result<std::unique_ptr<PsServer>> PsServer::Start(datacenter::ShardHost* host,
                                                  const PsServerOptions& options) {
  if (host == nullptr) return InvalidArgumentError("PsServer needs a shard host");
  return Start(host, options, nullptr);
}

Result<std::unique_ptr<PsServer>> PsServer::Start(datacenter::ShardHost* host,
                                                  const PsServerOptions& options,
                                                  std::unique_ptr<datacenter::ShardHost> owned) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  GEOPS_ASSIGN_OR_RETURN(ServerListener listener, BindServerListener(options, "listen"));
  auto processor_factory = std::make_shared<gen::ParameterServerProcessorFactory>(
      std::make_shared<PsHandlerFactory>(host, std::make_shared<const PeerNames>(options.peers)));
  auto server = std::make_shared<ConnectionServer>(
      processor_factory, listener.socket, listener.transport_factory,
      MakeProtocolFactory(options.transport, /*borrow_binaries=*/true),
      ConnectionServer::Limits{options.max_connections, options.max_active_requests, options.idle_timeout_ms},
      "shard " + std::to_string(host->options().shard_id), "ps");
  std::unique_ptr<PsServer> ps(
      new PsServer(host, std::move(owned), options, listener.port, listener.counters, server));
  try {
    ps->serve_thread_ = std::thread([self = ps.get()] {
      NameThisThread("ps-accept");
      self->ServeLoop();
    });
  } catch (const std::system_error& e) {
    ps->serve_done_ = true;  // nothing to wait for
    return ResourceExhaustedError(std::string("cannot start the server thread: ") + e.what());
  }
  spdlog::info("shard {}: serving on {}", host->options().shard_id, ps->address().ToString());
  return ps;
}

void PsServer::ServeLoop() {
  try {
    server_->serve();
  } catch (const std::exception& e) {
    spdlog::error("shard {}: server loop ended: {}", host_->options().shard_id, e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    serve_done_ = true;
  }
  serve_done_cv_.notify_all();
}

PsServer::PsServer(datacenter::ShardHost* host, std::unique_ptr<datacenter::ShardHost> owned_host,
                   const PsServerOptions& options, int port, std::shared_ptr<ByteCounters> counters,
                   std::shared_ptr<ConnectionServer> server)
    : host_(host),
      owned_host_(std::move(owned_host)),
      options_(options),
      port_(port),
      counters_(std::move(counters)),
      server_(std::move(server)) {}

PsServer::~PsServer() {
  // Calls still in the shard end by their own deadline, which the shard
  // bounds by max_read_wait_ms.
  const int64_t grace_ms = host_->options().max_read_wait_ms + 10000;
  Status s = Stop(Deadline::InMs(grace_ms));
  while (!s.ok()) {
    spdlog::error("shard {}: server on port {} still busy at destruction: {}",
                  host_->options().shard_id, port_, s.ToString());
    s = Stop(Deadline::InMs(grace_ms));
  }
}

Status PsServer::Stop(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!stopping_) {
    stopping_ = true;
    server_->stop();  // interrupts accept() and every read in progress
  }
  if (!serve_done_cv_.wait_until(lock, deadline.when(), [this] { return serve_done_; })) {
    return DeadlineExceededError("server on port " + std::to_string(port_) + " still has " +
                                 std::to_string(server_->active_requests()) +
                                 " request(s) busy in the shard");
  }
  if (serve_thread_.joinable()) serve_thread_.join();
  return Status::Ok();
}

int64_t PsServer::connections() const { return server_->connections(); }

int64_t PsServer::connections_refused() const { return server_->refused(); }

}  // namespace geops::rpc
