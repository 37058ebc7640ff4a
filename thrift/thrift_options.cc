#include "thrift/thrift_options.h"

#include <fstream>
#include <limits>
#include <utility>

namespace geops::rpc {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// Socket timeouts travel as int milliseconds.
constexpr int64_t kMaxTimeoutMs = std::numeric_limits<int32_t>::max() / 2;

}  // namespace

Status TransportOptions::Validate() const {
  if (max_frame_bytes < 4096 || max_frame_bytes > kMaxFrameBytesLimit) {
    return InvalidArgumentError("max_frame_bytes must be in [4096, " + Str(kMaxFrameBytesLimit) +
                                "], got " + Str(max_frame_bytes));
  }
  if (write_buffer_bytes < 64 || write_buffer_bytes > max_frame_bytes) {
    return InvalidArgumentError("write_buffer_bytes must be in [64, max_frame_bytes], got " +
                                Str(write_buffer_bytes));
  }
  if (buffer_reclaim_bytes < write_buffer_bytes || buffer_reclaim_bytes > kMaxFrameBytesLimit) {
    return InvalidArgumentError(
        "buffer_reclaim_bytes must be in [write_buffer_bytes, " + Str(kMaxFrameBytesLimit) +
        "], got " + Str(buffer_reclaim_bytes));
  }
  if (socket_buffer_bytes < 0 || socket_buffer_bytes > (int64_t{1} << 30)) {
    return InvalidArgumentError("socket_buffer_bytes must be in [0, 1 GiB], got " +
                                Str(socket_buffer_bytes));
  }
  if (frame_timeout_ms < 0 || frame_timeout_ms > kMaxTimeoutMs) {
    return InvalidArgumentError("frame_timeout_ms must be in [0, " + Str(kMaxTimeoutMs) + "], got " +
                                Str(frame_timeout_ms));
  }
  return Status::Ok();
}

Status TlsOptions::Validate() const {
  if (!enabled()) return Status::Ok();
  const std::pair<const char*, const std::string*> files[] = {
      {"ca", &ca_file}, {"cert", &cert_file}, {"key", &key_file}};
  for (const auto& [name, path] : files) {
    if (path->empty()) {
      return InvalidArgumentError(std::string("tls: ") + name +
                                  " file is not set (TLS needs the CA, a certificate and its key)");
    }
    std::ifstream in(*path);
    if (!in) return InvalidArgumentError(std::string("tls: cannot read the ") + name + " file " + *path);
  }
  return Status::Ok();
}

ThriftClientOptions ForMirrorPeer(ThriftClientOptions options, int32_t peer) {
  if (options.tls.enabled() && peer >= 0 && peer < static_cast<int32_t>(options.tls.site_names.size())) {
    options.tls.expect_peer = SiteIdentityUri(options.tls.site_names[static_cast<size_t>(peer)]);
  }
  return options;
}

Status PsServerOptions::Validate() const {
  if (host.empty()) return InvalidArgumentError("server host must not be empty");
  if (port < 0 || port > 65535) return InvalidArgumentError("server port must be in [0, 65535], got " + Str(port));
  GEOPS_RETURN_IF_ERROR(transport.Validate().WithContext("server transport"));
  GEOPS_RETURN_IF_ERROR(tls.Validate());
  if (tls.enabled() && !peers.known()) {
    return InvalidArgumentError("tls: the server needs the deployment's site names and its own (peers)");
  }
  if (max_connections < 1) {
    return InvalidArgumentError("max_connections must be >= 1, got " + Str(max_connections));
  }
  if (max_active_requests < 1) {
    return InvalidArgumentError("max_active_requests must be >= 1, got " + Str(max_active_requests));
  }
  if (idle_timeout_ms < 0 || idle_timeout_ms > kMaxTimeoutMs) {
    return InvalidArgumentError("idle_timeout_ms must be in [0, " + Str(kMaxTimeoutMs) + "], got " +
                                Str(idle_timeout_ms));
  }
  if (send_timeout_ms < 0 || send_timeout_ms > kMaxTimeoutMs) {
    return InvalidArgumentError("send_timeout_ms must be in [0, " + Str(kMaxTimeoutMs) + "], got " +
                                Str(send_timeout_ms));
  }
  return Status::Ok();
}

Status ThriftClientOptions::Validate() const {
  if (connect_timeout_ms < 1 || connect_timeout_ms > kMaxTimeoutMs) {
    return InvalidArgumentError("connect_timeout_ms must be in [1, " + Str(kMaxTimeoutMs) + "], got " +
                                Str(connect_timeout_ms));
  }
  if (rpc_timeout_ms < 1 || rpc_timeout_ms > kMaxTimeoutMs) {
    return InvalidArgumentError("rpc_timeout_ms must be in [1, " + Str(kMaxTimeoutMs) + "], got " +
                                Str(rpc_timeout_ms));
  }
  GEOPS_RETURN_IF_ERROR(tls.Validate());
  return transport.Validate().WithContext("client transport");
}

}  // namespace geops::rpc
