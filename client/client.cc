#include "client/client.h"
#include "client/tls_diagnosis.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "model/core/file_util.h"
#include "proto/error_reason.h"
#include "proto/graph_codec.h"
#include "tgraph/v1/ranker.grpc.pb.h"

namespace tgraph {

namespace {

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

// An answer callers may index without checking: a score and a spread per configuration
// sent, and a ranking of distinct configurations, all of them or the top_k. A server of
// another version, or something else answering on its port, is an error, never a crash.
absl::Status CheckRanking(const v1::RankConfigsResponse& r, int64_t configs, int64_t top_k) {
  const int64_t want = top_k > 0 ? std::min(top_k, configs) : configs;
  if (r.scores_size() != configs || r.spread_size() != configs || r.ranking_size() != want)
    return absl::InternalError(absl::StrCat("RankConfigs: the server's answer has ", r.scores_size(), " scores, ",
                                            r.spread_size(), " spreads and a ranking of ", r.ranking_size(),
                                            " for ", configs, " configurations (expected ", configs, ", ", configs,
                                            " and ", want, "): is it a tgraph-server of this version?"));
  std::vector<bool> seen(static_cast<size_t>(configs), false);
  for (int32_t i : r.ranking()) {
    if (i < 0 || i >= configs || seen[static_cast<size_t>(i)])
      return absl::InternalError(absl::StrCat("RankConfigs: the server's ranking holds ", i, ", not a configuration ",
                                              "index in [0, ", configs, ") or one given twice"));
    seen[static_cast<size_t>(i)] = true;
  }
  return absl::OkStatus();
}

// 32 random hex digits: a report's id (ranker.proto, report_id).
std::string NewReportId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[33];
  std::snprintf(id, sizeof(id), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return id;
}

}  // namespace

struct RankerClient::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Ranker::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  // Deadline, the graph-hash header that graph-affinity routing hashes on, and the
  // request's size (a server that could not read it tells a cancel from an oversize).
  void Prepare(grpc::ClientContext* ctx, const std::string& graph_hash, size_t request_bytes) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000)));
    if (!graph_hash.empty()) ctx->AddMetadata("x-graph-hash", graph_hash);
    ctx->AddMetadata(kRequestBytesKey, absl::StrCat(request_bytes));
  }

  // What a call ended with: its status, and whether the server said the graph is not
  // registered (the machine-readable reason of proto/error_reason.h, never message text).
  struct Outcome {
    grpc::Status status;
    bool graph_not_registered = false;
  };

  // Runs `call` (a fresh context each time), retrying UNAVAILABLE with backoff.
  template <typename Call>
  Outcome WithRetries(const std::string& graph_hash, const google::protobuf::Message& request, Call call) const {
    const size_t request_bytes = request.ByteSizeLong();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.retry_budget_s);
    double backoff = options.initial_backoff_s;
    bool probed = false;
    Outcome o;
    while (true) {
      grpc::ClientContext ctx;
      Prepare(&ctx, graph_hash, request_bytes);
      o.status = call(&ctx);
      if (o.status.error_code() != grpc::UNAVAILABLE) {
        const auto& trailers = ctx.GetServerTrailingMetadata();
        auto it = trailers.find(kErrorReasonKey);
        o.graph_not_registered = o.status.error_code() == grpc::NOT_FOUND && it != trailers.end() &&
                                 absl::string_view(it->second.data(), it->second.size()) == kGraphNotRegistered;
        return o;
      }
      // A TLS mismatch is not a network fault: said as such, never retried (probed once).
      if (!probed) {
        probed = true;
        if (std::optional<absl::Status> tls = DiagnoseTls(o.status, options)) {
          o.status = grpc::Status(grpc::UNAUTHENTICATED, std::string(tls->message()));
          return o;
        }
      }
      if (std::chrono::steady_clock::now() + std::chrono::duration<double>(backoff) > give_up) return o;
      // A restarting server: wait for the connection to come back (at once when it is
      // up), rather than sleeping through backoff steps that may overshoot its return.
      const auto left = give_up - std::chrono::steady_clock::now();
      if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                     std::chrono::duration_cast<std::chrono::system_clock::duration>(left)))
        return o;
      // Connected but answered UNAVAILABLE (a proxy without a healthy backend): back off.
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff = std::min(2 * backoff, 2.0);
    }
  }

  // Runs `call` with retries; when the server does not know the graph (new, evicted,
  // restarted, another replica), registers it and tries once more.
  template <typename Call>
  absl::Status WithRegistration(const std::string& hash, const char* method, const google::protobuf::Message& request,
                                Call call,
                                const std::function<absl::StatusOr<RegisteredGraph>()>& register_graph,
                                int* registrations) {
    for (int round = 0; round < 2; ++round) {
      Outcome o = WithRetries(hash, request, call);
      if (o.status.ok()) return absl::OkStatus();
      if (o.graph_not_registered && round == 0) {
        absl::StatusOr<RegisteredGraph> reg = register_graph();
        if (!reg.ok()) return reg.status();
        ++*registrations;
        continue;
      }
      return FromGrpc(o.status, method);
    }
    return absl::InternalError(absl::StrCat(method, ": the graph was registered but the server still does not know it"));
  }

  // ReportMeasurements by hash for a graph of `num_config_nodes`; `register_graph` as Rank's.
  absl::StatusOr<MeasurementReceipt> Report(const std::string& hash, size_t num_config_nodes,
                                            const std::string& collection, const int8_t* configs,
                                            const int64_t* runtimes_ns, int64_t count, const std::string& source,
                                            const std::function<absl::StatusOr<RegisteredGraph>()>& register_graph);

  // SearchConfigs by hash for a graph of `num_config_nodes`; `register_graph` as Rank's.
  absl::StatusOr<Proposals> Search(const std::string& hash, size_t num_config_nodes, const SearchConfigsOptions& o,
                                   const std::function<absl::StatusOr<RegisteredGraph>()>& register_graph) {
    const size_t row = num_config_nodes * kConfigFeatDim;
    v1::SearchConfigsRequest q;
    q.set_collection(o.collection);
    q.set_model_version(o.model_version);
    q.set_graph_hash(hash);
    q.set_num_results(o.results);
    q.set_max_evaluations(o.max_evaluations);
    q.set_num_exclude(row ? static_cast<int64_t>(o.exclude.size() / row)
                          : static_cast<int64_t>(o.exclude_tiles.size() / kTileConfigDim));
    q.set_exclude_tile_configs(reinterpret_cast<const char*>(o.exclude_tiles.data()),
                               o.exclude_tiles.size() * sizeof(float));
    q.set_exclude_layout_configs(reinterpret_cast<const char*>(o.exclude.data()), o.exclude.size());
    q.set_num_start(row ? static_cast<int64_t>(o.start.size() / row) : 0);
    q.set_start_layout_configs(reinterpret_cast<const char*>(o.start.data()), o.start.size());
    q.set_num_candidates(row ? static_cast<int64_t>(o.candidates.size() / row) : 0);
    q.set_candidate_layout_configs(reinterpret_cast<const char*>(o.candidates.data()), o.candidates.size());
    q.set_seed(o.seed);
    q.set_max_changed_groups(o.max_changed_groups);
    q.mutable_exclude_runtimes_ns()->Assign(o.exclude_runtimes_ns.begin(), o.exclude_runtimes_ns.end());
    q.set_include_stored_measurements(o.include_stored);
    v1::SearchConfigsResponse resp;
    Proposals p;
    if (absl::Status s = WithRegistration(
            hash, "SearchConfigs", q, [&](grpc::ClientContext* ctx) { return stub->SearchConfigs(ctx, q, &resp); },
            register_graph, &p.registrations);
        !s.ok())
      return s;
    p.rows.assign(resp.layout_configs().begin(), resp.layout_configs().end());
    p.tile_rows.resize(resp.tile_configs().size() / sizeof(float));
    std::memcpy(p.tile_rows.data(), resp.tile_configs().data(), p.tile_rows.size() * sizeof(float));
    p.tile_names.assign(resp.tile_names().begin(), resp.tile_names().end());
    p.count = resp.num_configs();
    p.scores.assign(resp.scores().begin(), resp.scores().end());
    p.spread.assign(resp.spread().begin(), resp.spread().end());
    p.model_version = resp.model_version();
    p.evaluations = resp.evaluations();
    p.generations = resp.generations();
    p.reference_configs = resp.reference_configs();
    p.reference_rows.assign(resp.reference_layout_configs().begin(), resp.reference_layout_configs().end());
    p.correction_measurements = resp.correction_measurements();
    p.correction_weight = resp.correction_weight();
    p.max_changed_groups = resp.max_changed_groups();
    p.variation = resp.num_variation();
    p.stored_measurements = resp.stored_measurements();
    p.older_stored_reports = resp.older_stored_reports();
    p.start_configs = resp.start_configs();
    p.server_total_ms = resp.timing().total_ms();
    p.inference_ms = resp.timing().inference_ms();
    return p;
  }

  // Ranks by hash; `register_graph` is called when the server does not know the graph.
  absl::StatusOr<Ranking> Rank(const std::string& hash, v1::RankConfigsRequest q, const RankOptions& o,
                               const std::function<absl::StatusOr<RegisteredGraph>()>& register_graph) {
    q.set_collection(o.collection);
    q.set_model_version(o.model_version);
    q.set_graph_hash(hash);
    q.set_top_k(o.top_k);
    if (o.reference_count > 0) {
      q.set_num_reference_configs(o.reference_count);
      q.set_reference_layout_configs(std::string(o.reference_layout.begin(), o.reference_layout.end()));
      q.set_reference_tile_configs(std::string(reinterpret_cast<const char*>(o.reference_tile.data()),
                                               o.reference_tile.size() * sizeof(float)));
    }
    q.mutable_folds()->Assign(o.folds.begin(), o.folds.end());
    q.set_cascade(o.cascade);
    Ranking r;
    v1::RankConfigsResponse resp;
    if (absl::Status s = WithRegistration(
            hash, "RankConfigs", q, [&](grpc::ClientContext* ctx) { return stub->RankConfigs(ctx, q, &resp); },
            register_graph, &r.registrations);
        !s.ok())
      return s;
    if (absl::Status s = CheckRanking(resp, q.num_configs(), o.top_k); !s.ok()) return s;
    r.scores.assign(resp.scores().begin(), resp.scores().end());
    r.spread.assign(resp.spread().begin(), resp.spread().end());
    r.order.assign(resp.ranking().begin(), resp.ranking().end());
    r.model_version = resp.model_version();
    r.server_total_ms = resp.timing().total_ms();
    r.inference_ms = resp.timing().inference_ms();
    r.graph_prepare_ms = resp.timing().graph_prepare_ms();
    r.queue_ms = resp.timing().queue_ms();
    r.cache_hit = resp.timing().cache_hit();
    r.rescored = resp.timing().rescored();
    r.reference_configs = resp.reference_configs();
    return r;
  }

  absl::StatusOr<RegisteredGraph> Register(const v1::RegisterGraphRequest& req, const std::string& hash) {
    v1::RegisterGraphResponse resp;
    grpc::Status s =
        WithRetries(hash, req, [&](grpc::ClientContext* ctx) { return stub->RegisterGraph(ctx, req, &resp); }).status;
    if (!s.ok()) return FromGrpc(s, "RegisterGraph");
    if (resp.graph_hash() != hash)
      return absl::InternalError(absl::StrCat("RegisterGraph: the server's hash ", resp.graph_hash(),
                                              " differs from the local one ", hash, " (incompatible versions?)"));
    RegisteredGraph r{hash, resp.num_nodes(), resp.pruned_nodes(), resp.already_registered(), {}, {}};
    absl::StatusOr<LayoutSpace> space = DecodeLayoutSpace(resp);
    if (!space.ok()) return absl::InternalError(absl::StrCat("RegisterGraph: the answer's ", space.status().message()));
    for (int j = 0; j < resp.configurable_nodes_size(); ++j) {
      const v1::ConfigurableNode& c = resp.configurable_nodes(j);
      ConfigurableNode node{c.node(), c.opcode(), c.instruction(), c.computation(), {}};
      if (static_cast<size_t>(j) < space->nodes.size())
        node.groups.assign(space->nodes[j].groups.begin(), space->nodes[j].groups.end());
      r.configurable_nodes.push_back(std::move(node));
    }
    r.warnings.assign(resp.warnings().begin(), resp.warnings().end());
    return r;
  }

  absl::StatusOr<RegisteredGraph> Register(const NodeGraph& graph, const std::vector<int64_t>& ids) {
    v1::RegisterGraphRequest req;
    EncodeGraph(graph, ids, req.mutable_graph());
    return Register(req, GraphContentHash(graph, ids));
  }

  absl::StatusOr<RegisteredGraph> Register(const HloProgram& p) {
    v1::RegisterGraphRequest req;
    req.set_hlo_module(p.serialized);
    return Register(req, p.graph_hash);
  }
};

