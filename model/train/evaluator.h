// Scores a split with a loaded model (published version or run directory) through the
// shared scoring function and reports per-graph metrics and their means.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/dataset.h"
#include "model/model_io.h"
#include "model/scoring.h"

namespace tgraph {

// Per-graph metrics; NaN (printed "-", JSON null) where undefined, e.g. for graphs whose
// runtimes are hidden (all zero).
struct GraphEval {
  std::string name;
  int64_t nodes = 0, pruned_nodes = 0, configs = 0;
  double tau = 0, opa = 0;
  double top_error[3] = {0, 0, 0};  // layout: K = 1, 10, 100; tile: K = 1, 5, 10
  double tile_score = 0;            // M_tile (tile only)
};

struct EvalReport {
  std::string collection;
  std::string split;
  bool tile = false;
  std::vector<GraphEval> graphs;
  GraphEval mean;  // NaN-skipping means over graphs
  std::string Table() const;
  std::string Json() const;
};

struct EvalOptions {
  bool official_subset = false;  // layout: the 1,000-config subset of the TpuGraphs evaluation
  ScoringOptions scoring;        // usually the manifest's batch size and TTA
  bool progress = false;
};

absl::StatusOr<EvalReport> EvaluateSplit(const LoadedModel& model, const std::string& data_root, const Collection& c,
                                         const std::string& split, const EvalOptions& options);

}  // namespace tgraph
