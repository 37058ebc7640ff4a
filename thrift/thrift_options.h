// Options of the Thrift edge: transport sizing shared by both ends, the
// shard server (PsServer) and the worker-side client (ThriftShardConnection).
// Plain values with in-class defaults; each is checked once, by Validate(),
// when the object that uses it is built.
#ifndef GEOPS_THRIFT_THRIFT_OPTIONS_H_
#define GEOPS_THRIFT_THRIFT_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/status.h"

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

  Status Validate() const;
};

struct PsServerOptions {
  std::string host = "127.0.0.1";  // address to bind; "0.0.0.0" for all interfaces
  int port = 0;                    // TCP port; 0 picks a free one (see PsServer::port())
  TransportOptions transport;
  // Connections served at once (one thread each); further clients wait in
  // the accept backlog until one leaves.
  int64_t max_connections = 1024;
  // A connection silent this long between requests is closed, ms; 0 = never.
  // Workers reconnect by themselves, so a finite value only costs a retry.
  int64_t idle_timeout_ms = 0;
  // A reply the peer does not drain within this is dropped with its
  // connection, ms; 0 = never.
  int64_t send_timeout_ms = 60000;

  Status Validate() const;
};

struct ThriftClientOptions {
  int64_t connect_timeout_ms = 3000;  // TCP connect, ms
  // Deadline of one RPC on the wire, ms: the socket's send timeout, and its
  // receive timeout plus the server-side wait a Read allows (deadline_ms).
  int64_t rpc_timeout_ms = 30000;
  TransportOptions transport;

  Status Validate() const;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_THRIFT_OPTIONS_H_