absl::StatusOr<HloProgram> HloProgram::FromSerialized(std::string serialized, const std::string& what) {
  // The server's decoding, so that both sides agree on the graph and its hash.
  absl::StatusOr<WireGraph> w = DecodeHloModule(serialized, hlo::Limits(), what);
  if (!w.ok()) return w.status();
  HloProgram p;
  p.serialized = std::move(serialized);
  p.module_name = std::move(w->module_name);
  p.graph = std::move(w->graph);
  p.node_config_ids = std::move(w->node_config_ids);
  p.warnings = std::move(w->warnings);
  // The same space the server gives a module (its operands' exact ranks).
  const std::vector<std::string> names = hlo::InstructionNames(w->sources, p.node_config_ids);
  const LayoutSpace space = LayoutSpaceOf(p.graph, p.node_config_ids, &w->first_operands, &names);
  for (size_t j = 0; j < p.node_config_ids.size(); ++j) {
    const int64_t id = p.node_config_ids[j];
    const hlo::NodeSource& s = w->sources[static_cast<size_t>(id)];
    const auto& groups = space.nodes[j].groups;
    p.configurable_nodes.push_back({id, s.opcode, s.instruction, s.computation, {groups.begin(), groups.end()}});
  }
  p.graph_hash = GraphContentHash(p.graph, p.node_config_ids);
  return p;
}

