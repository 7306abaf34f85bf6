// tgraph-server: serves tgraph.v1.Ranker over gRPC with the models of a registry.
//
//   tgraph-server --registry REG [--address 0.0.0.0:50051] [--metrics_address 0.0.0.0:9090]
//
// Health (grpc.health.v1): the overall status ("") and "tgraph.v1.Ranker" are
// NOT_SERVING until a model is loaded (readiness); "liveness" is SERVING as long as the
// process answers RPCs, with or without a model (liveness probes). Server reflection is
// on unless --reflection=false; TLS or mutual TLS with --tls_cert, --tls_key and
// --tls_client_ca; Prometheus metrics are on their own port. SIGTERM/SIGINT
// stop accepting, drain in-flight RPCs up to --drain_timeout_s, and exit 0.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <torch/torch.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "model/tools/cli.h"
#include "model/tools/tool.h"
#include "server/metrics.h"
#include "server/model_manager.h"
#include "server/ranker.h"
#include "server/service.h"
#include "server/tls.h"

ABSL_FLAG(std::string, registry, "", "Model registry root (<registry>/<collection>/<version>/manifest.json)");
ABSL_FLAG(std::string, address, "0.0.0.0:50051", "gRPC listen address; port 0 picks a free port");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9090", "Prometheus metrics HTTP address; empty disables");
ABSL_FLAG(std::string, port_file, "", "If set, the bound gRPC port and metrics port (two lines) are written there once serving");
ABSL_FLAG(int64_t, cache_bytes, int64_t{4} << 30, "Byte budget of the per-(graph, model version) tensor cache");
ABSL_FLAG(int64_t, graph_store_bytes, int64_t{2} << 30, "Byte budget of registered (pruned) graphs");
ABSL_FLAG(int, workers, 1, "Inference workers (requests scored in parallel)");
ABSL_FLAG(int, intra_op_threads, 0, "LibTorch intra-op threads (0 = every core this process may use: affinity mask, cgroup CPU limit)");
ABSL_FLAG(int, queue_size, 16, "Requests that may wait for a worker before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_nodes, 200000, "Largest graph accepted (nodes)");
ABSL_FLAG(int64_t, max_configs, 100000, "Most configurations per RankConfigs request");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{256} << 20, "Largest gRPC message accepted");
ABSL_FLAG(std::string, precision, "auto", tgraph::kPrecisionFlagHelp);
ABSL_FLAG(int64_t, activation_bytes, 0,
          "Activation memory one request may use: batches are made smaller to fit, and a graph one configuration of "
          "which does not fit is refused (RESOURCE_EXHAUSTED). 0 = auto: the memory limit (cgroup, else MemTotal) "
          "minus cache_bytes, graph_store_bytes and 1 GiB, divided by workers (at least 256 MiB)");
ABSL_FLAG(double, cascade_fraction, 0.25,
          "Requests with cascade: the fraction of configurations (at least 2 x top_k) the first fold's scores keep "
          "for every fold");
ABSL_FLAG(double, poll_interval_s, 10, "Seconds between registry scans for new model versions");
ABSL_FLAG(int, keep_versions, 2, "Newest loadable versions kept loaded per collection (older ones cannot be pinned; versions that fail to load are passed over)");
ABSL_FLAG(bool, fold_inference, true,
          "Fold TGraph's f1 into f2 at inference (the same function, half the block matmuls; false: the layers as "
          "trained, for A/B comparisons)");
ABSL_FLAG(std::string, measurement_store, "",
          "Directory where ReportMeasurements stores measured runtimes (a TpuGraphs dataset root; "
          "docs/operations.md); empty: ReportMeasurements answers FAILED_PRECONDITION");
ABSL_FLAG(int64_t, registration_bytes, int64_t{512} << 20,
          "RegisterGraph calls in progress at once may hold this many request bytes in all (decoding takes a few "
          "times that); past it they get RESOURCE_EXHAUSTED. One larger request alone is admitted");
