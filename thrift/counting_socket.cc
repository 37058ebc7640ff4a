#include "thrift/counting_socket.h"

#include <limits.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>
#include <thrift/transport/TTransportException.h>

#include "thrift/tls.h"

namespace geops::rpc {

using apache::thrift::TConfiguration;
using apache::thrift::transport::TServerSocket;
using apache::thrift::transport::TSocket;
using apache::thrift::transport::TTransportException;

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

void CountingSocket::WriteGathered(std::span<iovec> parts) {
  if (!isOpen()) throw TTransportException(TTransportException::NOT_OPEN, "write on a closed socket");
  size_t first = 0;
  while (first < parts.size() && parts[first].iov_len == 0) ++first;
  while (first < parts.size()) {
    msghdr msg{};
    msg.msg_iov = parts.data() + first;
    msg.msg_iovlen = std::min<size_t>(parts.size() - first, IOV_MAX);
    const ssize_t put = ::sendmsg(getSocketFD(), &msg, MSG_NOSIGNAL);
    if (put < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) {
        throw TTransportException(TTransportException::TIMED_OUT, "send timeout expired");
      }
      if (error == EPIPE || error == ECONNRESET || error == ENOTCONN) {
        throw TTransportException(TTransportException::NOT_OPEN, "sendmsg()", error);
      }
      throw TTransportException(TTransportException::UNKNOWN, "sendmsg()", error);
    }
    if (put == 0) throw TTransportException(TTransportException::NOT_OPEN, "sendmsg() sent nothing");
    counters_->sent.fetch_add(static_cast<int64_t>(put), std::memory_order_relaxed);
    auto left = static_cast<size_t>(put);
    while (first < parts.size() && left >= parts[first].iov_len) left -= parts[first++].iov_len;
    if (left > 0) {
      parts[first].iov_base = static_cast<uint8_t*>(parts[first].iov_base) + left;
      parts[first].iov_len -= left;
    }
  }
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
