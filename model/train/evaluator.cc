#include "model/train/evaluator.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "model/nn/features.h"
#include "model/core/rank_metrics.h"
#include "model/train/train_step.h"
#include "model/train/train_data.h"

namespace tgraph {

absl::StatusOr<EvalReport> EvaluateSplit(const LoadedModel& model, const std::string& root, const Collection& c,
                                         const std::string& split, const EvalOptions& o) {
  if (model.manifest.spec.kind != c.kind)
    return absl::InvalidArgumentError(absl::StrCat("the model is for ", model.manifest.collection,
                                                   ", which cannot score collection ", c.name()));
  absl::StatusOr<std::vector<GraphFile>> files = ListSplit(root, c, split);
  if (!files.ok()) return files.status();
  EvalReport report;
  report.collection = c.name();
  report.split = split;
  report.tile = c.kind == CollectionKind::kTile;
  LoadOptions lo;
  lo.dedup = false;  // evaluate the file as it is
  for (size_t fi = 0; fi < files->size(); ++fi) {
    const GraphFile& f = (*files)[fi];
    absl::StatusOr<GraphData> g = LoadGraphData(f, split, c.kind, lo);
    if (!g.ok()) return g.status();
    std::vector<int64_t> rows(static_cast<size_t>(g->num_configs()));
    std::iota(rows.begin(), rows.end(), 0);
    if (o.official_subset && !report.tile) rows = OfficialEvalSubset(g->target);
    std::vector<double> target;
    for (int64_t r : rows) target.push_back(g->target[r]);
    const GraphTensors tensors = MakeGraphTensors(g->graph, g->config_nodes, model.manifest.stats);
    std::vector<FoldModel> folds;
    for (const auto& net : model.folds) folds.push_back({net.get(), nullptr});
    RowStorage storage;
    const ConfigRows cr = SelectRows(*g, rows, &storage);
    ScoringOptions so = o.scoring;
    if (report.tile && o.tile_prior && model.manifest.tile_prior) {
      absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(g->graph, f.path);
      if (!problem.ok()) return problem.status();
      UseTilePrior(model.manifest, *problem, &so);
      if (o.tile_network_share >= 0) {
        auto values = std::make_shared<TilePriorValues>(*so.tile_prior);
        values->network_share = o.tile_network_share;
        so.tile_prior = std::move(values);
      }
    }
    using Clock = std::chrono::steady_clock;
    auto t0 = Clock::now();
    const ScoreResult s = o.cascade_top_k > 0 ? ScoreCascade(folds, tensors, cr, so, o.cascade_top_k, o.cascade_fraction)
                                              : ScoreConfigs(folds, tensors, cr, so);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    GraphEval e =
        EvaluateScores(g->name, g->original_nodes, g->graph.num_nodes, s.score, target, report.tile, rows, s.spread);
    e.passes = s.passes;
    if (o.cascade_top_k > 0) {
      report.cascade_seconds += seconds;
      t0 = Clock::now();
      const ScoreResult full = ScoreConfigs(folds, tensors, cr, so);
      report.full_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      const int64_t k = std::min<int64_t>(o.cascade_top_k, cr.count);
      std::vector<int64_t> want = RankByScore(full.score, k), got = RankByScore(s.score, k);
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      std::vector<int64_t> both;
      std::set_intersection(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(both));
      e.cascade_recall = static_cast<double>(both.size()) / static_cast<double>(k);
    }
    report.graphs.push_back(e);
    if (o.progress) std::fprintf(stderr, "evaluated %zu/%zu: %s\n", fi + 1, files->size(), e.name.c_str());
  }
  report.ComputeMean();
  return report;
}

}  // namespace tgraph
