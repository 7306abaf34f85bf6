// A listening TCP socket for "HOST:PORT" ("0.0.0.0:50051", "127.0.0.1:0", "[::]:50051",
// "localhost:8080"; an empty host is every IPv4 address): the one place the server's
// own listeners (the gRPC accept loop, the metrics endpoint) bind. Non-blocking and
// close-on-exec, SO_REUSEADDR (a restart binds at once) but never SO_REUSEPORT (a second
// server on a taken port fails instead of sharing it). Port 0 picks a free one.
// Threads: any; the caller owns the returned descriptor.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tgraph {

struct ListeningSocket {
  int fd = -1;
  int port = 0;  // the bound port (the one picked for port 0)
};

// `what` names the listener in errors ("metrics", "gRPC"): InvalidArgument for an
// address that does not parse or resolve, Unavailable when it cannot be bound.
absl::StatusOr<ListeningSocket> ListenTcp(const std::string& address, int backlog, const std::string& what);

}  // namespace tgraph
