// The plaintext accept loop (server/listener.h) on loopback, in this process: the cap,
// the handshake timeout and failed accepts. Connections here never send a byte, so none
// is handed to a gRPC server (tests/server_e2e_test.cc serves through it).
#define CATCH_CONFIG_PREFIX_ALL  // as the other files of this binary (LibTorch defines CHECK)
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "server/connections.h"
#include "server/listener.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

// Waits up to 10 s for `done`; false if it never held.
bool WaitFor(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The server closed its end: a read sees the end of the stream (within the socket's
// receive timeout).
bool ClosedByServer(int fd) {
  char byte;
  return recv(fd, &byte, 1, 0) == 0;
}

bool StillOpen(int fd) {
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

std::unique_ptr<Listener> Bound(int64_t max_connections, double handshake_timeout_s) {
  ListenerOptions o;
  o.address = "127.0.0.1:0";
  o.max_connections = max_connections;
  o.handshake_timeout_s = handshake_timeout_s;
  absl::StatusOr<std::unique_ptr<Listener>> l = Listener::Bind(o);
  CATCH_REQUIRE(l.ok());
  CATCH_REQUIRE((*l)->port() > 0);
  return std::move(*l);
}

}  // namespace

CATCH_TEST_CASE("past max_connections the accept loop closes new connections at once and accepts again when one "
                "closes",
                "[listener]") {
  std::unique_ptr<Listener> l = Bound(5, 30);
  l->Start(nullptr);
  std::vector<int> open;
  for (int i = 0; i < 5; ++i) open.push_back(ConnectLoopback(l->port(), 2));
  CATCH_REQUIRE(WaitFor([] { return CurrentConnectionCounts().open == 5; }));
  CATCH_CHECK(CurrentConnectionCounts().cap == 5);
  CATCH_CHECK(CurrentConnectionCounts().refused == 0);  // counts since this loop started
  const int sixth = ConnectLoopback(l->port(), 2);
  CATCH_CHECK(ClosedByServer(sixth));  // the kernel connected it; the loop closed it unserved
  CATCH_CHECK(WaitFor([] { return CurrentConnectionCounts().refused == 1; }));
  for (int fd : open) CATCH_CHECK(StillOpen(fd));
  // One of the five goes away: its place is free again.
  close(open.back());
  open.pop_back();
  CATCH_REQUIRE(WaitFor([] { return CurrentConnectionCounts().open == 4; }));
  const int next = ConnectLoopback(l->port(), 1);
  CATCH_REQUIRE(WaitFor([] { return CurrentConnectionCounts().open == 5; }));
  CATCH_CHECK(StillOpen(next));
  CATCH_CHECK(CurrentConnectionCounts().refused == 1);
  l->Stop();
  CATCH_CHECK(ClosedByServer(next));  // a stopped loop closes what it had not handed over
  for (int fd : open) close(fd);
  close(sixth);
  close(next);
}

CATCH_TEST_CASE("a connection that sends nothing within the handshake timeout is closed and counted", "[listener]") {
  std::unique_ptr<Listener> l = Bound(100, 0.3);
  l->Start(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const int fd = ConnectLoopback(l->port(), 5);
  CATCH_CHECK(ClosedByServer(fd));
  CATCH_CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
  CATCH_CHECK(WaitFor([] { return CurrentConnectionCounts().unspoken == 1; }));  // since this loop started
  CATCH_CHECK(WaitFor([] { return CurrentConnectionCounts().open == 0; }));
  close(fd);
}

CATCH_TEST_CASE("out of file descriptors the accept loop counts the failed accepts and accepts the rest once "
                "descriptors free",
                "[listener]") {
  std::unique_ptr<Listener> l = Bound(1000, 30);
  // Ten connections wait in the backlog before the loop runs.
  std::vector<int> clients;
  for (int i = 0; i < 10; ++i) clients.push_back(ConnectLoopback(l->port(), 2));
  const int64_t errors_before = AcceptErrors();
  struct rlimit saved;
  CATCH_REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  // Room for the loop's epoll descriptor and a few connections (descriptor numbers, not
  // counts, meet the limit: how many fit depends on the holes below it).
  struct rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(OpenFds() + 3);
  CATCH_REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  l->Start(nullptr);
  const bool failed = WaitFor([&] { return AcceptErrors() > errors_before; });
  const int64_t open_while_tight = CurrentConnectionCounts().open;
  CATCH_REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CATCH_CHECK(failed);
  CATCH_CHECK(open_while_tight < 10);
  // Descriptors free again: every waiting connection is taken within the back-off.
  CATCH_CHECK(WaitFor([] { return CurrentConnectionCounts().open == 10; }));
  for (int fd : clients) CATCH_CHECK(StillOpen(fd));
  l->Stop();
  for (int fd : clients) close(fd);
}

CATCH_TEST_CASE("binding a taken port or an address that is not HOST:PORT fails naming the address", "[listener]") {
  std::unique_ptr<Listener> first = Bound(10, 10);
  ListenerOptions o;
  o.address = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<Listener>> second = Listener::Bind(o);
  CATCH_REQUIRE(!second.ok());
  CATCH_CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CATCH_CHECK_THAT(std::string(second.status().message()), Catch::Contains(o.address));
  CATCH_CHECK_THAT(std::string(second.status().message()), Catch::Contains("in use"));
  o.address = "localhost";
  CATCH_CHECK(Listener::Bind(o).status().code() == absl::StatusCode::kInvalidArgument);
  o.address = "[::1]:0";  // IPv6 literal in brackets (where the host has IPv6)
  absl::StatusOr<std::unique_ptr<Listener>> v6 = Listener::Bind(o);
  if (v6.ok()) CATCH_CHECK((*v6)->port() > 0);
}