absl::StatusOr<HloProgram> HloProgram::FromFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return FromSerialized(std::move(*bytes), path);
}

absl::StatusOr<std::vector<int8_t>> HloProgram::LayoutRow(
    const std::map<std::string, std::vector<std::vector<int64_t>>>& by_instruction) const {
  std::map<std::string, size_t> row_of;
  for (size_t i = 0; i < configurable_nodes.size(); ++i) row_of.emplace(configurable_nodes[i].instruction, i);
  std::vector<int8_t> row(configurable_nodes.size() * kConfigFeatDim, -1);
  for (const auto& [name, tensors] : by_instruction) {
    auto it = row_of.find(name);
    if (it == row_of.end())
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a configurable instruction of module ",
                                                     module_name, " (its convolution, dot and reshape instructions)"));
    if (absl::Status s = hlo::NodeLayoutValues(tensors, row.data() + it->second * kConfigFeatDim); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("instruction '", name, "': ", s.message()));
  }
  return row;
}

absl::StatusOr<ClientTlsOptions> TlsFromFiles(const std::string& ca_file, const std::string& cert_file,
                                              const std::string& key_file, const std::string& server_name) {
  if (cert_file.empty() != key_file.empty())
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls_cert and --tls_key (PEM), or neither (no mutual TLS)");
  ClientTlsOptions t;
  t.enabled = true;
  t.server_name = server_name;
  for (auto [path, what, label, out] : {std::tuple{&ca_file, "--tls_ca", "CERTIFICATE", &t.root_certs_pem},
                                        std::tuple{&cert_file, "--tls_cert", "CERTIFICATE", &t.cert_chain_pem},
                                        std::tuple{&key_file, "--tls_key", "PRIVATE KEY", &t.private_key_pem}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPemFile(*path, what, label);
    if (!pem.ok()) return pem.status();
    *out = std::move(*pem);
  }
  return t;
}

RankerClient::RankerClient(ClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  args.SetMaxSendMessageSize(static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // Reconnect within about a second of a restarted server coming back: gRPC's default
  // reconnect backoff (1 s growing 1.6x to 120 s) held requests for up to 10 s after a
  // 1 s restart in the soak test, though the retry loop asked sooner.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls.enabled) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls.root_certs_pem;
    ssl.pem_cert_chain = options.tls.cert_chain_pem;
    ssl.pem_private_key = options.tls.private_key_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls.server_name.empty()) args.SetSslTargetNameOverride(options.tls.server_name);
  }
  impl_->channel = grpc::CreateCustomChannel(options.target, credentials, args);
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
  return impl_->Rank(GraphContentHash(graph, ids), std::move(q), o, [&] { return impl_->Register(graph, ids); });
}

