// tgraph-client: talks to tgraph-server.
//
//   tgraph-client rank --server H:P --collection C --npz FILE [--top_k K] [--max_configs N]
//   tgraph-client rank --server H:P --collection C (--hlo MODULE.hlo.pb | --npz GRAPH.npz) --configs ROWS.npy
//   tgraph-client register --server H:P (--hlo MODULE.hlo.pb | --npz GRAPH.npz)
//   tgraph-client report --server H:P --collection C (--npz FILE | --hlo MODULE --configs ROWS.npy --runtimes FILE)
//   tgraph-client eval --server H:P --collection C --data ROOT --split valid [--official_subset] [--json]
//                      [--rankings OUT.csv]
//   tgraph-client bench --server H:P --collection C --data ROOT [--concurrency 4] [--requests 200]
//                       [--duration_s 60] [--rate 0] [--configs_per_request 128] [--json]
//   tgraph-client health --server H:P [--service liveness]
//   tgraph-client models --server H:P
// --json on rank, register, report, eval, bench, health and models prints JSON instead
// of text. Exit status: 0 success (health: SERVING), 2 usage error, 1 anything else.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "client/bench.h"
#include "client/client.h"
#include "client/replay.h"
#include "model/core/dataset.h"
#include "model/core/eval_report.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/npy.h"
#include "model/core/rank_metrics.h"
#include "model/core/tile_space.h"
#include "model/tools/tool.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address HOST:PORT");
ABSL_FLAG(bool, tls, false, "Connect over TLS (implied by any --tls_* flag); the server's certificate is checked "
          "against --tls_ca, else gRPC's default roots");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle the server's certificate must chain to");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for a server that requires one (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "The name the server's certificate must carry, when it is not --server's host (e.g. connecting by IP)");
ABSL_FLAG(std::string, collection, "", "Collection, e.g. layout:xla:random");
ABSL_FLAG(std::string, npz, "", "A graph file in the TpuGraphs format");
ABSL_FLAG(std::string, hlo, "",
          "rank, register: an XLA HLO module (xla.HloProto, e.g. an XLA dump *.hlo.pb, or HloModuleProto)");
ABSL_FLAG(std::string, configs, "",
          "rank: layout rows to rank, .npy or .npz (node_config_feat), shape (c, nc, 18) or (nc, 18), values -1..5; "
          "needed with --hlo, replaces an --npz file's own configurations");
ABSL_FLAG(int64_t, top_k, 10, "How many of the fastest configurations to print");
ABSL_FLAG(int64_t, max_configs, 0, "Rank only the first N configurations of the file (0 = all)");
ABSL_FLAG(int64_t, model_version, 0, "Model version (0 = latest)");
ABSL_FLAG(bool, cascade, false,
          "rank: the top-k cascade: every configuration scored by one fold, the best by every fold (needs --top_k)");
ABSL_FLAG(double, timeout_s, 60, "Deadline of each RPC");
ABSL_FLAG(double, retry_budget_s, 30,
          "How long UNAVAILABLE (no server, a restart) is retried with backoff, in all (0 = no retries)");
ABSL_FLAG(std::string, data, "", "eval: dataset root");
ABSL_FLAG(std::string, split, "valid", "eval: train, valid or test");
ABSL_FLAG(bool, official_subset, false, "eval: layout graphs scored on the 1,000-config evaluation subset");
ABSL_FLAG(bool, json, false, "rank, register, report, eval, bench, search, health, models: print JSON instead of text");
ABSL_FLAG(std::string, rankings, "",
          "eval: also write each graph's ranking (the file's configuration indices, fastest first) to this CSV");
ABSL_FLAG(int, concurrency, 4, "bench: concurrent requests");
ABSL_FLAG(int64_t, requests, 200, "bench: stop after this many requests (0 = no limit)");
ABSL_FLAG(double, duration_s, 60, "bench: stop after this many seconds (0 = no limit)");
ABSL_FLAG(double, rate, 0, "bench: target requests per second (0 = as fast as possible)");
ABSL_FLAG(int64_t, configs_per_request, 128, "bench: configurations per request");
ABSL_FLAG(int, graphs, 8, "bench: graphs in the pool");
ABSL_FLAG(std::string, service, "tgraph.v1.Ranker", "health: the health service name (\"liveness\" for liveness)");
ABSL_FLAG(bool, allow_remote, false, "bench: allow a non-loopback target");
ABSL_FLAG(int, rounds, 10, "replay: measurement rounds");
ABSL_FLAG(int, per_round, 10, "replay: configurations measured per round");
ABSL_FLAG(int, random_orders, 20, "replay: random search is the mean over this many random orders");
ABSL_FLAG(uint64_t, seed, 0, "replay: seed of the random orders; search: the search's seed");
ABSL_FLAG(std::string, csv, "", "replay: also write the curves as CSV to this file");
ABSL_FLAG(std::string, finetune_command, "",
          "replay: the model with updates: report each round's measurements, run this command (e.g. tgraph-train "
          "finetune ...), wait for the version it publishes, rank again");
ABSL_FLAG(int64_t, search_evaluations, 0,
          "replay: also a model-guided search within the file's configurations (SearchConfigs with them as candidates), "
          "this many model evaluations per round (0 = none)");
ABSL_FLAG(std::string, source, "", "report: a label stored with the measurements (e.g. the farm and hardware)");
ABSL_FLAG(std::string, runtimes, "",
          "report --hlo: the measured runtimes (ns) of the --configs rows, in their order: an .npy of shape (c,), or "
          "text, numbers separated by spaces, commas or newlines");
ABSL_FLAG(int64_t, results, 0, "search: configurations to propose (0: the server's default)");
ABSL_FLAG(int64_t, max_evaluations, 0,
          "search: configurations the search's fitness model may score (0: the server's default; the answer says "
          "how many it scored)");
ABSL_FLAG(int64_t, max_changed_groups, 0,
          "search, replay --search_evaluations: the most layout groups a proposal may change from the default and the "
          "measured rows it starts from (0: the server's default; -1: the whole space)");
