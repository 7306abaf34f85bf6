// tgraph-server: serves tgraph.v1.Ranker over gRPC with the models of a registry.
//
//   tgraph-server --registry REG [--address 0.0.0.0:50051] [--metrics_address 0.0.0.0:9090]
//
// Reads its flags into ServerOptions and calls RunServer (server/server.h says what the
// server does: health, reflection, TLS, metrics, draining on SIGTERM/SIGINT).
#include <atomic>
#include <csignal>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "model/tools/cli.h"
#include "model/tools/tool.h"
#include "server/server.h"

ABSL_FLAG(std::string, registry, "", "Model registry root (<registry>/<collection>/<version>/manifest.json)");
ABSL_FLAG(std::string, address, tgraph::ServerOptions{}.address, "gRPC listen address; port 0 picks a free port");
ABSL_FLAG(std::string, metrics_address, tgraph::ServerOptions{}.metrics_address, "Prometheus metrics HTTP address; empty disables");
ABSL_FLAG(std::string, port_file, "", "If set, the bound gRPC port and metrics port (two lines) are written there once serving");
ABSL_FLAG(int64_t, cache_bytes, tgraph::ServerOptions{}.ranker.cache_bytes, "Byte budget of the per-(graph, model version) tensor cache");
ABSL_FLAG(int64_t, graph_store_bytes, tgraph::ServerOptions{}.ranker.graph_store_bytes, "Byte budget of registered (pruned) graphs");
ABSL_FLAG(int, workers, tgraph::ServerOptions{}.ranker.workers, "Inference workers (requests scored in parallel)");
ABSL_FLAG(int, intra_op_threads, tgraph::ServerOptions{}.intra_op_threads, "LibTorch intra-op threads (0 = every core this process may use: affinity mask, cgroup CPU limit)");
ABSL_FLAG(int, queue_size, tgraph::ServerOptions{}.ranker.queue_size, "Requests that may wait for a worker before RESOURCE_EXHAUSTED, per lane: ranks and layout searches each have their own queue (tile searches: --tile_queue_size), served in turn");
ABSL_FLAG(int, tile_queue_size, tgraph::ServerOptions{}.ranker.tile_queue_size, "Tile searches that may wait for a worker before RESOURCE_EXHAUSTED, in a lane of their own: each is milliseconds of work, so a fleet's start-up burst waits rather than falling back");
ABSL_FLAG(int64_t, max_nodes, tgraph::ServerOptions{}.service.max_nodes, "Largest graph accepted (nodes)");
ABSL_FLAG(int64_t, max_configs, tgraph::ServerOptions{}.ranker.max_configs, "Most configurations per RankConfigs request");
ABSL_FLAG(int64_t, max_report_rows, tgraph::ServerOptions{}.ranker.max_report_rows, "Most measured rows per ReportMeasurements request (more: INVALID_ARGUMENT, split the report)");
ABSL_FLAG(int64_t, max_message_bytes, tgraph::ServerOptions{}.service.max_message_bytes, "Largest gRPC message accepted");
ABSL_FLAG(std::string, precision, tgraph::ServerOptions{}.precision_flag, tgraph::kPrecisionFlagHelp);
ABSL_FLAG(int64_t, activation_bytes, tgraph::ServerOptions{}.ranker.activation_bytes,
          "Activation memory one request may use: batches are made smaller to fit, and a graph one configuration of "
          "which does not fit is refused (RESOURCE_EXHAUSTED). 0 = auto: the memory limit (cgroup, else MemTotal) "
          "minus cache_bytes, graph_store_bytes and 1 GiB, divided by workers (at least 256 MiB)");
ABSL_FLAG(double, cascade_fraction, tgraph::ServerOptions{}.ranker.cascade_fraction,
          "Requests with cascade: the fraction of configurations (at least 2 x top_k) the first fold's scores keep "
          "for every fold");
ABSL_FLAG(double, poll_interval_s, tgraph::ServerOptions{}.poll_interval_s, "Seconds between registry scans for new model versions");
ABSL_FLAG(int, keep_versions, tgraph::ServerOptions{}.keep_versions, "Newest loadable versions kept loaded per collection (older ones cannot be pinned; versions that fail to load are passed over)");
ABSL_FLAG(bool, fold_inference, tgraph::ServerOptions{}.fold_inference,
          "Fold TGraph's f1 into f2 at inference (the same function, half the block matmuls; false: the layers as "
          "trained, for A/B comparisons)");
