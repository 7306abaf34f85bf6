// The tgraph server process: its wiring and lifetime, from options to a drained exit.
// server/main.cc reads flags into ServerOptions and calls RunServer; tests and other
// front ends may do the same.
//
// Health (grpc.health.v1): the overall status ("") and "tgraph.v1.Ranker" are
// NOT_SERVING until a model is loaded (readiness); "liveness" is SERVING as long as the
// process answers RPCs, with or without a model (liveness probes). Server reflection is
// on unless options.reflection is false; TLS or mutual TLS per options.tls; Prometheus
// metrics on their own port. A stop request (SIGTERM/SIGINT in the tool) stops
// accepting, drains in-flight RPCs up to drain_timeout_s, and RunServer returns 0.
//
// Threads: RunServer runs on the caller's thread, which it blocks until `stop` is set
// (by a signal handler or another thread: it is only read). The gRPC server, the
// worker pool and the registry poller run threads of their own, all joined before
// RunServer returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "model/core/model_spec.h"
#include "server/ranker.h"
#include "server/connections.h"
#include "server/service_options.h"
#include "server/tls.h"

namespace tgraph {

struct ServerOptions {
  std::string registry;  // required: <registry>/<collection>/<version>/manifest.json
  std::string address = "0.0.0.0:50051";  // port 0 picks a free port
  std::string metrics_address = "0.0.0.0:9090";  // empty: no metrics
  std::string port_file;  // if set: the bound gRPC and metrics ports, written once serving
  // The ranker's limits and caches. ranker.activation_bytes <= 0: AutoActivationBytes.
  RankerOptions ranker;
  // The service's bounds: graph size, memory of calls in progress, message size, request log.
  ServiceOptions service;
  int intra_op_threads = 0;  // 0: every core this process may use
  Precision precision = Precision::kFloat32;
  std::string precision_flag = "auto";  // as given, for the log
  double poll_interval_s = 10;
  int keep_versions = 2;
  bool fold_inference = true;
  std::string measurement_store;  // empty: ReportMeasurements answers FAILED_PRECONDITION
  bool reflection = true;
  ServerTlsOptions tls;
  ConnectionOptions connections;  // gRPC's transport bounds (server/connections.h)
  double drain_timeout_s = 20;
};

// Starts the server, serves until `stop` is non-zero (its value is logged as the
// signal), drains and returns the process's exit status: kExitOk after a drain or a
// stop while starting, kExitUsage for options that cannot work (TLS files), else
// kExitFailure (the metrics port or the address cannot be bound), with the error
// logged.
int RunServer(const ServerOptions& options, const std::atomic<int>& stop);

}  // namespace tgraph
