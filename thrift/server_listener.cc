#include "thrift/server_listener.h"

#include <string>

#include "thrift/error_convert.h"
#include "thrift/host_port.h"
#include "thrift/tls.h"

namespace geops::rpc {

Result<ServerListener> BindServerListener(const PsServerOptions& options, std::string_view what) {
  std::shared_ptr<TlsContext> tls;
  if (options.tls.enabled()) {
    GEOPS_ASSIGN_OR_RETURN(tls, TlsContext::Create(options.tls, /*server=*/true));
  }
  ServerListener out;
  out.counters = std::make_shared<ByteCounters>();
  out.transport_factory = std::make_shared<FramedTransportFactory>(options.transport);
  out.socket = std::make_shared<ListenSocket>(options.host, options.port, out.transport_factory->configuration(),
                                              out.counters, options.transport.socket_buffer_bytes, tls);
  // Reads start only once a request arrives (the idle wait is in epoll),
  // so a read is bounded by the frame deadline: a sender that stalls inside
  // a frame or a TLS handshake releases its thread then.
  if (options.transport.frame_timeout_ms > 0) {
    out.socket->setRecvTimeout(static_cast<int>(options.transport.frame_timeout_ms));
  }
  if (options.send_timeout_ms > 0) out.socket->setSendTimeout(static_cast<int>(options.send_timeout_ms));
  try {
    out.socket->listen();
  } catch (...) {
    const std::string where = std::string(what) + " on " + HostPort{options.host, options.port}.ToString();
    return UnavailableError(StatusFromCurrentException(where).status.message());
  }
  out.port = out.socket->getPort();
  return out;
}

}  // namespace geops::rpc
