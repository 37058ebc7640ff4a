#include "thrift/mirror_server.h"

#include <system_error>


#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "thrift/bounded_protocol.h"
#include "thrift/connection_server.h"
#include "thrift/counting_socket.h"
#include "thrift/error_convert.h"
#include "thrift/framed_transport.h"
#include "thrift/tls.h"
#include "thrift/mirror_handler.h"

namespace geops::rpc {


Result<std::unique_ptr<MirrorServer>> MirrorServer::Start(wan::WanReceiver* receiver, MirrorIdentity self,
                                                          const PsServerOptions& options,
                                                          std::shared_ptr<MirrorModelInfo> model) {
  if (receiver == nullptr) return InvalidArgumentError("MirrorServer needs a receiver");
  if (model == nullptr) {
    model = std::make_shared<MirrorModelInfo>();
    model->fingerprint.store(self.model_fingerprint, std::memory_order_release);
  }
  GEOPS_RETURN_IF_ERROR(options.Validate());
  const std::string where = HostPort{options.host, options.port}.ToString();
  std::shared_ptr<TlsContext> tls;
  if (options.tls.enabled()) {
    GEOPS_ASSIGN_OR_RETURN(tls, TlsContext::Create(options.tls, /*server=*/true));
  }
  auto counters = std::make_shared<ByteCounters>();
  auto transport_factory = std::make_shared<FramedTransportFactory>(options.transport);
  auto listener = std::make_shared<ListenSocket>(options.host, options.port, transport_factory->configuration(),
                                                 counters, options.transport.socket_buffer_bytes, tls);
  // Reads start only once a request arrives (the idle wait is in epoll),
  // so a read is bounded by the frame deadline: a sender that stalls inside
  // a frame or a TLS handshake releases its thread then.
  if (options.transport.frame_timeout_ms > 0) {
    listener->setRecvTimeout(static_cast<int>(options.transport.frame_timeout_ms));
  }
  if (options.send_timeout_ms > 0) listener->setSendTimeout(static_cast<int>(options.send_timeout_ms));
  try {
    listener->listen();
  } catch (...) {
    return UnavailableError(StatusFromCurrentException("mirror listen on " + where).status.message());
  }
  const int port = listener->getPort();
  auto processor = std::make_shared<gen::MirrorProcessorFactory>(std::make_shared<MirrorHandlerFactory>(
      receiver, self, std::move(model), std::make_shared<const PeerNames>(options.peers)));
  auto server = std::make_shared<ConnectionServer>(
      processor, listener, transport_factory, MakeProtocolFactory(options.transport),
      ConnectionServer::Limits{options.max_connections, options.max_active_requests, options.idle_timeout_ms},
      "site " + std::to_string(self.site) + " shard " + std::to_string(self.shard) + " mirror", "mirror");
  std::unique_ptr<MirrorServer> ms(new MirrorServer(options.host, port, counters, server));
  try {
    ms->thread_ = std::thread([m = ms.get()] {
      NameThisThread("mirror-accept");
      try {
        m->server_->serve();
      } catch (const std::exception& e) {
        spdlog::error("mirror server on port {} ended: {}", m->port_, e.what());
      }
      {
        std::lock_guard<std::mutex> lock(m->mu_);
        m->done_ = true;
      }
      m->done_cv_.notify_all();
    });
  } catch (const std::system_error& e) {
    ms->done_ = true;
    return ResourceExhaustedError(std::string("cannot start the mirror server thread: ") + e.what());
  }
  spdlog::info("site {} shard {}: mirror serving on {}", self.site, self.shard, ms->address().ToString());
  return ms;
}

MirrorServer::~MirrorServer() {
  Status s = Stop(Deadline::InMs(30000));
  if (!s.ok()) spdlog::error("mirror server on port {}: {}", port_, s.ToString());
  if (thread_.joinable()) thread_.join();
}

Status MirrorServer::Stop(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!stopping_) {
    stopping_ = true;
    server_->stop();
  }
  if (!done_cv_.wait_until(lock, deadline.when(), [this] { return done_; })) {
    return DeadlineExceededError("mirror server on port " + std::to_string(port_) + " still has " +
                                 std::to_string(server_->active_requests()) + " request(s) busy");
  }
  if (thread_.joinable()) thread_.join();
  return Status::Ok();
}

}  // namespace geops::rpc
