#include "thrift/client_socket.h"

#include <utility>

#include "thrift/bounded_protocol.h"
#include "thrift/error_convert.h"
#include "thrift/framed_transport.h"

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
  auto socket = std::make_shared<CountingSocket>(address_.host, address_.port, factory.configuration(), counters_);
  socket->setConnTimeout(static_cast<int>(options_.connect_timeout_ms));
  socket->setSendTimeout(static_cast<int>(options_.rpc_timeout_ms));
  socket->setRecvTimeout(static_cast<int>(options_.rpc_timeout_ms));
  socket->setNoDelay(true);
  try {
    socket->open();
  } catch (...) {
    return StatusFromCurrentException("connect to " + what).status;
  }
  socket->SetKernelBuffers(options_.transport.socket_buffer_bytes);
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
