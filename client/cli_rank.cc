// tgraph-client rank: a graph's configurations ranked by the server (--npz, or --hlo with --configs).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "model/core/rank_metrics.h"
#include "model/tools/tool.h"

namespace tgraph::cli {

namespace {

// A ranking and what it is printed with: the graph's runtimes where the file has them.
struct Ranked {
  tgraph::Ranking r;
  std::vector<double> truth;  // per configuration; all 0 when unknown
  int64_t count = 0, nodes = 0;
  std::string path;
};

// --reference's rows for a graph of nc configurable nodes into `o` (none: unchanged).
absl::Status ReferenceFlag(int64_t nc, tgraph::RankOptions* o) {
  const std::string path = absl::GetFlag(FLAGS_reference);
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<tgraph::LayoutConfigRows> rows = tgraph::LoadLayoutConfigRows(path, nc);
  if (!rows.ok()) return rows.status();
  o->reference_count = rows->count;
  o->reference_layout = std::move(rows->values);
  return absl::OkStatus();
}

absl::StatusOr<Ranked> RankHlo(tgraph::RankerClient& client, tgraph::RankOptions o) {
  Ranked out;
  out.path = absl::GetFlag(FLAGS_hlo);
  absl::StatusOr<tgraph::HloProgram> p = ReadProgram(out.path);
  if (!p.ok()) return p.status();
  absl::StatusOr<tgraph::LayoutConfigRows> rows = ConfigsFlag(static_cast<int64_t>(p->node_config_ids.size()));
  if (!rows.ok()) return rows.status();
  if (absl::Status s = ReferenceFlag(static_cast<int64_t>(p->node_config_ids.size()), &o); !s.ok()) return s;
  out.count = rows->count;
  out.nodes = p->graph.num_nodes;
  out.truth.assign(static_cast<size_t>(out.count), 0.0);
  absl::StatusOr<tgraph::Ranking> r = client.RankLayout(*p, rows->values.data(), out.count, o);
  if (!r.ok()) return r.status();
  out.r = std::move(*r);
  return out;
}

absl::StatusOr<Ranked> RankFile(tgraph::RankerClient& client, tgraph::CollectionKind kind, tgraph::RankOptions o) {
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
    if (absl::Status s = ReferenceFlag(g->num_config_nodes(), &o); !s.ok()) return s;
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

}  // namespace

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
  if ((!hlo.empty() || !configs.empty() || !absl::GetFlag(FLAGS_reference).empty()) &&
      c->kind != tgraph::CollectionKind::kLayout)
    return Fail(UsageError("--hlo, --configs and --reference rank layout configurations: give a layout collection"));
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

}  // namespace tgraph::cli
