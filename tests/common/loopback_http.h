// A minimal HTTP/1.0 GET on a loopback port for tests (a /metrics endpoint,
// Prometheus' query API): the response body when the status is 200,
// nullopt otherwise or after a 2 s socket timeout.
#ifndef GEOPS_TESTS_COMMON_LOOPBACK_HTTP_H_
#define GEOPS_TESTS_COMMON_LOOPBACK_HTTP_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <string>

namespace geops::testing {

inline std::optional<std::string> LoopbackHttpGet(int port, const std::string& target) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string req = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string resp;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.", 0) != 0 || body == std::string::npos || resp.find(" 200 ") > 12) return std::nullopt;
  return resp.substr(body + 4);
}

}  // namespace geops::testing

#endif  // GEOPS_TESTS_COMMON_LOOPBACK_HTTP_H_
