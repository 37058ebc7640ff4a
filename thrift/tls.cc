#include "thrift/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <csignal>
#include <memory>
#include <utility>

#include <thrift/transport/TTransportException.h>

namespace geops::rpc {

using apache::thrift::TConfiguration;
using apache::thrift::transport::SSLContext;
using apache::thrift::transport::SSLProtocol;
using apache::thrift::transport::TSSLException;
using apache::thrift::transport::TSSLSocket;
using apache::thrift::transport::TSSLSocketFactory;
using apache::thrift::transport::TTransportException;

namespace {

constexpr std::string_view kIdentityScheme = "geops://";
constexpr size_t kReadBufferBytes = 256 * 1024;
constexpr long kWriteBufferBytes = 256 * 1024;

std::string OpenSslErrors() {
  std::string out;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("no OpenSSL error queued") : out;
}

// The first subjectAltName URI of `cert` in the geops scheme, or "".
std::string IdentityOf(X509* cert) {
  std::string found;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return found;
  for (int i = 0; i < sk_GENERAL_NAME_num(names) && found.empty(); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
    std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                     static_cast<size_t>(ASN1_STRING_length(uri)));
    if (text.rfind(kIdentityScheme, 0) == 0) found = std::move(text);
  }
  GENERAL_NAMES_free(names);
  return found;
}

}  // namespace

// TSSLSocketFactory keeps its SSLContext protected; geops builds its own
// sockets (counting ones), so it only needs the configured context.
class TlsContext::Factory : public TSSLSocketFactory {
 public:
  Factory() : TSSLSocketFactory(SSLProtocol::TLSv1_2) {}
  const std::shared_ptr<SSLContext>& context() const { return ctx_; }
};

TlsSocket::TlsSocket(std::shared_ptr<SSLContext> ctx, const std::string& host, int port,
                     std::shared_ptr<TConfiguration> config, std::shared_ptr<ByteCounters> counters)
    : TSSLSocket(std::move(ctx), host, port, std::move(config)), counters_(std::move(counters)) {}

TlsSocket::TlsSocket(std::shared_ptr<SSLContext> ctx, THRIFT_SOCKET fd, std::shared_ptr<THRIFT_SOCKET> interrupt_listener,
                     std::shared_ptr<TConfiguration> config, std::shared_ptr<ByteCounters> counters)
    : TSSLSocket(std::move(ctx), fd, std::move(interrupt_listener), std::move(config)),
      counters_(std::move(counters)) {}

uint32_t TlsSocket::read(uint8_t* buf, uint32_t len) {
  uint32_t got = TSSLSocket::read(buf, len);
  counters_->received.fetch_add(got, std::memory_order_relaxed);
  return got;
}

void TlsSocket::BufferWrites() {
  if (write_buffer_ != nullptr || ssl_ == nullptr || SSL_is_init_finished(ssl_) != 1) return;
  BIO* socket_bio = SSL_get_wbio(ssl_);
  BIO* buffer = BIO_new(BIO_f_buffer());
  if (socket_bio == nullptr || buffer == nullptr || BIO_set_write_buffer_size(buffer, kWriteBufferBytes) != 1 ||
      BIO_up_ref(socket_bio) != 1) {
    BIO_free(buffer);  // unbuffered writes still work, only slower
    return;
  }
  BIO_push(buffer, socket_bio);  // the chain now holds the reference taken above
  SSL_set0_wbio(ssl_, buffer);   // drops the SSL's own reference to the bare socket BIO
  write_buffer_ = buffer;
}

void TlsSocket::write(const uint8_t* buf, uint32_t len) {
  initializeHandshake();  // no-op once done
  BufferWrites();
  TSSLSocket::write(buf, len);
  counters_->sent.fetch_add(len, std::memory_order_relaxed);
}

uint32_t TlsSocket::write_partial(const uint8_t* buf, uint32_t len) {
  uint32_t put = TSSLSocket::write_partial(buf, len);
  counters_->sent.fetch_add(put, std::memory_order_relaxed);
  return put;
}

void TlsSocket::flush() {
  if (write_buffer_ == nullptr || ssl_ == nullptr) {
    TSSLSocket::flush();
    return;
  }
  // The socket is non-blocking (TSSLSocket): a full kernel buffer makes
  // BIO_flush ask for a retry, which waits for the socket to drain.
  while (BIO_flush(write_buffer_) != 1) {
    if (!BIO_should_retry(write_buffer_)) {
      throw TTransportException(TTransportException::UNKNOWN,
                                "TLS write to " + PeerName() + " failed: " + OpenSslErrors());
    }
    waitForEvent(/*wantRead=*/false);  // throws TIMED_OUT past the send timeout
  }
}

