#include "thrift/host_port.h"

#include <charconv>

namespace geops::rpc {
namespace {

Status Bad(std::string_view text, std::string_view why) {
  std::string msg = "bad address '";
  msg.append(text.substr(0, 200));
  msg += "': ";
  msg += why;
  msg += " (expected host:port, e.g. 127.0.0.1:9090 or [::1]:9090)";
  return InvalidArgumentError(msg);
}

}  // namespace

std::string HostPort::ToString() const {
  bool v6 = host.find(':') != std::string::npos;
  std::string out = v6 ? "[" + host + "]" : host;
  out += ':';
  out += std::to_string(port);
  return out;
}

Result<HostPort> ParseHostPort(std::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  std::string_view host;
  std::string_view port;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(text, "'[' without ']'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return Bad(text, "missing ':port' after ']'");
    port = rest.substr(1);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return Bad(text, "missing ':port'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Bad(text, "an IPv6 address must be written in brackets");
    }
  }
  if (host.empty()) return Bad(text, "empty host");
  for (char c : host) {
    if (c <= 0x20 || c >= 0x7f) return Bad(text, "host has a space or non-printable character");
  }
  if (port.empty()) return Bad(text, "empty port");
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size()) {
    return Bad(text, "port is not a decimal number");
  }
  if (value < 0 || value > 65535) return Bad(text, "port outside [0, 65535]");
  return HostPort{std::string(host), value};
}

}  // namespace geops::rpc
