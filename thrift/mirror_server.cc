#include "thrift/mirror_server.h"

#include <system_error>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "thrift/bounded_protocol.h"
#include "thrift/connection_server.h"
#include "thrift/mirror_handler.h"
#include "thrift/server_listener.h"

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
  GEOPS_ASSIGN_OR_RETURN(ServerListener listener, BindServerListener(options, "mirror listen"));
  auto processor = std::make_shared<gen::MirrorProcessorFactory>(std::make_shared<MirrorHandlerFactory>(
      receiver, self, std::move(model), std::make_shared<const PeerNames>(options.peers)));
  auto server = std::make_shared<ConnectionServer>(
      processor, listener.socket, listener.transport_factory, MakeProtocolFactory(options.transport),
      ConnectionServer::Limits{options.max_connections, options.max_active_requests, options.idle_timeout_ms},
      "site " + std::to_string(self.site) + " shard " + std::to_string(self.shard) + " mirror", "mirror");
  std::unique_ptr<MirrorServer> ms(new MirrorServer(options.host, listener.port, listener.counters, server));
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
