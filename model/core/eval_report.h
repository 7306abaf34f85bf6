// Per-graph ranking metrics and their report (table, JSON), shared by tgraph-eval and
// tgraph-client eval so that both print the same numbers the same way. Torch-free.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>


namespace tgraph {

// Per-graph metrics; NaN (printed "-", JSON null) where undefined, e.g. for graphs whose
// runtimes are hidden (all zero).
struct GraphEval {
  std::string name;
  int64_t nodes = 0, pruned_nodes = 0, configs = 0;
  double tau = 0, opa = 0;
  double top_error[3] = {0, 0, 0};  // layout: K = 1, 10, 100; tile: K = 1, 5, 10
  double tile_score = 0;            // M_tile (tile only)
  // Tile only: configurations measured in predicted order until one within 1% of the
  // fastest (MeasurementsToWithin), what an autotuner that trusts the ranking spends.
  double to_within = std::nan("");
  // The file's configuration indices, predicted fastest first: what a test split (hidden
  // runtimes) is evaluated for.
  std::vector<int64_t> ranking;
  // Permutation (TTA) passes run over all folds; 0 where the scores came from elsewhere.
  int64_t passes = 0;
  // With a cascade evaluation: the share of the full ensemble's top k that the cascade's
  // top k holds (NaN otherwise).
  double cascade_recall = std::nan("");
  // Mean absolute rank error (/ configurations) of the configurations in each quartile of
  // the fold spread, lowest spread first (RankErrorBySpread; NaN without runtimes or
  // with one fold).
  double spread_error[4] = {std::nan(""), std::nan(""), std::nan(""), std::nan("")};
  // Per configuration, in the order scored: the file's configuration index, the ensemble
  // score, the fold spread (empty when unknown) and the runtime (0 when hidden). For
  // analyses the summary metrics do not cover (EvalReport::ScoresCsv).
  std::vector<int64_t> rows;
  std::vector<double> scores, spread, targets;
};

// The metrics of one graph from its scores (lower = predicted faster) and its targets.
// `rows`: the file's configuration index of each score (empty: 0, 1, ...), for the ranking.
// `spread`: the scores' fold spread, when known (for spread_error).
GraphEval EvaluateScores(const std::string& name, int64_t nodes, int64_t pruned_nodes,
                         const std::vector<double>& scores, const std::vector<double>& targets, bool tile,
                         const std::vector<int64_t>& rows = {}, const std::vector<double>& spread = {});

struct EvalReport {
  std::string collection;
  std::string split;
  bool tile = false;
  std::vector<GraphEval> graphs;
  GraphEval mean;    // NaN-skipping means over graphs
  GraphEval median;  // medians over graphs (tau, OPA, top-K errors, M_tile, to_within), NaN skipped
  // A cascade evaluation's scoring time, cascade and full ensemble (seconds, all graphs).
  double cascade_seconds = 0, full_seconds = 0;
  void ComputeMean();  // mean and median
  std::string Table() const;
  std::string Json() const;
  // One line per graph, "collection,graph,ranking" with the ranking's configuration
  // indices joined by ';' (a header line first).
  std::string RankingsCsv() const;
  // One line per configuration, "collection,graph,config,score,spread,runtime" (a header
  // line first; spread empty when unknown, runtime 0 when hidden): the file's
  // configuration index, the ensemble score (lower = predicted faster), the fold spread.
  std::string ScoresCsv() const;
};

}  // namespace tgraph
