// The gRPC service tgraph.v1.Ranker: thin handlers that decode, call the Ranker, map
// absl::Status to gRPC status codes and record metrics.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "model/measurement_store.h"
#include "server/byte_budget.h"
#include "server/metrics.h"
#include "server/model_manager.h"
#include "server/ranker.h"
#include "tgraph/v1/ranker.grpc.pb.h"

namespace tgraph {

class RankerService final : public v1::Ranker::Service {
 public:
  // `measurements` may be null: ReportMeasurements then answers FAILED_PRECONDITION.
  // `registration_bytes` bounds the request bytes of RegisterGraph calls in progress at
  // once (their decoding takes a few times that in memory); past it, RESOURCE_EXHAUSTED.
  RankerService(Ranker* ranker, ModelManager* models, ServerMetrics* metrics, int64_t max_nodes,
                MeasurementStore* measurements = nullptr, int64_t registration_bytes = int64_t{512} << 20)
      : ranker_(ranker), models_(models), metrics_(metrics), max_nodes_(max_nodes), measurements_(measurements),
        registrations_(registration_bytes) {}

  grpc::Status RegisterGraph(grpc::ServerContext* context, const v1::RegisterGraphRequest* request,
                             v1::RegisterGraphResponse* response) override;
  grpc::Status RankConfigs(grpc::ServerContext* context, const v1::RankConfigsRequest* request,
                           v1::RankConfigsResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status ReportMeasurements(grpc::ServerContext* context, const v1::ReportMeasurementsRequest* request,
                                  v1::ReportMeasurementsResponse* response) override;

 private:
  Ranker* ranker_;
  ModelManager* models_;
  ServerMetrics* metrics_;
  int64_t max_nodes_;
  MeasurementStore* measurements_;
  ByteBudget registrations_;
};

// Counts every tgraph.v1.Ranker RPC in tgraph_requests_total{method,code} and its
// latency, with the status actually sent, including the requests gRPC itself refuses
// before a handler runs (over --max_message_bytes, unparseable): install it with
// ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRequestCounter(ServerMetrics* metrics);

// absl::Status -> grpc::Status with the same code and message; a machine-readable
// reason (proto/error_reason.h) becomes trailing metadata of `context` when given.
grpc::Status ToGrpc(const absl::Status& s, grpc::ServerContext* context = nullptr);

}  // namespace tgraph
