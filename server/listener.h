// The server's own accept loop for plaintext gRPC, where gRPC 1.51's listener has no cap
// on connections and stops accepting for good once an accept() fails for want of
// descriptors. One thread accepts on the listening socket and
// - closes a connection at once, unserved, while `max_connections` are open (counted in
//   ConnectionsRefused): the process never runs out of descriptors for its own files;
// - holds a new connection until it sends its first bytes (the HTTP/2 preface), then
//   hands it to the gRPC server (grpc::AddInsecureChannelFromFd), which serves it with
//   the server's channel arguments (keepalive, idle timeout, streams); one that sends
//   nothing within `handshake_timeout_s` is closed (a port scan, a leaking client);
// - publishes what it counts (PublishConnectionCounts, server/connections.h) for the
//   metrics;
// - on a failed accept() (EMFILE, ENFILE, ENOBUFS) counts it (AcceptErrors), waits
//   100 ms and goes on: never fatal, and it accepts again as soon as descriptors free.
// Connections handed to gRPC count as open until gRPC closes them (checked by each
// descriptor's socket inode once a second and whenever the cap is reached).
// TLS servers keep gRPC's listener (gRPC 1.51 adopts only plaintext descriptors) with
// its handshake timeout and the raised descriptor limit.
// Threads: Start and Stop from the owner's thread (Stop before the gRPC server shuts
// down).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}

namespace tgraph {

struct ListenerOptions {
  std::string address;
  int64_t max_connections = 10000;
  double handshake_timeout_s = 10;
};

class Listener {
 public:
  // Binds the address (a taken port is an error); nothing is accepted until Start.
  static absl::StatusOr<std::unique_ptr<Listener>> Bind(const ListenerOptions& o);
  ~Listener();  // Stop()

  int port() const { return port_; }
  // Accepts on a thread of its own, handing connections to `server` (borrowed: it
  // outlives Stop).
  void Start(grpc::Server* server);
  // Stops accepting, closes the listening socket and the connections not yet handed
  // over, joins the thread. Connections gRPC serves stay gRPC's. Idempotent.
  void Stop();

 private:
  Listener(ListenerOptions o, int fd, int port, int wake_fd);
  void Serve(grpc::Server* server);

  const ListenerOptions o_;
  const int fd_, port_, wake_fd_;  // listening socket, eventfd that wakes Serve to stop
  std::thread thread_;
};

}  // namespace tgraph
