#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/nn/model_io.h"
#include "model/store/measurement_store.h"
#include "model/store/report_ids.h"
#include "model/tools/cli.h"
#include "model/tools/tool.h"
#include "server/listener.h"
#include "server/metrics.h"
#include "server/model_manager.h"
#include "server/service.h"

namespace tgraph {
namespace {

// The BLAS library LibTorch's matmuls end up in, from this process's mappings.
std::string BlasInUse() {
  std::ifstream maps("/proc/self/maps");
  std::string line, found;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("blas") != std::string::npos && found.find(path) == std::string::npos)
      found += (found.empty() ? "" : ", ") + path;
  }
  return found.empty() ? "none mapped (LibTorch's own kernels)" : found;
}

// Linking grpc++_reflection registers server reflection for every server builder;
// this option takes the plugin out again (reflection = false).
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const auto& p) { return p->name() == "proto_server_reflection"; }),
                   plugins->end());
  }
};

void LogOptions(const ServerOptions& o) {
  const RankerOptions& r = o.ranker;
  LogInfo(absl::StrCat(
      "registry=", o.registry, " address=", o.address, " metrics_address=", o.metrics_address, " workers=", r.workers,
      " intra_op_threads=", torch::get_num_threads(), " OMP_WAIT_POLICY=", OpenMpWaitPolicy(),
      " queue_size=", r.queue_size, " tile_queue_size=", r.tile_queue_size, " cache_bytes=", r.cache_bytes, " graph_store_bytes=", r.graph_store_bytes,
      " max_nodes=", o.service.max_nodes, " max_configs=", r.max_configs, " max_report_rows=", r.max_report_rows, " max_message_bytes=", o.service.max_message_bytes,
      " poll_interval_s=", o.poll_interval_s, " keep_versions=", o.keep_versions,
      " fold_inference=", o.fold_inference ? "true" : "false", " precision=", PrecisionName(o.precision), " (",
      o.precision_flag, CpuHasBf16() ? "; the CPU has avx512_bf16)" : "; the CPU has no avx512_bf16)",
      " reflection=", o.reflection ? "true" : "false", " transport=", o.tls.Describe(),
      " request_bytes=", o.service.request_bytes, " request_log_every=", o.service.request_log_every, " drain_timeout_s=", o.drain_timeout_s));
}

// One server process's parts, in the order they are built; destroyed in reverse (the
// gRPC server first, the metrics last). Used by RunServer's thread only.
class ServerProcess {
 public:
  explicit ServerProcess(const ServerOptions& o) : o_(o) {}
  ~ServerProcess() { Stop(); }

  absl::Status StartMetrics();
  void LoadModels();     // the first registry scan, logged
  absl::Status OpenMeasurementStore();  // a --measurement_store that is not a directory: a usage error
  absl::Status StartGrpc(const std::shared_ptr<grpc::ServerCredentials>& credentials);
  absl::Status ListenOrAddPort(const std::shared_ptr<grpc::ServerCredentials>& credentials,
                               grpc::ServerBuilder* builder);
  void StartPolling();  // health, hot swaps and purges from now on
  void WritePortFile() const;
  void Drain(int signal);

 private:
  void Report(const std::vector<ModelEvent>& events);
  void CheckRegistry();
  bool SetHealth();
  void Stop();
  void StartIndexLoader();  // after OpenMeasurementStore; joined by Stop

  const ServerOptions& o_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<ModelManager> models_;
  std::string registry_problem_;  // the last registry check's message; "" when fine
  std::unique_ptr<Ranker> ranker_;
  std::unique_ptr<MeasurementStore> measurements_;
  std::thread index_loader_;  // reads the store's tile shards while the server serves
  std::atomic<bool> stop_loading_{false};
  std::unique_ptr<RankerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Listener> listener_;  // plaintext: the capped accept loop; null: gRPC's own
  int port_ = 0;
};

