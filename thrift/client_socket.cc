#include "thrift/client_socket.h"

#include <utility>

#include "thrift/bounded_protocol.h"
#include "thrift/error_convert.h"
#include "thrift/framed_transport.h"
#include "thrift/tls.h"

namespace geops::rpc {

ClientSocket::ClientSocket(HostPort address, const ThriftClientOptions& options,
                           std::shared_ptr<ByteCounters> counters)
    : address_(std::move(address)), options_(options), counters_(std::move(counters)) {}

ClientSocket::~ClientSocket() { Close(); }

bool ClientSocket::is_open() const { return socket_ != nullptr && socket_->isOpen(); }

Status ClientSocket::Open(const std::string& what) {
  if (is_open()) return Status::Ok();
  Close();
  FramedTransportFactory factory(options_.transport);
  std::shared_ptr<apache::thrift::transport::TSocket> socket;
  std::shared_ptr<TlsSocket> tls_socket;
  if (options_.tls.enabled()) {
    if (tls_ == nullptr) {
      Result<std::shared_ptr<TlsContext>> ctx = TlsContext::Create(options_.tls, /*server=*/false);
      if (!ctx.ok()) return ctx.status().WithContext("connect to " + what);
      tls_ = *ctx;
    }
    tls_socket = tls_->Connect(address_.host, address_.port, factory.configuration(), counters_);
    socket = tls_socket;
  } else {
    socket = std::make_shared<CountingSocket>(address_.host, address_.port, factory.configuration(), counters_);
  }
  socket->setConnTimeout(static_cast<int>(options_.connect_timeout_ms));
  socket->setSendTimeout(static_cast<int>(options_.rpc_timeout_ms));
  socket->setRecvTimeout(static_cast<int>(options_.rpc_timeout_ms));
  socket->setNoDelay(true);
  try {
    socket->open();
    if (tls_socket != nullptr) tls_socket->Handshake(options_.tls.expect_peer);
  } catch (...) {
    socket->close();
    return StatusFromCurrentException("connect to " + what).status;
  }
  SetKernelBuffersOf(socket->getSocketFD(), options_.transport.socket_buffer_bytes,
                     address_.ToString());
  socket_ = socket;
  transport_ = std::static_pointer_cast<FramedTransport>(factory.getTransport(socket));
  protocol_ = std::make_shared<BoundedBinaryProtocol>(transport_, options_.transport);
  return Status::Ok();
}

void ClientSocket::Close() {
  if (socket_ != nullptr) socket_->close();
  protocol_.reset();
  transport_.reset();
  socket_.reset();
}

}  // namespace geops::rpc
