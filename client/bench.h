// The load generator behind `tgraph-client bench` (in the spirit of ghz): concurrent
// RankConfigs calls over a pool of graphs, bounded by a request count and a duration,
// optionally paced to a target rate; reports throughput, latency percentiles and errors
// by status code.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "client/client.h"

namespace tgraph {

struct BenchOptions {
  ClientOptions client;
  std::string collection;
  std::string data_root;        // graphs come from every split of the collection here
  int graphs = 8;               // pool size
  int concurrency = 4;
  int64_t requests = 200;       // stop after this many (0 = no count limit)
  double duration_s = 60;       // and after this long (0 = no time limit)
  double rate = 0;              // requests per second over all workers (0 = as fast as possible)
  int64_t configs = 128;        // configurations per request
  bool allow_remote = false;    // only loopback targets unless set
  bool progress = false;        // a live line on stderr
};

struct BenchReport {
  int64_t ok = 0;
  std::map<std::string, int64_t> errors;  // by status code name
  double seconds = 0;
  double requests_per_s = 0, configs_per_s = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0;
  double server_inference_mean_ms = 0;
  std::string Text() const;
  std::string Json() const;
};

absl::StatusOr<BenchReport> RunBench(const BenchOptions& options);

}  // namespace tgraph