ABSL_FLAG(bool, reflection, true,
          "Serve gRPC server reflection (grpcurl and similar tools list the services); false turns it off");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the server; with --tls_key, gRPC is served over TLS (empty: plaintext)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: clients must present a certificate it signed (mutual TLS); needs --tls_cert and --tls_key");
ABSL_FLAG(int, tls_reload_s, 60,
          "Seconds between re-reads of the TLS files: a rotated certificate is served without a restart");
ABSL_FLAG(std::string, log_format, "text",
          "Log lines: text (time, level, message) or json (one object per line: time, level, tool, msg)");
ABSL_FLAG(double, drain_timeout_s, 20, "On SIGTERM, how long in-flight RPCs may take to finish");

namespace {

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal = sig; }

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
// this option takes the plugin out again (--reflection=false).
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const auto& p) { return p->name() == "proto_server_reflection"; }),
                   plugins->end());
  }
};

using tgraph::LogError;
using tgraph::LogInfo;
using tgraph::LogWarning;

}  // namespace

int main(int argc, char** argv) {
  tgraph::ReexecWithPassiveOpenMpWait(argv);  // see model/tools/cli.h
  // From the first line (exec resets handlers, so after the re-exec): a SIGTERM while
  // the server starts (loading models can take seconds) ends it cleanly, exit 0.
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const std::vector<char*> args = tgraph::ParseToolCommandLine(
      argc, argv, "Serve tgraph.v1.Ranker.\n  tgraph-server --registry REG [--address HOST:PORT]");
  if (args.size() > 1) return tgraph::Fail(tgraph::UsageError(absl::StrCat("unexpected argument '", args[1], "'")));
  if (absl::GetFlag(FLAGS_log_format) != "text" && absl::GetFlag(FLAGS_log_format) != "json")
    return tgraph::Fail(tgraph::UsageError(absl::StrCat("--log_format must be text or json, got '",
                                                        absl::GetFlag(FLAGS_log_format), "'")));
  tgraph::SetJsonLogs(absl::GetFlag(FLAGS_log_format) == "json");
  const std::string registry = absl::GetFlag(FLAGS_registry);
  if (registry.empty()) return tgraph::Fail(tgraph::UsageError("--registry is required"));
  absl::StatusOr<tgraph::Precision> precision = tgraph::ResolvePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok())
    return tgraph::Fail(tgraph::UsageError(absl::StrCat("--precision: ", precision.status().message())));
  tgraph::ServerTlsOptions tls;
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  tls.reload_s = absl::GetFlag(FLAGS_tls_reload_s);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = tgraph::MakeServerCredentials(tls);
  if (!credentials.ok()) return tgraph::Fail(tgraph::UsageError(credentials.status().message()));
  const int intra = tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_intra_op_threads));
  torch::set_num_threads(intra);
  LogInfo(absl::StrCat("registry=", registry, " address=", absl::GetFlag(FLAGS_address),
                   " metrics_address=", absl::GetFlag(FLAGS_metrics_address), " workers=", absl::GetFlag(FLAGS_workers),
                   " intra_op_threads=", torch::get_num_threads(), " OMP_WAIT_POLICY=", tgraph::OpenMpWaitPolicy(),
                   " queue_size=", absl::GetFlag(FLAGS_queue_size),
                   " cache_bytes=", absl::GetFlag(FLAGS_cache_bytes), " graph_store_bytes=",
                   absl::GetFlag(FLAGS_graph_store_bytes), " max_nodes=", absl::GetFlag(FLAGS_max_nodes),
                   " max_configs=", absl::GetFlag(FLAGS_max_configs), " max_message_bytes=",
                   absl::GetFlag(FLAGS_max_message_bytes), " poll_interval_s=", absl::GetFlag(FLAGS_poll_interval_s),
                   " keep_versions=", absl::GetFlag(FLAGS_keep_versions),
                   " fold_inference=", absl::GetFlag(FLAGS_fold_inference) ? "true" : "false",
                   " precision=", tgraph::PrecisionName(*precision), " (", absl::GetFlag(FLAGS_precision),
                   tgraph::CpuHasBf16() ? "; the CPU has avx512_bf16)" : "; the CPU has no avx512_bf16)",
                   " reflection=", absl::GetFlag(FLAGS_reflection) ? "true" : "false", " transport=", tls.Describe(),
                   " registration_bytes=", absl::GetFlag(FLAGS_registration_bytes),
                   " drain_timeout_s=",
                   absl::GetFlag(FLAGS_drain_timeout_s)));
  // Touch the BLAS once so it is mapped, then report it.
  (void)torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
  LogInfo(absl::StrCat("BLAS: ", BlasInUse()));

  std::unique_ptr<tgraph::ServerMetrics> metrics;
  if (!absl::GetFlag(FLAGS_metrics_address).empty()) {
    absl::StatusOr<std::unique_ptr<tgraph::ServerMetrics>> m =
        tgraph::ServerMetrics::Start(absl::GetFlag(FLAGS_metrics_address), tgraph::PrecisionName(*precision));
    if (!m.ok()) return tgraph::Fail(m.status());
    metrics = std::move(*m);
    LogInfo(absl::StrCat("metrics on port ", metrics->port(), " at /metrics"));
  }

  tgraph::ModelManager models(tgraph::Registry(registry),
                              {absl::GetFlag(FLAGS_keep_versions), absl::GetFlag(FLAGS_fold_inference), *precision});
  auto report = [&](const std::vector<tgraph::ModelEvent>& events) {
    for (const tgraph::ModelEvent& e : events) {
      switch (e.kind) {
        case tgraph::ModelEvent::Kind::kLoaded:
          LogInfo(absl::StrCat("loaded ", e.collection, " version ", e.version, " in ", e.seconds, " s"));
          break;
        case tgraph::ModelEvent::Kind::kFailed:
          LogError(absl::StrCat("FAILED to load ", e.collection, " version ", e.version, ": ", e.message,
                           " (the previous version keeps serving)"));
          break;
        case tgraph::ModelEvent::Kind::kVanished:
          LogError(absl::StrCat(e.collection, " version ", e.version, ": ", e.message));
          break;
        case tgraph::ModelEvent::Kind::kUnloaded:
          LogInfo(absl::StrCat("unloaded ", e.collection, " version ", e.version, ": ", e.message));
          break;
      }
      if (metrics) metrics->RecordModelEvent(e);
    }
  };
  report(models.Poll());
  // Registry problems are logged at startup, at each poll while nothing is loaded, and
  // when they change while serving; every poll that finds one is counted by reason.
  std::string registry_problem;
  auto check_registry = [&] {
    const tgraph::RegistryCheck c = models.registry().Check();
    const bool serving = models.AnyLoaded();
    if (!c.ok()) {
      if (metrics) metrics->RecordRegistryError(c.reason);
      if (!serving || c.message != registry_problem)
        LogError(absl::StrCat(c.message, serving ? " (the versions already loaded keep serving)"
                                                 : "; health is NOT_SERVING until a model loads"));
    } else if (!registry_problem.empty()) {
      LogInfo(absl::StrCat("registry ", registry, " is readable and holds a servable version again"));
    }
    registry_problem = c.ok() ? "" : c.message;
  };
  check_registry();
  if (g_signal != 0) {
    LogInfo(absl::StrCat("signal ", g_signal.load(), " while starting: stopped before serving"));
    return tgraph::kExitOk;
  }

  tgraph::RankerOptions ro;
  ro.cache_bytes = absl::GetFlag(FLAGS_cache_bytes);
  ro.graph_store_bytes = absl::GetFlag(FLAGS_graph_store_bytes);
  ro.max_nodes = absl::GetFlag(FLAGS_max_nodes);
  ro.max_configs = absl::GetFlag(FLAGS_max_configs);
  ro.workers = absl::GetFlag(FLAGS_workers);
  ro.queue_size = absl::GetFlag(FLAGS_queue_size);
  ro.cascade_fraction = absl::GetFlag(FLAGS_cascade_fraction);
  ro.activation_bytes = absl::GetFlag(FLAGS_activation_bytes);
  if (ro.activation_bytes <= 0) {
    const int64_t spare = tgraph::AvailableMemoryBytes() - ro.cache_bytes - ro.graph_store_bytes - (int64_t{1} << 30);
    ro.activation_bytes = std::max<int64_t>(int64_t{256} << 20, spare / std::max(1, ro.workers));
  }
  LogInfo(absl::StrCat("activation budget per request: ", ro.activation_bytes >> 20, " MiB",
                   absl::GetFlag(FLAGS_activation_bytes) > 0 ? "" : " (auto, from the memory limit)"));
  tgraph::Ranker ranker(&models, ro);
  std::unique_ptr<tgraph::MeasurementStore> measurements;
  if (!absl::GetFlag(FLAGS_measurement_store).empty()) {
    measurements = std::make_unique<tgraph::MeasurementStore>(absl::GetFlag(FLAGS_measurement_store));
    absl::StatusOr<int> stale = measurements->RemoveStaleTemporaries();
    LogInfo(absl::StrCat("measurement store: ", measurements->root(),
                     stale.ok() ? absl::StrCat(" (", *stale, " stale temporaries of crashed writes removed)")
                                : absl::StrCat(" (", stale.status().message(), ")")));
  }
  const int64_t max_message_bytes = std::min<int64_t>(absl::GetFlag(FLAGS_max_message_bytes), INT32_MAX);
  tgraph::RankerService service(&ranker, &models, metrics.get(), ro.max_nodes, measurements.get(),
                               absl::GetFlag(FLAGS_registration_bytes), max_message_bytes);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!absl::GetFlag(FLAGS_reflection)) builder.SetOption(std::make_unique<WithoutReflection>());
  if (metrics) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(tgraph::MakeRequestCounter(metrics.get()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_address), *credentials, &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    LogError(absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_address),
                          tls.enabled() ? " (with TLS: are --tls_cert and --tls_key a matching pair?)" : ""));
    return 1;
  }
  auto set_health = [&] {
    const bool serving = models.AnyLoaded();
    server->GetHealthCheckService()->SetServingStatus("", serving);  // not the overload that sets every service
    server->GetHealthCheckService()->SetServingStatus("tgraph.v1.Ranker", serving);
    return serving;
  };
  server->GetHealthCheckService()->SetServingStatus("liveness", true);
  if (!set_health() && registry_problem.empty())
    LogWarning("no model is loaded yet (see the load failures above): health is NOT_SERVING until one loads");
  models.StartPolling(absl::GetFlag(FLAGS_poll_interval_s), [&](const std::vector<tgraph::ModelEvent>& events) {
    report(events);
    check_registry();
    if (const int64_t purged = ranker.PurgeUnloaded(); purged > 0)
      LogInfo(absl::StrCat("dropped the prepared tensors of ", purged, " graph(s) for unloaded model versions"));
    set_health();
  });
  if (metrics) metrics->Watch(&ranker, &models);
  LogInfo(absl::StrCat("serving tgraph.v1.Ranker on port ", port));
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    // Written whole, then renamed: a reader never sees a half-written file.
    const std::string tmp = absl::GetFlag(FLAGS_port_file) + ".tmp";
    std::ofstream(tmp) << port << "\n" << (metrics ? metrics->port() : 0) << "\n";
    std::rename(tmp.c_str(), absl::GetFlag(FLAGS_port_file).c_str());
  }

  while (g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  LogInfo(absl::StrCat("signal ", g_signal.load(), ": draining in-flight RPCs (up to ", absl::GetFlag(FLAGS_drain_timeout_s),
                   " s)"));
  server->GetHealthCheckService()->Shutdown();  // health reports NOT_SERVING from now on
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_drain_timeout_s) * 1000));
  server->Shutdown(deadline);
  models.Stop();
  if (metrics) metrics->Watch(nullptr, nullptr);  // the ranker and models go before the metrics
  LogInfo("stopped");
  return 0;
}