absl::StatusOr<RegisteredGraph> RankerClient::Register(const HloProgram& program) { return impl_->Register(program); }

absl::StatusOr<Ranking> RankerClient::RankLayout(const HloProgram& p, const int8_t* configs, int64_t count,
                                                 const RankOptions& o) {
  v1::RankConfigsRequest q;
  q.set_num_configs(count);
  q.set_layout_configs(reinterpret_cast<const char*>(configs),
                       static_cast<size_t>(count) * p.node_config_ids.size() * kConfigFeatDim);
  return impl_->Rank(p.graph_hash, std::move(q), o, [&] { return impl_->Register(p); });
}

absl::StatusOr<Ranking> RankerClient::RankTile(const NodeGraph& graph, const float* configs, int64_t count,
                                               const RankOptions& o) {
  v1::RankConfigsRequest q;
  q.set_num_configs(count);
  q.set_tile_configs(reinterpret_cast<const char*>(configs), static_cast<size_t>(count) * kTileConfigDim * sizeof(float));
  return impl_->Rank(GraphContentHash(graph, {}), std::move(q), o, [&] { return impl_->Register(graph, {}); });
}

absl::StatusOr<MeasurementReceipt> RankerClient::ReportMeasurements(const NodeGraph& graph,
                                                                   const std::vector<int64_t>& ids,
                                                                   const std::string& collection,
                                                                   const int8_t* configs, const int64_t* runtimes_ns,
                                                                   int64_t count, const std::string& source) {
  return impl_->Report(GraphContentHash(graph, ids), ids.size(), collection, configs, runtimes_ns, count, source,
                       [&] { return impl_->Register(graph, ids); });
}

