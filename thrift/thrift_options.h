// Options of the Thrift edge: transport sizing shared by both ends, the
// shard server (PsServer) and the worker-side client (ThriftShardConnection).
// Plain values with in-class defaults; each is checked once, by Validate(),
// when the object that uses it is built.
#ifndef GEOPS_THRIFT_THRIFT_OPTIONS_H_
#define GEOPS_THRIFT_THRIFT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "thrift/peer_identity.h"

namespace geops::rpc {

// Largest frame Thrift can describe: its frame and message sizes are int32.
inline constexpr int64_t kMaxFrameBytesLimit = int64_t{0x7fffffff} - 1024;

// How a framed connection is sized. Both ends of a connection should agree
// on max_frame_bytes; the receiver of an oversized frame drops the connection.
struct TransportOptions {
  // Largest frame (one message) accepted on read, bytes. It is also the
  // per-message budget of TConfiguration (reset at every frame).
  int64_t max_frame_bytes = int64_t{1} << 30;  // 1 GiB
  // Initial write buffer of the framed transport, bytes; it grows by
  // doubling to the largest message written and keeps that size (up to
  // buffer_reclaim_bytes).
  int64_t write_buffer_bytes = int64_t{1} << 20;  // 1 MiB
  // Read/write buffers grown past this are freed after the message instead
  // of being kept for the next one, bytes. Bounds idle memory per connection.
  int64_t buffer_reclaim_bytes = int64_t{256} << 20;  // 256 MiB
  // SO_SNDBUF / SO_RCVBUF of each socket, bytes; 0 keeps the kernel's
  // auto-tuning. A set size turns auto-tuning off and is capped by
  // net.core.wmem_max / rmem_max; it did not beat auto-tuning on loopback
  // (experiments/results/lan_throughput.md).
  int64_t socket_buffer_bytes = 0;
  // Once a frame's 4-byte header has arrived, the rest of the frame must
  // arrive within this, ms; past it the connection is dropped (logged).
  // Bounds what a slow or stalled sender holds: its thread, and the frame
  // memory, which grows only with the bytes that really arrived (a header
  // that claims 1 GiB reserves nothing). 0 = no deadline. Two minutes carry
  // 1 GiB at 70 Mbit/s.
  int64_t frame_timeout_ms = 120000;

  Status Validate() const;
};

// Mutual TLS of one end of a connection (docs/security.md). Every path empty:
// plaintext. Otherwise all three are needed: the deployment's CA (every peer's
// certificate must chain to it), this process's certificate and its key, as
// written by `geops certs`. TLS 1.3 only.
struct TlsOptions {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Client side: the geops identity the server's certificate must carry
  // ("geops://site/us"); empty accepts any certificate of the CA.
  std::string expect_peer;
  // The deployment's sites by SiteId: a mirror client sets expect_peer to
  // the site it connects to (ForMirrorPeer).
  std::vector<std::string> site_names;

  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
  // All three files or none, each readable.
  Status Validate() const;
};

struct PsServerOptions {
  std::string host = "127.0.0.1";  // address to bind; "0.0.0.0" for all interfaces
  int port = 0;                    // TCP port; 0 picks a free one (see PsServer::port())
  TransportOptions transport;
  // Connections open at once. An idle connection costs a descriptor, not a
  // thread (thrift/connection_server.h); beyond this a new connection is
  // accepted and closed at once, logged and counted.
  int64_t max_connections = 10000;
  // Requests in progress at once (threads, each possibly waiting in the
  // shard for a clock); further ready connections wait their turn.
  int64_t max_active_requests = 1024;
  // A connection silent this long between requests is closed, ms; 0 = never.
  // Workers reconnect by themselves, so a finite value only costs a retry.
  int64_t idle_timeout_ms = 0;
  // A reply the peer does not drain within this is dropped with its
  // connection, ms; 0 = never.
  int64_t send_timeout_ms = 60000;
  // Mutual TLS; off when empty. With it on, every connection must present a
  // certificate of the CA, and handlers check that it speaks only for itself.
  TlsOptions tls;
  // The deployment's sites and this server's, for the identity checks of
  // TLS; required with tls. The mirror also refuses origins outside it.
  PeerNames peers;

  Status Validate() const;
};

struct ThriftClientOptions {
  int64_t connect_timeout_ms = 3000;  // TCP connect, ms
  // Deadline of one RPC on the wire, ms: the socket's send timeout, and its
  // receive timeout plus the server-side wait a Read allows (deadline_ms).
  int64_t rpc_timeout_ms = 30000;
  TransportOptions transport;
  TlsOptions tls;  // mutual TLS; off when empty

  Status Validate() const;
};

// `options` for a mirror connection to site `peer`: with TLS, the server must
// present that site's certificate.
ThriftClientOptions ForMirrorPeer(ThriftClientOptions options, int32_t peer);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_THRIFT_OPTIONS_H_
