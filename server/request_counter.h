// The request counter: every tgraph.v1.Ranker RPC counted once in
// tgraph_requests_total{method,code} with its latency and the status actually sent,
// and the one policy for when a cancelled call counts as its deadline.
//
// Threads: gRPC creates one interceptor per call and runs it on the call's threads; the
// interceptors share only the metrics (server/metrics.h, which guards itself), which
// must outlive the server the factory is installed in.
#pragma once

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <memory>

#include "server/metrics.h"

namespace tgraph {

// A cancellation within this of the server's copy of a call's deadline is the deadline.
inline constexpr std::chrono::milliseconds kDeadlineSlack(1000);

// Whether a call that ended cancelled ended by its deadline (`deadline`: the server's
// copy; time_point::max() for none), by kDeadlineSlack.
bool DeadlinePassed(std::chrono::system_clock::time_point deadline);

// The metric label of a gRPC status code ("OK", "CANCELLED", ...; "OTHER" for the rest).
const char* GrpcCodeName(grpc::StatusCode c);

// Counts every tgraph.v1.Ranker RPC in tgraph_requests_total{method,code} and its
// latency, with the status actually sent, including requests over
// --max_message_bytes and unparseable ones (RankerService reads them itself): install
// it with ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRequestCounter(ServerMetrics* metrics);

}  // namespace tgraph