absl::StatusOr<MeasurementReceipt> RankerClient::ReportMeasurements(const HloProgram& p, const std::string& collection,
                                                                   const int8_t* configs, const int64_t* runtimes_ns,
                                                                   int64_t count, const std::string& source) {
  return impl_->Report(p.graph_hash, p.node_config_ids.size(), collection, configs, runtimes_ns, count, source,
                       [&] { return impl_->Register(p); });
}

absl::StatusOr<MeasurementReceipt> RankerClient::Impl::Report(
    const std::string& hash, size_t num_config_nodes, const std::string& collection, const int8_t* configs,
    const int64_t* runtimes_ns, int64_t count, const std::string& source,
    const std::function<absl::StatusOr<RegisteredGraph>()>& register_graph) {
  v1::ReportMeasurementsRequest q;
  q.set_collection(collection);
  q.set_graph_hash(hash);
  q.set_num_configs(count);
  q.set_layout_configs(reinterpret_cast<const char*>(configs),
                       static_cast<size_t>(count) * num_config_nodes * kConfigFeatDim);
  q.mutable_runtimes_ns()->Assign(runtimes_ns, runtimes_ns + count);
  q.set_source(source);
  // One id per report, the same on every retry below: the server stores it once.
  q.set_report_id(NewReportId());
  v1::ReportMeasurementsResponse resp;
  MeasurementReceipt r;
  if (absl::Status s = WithRegistration(
          hash, "ReportMeasurements", q, [&](grpc::ClientContext* ctx) { return stub->ReportMeasurements(ctx, q, &resp); },
          register_graph, &r.registrations);
      !s.ok())
    return s;
  r.stored = resp.stored();
  r.already_stored = resp.already_stored();
  r.shard = resp.shard();
  return r;
}

absl::StatusOr<Proposals> RankerClient::Search(const NodeGraph& graph, const std::vector<int64_t>& ids,
                                               const SearchConfigsOptions& o) {
  return impl_->Search(GraphContentHash(graph, ids), ids.size(), o, [&] { return impl_->Register(graph, ids); });
}

absl::StatusOr<Proposals> RankerClient::Search(const HloProgram& p, const SearchConfigsOptions& o) {
  return impl_->Search(p.graph_hash, p.node_config_ids.size(), o, [&] { return impl_->Register(p); });
}

absl::StatusOr<std::vector<ModelInfo>> RankerClient::ListModels() {
  const v1::ListModelsRequest req;
  v1::ListModelsResponse resp;
  grpc::Status s = impl_->WithRetries("", req, [&](grpc::ClientContext* ctx) {
    return impl_->stub->ListModels(ctx, req, &resp);
  }).status;
  if (!s.ok()) return FromGrpc(s, "ListModels");
  std::vector<ModelInfo> models;
  for (const v1::ModelInfo& m : resp.models()) models.push_back(DecodeModelInfo(m));
  return models;
}

absl::StatusOr<std::string> RankerClient::Health(const std::string& service) {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = impl_->WithRetries("", req, [&](grpc::ClientContext* ctx) { return impl_->health->Check(ctx, req, &resp); })
          .status;
  if (!s.ok()) return FromGrpc(s, "Health");
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

}  // namespace tgraph
