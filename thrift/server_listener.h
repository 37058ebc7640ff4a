// The listening side shared by the PS server and the mirror server: a
// socket bound to PsServerOptions' host and port, speaking the framed
// transport, with TLS when configured and the frame and send deadlines of
// the options. Binding happens here, not in serve(), so that the caller
// learns the port and hears about an address in use.
#ifndef GEOPS_THRIFT_SERVER_LISTENER_H_
#define GEOPS_THRIFT_SERVER_LISTENER_H_

#include <memory>
#include <string_view>

#include "common/status.h"
#include "thrift/byte_counters.h"
#include "thrift/counting_socket.h"
#include "thrift/framed_transport.h"
#include "thrift/thrift_options.h"

namespace geops::rpc {

struct ServerListener {
  std::shared_ptr<ListenSocket> socket;                      // bound and listening
  std::shared_ptr<FramedTransportFactory> transport_factory;  // for its connections
  std::shared_ptr<ByteCounters> counters;                    // their bytes
  int port = 0;                                              // the port bound
};

// REQUIRES: options.Validate().ok(). Errors: TLS files that do not load
// (as TlsContext::Create); Unavailable "<what> on host:port: ..." when the
// address cannot be bound.
Result<ServerListener> BindServerListener(const PsServerOptions& options, std::string_view what);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_SERVER_LISTENER_H_
