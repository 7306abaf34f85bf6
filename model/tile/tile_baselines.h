// Orders of a tile problem's configurations that need no model, built from measured
// problems (the training data of a collection with a tile space: tile_space.h): what a
// learned ranking has to beat, reported beside it by tgraph-eval --baselines.
//
//   nearest problem  the configurations in the runtime order of the measured problem of
//                    the same dtype nearest in log2 (M, N, K) (summed distance; ties by name);
//   mean slowdown    by their mean log slowdown (runtime / that problem's fastest) over
//                    the measured problems of the dtype;
//   nearby problems  the same mean weighted by the problems' closeness of shape
//                    (MeasuredSlowdowns::Near with ShapeBandwidth's defaults): a kernel's
//                    best tiles change with its shape, so the problems of a similar shape
//                    say more;
// Each counts the measured problems of the same kernel variant (GemmProblem::Variant: the
// dtype, and whether N and K are multiples of 16), where the compiler builds the same
// kernel. A variant no measured problem has uses its dtype's problems, and a dtype no
// measured problem has (a model trained on bf16 only, tested on f32) the problems of every
// dtype: the baselines know what the model knew.
//   fixed default    128x128x64 w4 s3 (Triton's tutorial choice) first, then mean slowdown;
//   random order     its expectation over all orders (rank_metrics.h), no sampling.
//
// Torch-free; values only, any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/eval_report.h"
#include "model/tile/tile_space.h"

namespace tgraph {

// How alike two problems' shapes are, for the weighted means over measured problems: a
// Gaussian in log2 units along three axes, each with its own bandwidth: the output's size
// M x N (how many output tiles, so how many waves of programs over the SMs), the
// contracted K (how many steps each program loops), and the output's aspect M / N. A
// configuration's slowdown follows the first two closely and the aspect little, so the
// defaults below are narrow in output size and K and wide in aspect
// (docs/notebook/2026-11-28-shape-axes.md).
// All three 0: every problem alike (the plain mean); otherwise each is > 0.
struct ShapeBandwidth {
  double output = 0.75;  // log2 (M N)
  double k = 0.5;        // log2 K
  double aspect = 2.0;   // log2 (M / N)

  // One bandwidth b along each of log2 M, N and K: the same weights as b along K and
  // b sqrt(2) along the output's size and aspect (the form older manifests hold).
  static ShapeBandwidth Isotropic(double b);
  bool AllAlike() const { return output == 0 && k == 0 && aspect == 0; }
  // Each finite and at most 16, and either all 0 or all > 0.
  bool Valid() const;
  // The sum over the axes of (difference / bandwidth)^2: a problem weighs exp(-d^2 / 2)
  // (relative to the nearest one's). 0 when AllAlike.
  double DistanceSquared(const GemmProblem& a, const GemmProblem& b) const;
  std::string ToString() const;  // "0.75,0.5,2"
};

// "OUTPUT,K,ASPECT" (three numbers), or one number B (ShapeBandwidth::Isotropic(B)). Each
// finite, at most 16, and either all 0 or all > 0. Errors (INVALID_ARGUMENT) name `what`.
absl::StatusOr<ShapeBandwidth> ParseShapeBandwidth(absl::string_view text, absl::string_view what);

// One measured problem: the runtime (or tile target: only ratios matter) of each of its
// configurations.
struct KnownTileProblem {
  std::string name;
  GemmProblem problem;
  std::vector<TritonTile> tiles;  // the file's rows, in order
  std::vector<double> runtime;    // per row
  // "" for a collection's own measurements (its training files); the kernel's key
  // ("name@hash", TileKernelId::Key) for a farm's, from the measurement store, whose
  // `name` is then the graph's hash: what keeps one kernel's measurements from another's.
  std::string kernel = "";
};

// A tile graph's problem (GemmProblemOfGraph) and its rows' configurations
// (TritonTileOfRow) with their targets. Errors name `what`.
absl::StatusOr<KnownTileProblem> KnownProblemOf(const TileGraph& g, absl::string_view what);

// How much measured problem q says of p: 2 the same kernel variant, 1 the same dtype
// only, 0 another dtype. The baselines and the prior count the problems of the highest
// kinship any measured problem has with p.
int TileKinship(const GemmProblem& q, const GemmProblem& p);

// The measured problems' log slowdowns (runtime / the problem's fastest), one table per
// problem over the configurations any of them measured, and their weighted mean near a
// problem: what the mean-slowdown and nearby-problems baselines and a published model's
// prior (tile_prior.h) read. Values only, any thread.
class MeasuredSlowdowns {
 public:
  struct Problem {
    GemmProblem problem;
    std::vector<double> log_slowdown;  // aligned with tiles(); NaN: this problem did not measure it
    // A farm's measurement (KnownTileProblem::kernel and, as `stored`, its graph's hash);
    // both "" for the collection's own.
    std::string kernel = "", stored = "";
  };

  MeasuredSlowdowns() = default;
  // Problems with hidden runtimes (a test file's zeros) are left out.
  explicit MeasuredSlowdowns(const std::vector<KnownTileProblem>& known);
  // From stored tables (a manifest): `tiles` sorted and distinct, each problem's table
  // aligned with them (checked by the caller).
  MeasuredSlowdowns(std::vector<TritonTile> tiles, std::vector<Problem> problems)
      : tiles_(std::move(tiles)), problems_(std::move(problems)) {}

  const std::vector<TritonTile>& tiles() const { return tiles_; }  // sorted
  const std::vector<Problem>& problems() const { return problems_; }