ABSL_FLAG(int64_t, start_best, 16,
          "search: start from the file's this many fastest measured configurations (0: none); every configuration of "
          "the file is excluded (it was measured)");
ABSL_FLAG(std::string, out, "", "search: write the proposed rows, (results, nc, 18) int8, to this .npy file");
ABSL_FLAG(bool, force, false, "search: replace --out when it exists (never a link or a device)");

namespace {

using tgraph::Fail;
using tgraph::UsageError;

int PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(1).c_str());
  return tgraph::kExitOk;
}

// --collection, parsed; a usage error names the flag.
absl::StatusOr<tgraph::Collection> CollectionFlag() {
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(absl::GetFlag(FLAGS_collection));
  if (!c.ok()) return UsageError(absl::StrCat("--collection: ", c.status().message()));
  return c;
}

// The configuration rows of --configs for a graph of nc configurable nodes, cut to
// --max_configs; runtimes unknown (0).
absl::StatusOr<tgraph::LayoutConfigRows> ConfigsFlag(int64_t nc) {
  absl::StatusOr<tgraph::LayoutConfigRows> rows = tgraph::LoadLayoutConfigRows(absl::GetFlag(FLAGS_configs), nc);
  if (!rows.ok()) return rows.status();
  const int64_t max = absl::GetFlag(FLAGS_max_configs);
  if (max > 0 && rows->count > max) {
    rows->count = max;
    rows->values.resize(static_cast<size_t>(max * nc * tgraph::kConfigFeatDim));
  }
  return rows;
}

// A ranking and what it is printed with: the graph's runtimes where the file has them.
struct Ranked {
  tgraph::Ranking r;
  std::vector<double> truth;  // per configuration; all 0 when unknown
  int64_t count = 0, nodes = 0;
  std::string path;
};

// The --hlo module, its featurization's warnings (e.g. a module dumped after XLA's
// passes) on stderr.
absl::StatusOr<tgraph::HloProgram> ReadProgram(const std::string& path) {
  absl::StatusOr<tgraph::HloProgram> p = tgraph::HloProgram::FromFile(path);
  if (p.ok())
    for (const std::string& w : p->warnings) std::fprintf(stderr, "tgraph-client: warning: %s\n", w.c_str());
  return p;
}

absl::StatusOr<Ranked> RankHlo(tgraph::RankerClient& client, const tgraph::RankOptions& o) {
  Ranked out;
  out.path = absl::GetFlag(FLAGS_hlo);
  absl::StatusOr<tgraph::HloProgram> p = ReadProgram(out.path);
  if (!p.ok()) return p.status();
  absl::StatusOr<tgraph::LayoutConfigRows> rows = ConfigsFlag(static_cast<int64_t>(p->node_config_ids.size()));
  if (!rows.ok()) return rows.status();
  out.count = rows->count;
  out.nodes = p->graph.num_nodes;
  out.truth.assign(static_cast<size_t>(out.count), 0.0);
  absl::StatusOr<tgraph::Ranking> r = client.RankLayout(*p, rows->values.data(), out.count, o);
  if (!r.ok()) return r.status();
  out.r = std::move(*r);
  return out;
}

absl::StatusOr<Ranked> RankFile(tgraph::RankerClient& client, tgraph::CollectionKind kind,
                                const tgraph::RankOptions& o) {
  Ranked out;
  out.path = absl::GetFlag(FLAGS_npz);
  const int64_t max = absl::GetFlag(FLAGS_max_configs);
  const std::string configs = absl::GetFlag(FLAGS_configs);
  absl::StatusOr<tgraph::Ranking> r;
  if (kind == tgraph::CollectionKind::kLayout) {
    // With --configs the file may be graph-only (tgraph-featurize module writes one).
    absl::StatusOr<tgraph::LayoutGraph> g = tgraph::LoadLayoutGraph(out.path, /*allow_no_configs=*/!configs.empty());
    if (!g.ok()) return g.status();
    if (!configs.empty()) {
      absl::StatusOr<tgraph::LayoutConfigRows> rows = ConfigsFlag(g->num_config_nodes());
      if (!rows.ok()) return rows.status();
      g->num_configs = rows->count;
      g->config_feat = std::move(rows->values);
      g->config_runtime.assign(static_cast<size_t>(rows->count), 0);
    }
    out.count = max > 0 ? std::min(max, g->num_configs) : g->num_configs;
    out.nodes = g->graph.num_nodes;
    out.truth.assign(g->config_runtime.begin(), g->config_runtime.begin() + out.count);
    r = client.RankLayout(g->graph, g->node_config_ids, g->config_feat.data(), out.count, o);
  } else {
    absl::StatusOr<tgraph::TileGraph> g = tgraph::LoadTileGraph(out.path);
    if (!g.ok()) return g.status();
    out.count = max > 0 ? std::min(max, g->num_configs) : g->num_configs;
    out.nodes = g->graph.num_nodes;
    out.truth = tgraph::TileTargets(*g);
    out.truth.resize(static_cast<size_t>(out.count));
    r = client.RankTile(g->graph, g->config_feat.data(), out.count, o);
  }
  if (!r.ok()) return r.status();
  out.r = std::move(*r);
  return out;
}

// The file's rows are what was measured: all excluded, the fastest --start_best the
// search starts from, and their runtimes sent when the file has every one (a test
// split's are hidden: zeros).
void MeasuredRows(const tgraph::LayoutGraph& g, tgraph::SearchConfigsOptions* o) {
  o->exclude = g.config_feat;
  if (g.num_configs > 0 &&
      std::all_of(g.config_runtime.begin(), g.config_runtime.end(), [](int64_t t) { return t > 0; }))
    o->exclude_runtimes_ns = g.config_runtime;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < g.num_configs; ++i)
    if (g.config_runtime[static_cast<size_t>(i)] > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return g.config_runtime[static_cast<size_t>(a)] != g.config_runtime[static_cast<size_t>(b)]
               ? g.config_runtime[static_cast<size_t>(a)] < g.config_runtime[static_cast<size_t>(b)]
               : a < b;
  });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_start_best)))));
  for (int64_t i : order) o->start.insert(o->start.end(), g.config(i), g.config(i) + g.num_config_nodes() * tgraph::kConfigFeatDim);
}