absl::Status ServerProcess::StartMetrics() {
  if (o_.metrics_address.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<ServerMetrics>> m = ServerMetrics::Start(o_.metrics_address, PrecisionName(o_.precision));
  if (!m.ok()) return m.status();
  metrics_ = std::move(*m);
  LogInfo(absl::StrCat("metrics on port ", metrics_->port(), " at /metrics"));
  return absl::OkStatus();
}

void ServerProcess::Report(const std::vector<ModelEvent>& events) {
  for (const ModelEvent& e : events) {
    switch (e.kind) {
      case ModelEvent::Kind::kLoaded:
        LogInfo(absl::StrCat("loaded ", e.collection, " version ", e.version, " in ", e.seconds, " s; trained on ",
                             e.message));
        if (e.synthetic_only)
          LogWarning(absl::StrCat(e.collection, " version ", e.version,
                                  " was trained only on synthetic data: its rankings say how the generator's cost "
                                  "model orders configurations, not real hardware"));
        break;
      case ModelEvent::Kind::kFailed:
        LogError(absl::StrCat("FAILED to load ", e.collection, " version ", e.version, ": ", e.message,
                              " (the previous version keeps serving)"));
        break;
      case ModelEvent::Kind::kVanished:
      case ModelEvent::Kind::kCorrupted:
        LogError(absl::StrCat(e.collection, " version ", e.version, ": ", e.message));
        break;
      case ModelEvent::Kind::kUnloaded:
        LogInfo(absl::StrCat("unloaded ", e.collection, " version ", e.version, ": ", e.message));
        break;
    }
    if (metrics_) metrics_->RecordModelEvent(e);
  }
}

// Registry problems are logged at startup, at each poll while nothing is loaded, and
// when they change while serving; every poll that finds one is counted by reason.
void ServerProcess::CheckRegistry() {
  const RegistryCheck c = models_->registry().Check();
  const bool serving = models_->AnyLoaded();
  if (!c.ok()) {
    if (metrics_) metrics_->RecordRegistryError(c.reason);
    if (!serving || c.message != registry_problem_)
      LogError(absl::StrCat(c.message, serving ? " (the versions already loaded keep serving)"
                                               : "; health is NOT_SERVING until a model loads"));
  } else if (!registry_problem_.empty()) {
    LogInfo(absl::StrCat("registry ", o_.registry, " is readable and holds a servable version again"));
  }
  registry_problem_ = c.ok() ? "" : c.message;
}

void ServerProcess::LoadModels() {
  models_ = std::make_unique<ModelManager>(Registry(o_.registry),
                                           ModelManager::Options{o_.keep_versions, o_.fold_inference, o_.precision});
  Report(models_->Poll());
  CheckRegistry();
}

absl::Status ServerProcess::OpenMeasurementStore() {
  if (o_.measurement_store.empty()) return absl::OkStatus();
  std::error_code ec;
  if (std::filesystem::exists(o_.measurement_store, ec) && !std::filesystem::is_directory(o_.measurement_store, ec))
    return UsageError(absl::StrCat("--measurement_store: ", o_.measurement_store,
                                   " is not a directory (reports would all fail): give a directory, or one to create"));
  measurements_ = std::make_unique<MeasurementStore>(o_.measurement_store);
  // Without the lock reports still work (a read-only store refuses them precisely); only
  // a later start cannot tell this process's temporaries from a live writer's.
  if (absl::Status s = measurements_->HoldWriterLock(); !s.ok())
    LogWarning(absl::StrCat("measurement store: no writer lock (", s.message(), ")"));
  absl::StatusOr<MeasurementStore::TemporarySweep> stale = measurements_->RemoveStaleTemporaries();
  LogInfo(absl::StrCat(
      "measurement store: ", measurements_->root(),
      stale.ok() ? absl::StrCat(" (", stale->removed, " temporaries of crashed writes removed; ", stale->kept_live,
                                " of running writers kept; ", stale->kept_unknown,
                                " of writers without a lock file (an older server?) kept until an hour old)")
                 : absl::StrCat(" (", stale.status().message(), ")")));
  // A client retries a report within minutes; its id's marker is kept a day.
  if (absl::StatusOr<int> ids = RemoveOldReportIds(measurements_->root()); !ids.ok())
    LogWarning(absl::StrCat("measurement store: ", ids.status().message()));
  StartIndexLoader();
  return absl::OkStatus();
}

// Searches for a kernel follow its stored tile measurements: the shards listed now and
// read while the server serves (a store of a fleet's months holds hundreds of thousands,
// seconds to minutes of reading that would keep a restarted server from answering); a
// search meanwhile joins what has been read. Shards written before reports named their
// GPU count as their collection's GPU's.
void ServerProcess::StartIndexLoader() {
  absl::StatusOr<MeasurementStore::TileShards> shards = measurements_->ListTileShards();
  if (!shards.ok()) {
    LogError(absl::StrCat("measurement store: tile shards not indexed: ", shards.status().message()));
    return;
  }
  std::map<std::string, std::string> gpu_of;
  for (const auto& [collection, handles] : models_->Loaded())
    if (!handles.empty() && handles.front().model->manifest.tile_space)  // the newest
      gpu_of[collection] = handles.front().model->manifest.tile_space->gpu;
  index_loader_ = std::thread([this, shards = std::move(*shards), gpu_of = std::move(gpu_of)] {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<std::string>> skipped = measurements_->IndexTileShards(shards, gpu_of, &stop_loading_);
    if (!skipped.ok()) {
      LogError(absl::StrCat("measurement store: tile shards not indexed: ", skipped.status().message()));
      return;
    }
    for (const std::string& why : *skipped) LogError(absl::StrCat("measurement store: shard left out: ", why));
    LogInfo(absl::StrCat("measurement store: ", shards.count(), " tile shards indexed in ",
                         absl::FormatDuration(absl::FromChrono(std::chrono::steady_clock::now() - start)),
                         stop_loading_ ? " (stopped early: the server is stopping)" : ""));
  });
}

// Plaintext TCP: the server's own accept loop (server/listener.h) with the connection
// cap; TLS, unix sockets or max_connections 0: gRPC's listener.
absl::Status ServerProcess::ListenOrAddPort(const std::shared_ptr<grpc::ServerCredentials>& credentials,
                                            grpc::ServerBuilder* builder) {
  if (o_.connections.max_connections <= 0 || o_.tls.enabled() || o_.address.rfind("unix:", 0) == 0) {
    builder->AddListeningPort(o_.address, credentials, &port_);
    return absl::OkStatus();
  }
  ListenerOptions lo;
  lo.address = o_.address;
  lo.handshake_timeout_s = o_.connections.handshake_timeout_s;
  lo.max_connections = EffectiveMaxConnections(o_.connections.max_connections);
  absl::StatusOr<std::unique_ptr<Listener>> l = Listener::Bind(lo);
  if (!l.ok()) return l.status();
  listener_ = std::move(*l);
  LogInfo(absl::StrCat("at most ", lo.max_connections, " connections at once",
                       lo.max_connections < o_.connections.max_connections
                           ? absl::StrCat(" (--max_connections ", o_.connections.max_connections,
                                          ", within the descriptor limit)")
                           : "",
                       "; more are closed unserved"));
  return absl::OkStatus();
}

absl::Status ServerProcess::StartGrpc(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  RankerOptions ro = o_.ranker;
  if (ro.activation_bytes <= 0)
    ro.activation_bytes = AutoActivationBytes(AvailableMemoryBytes(), ro.cache_bytes, ro.graph_store_bytes, ro.workers);
  LogInfo(absl::StrCat("activation budget per request: ", ro.activation_bytes >> 20, " MiB",
                       o_.ranker.activation_bytes > 0 ? "" : " (auto, from the memory limit)"));
  ranker_ = std::make_unique<Ranker>(models_.get(), ro);
  if (absl::Status s = OpenMeasurementStore(); !s.ok()) return s;
  const int64_t max_message_bytes = std::min<int64_t>(o_.service.max_message_bytes, INT32_MAX);
  RankerService::Options so = o_.service;
  so.max_message_bytes = max_message_bytes;
  service_ = std::make_unique<RankerService>(ranker_.get(), models_.get(), metrics_.get(), measurements_.get(), so);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!o_.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  if (metrics_) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(MakeRequestCounter(metrics_.get()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  if (absl::Status s = ListenOrAddPort(credentials, &builder); !s.ok()) return s;
  // gRPC sets SO_REUSEPORT by default, so a second server on a taken port would start and
  // silently share its connections with the first (replicas of different versions
  // answering alternate requests). A taken port is an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyConnectionArguments(o_.connections, &builder);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ && listener_) {
    port_ = listener_->port();
    listener_->Start(server_.get());
  }
  if (!server_ || port_ == 0)
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", o_.address, " (is another process listening there?)",
        o_.tls.enabled() ? " (with TLS: are --tls_cert and --tls_key a matching pair?)" : ""));
  return absl::OkStatus();
}

