#include "server/tcp_listen.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tgraph {

absl::StatusOr<ListeningSocket> ListenTcp(const std::string& address, int backlog, const std::string& what) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat(what, " address must be HOST:PORT, got '", address, "'"));
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.empty() ? "0.0.0.0" : host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " address '", address, "': '", host, "' does not resolve: ", gai_strerror(rc)));
  std::string err = "no address";
  ListeningSocket out;
  for (const addrinfo* a = found; a != nullptr && out.fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (fd < 0 || ::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, backlog) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      err = std::strerror(errno);
      if (fd >= 0) ::close(fd);
      continue;
    }
    out.fd = fd;
    out.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  ::freeaddrinfo(found);
  if (out.fd < 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " for ", what, ": ", err));
  return out;
}

}  // namespace tgraph
