// CountingSocket: a Thrift TSocket that counts the bytes it really moves, and
// ListenSocket: a server socket whose accepted connections are CountingSockets
// sharing one TConfiguration and one set of counters.
//
// Counting at the socket (below framing and protocol) gives the exact bytes
// on the wire per direction, frame headers and Thrift envelopes included.
// CountingSocket also exposes ResetMessageBudget() so the framed transport
// above it can renew Thrift's per-message budget at each frame (see
// framed_transport.h).
//
// Thread-safety: a socket is used by one thread at a time (Thrift's rule);
// ByteCounters may be read from any thread while sockets update them.
// ListenSocket follows TServerSocket: listen/accept on one thread,
// interrupt()/interruptChildren() from any.
#ifndef GEOPS_THRIFT_COUNTING_SOCKET_H_
#define GEOPS_THRIFT_COUNTING_SOCKET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <sys/uio.h>

#include <thrift/TConfiguration.h>
#include <thrift/transport/TServerSocket.h>
#include <thrift/transport/TSocket.h>

#include "thrift/byte_counters.h"

namespace geops::rpc {

// What geops asks of a connection's socket, plain (CountingSocket) or TLS
// (TlsSocket, thrift/tls.h), wherever the framed transport and the handlers
// meet it.
class WireSocket {
 public:
  virtual ~WireSocket() = default;
  // A fresh per-message budget (see CountingSocket::ResetMessageBudget).
  virtual void ResetMessageBudget() = 0;
  // "address:port" of the peer, numeric (no DNS lookup).
  virtual std::string PeerName() const = 0;
  // SO_SNDBUF / SO_RCVBUF; bytes <= 0 leaves auto-tuning on.
  virtual void SetKernelBuffers(int64_t bytes) = 0;
  // Sets the receive timeout of the next reads, ms (0: none), and returns
  // the one it replaces.
  virtual int ExchangeReceiveTimeout(int ms) = 0;
  // The geops identity in the peer's verified certificate, e.g.
  // "geops://site/us" or "geops://worker/us/0" (certs/cert_authority.h);
  // empty on a plaintext connection. On TLS it completes the handshake first
  // (throws TTransportException when that fails).
  virtual std::string PeerIdentity() { return {}; }
  virtual bool secure() const { return false; }
  // True when bytes of the peer are already read from the kernel but not
  // yet consumed (TLS records), so that polling the descriptor would miss
  // them.
  virtual bool HasBufferedInput() { return false; }
};

// setsockopt of both kernel buffers of `fd`, logged (not failed) when refused.
void SetKernelBuffersOf(int fd, int64_t bytes, const std::string& peer);

class CountingSocket : public apache::thrift::transport::TSocket, public WireSocket {
 public:
  // Client side: not yet connected; open() connects. `counters` outlive
  // reconnections when the owner passes the same object to each new socket.
  CountingSocket(const std::string& host, int port,
                 std::shared_ptr<apache::thrift::TConfiguration> config,
                 std::shared_ptr<ByteCounters> counters);
  // Server side: an accepted descriptor, interruptible through
  // `interrupt_listener` (TServerSocket::interruptChildren).
  CountingSocket(THRIFT_SOCKET fd, std::shared_ptr<THRIFT_SOCKET> interrupt_listener,
                 std::shared_ptr<apache::thrift::TConfiguration> config,
                 std::shared_ptr<ByteCounters> counters);

  uint32_t read(uint8_t* buf, uint32_t len) override;
  uint32_t write_partial(const uint8_t* buf, uint32_t len) override;
  // Writes every byte of `parts` in order (sendmsg: one system call when the
  // kernel takes it all), as write() would: TTransportException TIMED_OUT
  // past the send timeout, NOT_OPEN when the peer is gone. Advances `parts`.
  void WriteGathered(std::span<iovec> parts);

  // Gives this socket a fresh per-message budget (TConfiguration max message
  // size). Thrift 0.17's TSocket only checks reads against the budget and
  // never spends it, so this is a guard should a later release start to.
  void ResetMessageBudget() override { resetConsumedMessageSize(); }

  // "address:port" of the peer, numeric: unlike getOrigin() it never waits
  // for a reverse DNS lookup, so it is safe in logs on the serving path.
  std::string PeerName() const override;

  // Sets SO_SNDBUF and SO_RCVBUF; bytes <= 0 leaves kernel auto-tuning on.
  // Logs (does not fail) when the kernel refuses. REQUIRES: isOpen().
  void SetKernelBuffers(int64_t bytes) override;
  int ExchangeReceiveTimeout(int ms) override;

 private:
  std::shared_ptr<ByteCounters> counters_;
};

class TlsContext;

class ListenSocket : public apache::thrift::transport::TServerSocket {
 public:
  // With `tls`, accepted connections are server-side TlsSockets of it.
  ListenSocket(const std::string& host, int port,
               std::shared_ptr<apache::thrift::TConfiguration> config,
               std::shared_ptr<ByteCounters> counters, int64_t socket_buffer_bytes,
               std::shared_ptr<TlsContext> tls = nullptr);

  // Binds and listens once; later calls do nothing. The owner calls it first
  // to learn the port and report bind errors, then TServerFramework::serve()
  // calls it again. Throws TTransportException when the address is taken.
  void listen() override;

 protected:
  std::shared_ptr<apache::thrift::transport::TSocket> createSocket(THRIFT_SOCKET client) override;

 private:
  std::shared_ptr<apache::thrift::TConfiguration> config_;
  std::shared_ptr<ByteCounters> counters_;
  int64_t socket_buffer_bytes_;
  std::shared_ptr<TlsContext> tls_;
  bool listening_ = false;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_COUNTING_SOCKET_H_