bool ServerProcess::SetHealth() {
  const bool serving = models_->AnyLoaded();
  server_->GetHealthCheckService()->SetServingStatus("", serving);  // not the overload that sets every service
  server_->GetHealthCheckService()->SetServingStatus("tgraph.v1.Ranker", serving);
  return serving;
}

void ServerProcess::StartPolling() {
  server_->GetHealthCheckService()->SetServingStatus("liveness", true);
  if (!SetHealth() && registry_problem_.empty())
    LogWarning("no model is loaded yet (see the load failures above): health is NOT_SERVING until one loads");
  // The poller's thread runs these; the members it touches are only read by this
  // thread after Stop() has joined it.
  models_->StartPolling(o_.poll_interval_s, [this](const std::vector<ModelEvent>& events) {
    Report(events);
    CheckRegistry();
    if (const int64_t purged = ranker_->PurgeUnloaded(); purged > 0)
      LogInfo(absl::StrCat("dropped the prepared tensors of ", purged, " graph(s) for unloaded model versions"));
    SetHealth();
  });
  if (metrics_) metrics_->Watch(ranker_.get(), models_.get());
  LogInfo(absl::StrCat("serving tgraph.v1.Ranker on port ", port_));
}

void ServerProcess::WritePortFile() const {
  if (o_.port_file.empty()) return;
  // Written whole, then renamed: a reader never sees a half-written file.
  const std::string tmp = o_.port_file + ".tmp";
  std::ofstream(tmp) << port_ << "\n" << (metrics_ ? metrics_->port() : 0) << "\n";
  std::rename(tmp.c_str(), o_.port_file.c_str());
}

