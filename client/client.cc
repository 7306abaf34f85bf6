#include "client/client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "proto/graph_codec.h"
#include "tgraph/v1/ranker.grpc.pb.h"

namespace tgraph {

namespace {

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

}  // namespace

struct RankerClient::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Ranker::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  // Deadline, and the graph-hash header that graph-affinity routing hashes on.
  void Prepare(grpc::ClientContext* ctx, const std::string& graph_hash) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000)));
    if (!graph_hash.empty()) ctx->AddMetadata("x-graph-hash", graph_hash);
  }

  // Runs `call` (a fresh context each time), retrying UNAVAILABLE with backoff.
  template <typename Call>
  grpc::Status WithRetries(const std::string& graph_hash, Call call) const {
    double backoff = options.initial_backoff_s;
    grpc::Status s;
    for (int attempt = 0; attempt < std::max(1, options.max_attempts); ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx, graph_hash);
      s = call(&ctx);
      if (s.error_code() != grpc::UNAVAILABLE) return s;
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff *= 2;
    }
    return s;
  }

  absl::StatusOr<Ranking> Rank(const NodeGraph& graph, const std::vector<int64_t>& ids, v1::RankConfigsRequest q,
                               const RankOptions& o) {
    const std::string hash = GraphContentHash(graph, ids);
    q.set_collection(o.collection);
    q.set_model_version(o.model_version);
    q.set_graph_hash(hash);
    q.set_top_k(o.top_k);
    q.set_tta(o.tta);
    q.mutable_folds()->Assign(o.folds.begin(), o.folds.end());
    Ranking r;
    v1::RankConfigsResponse resp;
    for (int round = 0; round < 2; ++round) {
      grpc::Status s = WithRetries(hash, [&](grpc::ClientContext* ctx) { return stub->RankConfigs(ctx, q, &resp); });
      if (s.ok()) break;
      // The server does not know the graph (new, evicted, restarted, another replica):
      // register it and try once more.
      if (s.error_code() == grpc::NOT_FOUND && round == 0 && s.error_message().find("RegisterGraph") != std::string::npos) {
        absl::StatusOr<RegisteredGraph> reg = Register(graph, ids);
        if (!reg.ok()) return reg.status();
        ++r.registrations;
        continue;
      }
      return FromGrpc(s, "RankConfigs");
    }
    r.scores.assign(resp.scores().begin(), resp.scores().end());
    r.spread.assign(resp.spread().begin(), resp.spread().end());
    r.order.assign(resp.ranking().begin(), resp.ranking().end());
    r.model_version = resp.model_version();
    r.server_total_ms = resp.timing().total_ms();
    r.inference_ms = resp.timing().inference_ms();
    r.graph_prepare_ms = resp.timing().graph_prepare_ms();
    r.queue_ms = resp.timing().queue_ms();
    r.cache_hit = resp.timing().cache_hit();
    return r;
  }

  absl::StatusOr<RegisteredGraph> Register(const NodeGraph& graph, const std::vector<int64_t>& ids) {
    v1::RegisterGraphRequest req;
    EncodeGraph(graph, ids, req.mutable_graph());
    const std::string hash = GraphContentHash(graph, ids);
    v1::RegisterGraphResponse resp;
    grpc::Status s = WithRetries(hash, [&](grpc::ClientContext* ctx) { return stub->RegisterGraph(ctx, req, &resp); });
    if (!s.ok()) return FromGrpc(s, "RegisterGraph");
    if (resp.graph_hash() != hash)
      return absl::InternalError(absl::StrCat("RegisterGraph: the server's hash ", resp.graph_hash(),
                                              " differs from the local one ", hash, " (incompatible versions?)"));
    return RegisteredGraph{hash, resp.num_nodes(), resp.pruned_nodes(), resp.already_registered()};
  }
};

RankerClient::RankerClient(ClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  args.SetMaxSendMessageSize(static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  impl_->channel = grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), args);
  impl_->stub = v1::Ranker::NewStub(impl_->channel);
  impl_->health = grpc::health::v1::Health::NewStub(impl_->channel);
}

RankerClient::~RankerClient() = default;

absl::StatusOr<RegisteredGraph> RankerClient::Register(const NodeGraph& graph, const std::vector<int64_t>& ids) {
  return impl_->Register(graph, ids);
}

absl::StatusOr<Ranking> RankerClient::RankLayout(const NodeGraph& graph, const std::vector<int64_t>& ids,
                                                 const int8_t* configs, int64_t count, const RankOptions& o) {
  v1::RankConfigsRequest q;
  q.set_num_configs(count);
  q.set_layout_configs(reinterpret_cast<const char*>(configs), static_cast<size_t>(count) * ids.size() * kConfigFeatDim);
  return impl_->Rank(graph, ids, std::move(q), o);
}

absl::StatusOr<Ranking> RankerClient::RankTile(const NodeGraph& graph, const float* configs, int64_t count,
                                               const RankOptions& o) {
  v1::RankConfigsRequest q;
  q.set_num_configs(count);
  q.set_tile_configs(reinterpret_cast<const char*>(configs), static_cast<size_t>(count) * kTileConfigDim * sizeof(float));
  return impl_->Rank(graph, {}, std::move(q), o);
}

absl::StatusOr<v1::ListModelsResponse> RankerClient::ListModels() {
  v1::ListModelsResponse resp;
  grpc::Status s = impl_->WithRetries("", [&](grpc::ClientContext* ctx) {
    return impl_->stub->ListModels(ctx, v1::ListModelsRequest(), &resp);
  });
  if (!s.ok()) return FromGrpc(s, "ListModels");
  return resp;
}

absl::StatusOr<std::string> RankerClient::Health(const std::string& service) {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = impl_->WithRetries("", [&](grpc::ClientContext* ctx) { return impl_->health->Check(ctx, req, &resp); });
  if (!s.ok()) return FromGrpc(s, "Health");
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

}  // namespace tgraph
