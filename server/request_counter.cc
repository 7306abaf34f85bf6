#include "server/request_counter.h"

#include <grpcpp/server_context.h>

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace tgraph {

// Whether a call that ended cancelled ended by its deadline. The client cancels at its
// own deadline; the server's copy of it is later by the time the request's headers took
// to arrive (the grpc-timeout header counts from when it was sent), so the client's
// cancellation can arrive before the server's deadline has passed. On a loaded server
// that lag is the time a call waited before its headers were parsed: hundreds of
// milliseconds in a fleet's start-up burst (a report cancelled at its deadline was logged
// as a request over --max_message_bytes). A cancellation within kDeadlineSlack of the
// server's deadline is taken as the deadline.
bool DeadlinePassed(std::chrono::system_clock::time_point deadline) {
  return deadline != std::chrono::system_clock::time_point::max() &&
         deadline - kDeadlineSlack < std::chrono::system_clock::now();
}

const char* GrpcCodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    default: return "OTHER";
  }
}

namespace {

using Clock = std::chrono::steady_clock;

// Counts each tgraph.v1.Ranker RPC once, with the status it ended with: at
// PRE_SEND_STATUS, which gRPC reaches also for requests refused before any handler runs;
// a call gRPC ended itself (its deadline passed, the client cancelled: no status is sent
// by the server) is counted when its interceptor goes, as DEADLINE_EXCEEDED when its
// deadline has passed (DeadlinePassed), else CANCELLED. A CANCELLED past the deadline is
// a deadline too.
class RequestCounter : public grpc::experimental::Interceptor {
 public:
  RequestCounter(ServerMetrics* metrics, std::string method, grpc::ServerContextBase* context)
      : metrics_(metrics),
        method_(std::move(method)),
        context_(context),
        start_(Clock::now()),
        // The sync server builds the context, deadline included, before its interceptors.
        deadline_(context ? context->deadline() : std::chrono::system_clock::time_point::max()) {}
  ~RequestCounter() override {
    if (!counted_) Record(grpc::CANCELLED);
  }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA) &&
        context_)
      deadline_ = context_->deadline();
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS))
      Record(methods->GetSendStatus().error_code());
    methods->Proceed();
  }

 private:
  void Record(grpc::StatusCode code) {
    if (counted_) return;
    counted_ = true;
    if (code == grpc::CANCELLED && DeadlinePassed(deadline_)) code = grpc::DEADLINE_EXCEEDED;
    metrics_->RecordRequest(method_, GrpcCodeName(code), std::chrono::duration<double>(Clock::now() - start_).count());
  }

  ServerMetrics* metrics_;
  std::string method_;
  grpc::ServerContextBase* context_;
  Clock::time_point start_;
  std::chrono::system_clock::time_point deadline_;
  bool counted_ = false;
};

class RequestCounterFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RequestCounterFactory(ServerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    constexpr absl::string_view kService = "/tgraph.v1.Ranker/";
    const absl::string_view method = info->method() ? info->method() : "";
    if (!absl::StartsWith(method, kService)) return nullptr;  // health, reflection
    return new RequestCounter(metrics_, std::string(method.substr(kService.size())), info->server_context());
  }

 private:
  ServerMetrics* metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRequestCounter(ServerMetrics* metrics) {
  return std::make_unique<RequestCounterFactory>(metrics);
}


}  // namespace tgraph