  // Each configuration of tiles()'s mean log slowdown over the problems of p's kernel
  // variant (of its dtype, else of every dtype, when none has it: TileKinship), problem q
  // weighted by exp(-d^2 / 2), d^2 its
  // bandwidth.DistanceSquared to p. NaN where no such problem measured the
  // configuration. leave_shape_out: problems of p's (M, N, K), of any dtype, do not count
  // (what p's prior would be had its shape never been measured: training on the prior's
  // errors, tile_prior.h).
  std::vector<double> Near(const GemmProblem& p, const ShapeBandwidth& bandwidth, bool leave_shape_out = false) const;

  // The near end of the same problems' slowdowns s: each configuration's weighted mean of
  // log(s - 1 + excess), plus guard x its largest log s over the problems weighing at
  // least a tenth of the nearest one (over all of them where none of those measured it).
  // NaN where no problem measured it. See TilePrior::NearEnd (tile_prior.h) for why.
  std::vector<double> NearEnd(const GemmProblem& p, const ShapeBandwidth& bandwidth, double excess, double guard,
                              bool leave_shape_out = false) const;

  // The same problems with each configuration t's log slowdown plus shift[t] (aligned with
  // tiles()), each problem's table then measured from its new fastest again (so that its
  // smallest log slowdown is 0): what they would say had they deviated from their
  // averages as a problem's own measurements do (TileCorrection, tile_correction.h).
  MeasuredSlowdowns Shifted(const std::vector<double>& shift) const;

  // These problems and `more` (each its table over the configurations it measured, the
  // rest NaN): tiles() the union, every table realigned to it. With `anchor`, a problem
  // of `more` that measured fewer than half of tiles() (a pruned tuning's top few) is
  // read for the differences among what it measured, not as if its best were the
  // fastest: its log runtimes less one offset, the mean of their excess over what these
  // problems say of the same configurations near it (Near with *anchor), floored at 0.
  // Its best measured is then as slow as its neighbours make such a tile, and a tile
  // the prior favoured that measured slow says so to the next problem.
  MeasuredSlowdowns With(const std::vector<KnownTileProblem>& more, const ShapeBandwidth* anchor = nullptr) const;

  // What a search of `kernel` reads: the collection's own problems, those of `kernel`
  // (none of another kernel's, none at all for kernel ""), a stored problem that `more`
  // holds again replaced by `more`'s (the store's is the newer), and then `more` (With,
  // anchored by `anchor` when given).
  MeasuredSlowdowns ForKernel(const std::string& kernel, const std::vector<KnownTileProblem>& more,
                              const ShapeBandwidth* anchor = nullptr) const;
  // Whether any problem is a farm's (Problem::kernel set).
  bool HasKernelProblems() const;

 private:
  // The problems Near counts for p, each with its weight (the nearest one's is 1).
  std::vector<std::pair<const Problem*, double>> Weighted(const GemmProblem& p, const ShapeBandwidth& bandwidth,
                                                          bool leave_shape_out) const;

  // k's table as With(anchor) reads a partial problem (nullopt: not partial, or nothing
  // to anchor to).
  std::optional<Problem> Anchored(const KnownTileProblem& k, const ShapeBandwidth& anchor) const;

  std::vector<TritonTile> tiles_;
  std::vector<Problem> problems_;
};

enum class TileBaseline { kNearestProblem, kMeanSlowdown, kNearbySlowdown, kFixedDefault };
inline constexpr TileBaseline kAllTileBaselines[] = {TileBaseline::kNearestProblem, TileBaseline::kMeanSlowdown,
                                                     TileBaseline::kNearbySlowdown, TileBaseline::kFixedDefault};
std::string TileBaselineName(TileBaseline b);  // "nearest problem", ...

inline const TritonTile kFixedDefaultTile{128, 128, 64, 4, 3};

class TileBaselines {
 public:
  explicit TileBaselines(std::vector<KnownTileProblem> known);
  // Scores (lower = measure first) of `tiles` on `p`. A configuration no known problem of
  // p's variant (or dtype, or any, above) measured scores last; with no known problem every
  // score is 0.
  std::vector<double> Scores(TileBaseline b, const GemmProblem& p, const std::vector<TritonTile>& tiles) const;
  // The known problem of p's variant (or dtype, or any, above) nearest to p, or nullptr.
  const KnownTileProblem* Nearest(const GemmProblem& p) const;
  size_t size() const { return known_.size(); }
  const MeasuredSlowdowns& slowdowns() const { return slowdowns_; }

 private:
  std::vector<KnownTileProblem> known_;
  MeasuredSlowdowns slowdowns_;
};

// A method's metrics over the evaluated problems (its EvalReport's graphs and mean/median).
struct MethodReport {
  std::string method;
  EvalReport report;
};

// Random order's expected metrics on one problem's runtimes (rank_metrics.h): tau 0, OPA
// 1/2, the expected top-K errors and measurements to within 1%.
GraphEval RandomOrderEval(const std::string& name, const std::vector<double>& runtime);

// The baselines' reports over `problems` (the evaluated split), in kAllTileBaselines order,
// then random order's expectation.
std::vector<MethodReport> TileBaselineReports(const TileBaselines& baselines, const std::vector<KnownTileProblem>& problems,
                                              const std::string& collection, const std::string& split);

// Two tables, one line per method in each. Medians over the problems: tau, best of the
// top 1/3/5/10 over the fastest (ratios), measurements until one within 1% of the fastest,
// and their mean. Then the worst problem's: best of the top 1/3/5 and measurements to 1%
// (the slow kernel a user remembers). Problems with hidden runtimes are left out.
std::string TileComparisonTable(const std::vector<MethodReport>& methods);
// {"methods": [{"method": ..., "report": EvalReport::Json()}, ...]}
std::string MethodsJson(const std::vector<MethodReport>& methods);

}  // namespace tgraph