bool TlsSocket::HasBufferedInput() { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

void TlsSocket::close() {
  write_buffer_ = nullptr;
  TSSLSocket::close();
}

std::string TlsSocket::PeerName() const { return getPeerAddress() + ":" + std::to_string(getPeerPort()); }

int TlsSocket::ExchangeReceiveTimeout(int ms) {
  const int old = recvTimeout_;
  setRecvTimeout(ms);  // TSSLSocket waits for data with poll, bounded by it
  return old;
}

void TlsSocket::SetKernelBuffers(int64_t bytes) { SetKernelBuffersOf(getSocketFD(), bytes, PeerName()); }

std::string TlsSocket::PeerIdentity() {
  if (!identity_.empty()) return identity_;
  initializeHandshake();  // no-op once done
  if (ssl_ == nullptr) return {};
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return {};  // cannot happen: the context requires one
  identity_ = IdentityOf(cert);
  X509_free(cert);
  return identity_;
}

void TlsSocket::Handshake(const std::string& expect) {
  try {
    initializeHandshake();
  } catch (const TTransportException& e) {
    throw TTransportException(TTransportException::NOT_OPEN,
                              "TLS handshake with " + PeerName() + " failed: " + e.what() +
                                  " (is its certificate from this deployment's CA?)");
  }
  const std::string who = PeerIdentity();
  if (!expect.empty() && who != expect) {
    close();
    throw TTransportException(TTransportException::NOT_OPEN,
                              "TLS peer " + PeerName() + " presented the certificate of '" +
                                  (who.empty() ? std::string("no geops identity") : who) + "', expected '" +
                                  expect + "'");
  }
}

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsOptions& options, bool server) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return InvalidArgumentError("tls: no CA, certificate or key given");
  // OpenSSL writes with write(2), not send(MSG_NOSIGNAL) as TSocket does: a
  // peer that hung up would kill the process with SIGPIPE instead of
  // failing the call. A geops process never wants SIGPIPE.
  static const bool sigpipe_ignored = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)sigpipe_ignored;
  std::shared_ptr<Factory> factory;
  std::string step = "setting up OpenSSL";
  try {
    factory = std::make_shared<Factory>();
    SSL_CTX* ctx = factory->context()->get();
    step = "requiring TLS 1.3";
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
      return InvalidArgumentError("tls: cannot require TLS 1.3: " + OpenSslErrors());
    }
    // AES-128-GCM first: as strong as a TLS 1.3 peer needs, and the fastest
    // suite with AES-NI (about 10% over AES-256-GCM here).
    step = "choosing the TLS 1.3 cipher suites";
    if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") !=
        1) {
      return InvalidArgumentError("tls: cannot set the TLS 1.3 cipher suites: " + OpenSslErrors());
    }
    // Read ahead into a buffer of several records: one read(2) brings many
    // 16 KiB records instead of two reads (header, then body) for each.
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, kReadBufferBytes);
    factory->server(server);
    factory->authenticate(true);  // verify the peer, and require it to present a certificate
    step = "loading the CA " + options.ca_file;
    factory->loadTrustedCertificates(options.ca_file.c_str());
    step = "loading the certificate " + options.cert_file;
    factory->loadCertificate(options.cert_file.c_str());
    step = "loading the key " + options.key_file;
    factory->loadPrivateKey(options.key_file.c_str());
    step = "matching the key " + options.key_file + " with the certificate " + options.cert_file;
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return InvalidArgumentError("tls: the key " + options.key_file + " does not belong to the certificate " +
                                  options.cert_file + ": " + OpenSslErrors());
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError("tls: " + step + ": " + e.what());
  }
  return std::shared_ptr<TlsContext>(new TlsContext(std::move(factory), server));
}

TlsContext::TlsContext(std::shared_ptr<Factory> factory, bool server)
    : factory_(std::move(factory)), server_(server) {}

TlsContext::~TlsContext() = default;

std::shared_ptr<TlsSocket> TlsContext::Connect(const std::string& host, int port, std::shared_ptr<TConfiguration> config,
                                               std::shared_ptr<ByteCounters> counters) const {
  std::shared_ptr<TlsSocket> socket(
      new TlsSocket(factory_->context(), host, port, std::move(config), std::move(counters)));
  socket->server(false);
  return socket;
}

std::shared_ptr<TlsSocket> TlsContext::Accepted(THRIFT_SOCKET fd, std::shared_ptr<THRIFT_SOCKET> interrupt_listener,
                                                std::shared_ptr<TConfiguration> config,
                                                std::shared_ptr<ByteCounters> counters) const {
  std::shared_ptr<TlsSocket> socket(new TlsSocket(factory_->context(), fd, std::move(interrupt_listener),
                                                  std::move(config), std::move(counters)));
  socket->server(true);
  return socket;
}

}  // namespace geops::rpc