// Proposes what to measure next for the --npz graph.
// A tile kernel's search: its graph (--hlo, registered as a kernel: no configurable
// nodes; or a tile --npz, whose rows count as measured), every legal configuration of the
// model's tile space scored, the best named by their parameters.
int SearchTiles(tgraph::RankerClient& client, const tgraph::Collection& c) {
  const std::string hlo = absl::GetFlag(FLAGS_hlo), path = hlo.empty() ? absl::GetFlag(FLAGS_npz) : hlo;
  tgraph::NodeGraph graph;
  tgraph::SearchConfigsOptions o;
  if (!hlo.empty()) {
    absl::StatusOr<tgraph::HloProgram> program = ReadProgram(hlo);
    if (!program.ok()) return Fail(program.status());
    graph = std::move(program->graph);
  } else {
    absl::StatusOr<tgraph::TileGraph> g = tgraph::LoadTileGraph(path);
    if (!g.ok()) return Fail(g.status());
    graph = std::move(g->graph);
    o.exclude_tiles = std::move(g->config_feat);
    // Their runtimes when the file has every one (a test split's are hidden: zeros).
    if (!g->config_runtime.empty() &&
        std::all_of(g->config_runtime.begin(), g->config_runtime.end(), [](auto t) { return t > 0; }))
      o.exclude_runtimes_ns.assign(g->config_runtime.begin(), g->config_runtime.end());
  }
  o.collection = c.name();
  o.model_version = absl::GetFlag(FLAGS_model_version);
  o.results = absl::GetFlag(FLAGS_results);
  absl::StatusOr<tgraph::Proposals> p = client.Search(graph, {}, o);
  if (!p.ok()) return Fail(p.status());
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = {{"graph", path}, {"collection", c.name()}, {"model_version", p->model_version},
                        {"evaluations", p->evaluations}, {"reference_configs", p->reference_configs},
                        {"total_ms", p->server_total_ms}, {"configs", p->tile_names}, {"scores", p->scores},
                        {"correction_measurements", p->correction_measurements},
                        {"spread", p->spread}};
    return PrintJson(j);
  }
  std::printf("%s: %lld of %lld legal configurations proposed by %s version %lld (%zu measured excluded%s), %.1f ms\n",
              path.c_str(), static_cast<long long>(p->count), static_cast<long long>(p->evaluations),
              c.name().c_str(), static_cast<long long>(p->model_version),
              o.exclude_tiles.size() / tgraph::kTileConfigDim,
              p->correction_measurements > 0
                  ? absl::StrCat("; the prior follows ", p->correction_measurements, " measured runtimes").c_str()
                  : "",
              p->server_total_ms);
  std::printf("%6s  %-20s %12s %10s\n", "rank", "BLOCK_MxNxK warps stages", "score", "spread");
  for (int64_t i = 0; i < p->count; ++i)
    std::printf("%6lld  %-20s %12.4f %10.4f\n", static_cast<long long>(i + 1), p->tile_names[i].c_str(), p->scores[i],
                p->spread[i]);
  return tgraph::kExitOk;
}

int Search(tgraph::RankerClient& client) {
  absl::StatusOr<tgraph::Collection> c = CollectionFlag();
  if (!c.ok()) return Fail(c.status());
  if (c->kind == tgraph::CollectionKind::kTile) {
    if (absl::GetFlag(FLAGS_hlo).empty() == absl::GetFlag(FLAGS_npz).empty())
      return Fail(UsageError("search needs one kernel: --hlo MODULE (one matrix product) or --npz KERNEL.npz (a tile "
                             "file; its rows count as measured)"));
    return SearchTiles(client, *c);
  }
  const std::string hlo = absl::GetFlag(FLAGS_hlo), path = hlo.empty() ? absl::GetFlag(FLAGS_npz) : hlo;
  if (path.empty() || (!hlo.empty() && !absl::GetFlag(FLAGS_npz).empty()))
    return Fail(UsageError("search needs one graph: --npz GRAPH.npz (a layout graph; its rows count as measured) "
                           "or --hlo MODULE (text, .hlo.pb; nothing measured yet)"));
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty())
    if (absl::Status s = tgraph::CheckOutputFile(out, "--out", absl::GetFlag(FLAGS_force)); !s.ok()) return Fail(s);
  absl::StatusOr<tgraph::HloProgram> program;
  absl::StatusOr<tgraph::LayoutGraph> g = absl::UnknownError("");
  if (!hlo.empty()) {
    program = ReadProgram(hlo);
    if (!program.ok()) return Fail(program.status());
    g = tgraph::LayoutGraph();
    g->graph = program->graph;
    g->node_config_ids = program->node_config_ids;
  } else {
    g = tgraph::LoadLayoutGraph(path, /*allow_no_configs=*/true);
  }
  if (!g.ok()) return Fail(g.status());
  tgraph::SearchConfigsOptions o;
  o.collection = c->name();
  o.model_version = absl::GetFlag(FLAGS_model_version);
  o.results = absl::GetFlag(FLAGS_results);
  o.max_evaluations = absl::GetFlag(FLAGS_max_evaluations);
  o.max_changed_groups = absl::GetFlag(FLAGS_max_changed_groups);
  o.seed = absl::GetFlag(FLAGS_seed);
  MeasuredRows(*g, &o);
  absl::StatusOr<tgraph::Proposals> p =
      program.ok() ? client.Search(*program, o) : client.Search(g->graph, g->node_config_ids, o);
  if (!p.ok()) return Fail(p.status());
  const int64_t nc = g->num_config_nodes();
  if (!absl::GetFlag(FLAGS_out).empty()) {
    const tgraph::NpyArray rows = tgraph::NpyArray::From<int8_t>({p->count, nc, tgraph::kConfigFeatDim}, p->rows);
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_out), tgraph::SerializeNpy(rows)); !s.ok())
      return Fail(s);
  }
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = {{"graph", path}, {"collection", c->name()}, {"model_version", p->model_version},
                        {"evaluations", p->evaluations}, {"generations", p->generations},
                        {"reference_configs", p->reference_configs}, {"total_ms", p->server_total_ms},
                        {"correction_measurements", p->correction_measurements},
                        {"correction_weight", p->correction_weight},
                        {"max_changed_groups", p->max_changed_groups}, {"num_variation", p->variation},
                        {"scores", p->scores}, {"spread", p->spread}, {"configs", nlohmann::json::array()}};
    const size_t row = static_cast<size_t>(nc) * tgraph::kConfigFeatDim;
    for (int64_t i = 0; i < p->count; ++i)
      j["configs"].push_back(std::vector<int>(p->rows.begin() + i * row, p->rows.begin() + (i + 1) * row));
    return PrintJson(j);
  }
  std::printf("%s: %lld configurations proposed by %s version %lld: %lld evaluated in %lld generations against a "
              "reference of %lld, %.0f ms; %zu measured rows excluded, %zu started from, %lld runtimes correcting "
              "the scores (weight %.2f); %s\n",
              path.c_str(), static_cast<long long>(p->count), c->name().c_str(),
              static_cast<long long>(p->model_version), static_cast<long long>(p->evaluations),
              static_cast<long long>(p->generations), static_cast<long long>(p->reference_configs),
              p->server_total_ms, o.exclude.size() / std::max<size_t>(1, nc * tgraph::kConfigFeatDim),
              o.start.size() / std::max<size_t>(1, nc * tgraph::kConfigFeatDim),
              static_cast<long long>(p->correction_measurements), p->correction_weight,
              p->max_changed_groups > 0
                  ? absl::StrCat("at most ", p->max_changed_groups, " groups changed from the default or a start row")
                        .c_str()
                  : "anywhere in the space");
  std::printf("%6s %12s %10s\n", "rank", "score", "spread");
  for (int64_t i = 0; i < p->count; ++i)
    std::printf("%6lld %12.4f %10.4f\n", static_cast<long long>(i + 1), p->scores[i], p->spread[i]);
  if (p->variation > 0)
    std::printf("the last %lld are random variation of the fastest measured rows, not the model's picks: the last 30 "
                "measurements did not improve on the best\n",
                static_cast<long long>(p->variation));
  if (!absl::GetFlag(FLAGS_out).empty()) std::printf("rows written to %s\n", absl::GetFlag(FLAGS_out).c_str());
  return tgraph::kExitOk;
}

