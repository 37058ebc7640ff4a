// Mutual TLS for every geops port (DESIGN §7, docs/security.md), over
// Thrift's TSSLSocket and OpenSSL.
//
// TlsContext: one OpenSSL context per server or client, built from
// TlsOptions (the deployment's CA, this process's certificate and key, as
// `geops certs` writes them). TLS 1.3 only; the peer must present a
// certificate that chains to the CA, on both sides.
//
// TlsSocket: a TSSLSocket that counts the bytes it moves (the plaintext
// bytes: TLS adds about 22 bytes per 16 KiB record on the wire) and tells
// who the peer is: the geops URI in its certificate's subjectAltName
// ("geops://site/us", "geops://worker/us/0"). Identity checks are the
// handlers' (thrift/ps_handler.cc, thrift/mirror_handler.cc); the context
// only decides whether the peer belongs to the deployment at all.
//
// Thread-safety: a TlsContext may be shared by any number of threads; a
// TlsSocket is used by one thread at a time (Thrift's rule).
#ifndef GEOPS_THRIFT_TLS_H_
#define GEOPS_THRIFT_TLS_H_

#include <cstdint>
#include <memory>
#include <string>

#include <thrift/TConfiguration.h>
#include <thrift/transport/TSSLSocket.h>

#include "common/status.h"
#include "thrift/counting_socket.h"
#include "thrift/thrift_options.h"

namespace geops::rpc {

class TlsSocket : public apache::thrift::transport::TSSLSocket, public WireSocket {
 public:
  uint32_t read(uint8_t* buf, uint32_t len) override;
  // TSSLSocket::write does not go through write_partial: both count.
  // Records are gathered in a write buffer of kWriteBufferBytes (after the
  // handshake) and reach the kernel at flush(), which the framed transport
  // calls once per frame: a 2 MiB frame is 8 write(2) calls instead of 128,
  // each waking the peer.
  void write(const uint8_t* buf, uint32_t len) override;
  uint32_t write_partial(const uint8_t* buf, uint32_t len) override;
  // Drains the write buffer, waiting for the socket up to the send timeout
  // (TTransportException TIMED_OUT past it).
  void flush() override;
  // Frees the SSL object, and with it the write buffer.
  void close() override;

  void ResetMessageBudget() override { resetConsumedMessageSize(); }
  std::string PeerName() const override;
  void SetKernelBuffers(int64_t bytes) override;
  int ExchangeReceiveTimeout(int ms) override;
  std::string PeerIdentity() override;
  bool secure() const override { return true; }
  bool HasBufferedInput() override;

  // Runs the handshake now (it otherwise runs at the first read or write) and
  // checks the server's identity against `expect` (empty: any). A client
  // calls it right after open() so that a refused certificate is reported at
  // connect. Throws TTransportException naming the peer and the reason.
  void Handshake(const std::string& expect);

 private:
  friend class TlsContext;
  TlsSocket(std::shared_ptr<apache::thrift::transport::SSLContext> ctx, const std::string& host, int port,
            std::shared_ptr<apache::thrift::TConfiguration> config, std::shared_ptr<ByteCounters> counters);
  TlsSocket(std::shared_ptr<apache::thrift::transport::SSLContext> ctx, THRIFT_SOCKET fd,
            std::shared_ptr<THRIFT_SOCKET> interrupt_listener, std::shared_ptr<apache::thrift::TConfiguration> config,
            std::shared_ptr<ByteCounters> counters);

  // Puts a buffer BIO in front of the socket BIO once the handshake is done.
  void BufferWrites();

  std::shared_ptr<ByteCounters> counters_;
  BIO* write_buffer_ = nullptr;  // owned by ssl_ once installed
  std::string identity_;  // cached once the handshake is done
};

class TlsContext {
 public:
  // Loads the CA, certificate and key. InvalidArgument naming the file when
  // one cannot be read or parsed, or the key does not match the certificate.
  static Result<std::shared_ptr<TlsContext>> Create(const TlsOptions& options, bool server);
  ~TlsContext();

  // A client socket, not yet connected (open() connects; then Handshake()).
  std::shared_ptr<TlsSocket> Connect(const std::string& host, int port,
                                     std::shared_ptr<apache::thrift::TConfiguration> config,
                                     std::shared_ptr<ByteCounters> counters) const;
  // A server socket for an accepted descriptor; the handshake runs on the
  // connection's own thread at its first read.
  std::shared_ptr<TlsSocket> Accepted(THRIFT_SOCKET fd, std::shared_ptr<THRIFT_SOCKET> interrupt_listener,
                                      std::shared_ptr<apache::thrift::TConfiguration> config,
                                      std::shared_ptr<ByteCounters> counters) const;

 private:
  class Factory;
  TlsContext(std::shared_ptr<Factory> factory, bool server);
  std::shared_ptr<Factory> factory_;
  bool server_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_TLS_H_
