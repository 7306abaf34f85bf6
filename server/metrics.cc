#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "model/tools/build_info.h"
#include "server/connections.h"
#include "server/metrics_http.h"

namespace tgraph {
namespace {

// The process metrics Prometheus client libraries export under these standard names,
// from /proc at scrape time (Linux), in the text exposition format.
std::string ProcessMetricsText() {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                    absl::StrFormat("%.10g", value), "\n");
  };
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos && tick > 0) {
    const std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');  // f[0] is field 3 (state)
    double utime = 0, stime = 0, start = 0;
    if (f.size() > 19 && absl::SimpleAtod(f[11], &utime) && absl::SimpleAtod(f[12], &stime) &&
        absl::SimpleAtod(f[19], &start)) {
      metric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
             (utime + stime) / tick);
      std::ifstream boot_file("/proc/stat");
      for (std::string line; std::getline(boot_file, line);) {
        double btime = 0;
        if (absl::StartsWith(line, "btime ") && absl::SimpleAtod(line.substr(6), &btime))
          metric("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                 btime + start / tick);
      }
    }
  }
  std::ifstream statm("/proc/self/statm");
  double pages_virtual = 0, pages_resident = 0;
  if (statm >> pages_virtual >> pages_resident) {
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", pages_virtual * page);
    metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", pages_resident * page);
  }
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  if (!ec) metric("process_open_fds", "gauge", "Number of open file descriptors.", fds);
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", static_cast<double>(lim.rlim_cur));
  return out;
}

}  // namespace

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

