// Orders of a tile problem's configurations that need no model, built from measured
// problems (the training data of a collection with a tile space: tile_space.h): what a
// learned ranking has to beat, reported beside it by tgraph-eval --baselines.
//
//   nearest problem  the configurations in the runtime order of the measured problem of
//                    the same dtype nearest in log2 (M, N, K) (summed distance; ties by name);
//   mean slowdown    by their mean log slowdown (runtime / that problem's fastest) over
//                    the measured problems of the dtype;
// A dtype no measured problem has (a model trained on bf16 only, tested on f32) uses the
// measured problems of every dtype instead: the baselines know what the model knew.
//   fixed default    128x128x64 w4 s3 (Triton's tutorial choice) first, then mean slowdown;
//   random order     its expectation over all orders (rank_metrics.h), no sampling.
//
// Torch-free; values only, any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/eval_report.h"
#include "model/core/tile_space.h"

namespace tgraph {

// One measured problem: the runtime (or tile target: only ratios matter) of each of its
// configurations.
struct KnownTileProblem {
  std::string name;
  GemmProblem problem;
  std::vector<TritonTile> tiles;  // the file's rows, in order
  std::vector<double> runtime;    // per row
};

// A tile graph's problem (GemmProblemOfGraph) and its rows' configurations
// (TritonTileOfRow) with their targets. Errors name `what`.
absl::StatusOr<KnownTileProblem> KnownProblemOf(const TileGraph& g, absl::string_view what);

enum class TileBaseline { kNearestProblem, kMeanSlowdown, kFixedDefault };
inline constexpr TileBaseline kAllTileBaselines[] = {TileBaseline::kNearestProblem, TileBaseline::kMeanSlowdown,
                                                     TileBaseline::kFixedDefault};
std::string TileBaselineName(TileBaseline b);  // "nearest problem", ...

inline const TritonTile kFixedDefaultTile{128, 128, 64, 4, 3};

class TileBaselines {
 public:
  explicit TileBaselines(std::vector<KnownTileProblem> known);
  // Scores (lower = measure first) of `tiles` on `p`. A configuration no known problem of
  // p's dtype (or of any, above) measured scores last; with no known problem every score is 0.
  std::vector<double> Scores(TileBaseline b, const GemmProblem& p, const std::vector<TritonTile>& tiles) const;
  // The known problem of p's dtype (or of any, above) nearest to p, or nullptr.
  const KnownTileProblem* Nearest(const GemmProblem& p) const;
  size_t size() const { return known_.size(); }
  // Per dtype, and "*" over every dtype: each configuration's mean log slowdown over the
  // measured problems that measured it (the mean-slowdown baseline's order).
  const std::map<std::string, std::map<TritonTile, double>>& mean_log_slowdown() const { return mean_log_slowdown_; }
  static constexpr char kAnyDtype[] = "*";

 private:
  std::vector<KnownTileProblem> known_;
  std::map<std::string, std::map<TritonTile, double>> mean_log_slowdown_;  // per dtype, and "*" over all
};

// A method's metrics over the evaluated problems (its EvalReport's graphs and mean/median).
struct MethodReport {
  std::string method;
  EvalReport report;
};

// The baselines' reports over `problems` (the evaluated split), in kAllTileBaselines order,
// then random order's expectation.
std::vector<MethodReport> TileBaselineReports(const TileBaselines& baselines, const std::vector<KnownTileProblem>& problems,
                                              const std::string& collection, const std::string& split);

// One line per method: median tau, best of top-1/5/10 over the fastest (ratios), and the
// median and mean measurements until one within 1% of the fastest.
std::string TileComparisonTable(const std::vector<MethodReport>& methods);
// {"methods": [{"method": ..., "report": EvalReport::Json()}, ...]}
std::string MethodsJson(const std::vector<MethodReport>& methods);

}  // namespace tgraph
