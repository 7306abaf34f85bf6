#include "client/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"

namespace tgraph {
namespace {

using Clock = std::chrono::steady_clock;

struct PoolGraph {
  NodeGraph graph;
  std::vector<int64_t> ids;
  std::vector<int8_t> layout;  // exactly `configs` rows, cycled from the file's
  std::vector<float> tile;
};

bool IsLoopback(const std::string& target) {
  const std::string host = target.substr(0, target.rfind(':'));
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "[::1]" || host == "::1";
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

const char* CodeName(absl::StatusCode c) {
  switch (c) {
    case absl::StatusCode::kCancelled: return "CANCELLED";
    case absl::StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    case absl::StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kUnavailable: return "UNAVAILABLE";
    case absl::StatusCode::kInternal: return "INTERNAL";
    default: return "OTHER";
  }
}

// The graph pool: up to o.graphs graphs of the collection from every split, each with
// exactly o.configs rows cycled from its file's.
absl::StatusOr<std::vector<PoolGraph>> LoadPool(const BenchOptions& o, const Collection& c) {
  std::vector<PoolGraph> pool;
  for (const std::string& split : AllSplits()) {
    absl::StatusOr<std::vector<GraphFile>> files = ListSplit(o.data_root, c, split);
    if (!files.ok()) continue;
    for (const GraphFile& f : *files) {
      if (static_cast<int>(pool.size()) >= o.graphs) break;
      PoolGraph p;
      if (c.kind == CollectionKind::kLayout) {
        absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(f.path);
        if (!g.ok()) return g.status();
        const size_t row = static_cast<size_t>(g->num_config_nodes()) * kConfigFeatDim;
        for (int64_t i = 0; i < o.configs; ++i) {
          const int8_t* r = g->config(i % g->num_configs);
          p.layout.insert(p.layout.end(), r, r + row);
        }
        p.graph = std::move(g->graph);
        p.ids = std::move(g->node_config_ids);
      } else {
        absl::StatusOr<TileGraph> g = LoadTileGraph(f.path);
        if (!g.ok()) return g.status();
        for (int64_t i = 0; i < o.configs; ++i) {
          const float* r = g->config_feat.data() + (i % g->num_configs) * kTileConfigDim;
          p.tile.insert(p.tile.end(), r, r + kTileConfigDim);
        }
        p.graph = std::move(g->graph);
      }
      pool.push_back(std::move(p));
    }
  }
  if (pool.empty()) return absl::NotFoundError(absl::StrCat("no graphs of ", o.collection, " under ", o.data_root));
  return pool;
}

// The requests' outcome, filled by the workers under `mu`.
struct Outcomes {
  std::mutex mu;
  std::vector<double> latencies, inference;
  BenchReport report;
};

// The figures of a finished run.
void Summarise(const Outcomes& out, double seconds, int64_t configs, BenchReport* report) {
  report->seconds = seconds;
  report->requests_per_s = static_cast<double>(report->ok) / report->seconds;
  report->configs_per_s = report->requests_per_s * static_cast<double>(configs);
  report->p50_ms = Percentile(out.latencies, 0.50);
  report->p90_ms = Percentile(out.latencies, 0.90);
  report->p99_ms = Percentile(out.latencies, 0.99);
  report->max_ms = out.latencies.empty() ? 0 : *std::max_element(out.latencies.begin(), out.latencies.end());
  double sum = 0, inf = 0;
  for (double v : out.latencies) sum += v;
  for (double v : out.inference) inf += v;
  report->mean_ms = out.latencies.empty() ? 0 : sum / static_cast<double>(out.latencies.size());
  report->server_inference_mean_ms = out.inference.empty() ? 0 : inf / static_cast<double>(out.inference.size());
}

}  // namespace

absl::StatusOr<BenchReport> RunBench(const BenchOptions& o) {
  if (!o.allow_remote && !IsLoopback(o.client.target))
    return absl::InvalidArgumentError(absl::StrCat("bench targets loopback addresses only (got ", o.client.target,
                                                   "); pass --allow_remote to load another host"));
  if (o.requests <= 0 && o.duration_s <= 0)
    return absl::InvalidArgumentError("give --requests or --duration_s: a benchmark must stop by itself");
  if (o.concurrency < 1 || o.configs < 1) return absl::InvalidArgumentError("--concurrency and --configs_per_request must be >= 1");
  absl::StatusOr<Collection> c = ParseCollection(o.collection);
  if (!c.ok()) return c.status();

  absl::StatusOr<std::vector<PoolGraph>> pool = LoadPool(o, *c);
  if (!pool.ok()) return pool.status();

  RankerClient client(o.client);
  // Registration is set-up, not load: do it before the clock starts.
  for (const PoolGraph& p : *pool)
    if (absl::StatusOr<RegisteredGraph> r = client.Register(p.graph, p.ids); !r.ok()) return r.status();

  std::atomic<int64_t> next{0};
  Outcomes out;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(o.duration_s > 0 ? o.duration_s : 1e9));
  RankOptions ro;
  ro.collection = o.collection;
  auto worker = [&] {
    while (true) {
      const int64_t i = next.fetch_add(1);
      if (o.requests > 0 && i >= o.requests) return;
      if (o.rate > 0) {  // request i is due at start + i / rate
        const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(static_cast<double>(i) / o.rate));
        if (due > deadline) return;
        std::this_thread::sleep_until(due);
      }
      if (Clock::now() >= deadline) return;
      const PoolGraph& p = (*pool)[static_cast<size_t>(i) % pool->size()];
      const auto t0 = Clock::now();
      absl::StatusOr<Ranking> r = p.tile.empty() ? client.RankLayout(p.graph, p.ids, p.layout.data(), o.configs, ro)
                                                 : client.RankTile(p.graph, p.tile.data(), o.configs, ro);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(out.mu);
      if (r.ok()) {
        ++out.report.ok;
        out.latencies.push_back(ms);
        out.inference.push_back(r->inference_ms);
      } else {
        ++out.report.errors[CodeName(r.status().code())];
      }
    }
  };
  std::atomic<bool> done{false};
  std::thread progress([&] {
    while (o.progress && !done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::lock_guard<std::mutex> lock(out.mu);
      int64_t errors = 0;
      for (const auto& [code, n] : out.report.errors) errors += n;
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr, "\r%6.1f s  %lld ok  %lld errors  %.1f req/s  ", t, static_cast<long long>(out.report.ok),
                   static_cast<long long>(errors), static_cast<double>(out.report.ok) / std::max(t, 1e-9));
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < o.concurrency; ++w) workers.emplace_back(worker);
  for (std::thread& t : workers) t.join();
  done = true;
  progress.join();
  if (o.progress) std::fprintf(stderr, "\n");

  Summarise(out, std::chrono::duration<double>(Clock::now() - start).count(), o.configs, &out.report);
  return out.report;
}

std::string BenchReport::Text() const {
  std::string err;
  for (const auto& [code, n] : errors) err += absl::StrCat(err.empty() ? "" : ", ", code, " ", n);
  return absl::StrFormat(
      "requests: %d ok, errors: %s\n"
      "duration: %.2f s\n"
      "throughput: %.2f requests/s, %.0f configs/s\n"
      "latency (ms): p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f\n"
      "server inference (ms, mean): %.1f\n",
      ok, err.empty() ? "none" : err, seconds, requests_per_s, configs_per_s, p50_ms, p90_ms, p99_ms, max_ms,
      mean_ms, server_inference_mean_ms);
}

std::string BenchReport::Json() const {
  nlohmann::json j = {{"ok", ok},           {"errors", errors},         {"seconds", seconds},
                      {"requests_per_s", requests_per_s}, {"configs_per_s", configs_per_s},
                      {"latency_ms", {{"p50", p50_ms}, {"p90", p90_ms}, {"p99", p99_ms}, {"max", max_ms}, {"mean", mean_ms}}},
                      {"server_inference_mean_ms", server_inference_mean_ms}};
  return j.dump(1);
}

}  // namespace tgraph