ABSL_FLAG(std::string, measurement_store, "",
          "Directory where ReportMeasurements stores measured runtimes (a TpuGraphs dataset root; "
          "docs/operations.md); empty: ReportMeasurements answers FAILED_PRECONDITION");
ABSL_FLAG(int64_t, request_bytes, tgraph::ServerOptions{}.service.request_bytes,
          "Calls in progress at once may hold this much memory in all, admitted before any work: RegisterGraph "
          "arrays 3x their bytes, an HLO module its bytes plus the working memory its reader reserves as it goes "
          "(about 1.3 kB per instruction), a report 5x its bytes, a ranking 2x, a search 3x plus its working memory "
          "(its evaluated and excluded rows, in the graph's row size); past it they get RESOURCE_EXHAUSTED. One "
          "larger request alone is admitted, but a module's working memory never passes this");
ABSL_FLAG(int64_t, registration_bytes, 0, "Deprecated: the old name of --request_bytes (which it sets when > 0)");
ABSL_FLAG(int64_t, request_log_every, tgraph::ServerOptions{}.service.request_log_every,
          "Log one line for one successful tgraph.v1.Ranker call in this many (method, code, latency, graph hash "
          "prefix, configurations, model version); 1: every call; 0: none. Failed calls are always logged, with "
          "their reason (at most 50 a second; past that they are counted in the next line)");
ABSL_FLAG(bool, reflection, tgraph::ServerOptions{}.reflection,
          "Serve gRPC server reflection (grpcurl and similar tools list the services); false turns it off");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the server; with --tls_key, gRPC is served over TLS (empty: plaintext)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: clients must present a certificate it signed (mutual TLS); needs --tls_cert and --tls_key");
ABSL_FLAG(int, tls_reload_s, tgraph::ServerOptions{}.tls.reload_s,
          "Seconds between re-reads of the TLS files: a rotated certificate is served without a restart");
ABSL_FLAG(std::string, log_format, "text",
          "Log lines: text (time, level, message) or json (one object per line: time, level, tool, msg)");
ABSL_FLAG(double, handshake_timeout_s, tgraph::ServerOptions{}.connections.handshake_timeout_s,
          "A connection that has not finished its TLS and HTTP/2 handshake within this is closed (an idle TCP "
          "connection that never speaks holds a file descriptor until then)");
ABSL_FLAG(double, max_connection_idle_s, tgraph::ServerOptions{}.connections.max_connection_idle_s,
          "A connection with no call in flight for this long is closed (GOAWAY: gRPC clients reconnect when they "
          "next call)");
ABSL_FLAG(double, keepalive_s, tgraph::ServerOptions{}.connections.keepalive_s, "Ping each connection this often to find dead peers");
ABSL_FLAG(double, keepalive_timeout_s, tgraph::ServerOptions{}.connections.keepalive_timeout_s, "A peer that does not answer a ping within this is disconnected");
ABSL_FLAG(int64_t, max_connections, tgraph::ServerOptions{}.connections.max_connections,
          "Plaintext: connections open at once (idle or not) past which new ones are closed unserved, within the "
          "file descriptor limit less 512; 0 = gRPC's own listener, uncapped (TLS always uses it)");
ABSL_FLAG(int, max_streams, tgraph::ServerOptions{}.connections.max_streams, "Calls at once on one connection (HTTP/2 concurrent streams)");
ABSL_FLAG(double, drain_timeout_s, tgraph::ServerOptions{}.drain_timeout_s, "On SIGTERM, how long in-flight RPCs may take to finish");

namespace {

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal = sig; }

