#include "server/service.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "model/core/heap.h"
#include "model/nn/model_io.h"
#include "model/tools/tool.h"
#include "proto/error_reason.h"
#include "proto/graph_codec.h"
#include "proto/model_codec.h"
#include "server/request_log.h"


namespace tgraph {
namespace {

using Clock = std::chrono::steady_clock;

// The size the client declared for its request (kRequestBytesKey), -1 when it sent none.
int64_t DeclaredRequestBytes(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kRequestBytesKey);
  int64_t bytes = -1;
  if (it == metadata.end() || !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &bytes) ||
      bytes < 0)
    return -1;
  return bytes;
}

// Why a request could not be read. gRPC cancels a call whose request is over the
// transport's message limit (its own RESOURCE_EXHAUSTED reaches the client) exactly as
// it cancels one the client gave up on while sending, and one whose deadline passed; a
// read that fails on an open call is a message not of the method's type. The size the
// client declared tells the first two apart; without it the message names both.
grpc::Status UnreadRequest(const grpc::ServerContext& context, absl::string_view method, int64_t max_message_bytes,
                           absl::string_view type) {
  if (DeadlinePassed(context.deadline()))
    return grpc::Status(grpc::DEADLINE_EXCEEDED,
                        absl::StrCat(method, ": the deadline passed before the request arrived whole"));
  if (!context.IsCancelled())
    return grpc::Status(grpc::INVALID_ARGUMENT, absl::StrCat(method, ": the request is not a ", type, " message"));
  const int64_t declared = DeclaredRequestBytes(context);
  if (declared >= 0 && declared <= max_message_bytes)
    return grpc::Status(grpc::CANCELLED, absl::StrCat(method, ": the client cancelled the call while sending its ",
                                                      declared, "-byte request"));
  if (declared > max_message_bytes)
    return grpc::Status(grpc::RESOURCE_EXHAUSTED, absl::StrCat(method, ": the request of ", declared,
                                                               " bytes is over --max_message_bytes (",
                                                               max_message_bytes, " bytes)"));
  return grpc::Status(grpc::RESOURCE_EXHAUSTED,
                      absl::StrCat(method, ": the request is over --max_message_bytes (", max_message_bytes,
                                   " bytes), or the client cancelled it while sending (it did not say its size in ",
                                   kRequestBytesKey, ")"));
}

// One streamed-unary call: the request read here, `handle` run on it, its answer
// written when OK. The status returned is the one tgraph_requests_total counts.
template <typename Request, typename Response, typename Handle>
grpc::Status ReadAndHandle(grpc::ServerContext* context, grpc::ServerUnaryStreamer<Request, Response>* stream,
                           absl::string_view method, int64_t max_message_bytes, Request* request, Response* response,
                           Handle handle) {
  if (!stream->Read(request)) {
    // The cancellation reaches the context a moment after the failed read.
    for (int i = 0; i < 100 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return UnreadRequest(*context, method, max_message_bytes, Request::descriptor()->full_name());
  }
  grpc::Status status = handle(context, request, response);
  if (status.ok() && !stream->Write(*response))
    return grpc::Status(grpc::CANCELLED, absl::StrCat(method, ": the answer could not be sent (the client left)"));
  return status;
}

// ReadAndHandle, timed, and the request's log line when it is sampled (request_log.h).
template <typename Request, typename Response, typename Handle>
grpc::Status ServeUnary(grpc::ServerContext* context, grpc::ServerUnaryStreamer<Request, Response>* stream,
                        absl::string_view method, int64_t max_message_bytes, RequestLog* log, Handle handle) {
  const Clock::time_point start = Clock::now();
  Request request;
  Response response;
  grpc::Status status = ReadAndHandle(context, stream, method, max_message_bytes, &request, &response, handle);
  int64_t unlogged = 0;
  if (log->Sample(status.error_code(), &unlogged)) {
    RequestFields fields = FieldsOf(request, response);
    fields.error = status.error_message();
    fields.unlogged_failures = unlogged;
    RequestLog::Write(method, status.error_code(),
                      std::chrono::duration<double, std::milli>(Clock::now() - start).count(), fields);
  }
  return status;
}

}  // namespace

