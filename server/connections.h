// What the server does about connections, so that no number of clients, idle or not,
// can take the listener down (gRPC 1.51's listener stops accepting for good after an
// accept() fails with EMFILE, and a TCP connection that never sends its HTTP/2 preface
// holds a descriptor for 120 s by default):
// - RaiseFdLimit: the soft descriptor limit raised to the hard one (and the hard one to
//   the kernel's nr_open where the process may), reported at start;
// - ApplyConnectionArguments: gRPC's transport bounded: a connection that has not
//   finished its handshake within handshake_timeout_s is closed, one with no call in
//   flight for max_connection_idle_s is sent GOAWAY, peers are pinged every keepalive_s
//   (dead ones dropped after keepalive_timeout_s), and one connection carries at most
//   max_streams calls at once;
// - CountAcceptErrors: gRPC's own log hooked, so that each failed accept() is counted
//   (AcceptErrors, tgraph_accept_errors_total) and logged in the server's format;
// - plaintext servers accept with a loop of their own that caps connections
//   (server/listener.h).
// Threads: RaiseFdLimit and CountAcceptErrors at start, before gRPC serves; AcceptErrors
// and OpenFds from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "grpcpp/server_builder.h"

namespace tgraph {

struct ConnectionOptions {
  double handshake_timeout_s = 10;
  double max_connection_idle_s = 300;
  double keepalive_s = 60;
  double keepalive_timeout_s = 20;
  int max_streams = 64;
  // Plaintext: connections open at once, past which new ones are closed unserved
  // (server/listener.h); within the descriptor limit (EffectiveMaxConnections). 0: gRPC's own
  // listener, uncapped.
  int64_t max_connections = 10000;
};

// Descriptors kept for the process's own files (registry, measurement store, logs)
// beyond the connections.
constexpr int64_t kReservedFds = 512;

struct FdLimit {
  int64_t before = 0, soft = 0, hard = 0;
  std::string Describe() const;  // "file descriptors: 1048576 (raised from 1024; hard limit 1048576)"
};
FdLimit RaiseFdLimit();

// max_connections within the descriptor limit less kReservedFds (less half the limit
// where that is smaller; at least 1).
int64_t EffectiveMaxConnections(int64_t max_connections);

void ApplyConnectionArguments(const ConnectionOptions& o, grpc::ServerBuilder* builder);

void CountAcceptErrors();
int64_t AcceptErrors();
// One failed accept() (gRPC's listener or the server's own, server/listener.h): counted,
// and `message` logged at most once a second (a flood is a line a second, not one per
// connection).
void NoteAcceptError(const std::string& message);
// What the plaintext accept loop (server/listener.h) counts, for the metrics. open is
// -1 where no such loop runs (TLS, or max_connections 0: gRPC's own listener).
struct ConnectionCounts {
  int64_t open = -1;      // waiting for their first bytes, or served by gRPC
  int64_t cap = 0;        // max_connections in force
  int64_t refused = 0;    // closed unserved at the cap, since the loop started
  int64_t unspoken = 0;   // closed after sending nothing within the handshake timeout, since the loop started
};
void PublishConnectionCounts(const ConnectionCounts& c);
ConnectionCounts CurrentConnectionCounts();

// Descriptors open in this process now (/proc/self/fd), -1 where it cannot be read.
int64_t OpenFds();

}  // namespace tgraph