int PrintRankedJson(const Ranked& x, const std::string& collection, int64_t k, bool known) {
  const tgraph::Ranking& r = x.r;
  nlohmann::json j = {{"graph", x.path}, {"nodes", x.nodes}, {"configs", x.count}, {"collection", collection},
                      {"model_version", r.model_version}, {"registrations", r.registrations},
                      {"reference_configs", r.reference_configs},
                      {"timing", {{"total_ms", r.server_total_ms}, {"queue_ms", r.queue_ms},
                                  {"graph_prepare_ms", r.graph_prepare_ms}, {"inference_ms", r.inference_ms},
                                  {"cache_hit", r.cache_hit}, {"rescored", r.rescored}}},
                      {"top", nlohmann::json::array()}, {"scores", r.scores}, {"spread", r.spread}};
  for (int64_t i = 0; i < k; ++i) {
    const int32_t idx = r.order[i];
    nlohmann::json row = {{"rank", i + 1}, {"config", idx}, {"score", r.scores[idx]}, {"spread", r.spread[idx]}};
    if (known) row["runtime"] = x.truth[idx];
    j["top"].push_back(row);
  }
  if (known) {
    const std::vector<double> scores(r.scores.begin(), r.scores.end());
    j["against_runtimes"] = {{"kendall_tau", tgraph::KendallTau(scores, x.truth)},
                             {"opa", tgraph::OrderedPairAccuracy(scores, x.truth)},
                             {"top1_error", tgraph::TopKError(scores, x.truth, 1)},
                             {"topk_error", tgraph::TopKError(scores, x.truth, k)}};
  }
  return PrintJson(j);
}

int PrintRankedText(const Ranked& x, const std::string& collection, int64_t k, bool known, bool cascade) {
  const tgraph::Ranking& r = x.r;
  std::printf("%s: %lld nodes, %lld configurations ranked by %s version %lld against a reference of %lld\n",
              x.path.c_str(), static_cast<long long>(x.nodes), static_cast<long long>(x.count), collection.c_str(),
              static_cast<long long>(r.model_version), static_cast<long long>(r.reference_configs));
  std::printf("server time %.1f ms (queue %.1f, graph preparation %.1f%s, inference %.1f)%s\n", r.server_total_ms,
              r.queue_ms, r.graph_prepare_ms, r.cache_hit ? ", cache hit" : "", r.inference_ms,
              r.registrations ? "; the graph was registered first" : "");
  if (cascade)
    std::printf("cascade: %lld of %lld configurations scored by every fold\n", static_cast<long long>(r.rescored),
                static_cast<long long>(x.count));
  std::printf("%6s %8s %12s %10s%s\n", "rank", "config", "score", "spread", known ? "   runtime" : "");
  for (int64_t i = 0; i < k; ++i) {
    const int32_t idx = r.order[i];
    std::printf("%6lld %8d %12.4f %10.4f", static_cast<long long>(i + 1), idx, r.scores[idx], r.spread[idx]);
    if (known) std::printf("   %.6g", x.truth[idx]);
    std::printf("\n");
  }
  if (known) {
    const std::vector<double> scores(r.scores.begin(), r.scores.end());
    std::printf("against the file's runtimes: Kendall tau %.4f, OPA %.4f, top-1 error %.4f, top-%lld error %.4f\n",
                tgraph::KendallTau(scores, x.truth), tgraph::OrderedPairAccuracy(scores, x.truth),
                tgraph::TopKError(scores, x.truth, 1), static_cast<long long>(k), tgraph::TopKError(scores, x.truth, k));
  }
  return tgraph::kExitOk;
}

