// Scores a split with a loaded model (published version or run directory) through the
// shared scoring function and reports per-graph metrics and their means.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/eval_report.h"
#include "model/nn/model_io.h"
#include "model/nn/scoring.h"

namespace tgraph {

struct EvalOptions {
  bool official_subset = false;  // layout: the 1,000-config subset of the TpuGraphs evaluation
  ScoringOptions scoring;        // usually the manifest's batch size and TTA
  bool progress = false;
  // > 0: score with the top-k cascade (ScoreCascade, top k = this, `cascade_fraction`),
  // and also with the full ensemble, to report the cascade's recall of its top k and
  // both times. The metrics are the cascade's.
  int64_t cascade_top_k = 0;
  double cascade_fraction = 0.25;
  // Tile problems: the model's prior in its scores, as the server serves them
  // (model/tile/tile_prior.h); false: the network alone (the ablation).
  bool tile_prior = true;
  // >= 0: the network's share beside the prior instead of the manifest's
  // (TilePrior::network_share), for ablations.
  double tile_network_share = -1;
};

absl::StatusOr<EvalReport> EvaluateSplit(const LoadedModel& model, const std::string& data_root, const Collection& c,
                                         const std::string& split, const EvalOptions& options);

}  // namespace tgraph
