// ClientSocket: the connection under a geops Thrift client (the LAN
// ThriftShardConnection and the WAN MirrorClient): a CountingSocket (or a
// TlsSocket, when options.tls is set: the handshake and the server's
// identity are checked at Open) with
// the connect/send/receive timeouts, TCP_NODELAY and kernel buffers of
// ThriftClientOptions, the framed transport that renews Thrift's message
// budget at every frame (docs/wire_format.md, DESIGN §11) and the bounded
// protocol. Opened on demand; closed when a call broke it, so the next call
// reconnects.
//
// Thread-compatible: one caller at a time, like the clients that own it.
#ifndef GEOPS_THRIFT_CLIENT_SOCKET_H_
#define GEOPS_THRIFT_CLIENT_SOCKET_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "thrift/counting_socket.h"
#include "thrift/host_port.h"
#include "thrift/thrift_options.h"

namespace geops::rpc {

class BoundedBinaryProtocol;
class TlsContext;
class FramedTransport;

class ClientSocket {
 public:
  // `counters` collects the exact socket bytes of every connection made.
  ClientSocket(HostPort address, const ThriftClientOptions& options, std::shared_ptr<ByteCounters> counters);
  // Closes the socket.
  ~ClientSocket();
  ClientSocket(const ClientSocket&) = delete;
  ClientSocket& operator=(const ClientSocket&) = delete;

  bool is_open() const;
  // Connects unless a connection is open (a caller builds its stub on the
  // new protocol()). Errors of the connect (Unavailable for a refused or
  // timed-out connect) name `what`.
  Status Open(const std::string& what);
  // Drops the connection. Closes the socket itself: closing the framed
  // transport would first try to flush what a failed call left in its
  // buffer.
  void Close();

  // REQUIRES: is_open().
  const std::shared_ptr<BoundedBinaryProtocol>& protocol() const { return protocol_; }
  apache::thrift::transport::TSocket& socket() const { return *socket_; }
  // True when the connection is mutual TLS.
  bool secure() const { return tls_ != nullptr; }
  const HostPort& address() const { return address_; }

 private:
  const HostPort address_;
  const ThriftClientOptions options_;
  const std::shared_ptr<ByteCounters> counters_;
  std::shared_ptr<TlsContext> tls_;  // built once, when options.tls is set
  std::shared_ptr<apache::thrift::transport::TSocket> socket_;
  std::shared_ptr<FramedTransport> transport_;
  std::shared_ptr<BoundedBinaryProtocol> protocol_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_CLIENT_SOCKET_H_
