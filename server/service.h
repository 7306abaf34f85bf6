// The gRPC service tgraph.v1.Ranker: thin handlers that decode, call the Ranker, map
// absl::Status to gRPC status codes and record metrics.
//
// Threads: gRPC calls the handlers from its own threads, any number at once. The
// service borrows the Ranker, the ModelManager, the metrics (may be null) and the
// measurement store (may be null); all must outlive the grpc::Server it is registered
// with (server/server.cc shuts that down first).
#pragma once

#include <memory>

#include "model/store/measurement_store.h"
#include "server/byte_budget.h"
#include "server/request_counter.h"
#include "server/request_log.h"
#include "server/service_options.h"
#include "server/metrics.h"
#include "server/model_manager.h"
#include "server/ranker.h"
#include "tgraph/v1/ranker.grpc.pb.h"

namespace tgraph {

// The methods are served "streamed unary" (one request read by the handler, one
// answer): gRPC then hands every call to the handler, also one whose request is over
// --max_message_bytes or does not parse, so that the handler answers it with a precise
// status and the request counter sees it. Served as plain unary, such calls are refused
// inside gRPC's transport, where nothing of the server sees them.
class RankerService final : public v1::Ranker::StreamedUnaryService {
 public:
  // `measurements` may be null: ReportMeasurements then answers FAILED_PRECONDITION.
  using Options = ServiceOptions;
  RankerService(Ranker* ranker, ModelManager* models, ServerMetrics* metrics, MeasurementStore* measurements,
                const Options& o)
      : ranker_(ranker), models_(models), metrics_(metrics), max_nodes_(o.max_nodes), measurements_(measurements),
        in_flight_(o.request_bytes), max_message_bytes_(o.max_message_bytes),
        request_log_(o.request_log_every) {}

  // What gRPC calls: read the request, run the handler below, write its answer.
  grpc::Status StreamedRegisterGraph(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::RegisterGraphRequest, v1::RegisterGraphResponse>* stream) override;
  grpc::Status StreamedRankConfigs(grpc::ServerContext* context,
                                   grpc::ServerUnaryStreamer<v1::RankConfigsRequest, v1::RankConfigsResponse>* stream) override;
  grpc::Status StreamedListModels(grpc::ServerContext* context,
                                  grpc::ServerUnaryStreamer<v1::ListModelsRequest, v1::ListModelsResponse>* stream) override;
  grpc::Status StreamedReportMeasurements(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::ReportMeasurementsRequest, v1::ReportMeasurementsResponse>* stream) override;
  grpc::Status StreamedSearchConfigs(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::SearchConfigsRequest, v1::SearchConfigsResponse>* stream) override;
  grpc::Status StreamedApplyLayouts(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::ApplyLayoutsRequest, v1::ApplyLayoutsResponse>* stream) override;

  grpc::Status RegisterGraph(grpc::ServerContext* context, const v1::RegisterGraphRequest* request,
                             v1::RegisterGraphResponse* response) override;
  grpc::Status RankConfigs(grpc::ServerContext* context, const v1::RankConfigsRequest* request,
                           v1::RankConfigsResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status ReportMeasurements(grpc::ServerContext* context, const v1::ReportMeasurementsRequest* request,
                                  v1::ReportMeasurementsResponse* response) override;
  grpc::Status SearchConfigs(grpc::ServerContext* context, const v1::SearchConfigsRequest* request,
                             v1::SearchConfigsResponse* response) override;
  // Stateless (apply_layouts.h): admitted against --request_bytes as a module's
  // registration is, its reader reserving its working memory from the same budget.
  grpc::Status ApplyLayouts(grpc::ServerContext* context, const v1::ApplyLayoutsRequest* request,
                            v1::ApplyLayoutsResponse* response) override;

 private:
  // What a module's reader may take (--max_nodes instructions, working memory from
  // --request_bytes through `lease`, which must outlive the limits).
  hlo::Limits ModuleLimits(ByteBudget::Lease* lease);
  // RegisterGraph's work; *held: the in-flight bytes it held at its peak.
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterGraphRequest* request,
                        v1::RegisterGraphResponse* response, int64_t* held);
  Ranker* ranker_;
  ModelManager* models_;
  ServerMetrics* metrics_;
  int64_t max_nodes_;
  MeasurementStore* measurements_;
  ByteBudget in_flight_;  // what every call in progress holds (--request_bytes), admitted before its work
  int64_t max_message_bytes_;
  RequestLog request_log_;
};

// absl::Status -> grpc::Status with the same code and message; a machine-readable
// reason (proto/error_reason.h) becomes trailing metadata of `context` (required: a
// handler that dropped it would hide the reason from clients).
grpc::Status ToGrpc(const absl::Status& s, grpc::ServerContext* context);

}  // namespace tgraph
