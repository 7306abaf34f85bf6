// The per-request log line: one in every N successful tgraph.v1.Ranker calls
// (--request_log_every), and every failed call with its reason, as
//   request method=RankConfigs code=OK ms=812.4 graph=3a0c5517a87d configs=1001 model_version=3
//   request method=RegisterGraph code=INVALID_ARGUMENT ms=3.1 error="hlo_module: line 4, ..."
// (SearchConfigs: evaluations=2048 instead of configs)
// (key=value pairs, in the text or JSON log format of model/tools/tool.h). Fields a
// method does not have are left out. Failed calls are logged at most kFailureLines a
// second: past that they are counted, and the next line logged says how many were not.
// Written by RankerService's streamed-unary wrapper (service.cc) after the handler ran.
// Threads: Sample and Write may be called from any thread at once (atomic counters and
// a mutex for the failure budget; each line is written whole).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tgraph/v1/ranker.pb.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tgraph {

// What a call's line says beyond its method, code and latency.
struct RequestFields {
  std::string graph_hash;     // shown as its first 12 characters
  int64_t configs = -1;       // configurations in the request
  int64_t evaluations = -1;   // SearchConfigs: the model evaluations it spent
  int64_t model_version = -1; // the version that answered
  std::string error;          // a failed call's status message (shown quoted, printable, bounded)
  int64_t unlogged_failures = 0;  // failed calls not logged before this one (the rate limit)
};

RequestFields FieldsOf(const v1::RegisterGraphRequest& q, const v1::RegisterGraphResponse& r);
RequestFields FieldsOf(const v1::RankConfigsRequest& q, const v1::RankConfigsResponse& r);
RequestFields FieldsOf(const v1::ListModelsRequest& q, const v1::ListModelsResponse& r);
RequestFields FieldsOf(const v1::ReportMeasurementsRequest& q, const v1::ReportMeasurementsResponse& r);
RequestFields FieldsOf(const v1::SearchConfigsRequest& q, const v1::SearchConfigsResponse& r);
RequestFields FieldsOf(const v1::ApplyLayoutsRequest& q, const v1::ApplyLayoutsResponse& r);

class RequestLog {
 public:
  static constexpr int64_t kFailureLines = 50;  // failed calls logged per second, at most

  // every: log one successful call in `every` (the first of each run of `every`); 0:
  // none (failed calls are still logged).
  explicit RequestLog(int64_t every) : every_(every) {}

  // Whether the call ending now with `code` (a grpc::StatusCode) gets a line; for a
  // failed one that does, *unlogged is how many failed calls were not logged before it.
  bool Sample(int code, int64_t* unlogged = nullptr);
  // The line (LogInfo for OK, LogWarning otherwise).
  static std::string Line(absl::string_view method, int code, double ms, const RequestFields& f);
  static void Write(absl::string_view method, int code, double ms, const RequestFields& f);

 private:
  const int64_t every_;
  std::atomic<int64_t> calls_{0};
  absl::Mutex failures_mu_;
  int64_t failure_second_ ABSL_GUARDED_BY(failures_mu_) = -1;
  int64_t failures_this_second_ ABSL_GUARDED_BY(failures_mu_) = 0;
  int64_t failures_unlogged_ ABSL_GUARDED_BY(failures_mu_) = 0;
};

}  // namespace tgraph
