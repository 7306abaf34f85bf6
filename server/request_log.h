// The per-request log line: one in every N tgraph.v1.Ranker calls (--request_log_every),
// and every call that ends in a server fault (INTERNAL, UNKNOWN, DATA_LOSS), as
//   request method=RankConfigs code=OK ms=812.4 graph=3a0c5517a87d configs=1001 model_version=3
// (SearchConfigs: evaluations=2048 instead of configs)
// (key=value pairs, in the text or JSON log format of model/tools/tool.h). Fields a
// method does not have are left out. Written by RankerService's streamed-unary wrapper
// (service.cc) after the handler ran.
// Threads: Sample and Write may be called from any thread at once (an atomic counter;
// each line is written whole).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tgraph/v1/ranker.pb.h"

namespace tgraph {

// What a call's line says beyond its method, code and latency.
struct RequestFields {
  std::string graph_hash;     // shown as its first 12 characters
  int64_t configs = -1;       // configurations in the request
  int64_t evaluations = -1;   // SearchConfigs: the model evaluations it may spend
  int64_t model_version = -1; // the version that answered
};

RequestFields FieldsOf(const v1::RegisterGraphRequest& q, const v1::RegisterGraphResponse& r);
RequestFields FieldsOf(const v1::RankConfigsRequest& q, const v1::RankConfigsResponse& r);
RequestFields FieldsOf(const v1::ListModelsRequest& q, const v1::ListModelsResponse& r);
RequestFields FieldsOf(const v1::ReportMeasurementsRequest& q, const v1::ReportMeasurementsResponse& r);
RequestFields FieldsOf(const v1::SearchConfigsRequest& q, const v1::SearchConfigsResponse& r);

class RequestLog {
 public:
  // every: log one call in `every` (the first of each run of `every`); 0: none
  // (server faults are still logged).
  explicit RequestLog(int64_t every) : every_(every) {}

  // Whether the call ending now with `code` (a grpc::StatusCode) gets a line.
  bool Sample(int code);
  // The line (LogInfo for OK, LogWarning otherwise).
  static std::string Line(absl::string_view method, int code, double ms, const RequestFields& f);
  static void Write(absl::string_view method, int code, double ms, const RequestFields& f);

 private:
  const int64_t every_;
  std::atomic<int64_t> calls_{0};
};

}  // namespace tgraph
