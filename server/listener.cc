#include "server/listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "grpcpp/server.h"
#include "grpcpp/server_posix.h"
#include "server/connections.h"
#include "server/tcp_listen.h"

namespace tgraph {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPruneEvery = std::chrono::seconds(1);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

int MsUntil(Clock::time_point t, Clock::time_point now) {
  if (t <= now) return 0;
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count()) + 1;
}

// The socket inode behind fd, 0 when fd is not an open socket.
ino_t SocketInode(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

// What the loop tracks: connections waiting for their first bytes (fd -> deadline) and
// those handed to gRPC (fd -> socket inode, to tell a closed one from a reused number).
struct Tracked {
  std::unordered_map<int, Clock::time_point> pending;
  std::unordered_map<int, ino_t> handed;

  int64_t size() const { return static_cast<int64_t>(pending.size() + handed.size()); }
  // Forgets the handed connections gRPC has closed.
  void Prune() {
    for (auto it = handed.begin(); it != handed.end();)
      it = SocketInode(it->first) == it->second ? std::next(it) : handed.erase(it);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Listener>> Listener::Bind(const ListenerOptions& o) {
  absl::StatusOr<ListeningSocket> l = ListenTcp(o.address, 4096, "gRPC");
  if (!l.ok()) return l.status();
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    ::close(l->fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.address, ": eventfd failed"));
  }
  return std::unique_ptr<Listener>(new Listener(o, l->fd, l->port, wake));
}

Listener::Listener(ListenerOptions o, int fd, int port, int wake_fd)
    : o_(std::move(o)), fd_(fd), port_(port), wake_fd_(wake_fd) {}

Listener::~Listener() {
  Stop();
  ::close(fd_);
  ::close(wake_fd_);
}

void Listener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { Serve(server); });
}

void Listener::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
}

void Listener::Serve(grpc::Server* server) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  auto watch = [ep](int fd, uint32_t events) {
    epoll_event e{};
    e.events = events;
    e.data.fd = fd;
    return ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0;
  };
  watch(wake_fd_, EPOLLIN);
  bool accepting = watch(fd_, EPOLLIN);
  Clock::time_point resume_accepting{}, next_prune = Clock::now() + kPruneEvery;
  const auto handshake = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.001, o_.handshake_timeout_s)));
  Tracked t;
  ConnectionCounts counts;
  counts.open = 0;
  counts.cap = o_.max_connections;
  PublishConnectionCounts(counts);
  // Stops accepting for a while after a failed accept: the backlog keeps the listening
  // socket readable, and polling it again at once would spin.
  auto back_off = [&] {
    NoteAcceptError(absl::StrCat("accept on ", o_.address, " failed: ", std::strerror(errno),
                                 "; accepting again in 100 ms"));
    ::epoll_ctl(ep, EPOLL_CTL_DEL, fd_, nullptr);
    accepting = false;
    resume_accepting = Clock::now() + kAcceptBackoff;
  };
  auto accept_all = [&] {
    while (true) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) back_off();
        return;
      }
      if (t.size() >= o_.max_connections) t.Prune();
      if (t.size() >= o_.max_connections || !watch(c, EPOLLIN | EPOLLRDHUP)) {
        ::close(c);  // the client sees its connection closed; it retries later
        ++counts.refused;
        continue;
      }
      t.pending[c] = Clock::now() + handshake;
    }
  };
  // A pending connection's first bytes hand it to gRPC; its end (or an error) before any
  // closes it here.
  auto on_event = [&](int c, uint32_t events) {
    char first;
    const ssize_t n = ::recv(c, &first, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) && (events & (EPOLLERR | EPOLLHUP)) == 0)
      return;  // nothing to read yet
    ::epoll_ctl(ep, EPOLL_CTL_DEL, c, nullptr);
    t.pending.erase(c);
    const ino_t inode = n > 0 ? SocketInode(c) : 0;
    if (inode == 0) {
      ::close(c);
      return;
    }
    const int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t.handed[c] = inode;
    grpc::AddInsecureChannelFromFd(server, c);  // gRPC owns c from here
  };
  std::vector<epoll_event> events(256);
  bool stop = false;
  while (!stop) {
    Clock::time_point now = Clock::now();
    Clock::time_point wake = next_prune;
    for (const auto& [fd, deadline] : t.pending) wake = std::min(wake, deadline);
    if (!accepting) wake = std::min(wake, resume_accepting);
    const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), MsUntil(wake, now));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        stop = true;
      } else if (fd == fd_) {
        accept_all();
      } else {
        on_event(fd, events[i].events);
      }
    }
    now = Clock::now();
    for (auto it = t.pending.begin(); it != t.pending.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      ::close(it->first);  // closing also drops it from the epoll set
      ++counts.unspoken;
      it = t.pending.erase(it);
    }
    if (!accepting && now >= resume_accepting) accepting = watch(fd_, EPOLLIN);
    if (now >= next_prune) {
      t.Prune();
      next_prune = now + kPruneEvery;
    }
    counts.open = t.size();
    PublishConnectionCounts(counts);
  }
  for (const auto& [fd, deadline] : t.pending) ::close(fd);
  counts.open = static_cast<int64_t>(t.handed.size());
  PublishConnectionCounts(counts);
  ::close(ep);
}

}  // namespace tgraph
