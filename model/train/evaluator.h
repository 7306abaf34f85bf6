// Scores a split with a loaded model (published version or run directory) through the
// shared scoring function and reports per-graph metrics and their means.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/dataset.h"
#include "model/eval_report.h"
#include "model/model_io.h"
#include "model/scoring.h"

namespace tgraph {

struct EvalOptions {
  bool official_subset = false;  // layout: the 1,000-config subset of the TpuGraphs evaluation
  ScoringOptions scoring;        // usually the manifest's batch size and TTA
  bool progress = false;
};

absl::StatusOr<EvalReport> EvaluateSplit(const LoadedModel& model, const std::string& data_root, const Collection& c,
                                         const std::string& split, const EvalOptions& options);

}  // namespace tgraph