struct ServerMetrics::Impl {
  Impl()
      : registry(std::make_shared<prometheus::Registry>()),
        requests(BuildCounter().Name("tgraph_requests_total").Help("RPCs by method and status code").Register(*registry)),
        latency(BuildHistogram().Name("tgraph_request_latency_seconds").Help("RPC latency by method").Register(*registry)),
        configs(BuildCounter().Name("tgraph_configs_scored_total").Help("Configurations scored").Register(*registry).Add({})),
        request_configs(BuildHistogram().Name("tgraph_request_configs").Help("Configurations per RankConfigs request")
                            .Register(*registry)
                            .Add({}, prometheus::Histogram::BucketBoundaries{1, 8, 32, 128, 512, 2048, 8192, 32768, 100000})),
        batches(BuildHistogram().Name("tgraph_request_batches").Help("Forward passes (folds x TTA x batches) per request")
                    .Register(*registry)
                    .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 64, 256, 1024, 4096})),
        inference(BuildHistogram().Name("tgraph_inference_seconds").Help("Network time per RankConfigs request")
                      .Register(*registry)
                      .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
        queue_wait_family(BuildHistogram().Name("tgraph_queue_wait_seconds").Help("Time waiting for an inference worker, by lane: rank, search (layout) or tile (tile search)").Register(*registry)),
        queue_wait_rank(queue_wait_family.Add({{"lane", "rank"}}, QueueWaitBuckets())),
        queue_wait_search(queue_wait_family.Add({{"lane", "search"}}, QueueWaitBuckets())),
        queue_wait_tile(queue_wait_family.Add({{"lane", "tile"}}, QueueWaitBuckets())),
        queue_depth_family(BuildGauge().Name("tgraph_queue_depth").Help("Requests waiting for a worker, by lane: rank, search (layout) or tile (tile search); each has its own queue, a worker takes them in turn").Register(*registry)),
        queue_depth_rank(queue_depth_family.Add({{"lane", "rank"}})),
        queue_depth_search(queue_depth_family.Add({{"lane", "search"}})),
        queue_depth_tile(queue_depth_family.Add({{"lane", "tile"}})),
        withdrawn_family(BuildCounter().Name("tgraph_queue_withdrawn_total").Help("Requests that left the queue before a worker took them: cancelled by the client or past their deadline, by lane").Register(*registry)),
        withdrawn_rank(withdrawn_family.Add({{"lane", "rank"}})),
        withdrawn_search(withdrawn_family.Add({{"lane", "search"}})),
        withdrawn_tile(withdrawn_family.Add({{"lane", "tile"}})),
        running(BuildGauge().Name("tgraph_requests_running").Help("Requests on a worker").Register(*registry).Add({})),
        cache_hits(BuildCounter().Name("tgraph_cache_hits_total").Help("Graph tensor cache hits").Register(*registry).Add({})),
        cache_misses(BuildCounter().Name("tgraph_cache_misses_total").Help("Graph tensor cache misses").Register(*registry).Add({})),
        cache_evictions(BuildCounter().Name("tgraph_cache_evictions_total").Help("Graph tensor cache evictions").Register(*registry).Add({})),
        cache_bytes(BuildGauge().Name("tgraph_cache_bytes").Help("Bytes held by the graph tensor cache").Register(*registry).Add({})),
        cache_entries(BuildGauge().Name("tgraph_cache_entries").Help("Entries in the graph tensor cache").Register(*registry).Add({})),
        graphs(BuildGauge().Name("tgraph_registered_graphs").Help("Registered graphs held").Register(*registry).Add({})),
        graph_bytes(BuildGauge().Name("tgraph_registered_graph_bytes").Help("Bytes of registered graphs held").Register(*registry).Add({})),
        accept_errors(BuildCounter().Name("tgraph_accept_errors_total").Help("Connections the listener failed to accept (out of file descriptors: see tgraph_open_fds beside tgraph_fd_limit); never fatal").Register(*registry).Add({})),
        connections(BuildGauge().Name("tgraph_connections").Help("Client connections open (plaintext accept loop: waiting for their first bytes or served); -1 with TLS").Register(*registry).Add({})),
        max_connections(BuildGauge().Name("tgraph_max_connections").Help("Connections open at once past which new ones are closed unserved (--max_connections, within the descriptor limit)").Register(*registry).Add({})),
        connections_refused(BuildCounter().Name("tgraph_connections_refused_total").Help("Connections closed unserved because --max_connections were open").Register(*registry).Add({})),
        connections_unspoken(BuildCounter().Name("tgraph_connections_unspoken_total").Help("Connections closed after sending nothing within --handshake_timeout_s (port scans, leaking clients)").Register(*registry).Add({})),
        open_fds(BuildGauge().Name("tgraph_open_fds").Help("File descriptors open in the server: connections, files, sockets").Register(*registry).Add({})),
        fd_limit(BuildGauge().Name("tgraph_fd_limit").Help("The server's file descriptor limit (raised to the hard limit at start)").Register(*registry).Add({})),
        rejected(BuildCounter().Name("tgraph_rejected_queue_full_total").Help("Requests refused because the queue was full").Register(*registry).Add({})),
        version(BuildGauge().Name("tgraph_model_version").Help("Newest loaded model version per collection").Register(*registry)),
        loads(BuildCounter().Name("tgraph_model_loads_total").Help("Model version events by result: loaded, failed, unloaded (retired), vanished (gone without being retired), corrupted (a loaded version's files changed on disk)").Register(*registry)),
        measurements(BuildCounter().Name("tgraph_measurements_stored_total").Help("Measured runtimes stored durably by ReportMeasurements").Register(*registry).Add({})),
        measurement_bytes(BuildCounter().Name("tgraph_measurement_bytes_total").Help("Bytes of measurement shards written").Register(*registry).Add({})),
        measurement_errors(BuildCounter().Name("tgraph_measurement_store_errors_total").Help("ReportMeasurements calls the store could not write, by status code (a full disk is RESOURCE_EXHAUSTED)").Register(*registry)),
        registry_errors(BuildCounter().Name("tgraph_registry_errors_total").Help("Registry polls that found nothing servable or could not read it, by reason: missing, not_a_directory, unreadable, empty, no_collection, no_version").Register(*registry)),
        build_info(BuildGauge().Name("tgraph_build_info").Help("1, labelled with the version, git commit and inference precision of this server").Register(*registry)) {}
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& latency;
  prometheus::Counter& configs;
  prometheus::Histogram& request_configs;
  prometheus::Histogram& batches;
  prometheus::Histogram& inference;
  static prometheus::Histogram::BucketBoundaries QueueWaitBuckets() { return {0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30}; }
  prometheus::Family<prometheus::Histogram>& queue_wait_family;
  prometheus::Histogram &queue_wait_rank, &queue_wait_search, &queue_wait_tile;
  prometheus::Family<prometheus::Gauge>& queue_depth_family;
  prometheus::Gauge &queue_depth_rank, &queue_depth_search, &queue_depth_tile;
  prometheus::Family<prometheus::Counter>& withdrawn_family;
  prometheus::Counter &withdrawn_rank, &withdrawn_search, &withdrawn_tile;
  prometheus::Gauge& running;
  prometheus::Counter &cache_hits, &cache_misses, &cache_evictions;
  prometheus::Gauge &cache_bytes, &cache_entries, &graphs, &graph_bytes;
  prometheus::Counter& accept_errors;
  prometheus::Gauge &connections, &max_connections;
  prometheus::Counter &connections_refused, &connections_unspoken;
  prometheus::Gauge &open_fds, &fd_limit;
  prometheus::Counter& rejected;
  prometheus::Family<prometheus::Gauge>& version;
  prometheus::Family<prometheus::Counter>& loads;
  prometheus::Counter& measurements;
  prometheus::Counter& measurement_bytes;
  prometheus::Family<prometheus::Counter>& measurement_errors;
  prometheus::Family<prometheus::Counter>& registry_errors;
  prometheus::Family<prometheus::Gauge>& build_info;
  // The scrape-time source (Watch) and the ranker's cumulative counts already added.
  absl::Mutex refresh_mu;
  const Ranker* ranker ABSL_GUARDED_BY(refresh_mu) = nullptr;
  const ModelManager* models ABSL_GUARDED_BY(refresh_mu) = nullptr;
  // Refresh's, which runs under refresh_mu.
  RankerStats counted;
  int64_t counted_accept_errors = 0, counted_refused = 0, counted_unspoken = 0;
  std::unique_ptr<MetricsHttpServer> http;  // last: stops serving before the metrics go
};