int Rank(tgraph::RankerClient& client) {
  absl::StatusOr<tgraph::Collection> c = CollectionFlag();
  if (!c.ok()) return Fail(c.status());
  const std::string hlo = absl::GetFlag(FLAGS_hlo), configs = absl::GetFlag(FLAGS_configs);
  if (absl::GetFlag(FLAGS_npz).empty() == hlo.empty()) return Fail(UsageError("give one graph: --npz FILE or --hlo FILE"));
  if (!hlo.empty() && configs.empty())
    return Fail(UsageError("--hlo needs --configs ROWS.npy|.npz: (c, nc, 18) layout rows for the module's "
                           "configurable nodes (tgraph-client register --hlo lists them)"));
  if ((!hlo.empty() || !configs.empty()) && c->kind != tgraph::CollectionKind::kLayout)
    return Fail(UsageError("--hlo and --configs rank layout configurations: give a layout collection"));
  tgraph::RankOptions o;
  o.collection = c->name();
  o.model_version = absl::GetFlag(FLAGS_model_version);
  o.cascade = absl::GetFlag(FLAGS_cascade);
  if (o.cascade) o.top_k = absl::GetFlag(FLAGS_top_k);
  absl::StatusOr<Ranked> x = hlo.empty() ? RankFile(client, c->kind, o) : RankHlo(client, o);
  if (!x.ok()) return Fail(x.status());
  const bool known = *std::max_element(x->truth.begin(), x->truth.end()) > 0;
  const int64_t k = std::min<int64_t>(absl::GetFlag(FLAGS_top_k), x->count);
  if (absl::GetFlag(FLAGS_json)) return PrintRankedJson(*x, c->name(), k, known);
  return PrintRankedText(*x, c->name(), k, known, o.cascade);
}

// Registers a graph (--npz or --hlo) and lists its configurable nodes in
// configuration-row order: what a client needs to build layout rows.
int Register(tgraph::RankerClient& client) {
  const std::string hlo = absl::GetFlag(FLAGS_hlo), path = absl::GetFlag(FLAGS_npz);
  if (path.empty() == hlo.empty()) return Fail(UsageError("give one graph: --npz FILE or --hlo FILE"));
  absl::StatusOr<tgraph::RegisteredGraph> reg;
  if (!hlo.empty()) {
    absl::StatusOr<tgraph::HloProgram> p = tgraph::HloProgram::FromFile(hlo);
    if (!p.ok()) return Fail(p.status());
    reg = client.Register(*p);
  } else {
    absl::StatusOr<tgraph::LayoutGraph> g = tgraph::LoadLayoutGraph(path, /*allow_no_configs=*/true);
    if (g.ok()) {
      reg = client.Register(g->graph, g->node_config_ids);
    } else {
      absl::StatusOr<tgraph::TileGraph> t = tgraph::LoadTileGraph(path);
      if (!t.ok()) return Fail(g.status());
      reg = client.Register(t->graph, {});
    }
  }
  if (!reg.ok()) return Fail(reg.status());
  for (const std::string& w : reg->warnings) std::fprintf(stderr, "tgraph-client: warning: %s\n", w.c_str());
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = {{"graph_hash", reg->graph_hash}, {"nodes", reg->num_nodes}, {"pruned_nodes", reg->pruned_nodes},
                        {"already_registered", reg->already_registered}, {"warnings", reg->warnings},
                        {"configurable_nodes", nlohmann::json::array()}};
    for (const tgraph::ConfigurableNode& n : reg->configurable_nodes) {
      nlohmann::json groups = nlohmann::json::array();
      for (size_t g = 0; g < n.groups.size(); ++g) {
        nlohmann::json candidates = nlohmann::json::array();
        for (const tgraph::GroupLayout& l : n.groups[g].candidates)
          candidates.push_back(std::vector<int>(l.begin(), l.end()));
        groups.push_back({{"group", tgraph::LayoutGroupName(static_cast<int>(g))}, {"rank", n.groups[g].rank},
                          {"candidates", candidates}});
      }
      j["configurable_nodes"].push_back({{"node", n.node}, {"opcode", n.opcode}, {"instruction", n.instruction},
                                         {"computation", n.computation}, {"groups", groups}});
    }
    return PrintJson(j);
  }
  std::printf("graph %s: %lld nodes, %lld after pruning, %zu configurable%s\n", reg->graph_hash.c_str(),
              static_cast<long long>(reg->num_nodes), static_cast<long long>(reg->pruned_nodes),
              reg->configurable_nodes.size(), reg->already_registered ? " (already registered)" : "");
  // ranks: of the output, input and kernel tensors (a legal group lists distinct dims
  // below the rank); layouts: how many each group's candidates hold (--json lists them).
  if (!reg->configurable_nodes.empty())
    std::printf("%5s %7s  %-12s %-7s %-9s %-32s %s\n", "row", "node", "opcode", "ranks", "layouts", "instruction",
                "computation");
  for (size_t i = 0; i < reg->configurable_nodes.size(); ++i) {
    const tgraph::ConfigurableNode& n = reg->configurable_nodes[i];
    std::string ranks = "-", layouts = "-";
    if (n.groups.size() == 3) {
      ranks = absl::StrCat(n.groups[0].rank, "/", n.groups[1].rank, "/", n.groups[2].rank);
      layouts = absl::StrCat(n.groups[0].candidates.size(), "/", n.groups[1].candidates.size(), "/",
                             n.groups[2].candidates.size());
    }
    std::printf("%5zu %7lld  %-12s %-7s %-9s %-32s %s\n", i, static_cast<long long>(n.node), n.opcode.c_str(),
                ranks.c_str(), layouts.c_str(), n.instruction.empty() ? "-" : n.instruction.c_str(),
                n.computation.empty() ? "-" : n.computation.c_str());
  }
  return tgraph::kExitOk;
}