void ServerProcess::Drain(int signal) {
  LogInfo(absl::StrCat("signal ", signal, ": draining in-flight RPCs (up to ", o_.drain_timeout_s, " s)"));
  server_->GetHealthCheckService()->Shutdown();  // health reports NOT_SERVING from now on
  if (listener_) listener_->Stop();  // no new connections while in-flight calls drain
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(o_.drain_timeout_s * 1000)));
  Stop();
  LogInfo("stopped");
}

// The poller stops, and the metrics forget the ranker and models, before either goes.
void ServerProcess::Stop() {
  stop_loading_ = true;
  if (index_loader_.joinable()) index_loader_.join();
  if (listener_) listener_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  if (models_) models_->Stop();
  if (metrics_) metrics_->Watch(nullptr, nullptr);
}

}  // namespace

int RunServer(const ServerOptions& options, const std::atomic<int>& stop) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(options.tls);
  if (!credentials.ok()) return Fail(UsageError(credentials.status().message()));
  torch::set_num_threads(ThreadsOrCores(options.intra_op_threads));
  LogOptions(options);
  CountAcceptErrors();
  const FdLimit fds = RaiseFdLimit();
  LogInfo(absl::StrCat(fds.Describe(), "; handshakes time out after ", options.connections.handshake_timeout_s,
                       " s, idle connections close after ", options.connections.max_connection_idle_s, " s, ",
                       options.connections.max_streams, " calls at once per connection"));
  (void)torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));  // touch the BLAS once so it is mapped
  LogInfo(absl::StrCat("BLAS: ", BlasInUse()));

  ServerProcess process(options);
  if (absl::Status s = process.StartMetrics(); !s.ok()) return Fail(s);
  process.LoadModels();  // loading can take seconds: a stop meanwhile ends the process cleanly
  if (stop != 0) {
    LogInfo(absl::StrCat("signal ", stop.load(), " while starting: stopped before serving"));
    return kExitOk;
  }
  if (absl::Status s = process.StartGrpc(*credentials); !s.ok()) {
    LogError(s.message());
    return IsUsageError(s) ? kExitUsage : kExitFailure;
  }
  process.StartPolling();
  process.WritePortFile();
  while (stop == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  process.Drain(stop.load());
  return kExitOk;
}

}  // namespace tgraph
