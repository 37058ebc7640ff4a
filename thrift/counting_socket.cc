#include "thrift/counting_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "thrift/tls.h"

namespace geops::rpc {

using apache::thrift::TConfiguration;
using apache::thrift::transport::TServerSocket;
using apache::thrift::transport::TSocket;

CountingSocket::CountingSocket(const std::string& host, int port,
                               std::shared_ptr<TConfiguration> config,
                               std::shared_ptr<ByteCounters> counters)
    : TSocket(host, port, std::move(config)), counters_(std::move(counters)) {}

CountingSocket::CountingSocket(THRIFT_SOCKET fd, std::shared_ptr<THRIFT_SOCKET> interrupt_listener,
                               std::shared_ptr<TConfiguration> config,
                               std::shared_ptr<ByteCounters> counters)
    : TSocket(fd, std::move(interrupt_listener), std::move(config)),
      counters_(std::move(counters)) {}

uint32_t CountingSocket::read(uint8_t* buf, uint32_t len) {
  uint32_t got = TSocket::read(buf, len);
  counters_->received.fetch_add(got, std::memory_order_relaxed);
  return got;
}

uint32_t CountingSocket::write_partial(const uint8_t* buf, uint32_t len) {
  uint32_t put = TSocket::write_partial(buf, len);
  counters_->sent.fetch_add(put, std::memory_order_relaxed);
  return put;
}

std::string CountingSocket::PeerName() const {
  return getPeerAddress() + ":" + std::to_string(getPeerPort());
}

void SetKernelBuffersOf(int fd, int64_t bytes, const std::string& peer) {
  if (bytes <= 0) return;
  int value = static_cast<int>(bytes);
  for (int opt : {SO_SNDBUF, SO_RCVBUF}) {
    if (setsockopt(fd, SOL_SOCKET, opt, &value, sizeof(value)) != 0) {
      spdlog::warn("setsockopt({}, {} bytes) on {}: {}", opt == SO_SNDBUF ? "SO_SNDBUF" : "SO_RCVBUF",
                   bytes, peer, std::strerror(errno));
    }
  }
}

void CountingSocket::SetKernelBuffers(int64_t bytes) { SetKernelBuffersOf(getSocketFD(), bytes, PeerName()); }

int CountingSocket::ExchangeReceiveTimeout(int ms) {
  const int old = recvTimeout_;
  setRecvTimeout(ms);
  return old;
}

ListenSocket::ListenSocket(const std::string& host, int port, std::shared_ptr<TConfiguration> config,
                           std::shared_ptr<ByteCounters> counters, int64_t socket_buffer_bytes,
                           std::shared_ptr<TlsContext> tls)
    : TServerSocket(host, port),
      config_(std::move(config)),
      counters_(std::move(counters)),
      socket_buffer_bytes_(socket_buffer_bytes),
      tls_(std::move(tls)) {
  if (socket_buffer_bytes_ > 0) {
    // Accepted sockets inherit the listener's buffer sizes.
    setTcpSendBuffer(static_cast<int>(socket_buffer_bytes_));
    setTcpRecvBuffer(static_cast<int>(socket_buffer_bytes_));
  }
}

void ListenSocket::listen() {
  if (listening_) return;
  TServerSocket::listen();
  listening_ = true;
}

std::shared_ptr<TSocket> ListenSocket::createSocket(THRIFT_SOCKET client) {
  if (tls_ != nullptr) return tls_->Accepted(client, pChildInterruptSockReader_, config_, counters_);
  return std::make_shared<CountingSocket>(client, pChildInterruptSockReader_, config_, counters_);
}

}  // namespace geops::rpc