grpc::Status RankerService::StreamedRegisterGraph(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<v1::RegisterGraphRequest, v1::RegisterGraphResponse>* s) {
  return ServeUnary(context, s, "RegisterGraph", max_message_bytes_, &request_log_, [this](auto... a) { return RegisterGraph(a...); });
}
grpc::Status RankerService::StreamedRankConfigs(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<v1::RankConfigsRequest, v1::RankConfigsResponse>* s) {
  return ServeUnary(context, s, "RankConfigs", max_message_bytes_, &request_log_, [this](auto... a) { return RankConfigs(a...); });
}
grpc::Status RankerService::StreamedListModels(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<v1::ListModelsRequest, v1::ListModelsResponse>* s) {
  return ServeUnary(context, s, "ListModels", max_message_bytes_, &request_log_, [this](auto... a) { return ListModels(a...); });
}
grpc::Status RankerService::StreamedReportMeasurements(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::ReportMeasurementsRequest, v1::ReportMeasurementsResponse>* s) {
  return ServeUnary(context, s, "ReportMeasurements", max_message_bytes_, &request_log_, [this](auto... a) { return ReportMeasurements(a...); });
}

grpc::Status RankerService::StreamedSearchConfigs(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<v1::SearchConfigsRequest, v1::SearchConfigsResponse>* s) {
  return ServeUnary(context, s, "SearchConfigs", max_message_bytes_, &request_log_, [this](auto... a) { return SearchConfigs(a...); });
}
grpc::Status RankerService::StreamedApplyLayouts(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<v1::ApplyLayoutsRequest, v1::ApplyLayoutsResponse>* s) {
  return ServeUnary(context, s, "ApplyLayouts", max_message_bytes_, &request_log_, [this](auto... a) { return ApplyLayouts(a...); });
}

namespace {

void SetTiming(const RankTiming& timing, v1::Timing* t) {
  t->set_queue_ms(timing.queue_ms);
  t->set_graph_prepare_ms(timing.graph_prepare_ms);
  t->set_inference_ms(timing.inference_ms);
  t->set_total_ms(timing.total_ms);
  t->set_cache_hit(timing.cache_hit);
  t->set_batches(timing.batches);
  t->set_rescored(timing.rescored);
}

// What a client is told when the measurement store could not write: the code and what
// it means, not the server's file names (the log has them).
absl::Status StoreFailure(const absl::Status& s) {
  const char* what = s.code() == absl::StatusCode::kResourceExhausted  ? "its disk is full"
                     : s.code() == absl::StatusCode::kPermissionDenied ? "it is not writable"
                     : s.code() == absl::StatusCode::kFailedPrecondition ? "it is on a read-only file system"
                                                                          : "it failed";
  return absl::Status(s.code(), absl::StrCat("the measurement store could not keep this report: ", what,
                                             "; nothing was stored (the server's log has the details)"));
}

// RESOURCE_EXHAUSTED for a call whose request bytes would take `budget` past
// --request_bytes.
absl::Status OverBudgetStatus(const char* method, const ByteBudget& budget, int64_t bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(method, ": ", budget.holders(), " calls (", budget.held() >> 20,
                                                   " MiB) are in progress, over --request_bytes (",
                                                   budget.budget() >> 20, " MiB) with this one (", bytes >> 20,
                                                   " MiB): retry with backoff"));
}

grpc::Status OverBudget(const char* method, const ByteBudget& budget, int64_t bytes) {
  const absl::Status s = OverBudgetStatus(method, budget, bytes);
  return grpc::Status(grpc::RESOURCE_EXHAUSTED, std::string(s.message()));
}

// What a registration's reader is told when its working memory would take the
// in-flight budget past --request_bytes (hlo/working_memory.h prefixes what).
absl::Status WorkingMemoryRefused(const ByteBudget& budget, const ByteBudget::Lease& lease) {
  if (budget.holders() <= 1)
    return absl::ResourceExhaustedError(absl::StrCat("more than --request_bytes (", budget.budget() >> 20,
                                                     " MiB) allows with nothing else in progress: send a smaller "
                                                     "module, or raise the flag"));
  return absl::ResourceExhaustedError(
      absl::StrCat(budget.holders() - 1, " other calls hold ", (budget.held() - lease.bytes()) >> 20,
                   " MiB of --request_bytes (", budget.budget() >> 20, " MiB): retry with backoff"));
}

// A call that held more than kTrimAfterBytes (the parse and featurize of a large module:
// a 7 MB module of tiny instructions frees ~250 MB) gives that much back when it ends
// (model/core/heap.h).
constexpr int64_t kTrimAfterBytes = int64_t{16} << 20;
void TrimHeapAfter(int64_t held_bytes) {
  if (held_bytes > kTrimAfterBytes) ReleaseFreedMemory(held_bytes);
}

}  // namespace

