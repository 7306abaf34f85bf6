// A minimal HTTP/1.1 endpoint for Prometheus scrapes: GET /metrics answers the text
// exposition format, anything else 404. (prometheus-cpp's CivetWeb exposer fails to
// start in a process that also loads Debian's LibTorch, so we serve it ourselves.)
//
// One thread runs a poll loop over the listening socket and every open connection, so
// no client holds up another: a connection has kRequestDeadline from its accept to
// send its request headers and receive the answer, whatever pace it sends at (a client
// trickling a byte a second is dropped then), and at most kMaxConnections are open at
// once (a new one closes the oldest that has not sent its request). A scrape is
// answered as soon as its headers are in, beside any number of slow or idle clients.
//
// Threads: Start and the destructor on the owner's thread; `body` runs on the serving
// thread, once per scrape (it must be safe to call from there).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace tgraph {

class MetricsHttpServer {
 public:
  static constexpr std::chrono::milliseconds kRequestDeadline{5000};
  static constexpr int kMaxConnections = 64;
  static constexpr size_t kMaxRequestBytes = 8192;  // headers beyond this: the request is dropped

  // INVALID_ARGUMENT for an address that is not IPv4 HOST:PORT, UNAVAILABLE when it
  // cannot listen there (port 0: any free port, see port()).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                   std::function<std::string()> body);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttpServer(int fd, int port, std::function<std::string()> body);
  void Serve();

  std::function<std::string()> body_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace tgraph
