#include "server/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/tcp_listen.h"

namespace tgraph {
namespace {

using Clock = std::chrono::steady_clock;

// One open connection: reading its request, then writing its answer.
struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string in, out;
  size_t sent = 0;
  bool writing = false;
};

// The answer to a request whose headers are `request`.
std::string Answer(const std::string& request, const std::function<std::string()>& body) {
  const bool metrics = request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics?", 0) == 0;
  const std::string text = metrics ? body() : "not found: try /metrics\n";
  return absl::StrCat(metrics ? "HTTP/1.1 200 OK" : "HTTP/1.1 404 Not Found",
                      "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: ", text.size(),
                      "\r\nConnection: close\r\n\r\n", text);
}

// Reads what the connection has sent; false when it is done with (closed, or too long).
bool ReadRequest(Connection& c, const std::function<std::string()>& body) {
  char buf[2048];
  const ssize_t n = ::read(c.fd, buf, sizeof buf);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
  if (n > 0) c.in.append(buf, static_cast<size_t>(n));
  if (c.in.find("\r\n\r\n") != std::string::npos) {
    c.out = Answer(c.in, body);
    c.writing = true;
  }
  return c.in.size() <= MetricsHttpServer::kMaxRequestBytes;
}

// Sends what the socket takes; false when the answer is out (or the client is gone).
bool WriteAnswer(Connection& c) {
  const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  c.sent += static_cast<size_t>(n);
  return c.sent < c.out.size();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& address,
                                                                             std::function<std::string()> body) {
  absl::StatusOr<ListeningSocket> l = ListenTcp(address, 64, "metrics");
  if (!l.ok()) return l.status();
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(l->fd, l->port, std::move(body)));
}

MetricsHttpServer::MetricsHttpServer(int fd, int port, std::function<std::string()> body)
    : body_(std::move(body)), fd_(fd), port_(port), thread_([this] { Serve(); }) {}

MetricsHttpServer::~MetricsHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

void MetricsHttpServer::Serve() {
  std::vector<Connection> open;
  std::vector<pollfd> polled;
  while (!stop_) {
    const auto now = Clock::now();
    // Drop connections past their deadline; wait at most until the next one (or 200 ms,
    // to see stop_).
    auto wait = std::chrono::milliseconds(200);
    for (auto it = open.begin(); it != open.end();) {
      if (now >= it->deadline) {
        ::close(it->fd);
        it = open.erase(it);
        continue;
      }
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(it->deadline - now) +
                                std::chrono::milliseconds(1));
      ++it;
    }
    polled.clear();
    for (const Connection& c : open) polled.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
    polled.push_back({fd_, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), static_cast<int>(wait.count())) <= 0) continue;
    // The connections' events (in the order polled), then new connections.
    std::vector<Connection> kept;
    for (size_t i = 0; i < open.size(); ++i) {
      Connection& c = open[i];
      bool keep = true;
      if (polled[i].revents & (POLLERR | POLLHUP | POLLNVAL)) keep = c.writing && (polled[i].revents & POLLOUT);
      if (keep && (polled[i].revents & POLLIN) && !c.writing) keep = ReadRequest(c, body_);
      if (keep && c.writing && (polled[i].revents & POLLOUT)) keep = WriteAnswer(c);
      if (keep) {
        kept.push_back(std::move(c));
      } else {
        ::close(c.fd);
      }
    }
    open = std::move(kept);
    if (polled.back().revents & POLLIN) {
      while (true) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) break;
        if (static_cast<int>(open.size()) >= kMaxConnections) {  // full: the oldest unanswered one goes
          auto oldest = open.end();
          for (auto it = open.begin(); it != open.end(); ++it)
            if (!it->writing && (oldest == open.end() || it->deadline < oldest->deadline)) oldest = it;
          if (oldest == open.end()) oldest = open.begin();
          ::close(oldest->fd);
          open.erase(oldest);
        }
        Connection conn;
        conn.fd = c;
        conn.deadline = Clock::now() + kRequestDeadline;
        open.push_back(std::move(conn));
      }
    }
  }
  for (const Connection& c : open) ::close(c.fd);
}

}  // namespace tgraph
