// tgraph-client register and eval: a graph registered and its configurable nodes listed; a split
// evaluated through the server as tgraph-eval evaluates it.
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
#include "model/core/eval_report.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/rank_metrics.h"
#include "model/tools/tool.h"

namespace tgraph::cli {

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

}  // namespace tgraph::cli