// The evaluation of tgraph-eval, through the server: same files, same configurations in
// the same order, same metrics, so the same numbers for the same model version.
int Eval(tgraph::RankerClient& client) {
  absl::StatusOr<tgraph::Collection> c = CollectionFlag();
  if (!c.ok()) return Fail(c.status());
  if (absl::GetFlag(FLAGS_data).empty()) return Fail(UsageError("--data ROOT is required"));
  absl::StatusOr<std::vector<tgraph::GraphFile>> files =
      tgraph::ListSplit(absl::GetFlag(FLAGS_data), *c, absl::GetFlag(FLAGS_split));
  if (!files.ok()) return Fail(files.status());
  tgraph::RankOptions o;
  o.collection = c->name();
  o.model_version = absl::GetFlag(FLAGS_model_version);
  tgraph::EvalReport report;
  report.collection = c->name();
  report.split = absl::GetFlag(FLAGS_split);
  report.tile = c->kind == tgraph::CollectionKind::kTile;
  int64_t version = 0;
  for (const tgraph::GraphFile& f : *files) {
    tgraph::NodeGraph graph;
    std::vector<int64_t> ids;
    std::vector<double> target;
    std::vector<int8_t> layout;
    std::vector<float> tile;
    std::vector<int64_t> file_rows;  // the file's configuration index of each ranked row
    int64_t count = 0;
    if (!report.tile) {
      absl::StatusOr<tgraph::LayoutGraph> g = tgraph::LoadLayoutGraph(f.path);
      if (!g.ok()) return Fail(g.status());
      std::vector<double> runtime(g->config_runtime.begin(), g->config_runtime.end());
      std::vector<int64_t> rows(static_cast<size_t>(g->num_configs));
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
      if (absl::GetFlag(FLAGS_official_subset)) rows = tgraph::OfficialEvalSubset(runtime);
      const size_t row = static_cast<size_t>(g->num_config_nodes()) * tgraph::kConfigFeatDim;
      for (int64_t r : rows) {
        layout.insert(layout.end(), g->config(r), g->config(r) + row);
        target.push_back(runtime[r]);
      }
      file_rows = rows;
      count = static_cast<int64_t>(rows.size());
      graph = std::move(g->graph);
      ids = std::move(g->node_config_ids);
    } else {
      absl::StatusOr<tgraph::TileGraph> g = tgraph::LoadTileGraph(f.path);
      if (!g.ok()) return Fail(g.status());
      target = tgraph::TileTargets(*g);
      tile = std::move(g->config_feat);
      count = g->num_configs;
      graph = std::move(g->graph);
    }
    absl::StatusOr<tgraph::RegisteredGraph> reg = client.Register(graph, ids);
    if (!reg.ok()) return Fail(reg.status());
    absl::StatusOr<tgraph::Ranking> r = report.tile ? client.RankTile(graph, tile.data(), count, o)
                                                    : client.RankLayout(graph, ids, layout.data(), count, o);
    if (!r.ok()) return Fail(absl::Status(r.status().code(), f.path + ": " + std::string(r.status().message())));
    version = r->model_version;
    report.graphs.push_back(tgraph::EvaluateScores(f.name, graph.num_nodes, reg->pruned_nodes,
                                                   std::vector<double>(r->scores.begin(), r->scores.end()), target,
                                                   report.tile, file_rows));
    if (!absl::GetFlag(FLAGS_json))
      std::fprintf(stderr, "evaluated %zu/%zu: %s\n", report.graphs.size(), files->size(), f.name.c_str());
  }
  report.ComputeMean();
  if (!absl::GetFlag(FLAGS_rankings).empty())
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_rankings), report.RankingsCsv()); !s.ok())
      return Fail(s);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", report.Json().c_str());
  } else {
    std::printf("%s %s through %s, model version %lld\n%s", c->name().c_str(), report.split.c_str(),
                absl::GetFlag(FLAGS_server).c_str(), static_cast<long long>(version), report.Table().c_str());
  }
  return tgraph::kExitOk;
}

int PrintReceipt(const std::string& graph, const tgraph::MeasurementReceipt& r) {
  if (absl::GetFlag(FLAGS_json))
    return PrintJson({{"graph", graph}, {"stored", r.stored}, {"shard", r.shard}, {"registrations", r.registrations}});
  std::printf("%s: %lld measurements stored as %s\n", graph.c_str(), static_cast<long long>(r.stored), r.shard.c_str());
  return tgraph::kExitOk;
}

// Reports an HLO module's measured rows (--configs) with their runtimes (--runtimes).
int ReportHlo(tgraph::RankerClient& client, const tgraph::Collection& c) {
  const std::string hlo = absl::GetFlag(FLAGS_hlo);
  if (absl::GetFlag(FLAGS_configs).empty() || absl::GetFlag(FLAGS_runtimes).empty())
    return Fail(UsageError("report --hlo needs --configs ROWS.npy (the measured layout rows, (c, nc, 18)) and "
                           "--runtimes FILE (their runtimes in ns, in row order)"));
  absl::StatusOr<tgraph::HloProgram> p = ReadProgram(hlo);
  if (!p.ok()) return Fail(p.status());
  absl::StatusOr<tgraph::LayoutConfigRows> rows = ConfigsFlag(static_cast<int64_t>(p->node_config_ids.size()));
  if (!rows.ok()) return Fail(rows.status());
  absl::StatusOr<std::vector<int64_t>> runtimes = tgraph::LoadRuntimes(absl::GetFlag(FLAGS_runtimes));
  if (!runtimes.ok()) return Fail(runtimes.status());
  if (static_cast<int64_t>(runtimes->size()) != rows->count)
    return Fail(absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_runtimes), " has ", runtimes->size(),
                                                        " runtimes for the ", rows->count, " rows of ",
                                                        absl::GetFlag(FLAGS_configs), ": one per row, in order")));
  absl::StatusOr<tgraph::MeasurementReceipt> r = client.ReportMeasurements(
      *p, c.name(), rows->values.data(), runtimes->data(), rows->count, absl::GetFlag(FLAGS_source));
  if (!r.ok()) return Fail(r.status());
  return PrintReceipt(hlo, *r);
}

