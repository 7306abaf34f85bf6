#include "server/request_log.h"

#include <grpcpp/support/status.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "model/tools/tool.h"

namespace tgraph {

RequestFields FieldsOf(const v1::RegisterGraphRequest&, const v1::RegisterGraphResponse& r) {
  RequestFields f;
  f.graph_hash = r.graph_hash();
  return f;
}
RequestFields FieldsOf(const v1::RankConfigsRequest& q, const v1::RankConfigsResponse& r) {
  RequestFields f;
  f.graph_hash = q.graph_hash();
  f.configs = q.num_configs();
  f.model_version = r.model_version();
  return f;
}
RequestFields FieldsOf(const v1::ListModelsRequest&, const v1::ListModelsResponse&) { return {}; }
RequestFields FieldsOf(const v1::ReportMeasurementsRequest& q, const v1::ReportMeasurementsResponse&) {
  RequestFields f;
  f.graph_hash = q.graph_hash();
  f.configs = q.num_configs();
  return f;
}
RequestFields FieldsOf(const v1::ApplyLayoutsRequest& q, const v1::ApplyLayoutsResponse&) {
  RequestFields f;
  f.configs = q.layout_config().empty() ? 0 : 1;
  return f;
}
RequestFields FieldsOf(const v1::SearchConfigsRequest& q, const v1::SearchConfigsResponse& r) {
  RequestFields f;
  f.graph_hash = q.graph_hash();
  // What it spent, not what it was allowed (a default request asks for 0: the policy's
  // budget); a call that failed before answering spent nothing worth a field.
  if (r.model_version() > 0) f.evaluations = r.evaluations();
  f.model_version = r.model_version();
  return f;
}

namespace {

bool ServerFault(int code) {
  return code == grpc::INTERNAL || code == grpc::UNKNOWN || code == grpc::DATA_LOSS;
}

const char* CodeText(int code) {
  static const char* const kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                       "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                       "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "OTHER";
}

// A graph hash as logged: its first 12 characters, hex digits only (it comes from the
// client: anything else is shown as '?').
std::string HashPrefix(absl::string_view hash) {
  std::string out;
  for (char c : hash.substr(0, 12)) out.push_back((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ? c : '?');
  return out;
}

}  // namespace

bool RequestLog::Sample(int code, int64_t* unlogged) {
  if (code == grpc::OK) {
    const int64_t n = calls_.fetch_add(1, std::memory_order_relaxed);
    return every_ > 0 && n % every_ == 0;
  }
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::steady_clock::now().time_since_epoch()).count();
  absl::MutexLock lock(&failures_mu_);
  if (second != failure_second_) {
    failure_second_ = second;
    failures_this_second_ = 0;
  }
  // Server faults are always logged; other failures within the rate.
  if (!ServerFault(code) && failures_this_second_ >= kFailureLines) {
    ++failures_unlogged_;
    return false;
  }
  ++failures_this_second_;
  if (unlogged) *unlogged = failures_unlogged_;
  failures_unlogged_ = 0;
  return true;
}

std::string RequestLog::Line(absl::string_view method, int code, double ms, const RequestFields& f) {
  char latency[32];
  std::snprintf(latency, sizeof latency, "%.1f", ms);
  std::string line = absl::StrCat("request method=", method, " code=", CodeText(code), " ms=", latency);
  if (!f.graph_hash.empty()) absl::StrAppend(&line, " graph=", HashPrefix(f.graph_hash));
  if (f.configs >= 0) absl::StrAppend(&line, " configs=", f.configs);
  if (f.evaluations >= 0) absl::StrAppend(&line, " evaluations=", f.evaluations);
  if (f.model_version > 0) absl::StrAppend(&line, " model_version=", f.model_version);
  if (code != grpc::OK) {
    // The reason, as the client got it: printable, quotes and backslashes escaped, bounded.
    constexpr size_t kMax = 400;
    std::string error;
    for (char c : absl::string_view(f.error).substr(0, kMax)) {
      if (c == '"' || c == '\\') error.push_back('\\');
      error.push_back(c >= 0x20 && c < 0x7f ? c : '?');
    }
    if (f.error.size() > kMax) absl::StrAppend(&error, "...(", f.error.size(), " bytes)");
    absl::StrAppend(&line, " error=\"", error, "\"");
    if (f.unlogged_failures > 0)
      absl::StrAppend(&line, " unlogged_failures=", f.unlogged_failures);
  }
  return line;
}

void RequestLog::Write(absl::string_view method, int code, double ms, const RequestFields& f) {
  const std::string line = Line(method, code, ms, f);
  if (code == grpc::OK) {
    LogInfo(line);
  } else {
    LogWarning(line);
  }
}

}  // namespace tgraph
