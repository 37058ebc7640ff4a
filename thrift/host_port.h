// HostPort: a TCP endpoint written "host:port" ("127.0.0.1:9090",
// "localhost:9090", "[::1]:9090"). A value type; thread-compatible.
#ifndef GEOPS_THRIFT_HOST_PORT_H_
#define GEOPS_THRIFT_HOST_PORT_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace geops::rpc {

struct HostPort {
  std::string host;  // name or address, without IPv6 brackets
  int port = 0;      // 0..65535; 0 means "any free port" when binding

  // "host:port", with brackets around an IPv6 address.
  std::string ToString() const;
  bool operator==(const HostPort&) const = default;
};

// Parses "host:port". InvalidArgument, quoting the text, when the host is
// empty or has spaces, the port is missing, not a decimal number, or
// outside [0, 65535], or an IPv6 address lacks its brackets.
Result<HostPort> ParseHostPort(std::string_view text);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_HOST_PORT_H_