absl::StatusOr<std::unique_ptr<ServerMetrics>> ServerMetrics::Start(const std::string& address,
                                                                    const std::string& precision) {
  std::unique_ptr<ServerMetrics> m(new ServerMetrics(std::make_unique<Impl>()));
  m->impl_->build_info.Add({{"version", BuildVersion()}, {"commit", BuildCommit()}, {"precision", precision}}).Set(1);
  Impl* impl = m->impl_.get();
  ServerMetrics* self = m.get();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http = MetricsHttpServer::Start(address, [impl, self] {
    {
      absl::MutexLock lock(&impl->refresh_mu);
      if (impl->ranker && impl->models) self->Refresh(impl->ranker->Stats(), *impl->models);
    }
    return prometheus::TextSerializer().Serialize(impl->registry->Collect()) + ProcessMetricsText();
  });
  if (!http.ok()) return http.status();
  m->impl_->http = std::move(*http);
  return m;
}

ServerMetrics::ServerMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::Watch(const Ranker* ranker, const ModelManager* models) {
  absl::MutexLock lock(&impl_->refresh_mu);
  impl_->ranker = ranker;
  impl_->models = models;
}

int ServerMetrics::port() const {
  return impl_->http->port();
}

void ServerMetrics::RecordRequest(const std::string& method, const std::string& code, double seconds) {
  impl_->requests.Add({{"method", method}, {"code", code}}).Increment();
  impl_->latency
      .Add({{"method", method}},
           prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
      .Observe(seconds);
}

void ServerMetrics::RecordRank(int64_t configs, const RankTiming& t) {
  impl_->configs.Increment(static_cast<double>(configs));
  impl_->request_configs.Observe(static_cast<double>(configs));
  impl_->batches.Observe(static_cast<double>(t.batches));
  impl_->inference.Observe(t.inference_ms / 1000.0);
  impl_->queue_wait_rank.Observe(t.queue_ms / 1000.0);
}

void ServerMetrics::RecordSearch(const RankTiming& t, bool tile) {
  (tile ? impl_->queue_wait_tile : impl_->queue_wait_search).Observe(t.queue_ms / 1000.0);
}

void ServerMetrics::RecordModelEvent(const ModelEvent& e) {
  impl_->loads.Add({{"collection", e.collection}, {"result", e.KindName()}}).Increment();
}

void ServerMetrics::RecordMeasurements(int64_t measurements, int64_t bytes) {
  impl_->measurements.Increment(static_cast<double>(measurements));
  impl_->measurement_bytes.Increment(static_cast<double>(bytes));
}

void ServerMetrics::RecordMeasurementError(const std::string& code) {
  impl_->measurement_errors.Add({{"code", code}}).Increment();
}

void ServerMetrics::RecordRegistryError(const std::string& reason) {
  impl_->registry_errors.Add({{"reason", reason}}).Increment();
}

// Called with refresh_mu held, at each scrape.
void ServerMetrics::Refresh(const RankerStats& s, const ModelManager& models) {
  impl_->queue_depth_rank.Set(static_cast<double>(s.queued_ranks));
  impl_->queue_depth_search.Set(static_cast<double>(s.queued_searches));
  impl_->queue_depth_tile.Set(static_cast<double>(s.queued_tile_searches));
  impl_->running.Set(static_cast<double>(s.running));
  impl_->cache_bytes.Set(static_cast<double>(s.tensor_cache.bytes));
  impl_->cache_entries.Set(static_cast<double>(s.tensor_cache.entries));
  impl_->graphs.Set(static_cast<double>(s.graph_store.entries));
  impl_->graph_bytes.Set(static_cast<double>(s.graph_store.bytes));
  // The ranker counts since start; the counters advance by what is new.
  RankerStats& c = impl_->counted;
  auto advance = [](prometheus::Counter& counter, int64_t now, int64_t& seen) {
    if (now > seen) counter.Increment(static_cast<double>(now - seen));
    seen = std::max(seen, now);
  };
  advance(impl_->cache_hits, s.tensor_cache.hits, c.tensor_cache.hits);
  advance(impl_->cache_misses, s.tensor_cache.misses, c.tensor_cache.misses);
  advance(impl_->cache_evictions, s.tensor_cache.evictions, c.tensor_cache.evictions);
  advance(impl_->rejected, s.rejected_queue_full, c.rejected_queue_full);
  advance(impl_->accept_errors, AcceptErrors(), impl_->counted_accept_errors);
  const ConnectionCounts conns = CurrentConnectionCounts();
  impl_->connections.Set(static_cast<double>(conns.open));
  impl_->max_connections.Set(static_cast<double>(conns.cap));
  advance(impl_->connections_refused, conns.refused, impl_->counted_refused);
  advance(impl_->connections_unspoken, conns.unspoken, impl_->counted_unspoken);
  impl_->open_fds.Set(static_cast<double>(OpenFds()));
  if (struct rlimit r; ::getrlimit(RLIMIT_NOFILE, &r) == 0) impl_->fd_limit.Set(static_cast<double>(r.rlim_cur));
  advance(impl_->withdrawn_rank, s.withdrawn_ranks, c.withdrawn_ranks);
  advance(impl_->withdrawn_search, s.withdrawn_searches, c.withdrawn_searches);
  advance(impl_->withdrawn_tile, s.withdrawn_tile_searches, c.withdrawn_tile_searches);
  for (const auto& [collection, handles] : models.Loaded())
    if (!handles.empty()) impl_->version.Add({{"collection", collection}}).Set(static_cast<double>(handles.front().version));
}

}  // namespace tgraph