// Reports the --npz file's configurations (the first --max_configs) with their
// runtimes to the server's measurement store, or an HLO module's measured rows.
int Report(tgraph::RankerClient& client) {
  absl::StatusOr<tgraph::Collection> c = CollectionFlag();
  if (!c.ok()) return Fail(c.status());
  if (c->kind != tgraph::CollectionKind::kLayout)
    return Fail(UsageError("report stores layout measurements: give a layout collection"));
  const std::string path = absl::GetFlag(FLAGS_npz);
  if (path.empty() == absl::GetFlag(FLAGS_hlo).empty())
    return Fail(UsageError("report needs one graph: --npz FILE with measured runtimes, or --hlo MODULE with "
                           "--configs ROWS.npy and --runtimes FILE"));
  if (path.empty()) return ReportHlo(client, *c);
  absl::StatusOr<tgraph::LayoutGraph> g = tgraph::LoadLayoutGraph(path);
  if (!g.ok()) return Fail(g.status());
  const int64_t max = absl::GetFlag(FLAGS_max_configs);
  const int64_t count = max > 0 ? std::min(max, g->num_configs) : g->num_configs;
  for (int64_t i = 0; i < count; ++i)
    if (g->config_runtime[i] <= 0)
      return Fail(absl::InvalidArgumentError(absl::StrCat(path, ": config_runtime[", i, "] is ", g->config_runtime[i],
                                                          "; report needs measured runtimes (test files hide them)")));
  absl::StatusOr<tgraph::MeasurementReceipt> r =
      client.ReportMeasurements(g->graph, g->node_config_ids, c->name(), g->config_feat.data(),
                                g->config_runtime.data(), count, absl::GetFlag(FLAGS_source));
  if (!r.ok()) return Fail(r.status());
  return PrintReceipt(path, *r);
}

int Replay(const tgraph::ClientOptions& co) {
  if (absl::GetFlag(FLAGS_json)) return Fail(UsageError("replay prints a table; --csv FILE writes its curves"));
  tgraph::ReplayOptions ro;
  ro.client = co;
  ro.collection = absl::GetFlag(FLAGS_collection);
  ro.npz = absl::GetFlag(FLAGS_npz);
  ro.rounds = absl::GetFlag(FLAGS_rounds);
  ro.per_round = absl::GetFlag(FLAGS_per_round);
  ro.random_orders = absl::GetFlag(FLAGS_random_orders);
  ro.seed = absl::GetFlag(FLAGS_seed);
  ro.finetune_command = absl::GetFlag(FLAGS_finetune_command);
  ro.search_evaluations = absl::GetFlag(FLAGS_search_evaluations);
  ro.max_changed_groups = absl::GetFlag(FLAGS_max_changed_groups);
  absl::StatusOr<tgraph::ReplayReport> r = tgraph::RunReplay(ro);
  if (!r.ok()) return Fail(r.status());
  std::printf("%s", r->Table().c_str());
  if (!absl::GetFlag(FLAGS_csv).empty())
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_csv), r->Csv()); !s.ok()) return Fail(s);
  return tgraph::kExitOk;
}

int Bench(const tgraph::ClientOptions& co) {
  tgraph::BenchOptions b;
  b.client = co;
  b.collection = absl::GetFlag(FLAGS_collection);
  b.data_root = absl::GetFlag(FLAGS_data);
  b.graphs = absl::GetFlag(FLAGS_graphs);
  b.concurrency = absl::GetFlag(FLAGS_concurrency);
  b.requests = absl::GetFlag(FLAGS_requests);
  b.duration_s = absl::GetFlag(FLAGS_duration_s);
  b.rate = absl::GetFlag(FLAGS_rate);
  b.configs = absl::GetFlag(FLAGS_configs_per_request);
  b.allow_remote = absl::GetFlag(FLAGS_allow_remote);
  b.progress = !absl::GetFlag(FLAGS_json);
  absl::StatusOr<tgraph::BenchReport> r = tgraph::RunBench(b);
  if (!r.ok()) return Fail(r.status());
  std::printf("%s", absl::GetFlag(FLAGS_json) ? (r->Json() + "\n").c_str() : r->Text().c_str());
  return r->errors.empty() ? tgraph::kExitOk : tgraph::kExitFailure;
}

// Whether flag `name` holds a value other than its default.
bool FlagChanged(absl::string_view name) {
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
  return f != nullptr && f->CurrentValue() != f->DefaultValue();
}

// A probe answers at once: unless --retry_budget_s or --timeout_s are set to other
// values, no retries (nothing listening is UNAVAILABLE now, not after the 30 s budget
// other commands ride restarts with) and a 5 s deadline. The Docker HEALTHCHECK and the
// TLS exec probes use it.
int Health(tgraph::ClientOptions co) {
  if (!FlagChanged("retry_budget_s")) co.retry_budget_s = 0;
  if (!FlagChanged("timeout_s")) co.timeout_s = std::min(co.timeout_s, 5.0);
  tgraph::RankerClient client(co);
  absl::StatusOr<std::string> h = client.Health(absl::GetFlag(FLAGS_service));
  if (!h.ok()) return Fail(h.status());
  if (absl::GetFlag(FLAGS_json)) PrintJson({{"service", absl::GetFlag(FLAGS_service)}, {"status", *h}});
  else std::printf("%s\n", h->c_str());
  return *h == "SERVING" ? tgraph::kExitOk : tgraph::kExitFailure;
}