namespace {

// Whether the caller is gone: cancelled, or its deadline passed (checked here as well:
// a queued request leaves the queue then, whenever gRPC notices).
bool Gone(grpc::ServerContext* context) {
  return context->IsCancelled() || context->deadline() < std::chrono::system_clock::now();
}

TileKernelId KernelOf(const v1::TileKernel& k) {
  return {k.name(), k.source_hash(), k.gpu(), k.compute_capability()};
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& s, grpc::ServerContext* context) {
  if (s.ok()) return grpc::Status::OK;
  if (std::optional<std::string> reason = ErrorReason(s); reason && context)
    context->AddTrailingMetadata(kErrorReasonKey, *reason);
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

hlo::Limits RankerService::ModuleLimits(ByteBudget::Lease* lease) {
  hlo::Limits limits;
  limits.max_instructions = max_nodes_;
  limits.reserve = [this, lease](int64_t more) {
    return lease->Grow(more) ? absl::OkStatus() : WorkingMemoryRefused(in_flight_, *lease);
  };
  return limits;
}

grpc::Status RankerService::RegisterGraph(grpc::ServerContext* context, const v1::RegisterGraphRequest* request,
                                          v1::RegisterGraphResponse* response) {
  int64_t held = 0;
  const grpc::Status s = Register(context, request, response, &held);
  TrimHeapAfter(held);
  return s;
}

grpc::Status RankerService::Register(grpc::ServerContext* context, const v1::RegisterGraphRequest* request,
                                     v1::RegisterGraphResponse* response, int64_t* held) {
  // Admitted up front: arrays, the request, its decoded copy and the pruned copy (each
  // at most the request's size); a module, its bytes, and its reader reserves the rest
  // from the same budget as it goes (model/hlo/working_memory.h), pruning included.
  const bool module = request->source_case() == v1::RegisterGraphRequest::kHloModule;
  const int64_t bytes = static_cast<int64_t>(request->ByteSizeLong()) * (module ? 1 : 3);
  std::optional<ByteBudget::Lease> lease = in_flight_.TryAcquire(bytes);
  if (!lease) return OverBudget("RegisterGraph", in_flight_, bytes);
  const hlo::Limits limits = ModuleLimits(&*lease);
  absl::StatusOr<WireGraph> g = DecodeRegistration(*request, limits);
  *held = lease->bytes();
  if (!g.ok()) return ToGrpc(g.status(), context);
  if (module)
    if (absl::Status s = limits.reserve(GraphBytes(g->graph)); !s.ok())
      return ToGrpc(absl::Status(s.code(), absl::StrCat("hlo_module: pruning its graph: ", s.message())), context);
  EncodeConfigurableNodes(*g, response);
  absl::StatusOr<RegisterResult> r = ranker_->Register(std::move(*g));
  if (!r.ok()) return ToGrpc(r.status(), context);
  response->set_graph_hash(r->graph_hash);
  response->set_num_nodes(r->num_nodes);
  response->set_pruned_nodes(r->pruned_nodes);
  response->set_num_config_nodes(r->num_config_nodes);
  response->set_already_registered(r->already_registered);
  EncodeLayoutSpace(r->graph->space, response);
  return grpc::Status::OK;
}

grpc::Status RankerService::RankConfigs(grpc::ServerContext* context, const v1::RankConfigsRequest* request,
                                        v1::RankConfigsResponse* response) {
  RankRequest q;
  q.collection = request->collection();
  q.model_version = request->model_version();
  q.graph_hash = request->graph_hash();
  q.num_configs = request->num_configs();
  q.layout_configs = request->layout_configs();
  q.tile_configs = request->tile_configs();
  q.top_k = request->top_k();
  q.num_reference_configs = request->num_reference_configs();
  q.reference_layout_configs = request->reference_layout_configs();
  q.reference_tile_configs = request->reference_tile_configs();
  q.folds.assign(request->folds().begin(), request->folds().end());
  q.cascade = request->cascade();
  // The request and what its rows become while scored (the reference's rows and the
  // ranking), held until the answer is sent.
  const int64_t bytes = static_cast<int64_t>(request->ByteSizeLong()) * 2;
  std::optional<ByteBudget::Lease> lease = in_flight_.TryAcquire(bytes);
  if (!lease) return OverBudget("RankConfigs", in_flight_, bytes);
  absl::StatusOr<RankResult> r = ranker_->Rank(q, [context] { return Gone(context); });
  if (!r.ok()) {
    // A request the client gave up on reports why, if the deadline passed.
    if (r.status().code() == absl::StatusCode::kCancelled && DeadlinePassed(context->deadline()))
      return grpc::Status(grpc::DEADLINE_EXCEEDED, "deadline exceeded; scoring stopped");
    return ToGrpc(r.status(), context);
  }
  response->mutable_scores()->Assign(r->scores.begin(), r->scores.end());
  response->mutable_spread()->Assign(r->spread.begin(), r->spread.end());
  response->mutable_ranking()->Assign(r->ranking.begin(), r->ranking.end());
  response->set_model_version(r->model_version);
  response->set_reference_configs(r->reference_configs);
  SetTiming(r->timing, response->mutable_timing());
  if (metrics_) metrics_->RecordRank(q.num_configs, r->timing);
  return grpc::Status::OK;
}

grpc::Status RankerService::ListModels(grpc::ServerContext*, const v1::ListModelsRequest*,
                                       v1::ListModelsResponse* response) {
  for (const auto& [collection, handles] : models_->Loaded()) {
    if (handles.empty()) continue;
    std::vector<int64_t> versions;
    for (const ModelHandle& h : handles) versions.push_back(h.version);
    EncodeModelInfo(collection, handles.front().version, handles.front().model->manifest, versions,
                    response->add_models());
  }
  return grpc::Status::OK;
}

grpc::Status RankerService::ReportMeasurements(grpc::ServerContext* context, const v1::ReportMeasurementsRequest* request,
                                               v1::ReportMeasurementsResponse* response) {
  if (!measurements_)
    return grpc::Status(grpc::FAILED_PRECONDITION,
                                 "this server keeps no measurements: start it with --measurement_store DIR");
  // A report holds up to kReportMemory times its bytes while it is validated and stored
  // (the request, the report's rows and runtimes, the shard's arrays: 3.9x measured
  // with 62 configurable nodes, more with few nodes, where runtimes weigh more):
  // admitted for that against the same budget as registrations.
  constexpr int64_t kReportMemory = 5;
  const int64_t bytes = static_cast<int64_t>(request->ByteSizeLong()) * kReportMemory;
  std::optional<ByteBudget::Lease> lease = in_flight_.TryAcquire(bytes);
  if (!lease) return OverBudget("ReportMeasurements", in_flight_, bytes);
  ReportRequest q;
  q.collection = request->collection();
  q.graph_hash = request->graph_hash();
  q.num_configs = request->num_configs();
  q.layout_configs = request->layout_configs();
  q.runtimes_ns.assign(request->runtimes_ns().begin(), request->runtimes_ns().end());
  q.source = request->source();
  q.tile_names.assign(request->tile_names().begin(), request->tile_names().end());
  q.kernel = KernelOf(request->kernel());
  q.report_id = request->report_id();
  absl::StatusOr<MeasurementReport> r = ranker_->MeasurementReportFor(q);
  if (!r.ok()) return ToGrpc(r.status(), context);
  absl::StatusOr<AppendResult> a = measurements_->Append(*r);
  if (!a.ok()) {
    // Invalid reports are the client's; anything else is the store's: counted, logged
    // here in full, and answered without the server's paths.
    if (a.status().code() == absl::StatusCode::kInvalidArgument) return ToGrpc(a.status(), context);
    if (metrics_) metrics_->RecordMeasurementError(GrpcCodeName(static_cast<grpc::StatusCode>(a.status().code())));
    LogError(absl::StrCat("ReportMeasurements: ", a.status().message()));
    return ToGrpc(StoreFailure(a.status()), context);
  }
  if (metrics_ && !a->already_stored) metrics_->RecordMeasurements(a->measurements, a->bytes);
  TrimHeapAfter(bytes);
  response->set_stored(a->measurements);
  response->set_already_stored(a->already_stored);
  response->set_shard(std::filesystem::path(a->path).lexically_relative(measurements_->root()).string());
  return grpc::Status::OK;
}

grpc::Status RankerService::SearchConfigs(grpc::ServerContext* context, const v1::SearchConfigsRequest* request,
                                          v1::SearchConfigsResponse* response) {
  SearchRequest q;
  q.collection = request->collection();
  q.model_version = request->model_version();
  q.graph_hash = request->graph_hash();
  q.num_results = request->num_results();
  q.max_evaluations = request->max_evaluations();
  q.num_exclude = request->num_exclude();
  q.exclude_layout_configs = request->exclude_layout_configs();
  q.num_start = request->num_start();
  q.start_layout_configs = request->start_layout_configs();
  q.seed = request->seed();
  q.num_candidates = request->num_candidates();
  q.candidate_layout_configs = request->candidate_layout_configs();
  q.exclude_runtimes_ns.assign(request->exclude_runtimes_ns().begin(), request->exclude_runtimes_ns().end());
  q.exclude_tile_configs = request->exclude_tile_configs();
  q.max_changed_groups = request->max_changed_groups();
  q.kernel = KernelOf(request->kernel());
  q.include_stored = request->include_stored_measurements();
  if (absl::StatusOr<Collection> c = ParseCollection(q.collection); c.ok() && measurements_) {
    if (!q.kernel.name.empty())
      q.kernel_problems = [store = measurements_, name = c->name()](const std::string& key) {
        return store->KernelProblems(name, key);
      };
    if (q.include_stored)
      q.stored_measurements = [root = measurements_->root(), c = *c](const std::string& hash, int64_t max_rows,
                                                                     const std::function<bool()>& cancelled) {
        return LoadGraphMeasurements(root, c, hash, max_rows, cancelled);
      };
  }
  // Admitted for the request, the copies its rows become (hashed sets, the measured
  // correction's rows) and its working memory (in its graph's row size, once the request
  // is admitted), before it waits in the queue; the heap it used is given back when it
  // ends (a search with 100,000 excluded rows holds ~100 MB).
  std::optional<ByteBudget::Lease> lease;
  struct TrimWhenDone {
    int64_t bytes;
    ~TrimWhenDone() { TrimHeapAfter(bytes); }
  } trim{static_cast<int64_t>(request->ByteSizeLong()) * 3};
  const auto hold = [&](int64_t working_bytes) -> absl::Status {
    trim.bytes += working_bytes;
    std::optional<ByteBudget::Lease> held = in_flight_.TryAcquire(trim.bytes);
    if (!held) return OverBudgetStatus("SearchConfigs", in_flight_, trim.bytes);
    lease.emplace(std::move(*held));
    return absl::OkStatus();
  };
  absl::StatusOr<SearchOutcome> r = ranker_->Search(q, [context] { return Gone(context); }, hold);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kCancelled && DeadlinePassed(context->deadline()))
      return grpc::Status(grpc::DEADLINE_EXCEEDED, "deadline exceeded; the search stopped");
    return ToGrpc(r.status(), context);
  }
  response->set_num_configs(static_cast<int64_t>(r->scores.size()));
  response->set_layout_configs(reinterpret_cast<const char*>(r->rows.data()), r->rows.size());
  response->set_tile_configs(reinterpret_cast<const char*>(r->tile_rows.data()), r->tile_rows.size() * sizeof(float));
  for (const std::string& name : r->tile_names) response->add_tile_names(name);
  response->mutable_scores()->Assign(r->scores.begin(), r->scores.end());
  response->mutable_spread()->Assign(r->spread.begin(), r->spread.end());
  response->set_model_version(r->model_version);
  response->set_evaluations(r->evaluations);
  response->set_generations(r->generations);
  response->set_reference_configs(r->reference_configs);
  response->set_reference_layout_configs(reinterpret_cast<const char*>(r->reference_rows.data()),
                                         r->reference_rows.size());
  response->set_correction_measurements(r->correction_measurements);
  response->set_correction_weight(r->correction_weight);
  response->set_max_changed_groups(r->max_changed_groups);
  response->set_num_variation(r->variation);
  response->set_kernel_problems(r->kernel_problems);
  response->set_stored_measurements(r->stored_measurements);
  response->set_older_stored_reports(r->older_stored_reports);
  response->set_start_configs(r->start_configs);
  for (const std::string& name : r->measured_tile_names) response->add_measured_tile_names(name);
  response->mutable_measured_runtimes_ns()->Assign(r->measured_runtimes_ns.begin(), r->measured_runtimes_ns.end());
  SetTiming(r->timing, response->mutable_timing());
  if (metrics_) metrics_->RecordSearch(r->timing, r->tile);
  return grpc::Status::OK;
}

grpc::Status RankerService::ApplyLayouts(grpc::ServerContext* context, const v1::ApplyLayoutsRequest* request,
                                         v1::ApplyLayoutsResponse* response) {
  // The request, and the edited text it answers with (the text and its edits).
  const int64_t bytes = static_cast<int64_t>(request->ByteSizeLong()) * 3;
  std::optional<ByteBudget::Lease> lease = in_flight_.TryAcquire(bytes);
  if (!lease) return OverBudget("ApplyLayouts", in_flight_, bytes);
  const absl::Status s = tgraph::ApplyLayouts(*request, ModuleLimits(&*lease), response);
  TrimHeapAfter(lease->bytes());
  return ToGrpc(s, context);
}

}  // namespace tgraph
