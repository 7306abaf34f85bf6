#include "server/connections.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "grpc/support/log.h"
#include "model/tools/tool.h"

namespace tgraph {

namespace {

std::atomic<int64_t> accept_errors{0};
std::atomic<int64_t> connections_open{-1}, connections_cap{0}, connections_refused{0}, connections_unspoken{0};

int64_t KernelMaxFds() {
  std::ifstream f("/proc/sys/fs/nr_open");
  int64_t n = 0;
  return (f >> n) ? n : 0;
}

// gRPC's log lines, in the server's log format; a failed accept() is counted.
void GrpcLog(gpr_log_func_args* args) {
  const char* message = args->message ? args->message : "";
  if (std::strstr(message, "Failed accept") != nullptr) {
    NoteAcceptError(absl::StrCat("gRPC: ", message));
    return;
  }
  const std::string line = absl::StrCat("gRPC ", args->file ? args->file : "", ":", args->line, ": ", message);
  if (args->severity == GPR_LOG_SEVERITY_ERROR) {
    LogError(line);
  } else {
    LogInfo(line);
  }
}

int Ms(double seconds) { return static_cast<int>(std::min(seconds * 1000.0, 2e9)); }

}  // namespace

std::string FdLimit::Describe() const {
  return absl::StrCat("file descriptors: ", soft, soft > before ? absl::StrCat(" (raised from ", before, ")") : "",
                      "; hard limit ", hard);
}

FdLimit RaiseFdLimit() {
  FdLimit out;
  struct rlimit r;
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return out;
  out.before = static_cast<int64_t>(r.rlim_cur);
  // The hard limit up to the kernel's where the process may (root, CAP_SYS_RESOURCE).
  const int64_t kernel = KernelMaxFds();
  if (kernel > 0 && r.rlim_max != RLIM_INFINITY && static_cast<int64_t>(r.rlim_max) < kernel) {
    struct rlimit higher = r;
    higher.rlim_max = static_cast<rlim_t>(kernel);
    higher.rlim_cur = higher.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &higher) == 0) r = higher;
  }
  if (r.rlim_cur != r.rlim_max) {
    struct rlimit soft = r;
    soft.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &soft) == 0) r = soft;
  }
  ::getrlimit(RLIMIT_NOFILE, &r);
  out.soft = static_cast<int64_t>(r.rlim_cur);
  out.hard = static_cast<int64_t>(r.rlim_max);
  return out;
}

int64_t EffectiveMaxConnections(int64_t max_connections) {
  struct rlimit r;
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return max_connections;
  const int64_t limit = static_cast<int64_t>(r.rlim_cur);
  return std::max<int64_t>(1, std::min(max_connections, limit - std::min(kReservedFds, limit / 2)));
}

void ApplyConnectionArguments(const ConnectionOptions& o, grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, Ms(o.handshake_timeout_s));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, Ms(o.max_connection_idle_s));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Ms(o.keepalive_s));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Ms(o.keepalive_timeout_s));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_streams);
}

void CountAcceptErrors() { gpr_set_log_function(GrpcLog); }

void NoteAcceptError(const std::string& message) {
  ++accept_errors;
  static std::atomic<int64_t> last_second{-1};
  const int64_t now = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  if (last_second.exchange(now) == now) return;
  LogWarning(absl::StrCat(message, " (", accept_errors.load(), " failed accepts so far: tgraph_accept_errors_total)"));
}

int64_t AcceptErrors() { return accept_errors.load(); }

void PublishConnectionCounts(const ConnectionCounts& c) {
  connections_open = c.open;
  connections_cap = c.cap;
  connections_refused = c.refused;
  connections_unspoken = c.unspoken;
}

ConnectionCounts CurrentConnectionCounts() {
  ConnectionCounts c;
  c.open = connections_open.load();
  c.cap = connections_cap.load();
  c.refused = connections_refused.load();
  c.unspoken = connections_unspoken.load();
  return c;
}

int64_t OpenFds() {
  std::error_code ec;
  int64_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return ec ? -1 : n;
}

}  // namespace tgraph