int Models(tgraph::RankerClient& client) {
  absl::StatusOr<std::vector<tgraph::ModelInfo>> m = client.ListModels();
  if (!m.ok()) return Fail(m.status());
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = nlohmann::json::array();
    for (const tgraph::ModelInfo& info : *m) {
      j.push_back({{"collection", info.collection}, {"version", info.version},
                   {"loaded_versions", info.loaded_versions}, {"architecture", info.architecture},
                   {"hidden", info.hidden}, {"folds", info.folds}, {"mean_valid_score", info.mean_valid_score},
                   {"created", info.created}, {"batch_size", info.batch_size},
                   {"reference_configs", info.reference_configs},
                   {"provenance",
                    {{"data", info.data}, {"dataset", info.dataset}, {"data_fingerprint", info.data_fingerprint},
                     {"graphs", info.graphs}, {"configurations", info.configurations}, {"finetunes", info.finetunes},
                     {"finetune_graphs", info.finetune_graphs}, {"finetune_measurements", info.finetune_measurements},
                     {"synthetic_only", info.synthetic_only}, {"summary", info.provenance}}}});
      if (!info.tile_space.empty()) j.back()["tile_space"] = nlohmann::json::parse(info.tile_space, nullptr, false);
      if (info.tile_prior)
        j.back()["tile_prior"] = {{"weight", info.tile_prior->weight},
                                  {"network_share", info.tile_prior->network_share},
                                  {"problems", info.tile_prior->problems}};
    }
    return PrintJson(j);
  }
  std::printf("%-20s %8s %10s %-20s %7s %6s %12s  %s\n", "collection", "version", "loaded", "architecture", "hidden",
              "folds", "valid score", "created");
  for (const tgraph::ModelInfo& info : *m) {
    std::string loaded;
    for (int64_t v : info.loaded_versions) loaded += (loaded.empty() ? "" : ",") + std::to_string(v);
    std::printf("%-20s %8lld %10s %-20s %7lld %6lld %12.4f  %s\n", info.collection.c_str(),
                static_cast<long long>(info.version), loaded.c_str(), info.architecture.c_str(),
                static_cast<long long>(info.hidden), static_cast<long long>(info.folds), info.mean_valid_score,
                info.created.c_str());
    std::printf("  trained on %s%s\n", info.provenance.c_str(),
                info.synthetic_only ? "\n  WARNING: synthetic data only: rankings follow the generator's cost model, "
                                      "not real hardware"
                                    : "");
    if (!info.tile_space.empty()) {
      absl::StatusOr<tgraph::TileSpace> space = tgraph::TileSpace::FromJson(info.tile_space, "tile_space");
      std::printf("  tile space: %s\n", space.ok() ? space->Summary().c_str() : space.status().ToString().c_str());
    }
    if (info.tile_prior) std::printf("  scores: %s\n", info.tile_prior->Summary().c_str());
  }
  return tgraph::kExitOk;
}

// The connection flags: the server, deadlines, retries and TLS.
absl::StatusOr<tgraph::ClientOptions> ClientOptionsFromFlags() {
  tgraph::ClientOptions co;
  co.target = absl::GetFlag(FLAGS_server);
  co.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  co.retry_budget_s = absl::GetFlag(FLAGS_retry_budget_s);
  if (absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty() || !absl::GetFlag(FLAGS_tls_cert).empty() ||
      !absl::GetFlag(FLAGS_tls_key).empty() || !absl::GetFlag(FLAGS_tls_server_name).empty()) {
    absl::StatusOr<tgraph::ClientTlsOptions> tls =
        tgraph::TlsFromFiles(absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                             absl::GetFlag(FLAGS_tls_server_name));
    if (!tls.ok()) return UsageError(tls.status().message());
    co.tls = std::move(*tls);
  }
  return co;
}

int RunCommand(const std::string& cmd) {
  absl::StatusOr<tgraph::ClientOptions> co = ClientOptionsFromFlags();
  if (!co.ok()) return Fail(co.status());
  tgraph::RankerClient client(*co);
  if (cmd == "rank") return Rank(client);
  if (cmd == "register") return Register(client);
  if (cmd == "eval") return Eval(client);
  if (cmd == "report") return Report(client);
  if (cmd == "replay") return Replay(*co);
  if (cmd == "bench") return Bench(*co);
  if (cmd == "health") return Health(*co);
  if (cmd == "models") return Models(client);
  if (cmd == "search") return Search(client);
  return Fail(UsageError(absl::StrCat("unknown command '", cmd,
                                      "'; expected rank, register, report, replay, eval, bench, search, health or models")));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = tgraph::ParseToolCommandLine(argc, argv,
      "Client of tgraph-server.\n"
      "  tgraph-client rank --server H:P --collection C --npz FILE [--top_k K] [--max_configs N]\n"
      "  tgraph-client rank --server H:P --collection C (--hlo MODULE.hlo.pb | --npz GRAPH.npz) --configs ROWS.npy\n"
      "  tgraph-client register --server H:P (--hlo MODULE.hlo.pb | --npz GRAPH.npz)\n"
      "  tgraph-client eval --server H:P --collection C --data ROOT --split valid [--official_subset] [--json]\n"
      "  tgraph-client bench --server H:P --collection C --data ROOT [--concurrency N] [--requests N] [--rate R]\n"
      "  tgraph-client report --server H:P --collection C --npz FILE [--max_configs N] [--source TEXT]\n"
      "  tgraph-client report --server H:P --collection C --hlo MODULE --configs ROWS.npy --runtimes FILE [--source TEXT]\n"
      "  tgraph-client replay --server H:P --collection C --npz MEASURED.npz [--rounds R] [--per_round K] [--csv OUT]\n"
      "                       [--finetune_command 'tgraph-train finetune ...'] [--search_evaluations N]\n"
      "                       [--max_changed_groups G]\n"
      "  tgraph-client search --server H:P --collection C (--npz MEASURED.npz | --hlo MODULE) [--results 10]\n"
      "                       [--max_evaluations N] [--max_changed_groups G]\n"
      "                       [--seed S] [--out PROPOSED.npy]\n"
      "  tgraph-client health --server H:P [--service liveness]\n"
      "  tgraph-client models --server H:P\n"
      "--json prints JSON (rank, register, report, eval, bench, health, models).\n"
      "--tls, --tls_ca CA.pem [--tls_cert C.pem --tls_key K.pem] connect over TLS (mutual TLS with a certificate).");
  if (args.size() != 2) return Fail(UsageError("give one command: rank, register, report, replay, eval, bench, search, health or models"));
  return RunCommand(args[1]);
}
