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

namespace {

// One run of the accept loop (Listener::Serve's): the epoll set over the listening
// socket, the wake eventfd and the pending connections, and what it counts.
class AcceptLoop {
 public:
  AcceptLoop(const ListenerOptions& o, int listen_fd, int wake_fd, grpc::Server* server)
      : o_(o), listen_fd_(listen_fd), wake_fd_(wake_fd), server_(server), ep_(::epoll_create1(EPOLL_CLOEXEC)),
        handshake_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::max(0.001, o.handshake_timeout_s)))) {
    counts_.open = 0;
    counts_.cap = o.max_connections;
  }
  ~AcceptLoop() { ::close(ep_); }

  // Until the wake eventfd is written; then the pending connections are closed and the
  // handed ones are gRPC's.
  void Run() {
    Watch(wake_fd_, EPOLLIN);
    accepting_ = Watch(listen_fd_, EPOLLIN);
    next_prune_ = Clock::now() + kPruneEvery;
    PublishConnectionCounts(counts_);
    std::vector<epoll_event> events(256);
    bool stop = false;
    while (!stop) {
      const int n = ::epoll_wait(ep_, events.data(), static_cast<int>(events.size()), MsUntil(Wake(), Clock::now()));
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_) {
          stop = true;
        } else if (fd == listen_fd_) {
          AcceptAll();
        } else {
          OnEvent(fd, events[i].events);
        }
      }
      Housekeeping(Clock::now());
    }
    for (const auto& [fd, deadline] : t_.pending) ::close(fd);
    counts_.open = static_cast<int64_t>(t_.handed.size());
    PublishConnectionCounts(counts_);
  }

 private:
  bool Watch(int fd, uint32_t events) {
    epoll_event e{};
    e.events = events;
    e.data.fd = fd;
    return ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e) == 0;
  }

  // When the loop must wake next: a pruning, a pending connection's deadline, the end of
  // an accept back-off.
  Clock::time_point Wake() const {
    Clock::time_point wake = next_prune_;
    for (const auto& [fd, deadline] : t_.pending) wake = std::min(wake, deadline);
    if (!accepting_) wake = std::min(wake, resume_accepting_);
    return wake;
  }

  // Stops accepting for a while after a failed accept: the backlog keeps the listening
  // socket readable, and polling it again at once would spin.
  void BackOff() {
    NoteAcceptError(absl::StrCat("accept on ", o_.address, " failed: ", std::strerror(errno),
                                 "; accepting again in 100 ms"));
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, listen_fd_, nullptr);
    accepting_ = false;
    resume_accepting_ = Clock::now() + kAcceptBackoff;
  }

  // Every connection waiting in the backlog, pending until its first bytes; past the cap
  // it is closed (the client sees its connection closed and retries later).
  void AcceptAll() {
    while (true) {
      const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) BackOff();
        return;
      }
      if (t_.size() >= o_.max_connections) t_.Prune();
      if (t_.size() >= o_.max_connections || !Watch(c, EPOLLIN | EPOLLRDHUP)) {
        ::close(c);
        ++counts_.refused;
        continue;
      }
      t_.pending[c] = Clock::now() + handshake_;
    }
  }

  // A pending connection's first bytes hand it to gRPC; its end (or an error) before any
  // closes it here.
  void OnEvent(int c, uint32_t events) {
    char first;
    const ssize_t n = ::recv(c, &first, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) && (events & (EPOLLERR | EPOLLHUP)) == 0)
      return;  // nothing to read yet
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, c, nullptr);
    t_.pending.erase(c);
    const ino_t inode = n > 0 ? SocketInode(c) : 0;
    if (inode == 0) {
      ::close(c);
      return;
    }
    const int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t_.handed[c] = inode;
    grpc::AddInsecureChannelFromFd(server_, c);  // gRPC owns c from here
  }

  // After each wake: pending connections past their deadline closed (unspoken), accepting
  // resumed after a back-off, closed handed connections forgotten, the counts published.
  void Housekeeping(Clock::time_point now) {
    for (auto it = t_.pending.begin(); it != t_.pending.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      ::close(it->first);  // closing also drops it from the epoll set
      ++counts_.unspoken;
      it = t_.pending.erase(it);
    }
    if (!accepting_ && now >= resume_accepting_) accepting_ = Watch(listen_fd_, EPOLLIN);
    if (now >= next_prune_) {
      t_.Prune();
      next_prune_ = now + kPruneEvery;
    }
    counts_.open = t_.size();
    PublishConnectionCounts(counts_);
  }

  const ListenerOptions& o_;
  const int listen_fd_, wake_fd_;
  grpc::Server* server_;
  const int ep_;
  const Clock::duration handshake_;
  bool accepting_ = false;
  Clock::time_point resume_accepting_{}, next_prune_{};
  Tracked t_;
  ConnectionCounts counts_;
};

}  // namespace

void Listener::Serve(grpc::Server* server) { AcceptLoop(o_, fd_, wake_fd_, server).Run(); }

}  // namespace tgraph