absl::StatusOr<tgraph::ServerOptions> OptionsFromFlags() {
  tgraph::ServerOptions o;
  const std::string log_format = absl::GetFlag(FLAGS_log_format);
  if (log_format != "text" && log_format != "json")
    return tgraph::UsageError(absl::StrCat("--log_format must be text or json, got '", log_format, "'"));
  tgraph::SetJsonLogs(log_format == "json");
  o.registry = absl::GetFlag(FLAGS_registry);
  if (o.registry.empty()) return tgraph::UsageError("--registry is required");
  o.precision_flag = absl::GetFlag(FLAGS_precision);
  absl::StatusOr<tgraph::Precision> precision = tgraph::ResolvePrecision(o.precision_flag);
  if (!precision.ok()) return tgraph::UsageError(absl::StrCat("--precision: ", precision.status().message()));
  o.precision = *precision;
  o.address = absl::GetFlag(FLAGS_address);
  o.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  o.ranker.cache_bytes = absl::GetFlag(FLAGS_cache_bytes);
  o.ranker.graph_store_bytes = absl::GetFlag(FLAGS_graph_store_bytes);
  o.service.max_nodes = absl::GetFlag(FLAGS_max_nodes);
  o.ranker.max_configs = absl::GetFlag(FLAGS_max_configs);
  o.ranker.max_report_rows = absl::GetFlag(FLAGS_max_report_rows);
  if (o.ranker.max_report_rows < 1)
    return tgraph::UsageError(absl::StrCat("--max_report_rows must be 1 or more, got ", o.ranker.max_report_rows));
  o.ranker.workers = absl::GetFlag(FLAGS_workers);
  o.ranker.queue_size = absl::GetFlag(FLAGS_queue_size);
  o.ranker.tile_queue_size = absl::GetFlag(FLAGS_tile_queue_size);
  if (o.ranker.queue_size < 0 || o.ranker.tile_queue_size < 0)
    return tgraph::UsageError(absl::StrCat("--queue_size and --tile_queue_size must be 0 or more, got ",
                                           o.ranker.queue_size, " and ", o.ranker.tile_queue_size));
  o.ranker.cascade_fraction = absl::GetFlag(FLAGS_cascade_fraction);
  o.ranker.activation_bytes = absl::GetFlag(FLAGS_activation_bytes);
  o.intra_op_threads = absl::GetFlag(FLAGS_intra_op_threads);
  o.poll_interval_s = absl::GetFlag(FLAGS_poll_interval_s);
  o.keep_versions = absl::GetFlag(FLAGS_keep_versions);
  o.fold_inference = absl::GetFlag(FLAGS_fold_inference);
  o.measurement_store = absl::GetFlag(FLAGS_measurement_store);
  o.service.request_bytes = absl::GetFlag(FLAGS_request_bytes);
  if (const int64_t old_name = absl::GetFlag(FLAGS_registration_bytes); old_name > 0) {
    o.service.request_bytes = old_name;
    tgraph::LogWarning("--registration_bytes is deprecated: it is --request_bytes now, and bounds every call");
  }
  o.service.request_log_every = absl::GetFlag(FLAGS_request_log_every);
  if (o.service.request_log_every < 0)
    return tgraph::UsageError(
        absl::StrCat("--request_log_every must be 0 or more, got ", o.service.request_log_every));
  o.service.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.reflection = absl::GetFlag(FLAGS_reflection);
  o.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  o.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  o.tls.reload_s = absl::GetFlag(FLAGS_tls_reload_s);
  o.drain_timeout_s = absl::GetFlag(FLAGS_drain_timeout_s);
  o.connections.handshake_timeout_s = absl::GetFlag(FLAGS_handshake_timeout_s);
  o.connections.max_connection_idle_s = absl::GetFlag(FLAGS_max_connection_idle_s);
  o.connections.keepalive_s = absl::GetFlag(FLAGS_keepalive_s);
  o.connections.keepalive_timeout_s = absl::GetFlag(FLAGS_keepalive_timeout_s);
  o.connections.max_streams = absl::GetFlag(FLAGS_max_streams);
  o.connections.max_connections = absl::GetFlag(FLAGS_max_connections);
  if (o.connections.max_connections < 0)
    return tgraph::UsageError(absl::StrCat("--max_connections must be 0 or more, got ", o.connections.max_connections));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  tgraph::ReexecWithPassiveOpenMpWait(argv);  // see model/tools/cli.h
  // From the first line (exec resets handlers, so after the re-exec): a SIGTERM while
  // the server starts (loading models can take seconds) ends it cleanly, exit 0.
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  tgraph::ParseToolFlags(
      argc, argv, "Serve tgraph.v1.Ranker.\n  tgraph-server --registry REG [--address HOST:PORT]");
  absl::StatusOr<tgraph::ServerOptions> options = OptionsFromFlags();
  if (!options.ok()) return tgraph::Fail(options.status());
  return tgraph::RunServer(*options, g_signal);
}
