// What the measured problems say of a tile configuration before a model does: its mean
// log slowdown over the training problems of the same dtype, weighted by how near each
// problem's shape is to the one asked about (the nearby-problems baseline,
// tile_baselines.h), standardised over the configurations. A tile model's published
// scores add weight x this value to the folds' standardised mean
// (ScoringOptions::tile_prior, model/nn/scoring.h): with 36 problem shapes to learn from,
// the network's order and the measured averages each get the top configurations wrong in
// different places, and their sum ranks better than either. The network is trained on
// what the prior leaves (TilePrior::residual, AttachTilePrior in model/train/train_data.h),
// so that it learns where the prior is wrong rather than an order of its own.
//
// Torch-free. Built once (the trainer, from its run's graphs; a manifest's JSON) and then
// only read, from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tile/tile_baselines.h"
#include "model/tile/tile_correction.h"
#include "model/tile/tile_space.h"

namespace tgraph {

// A prior's values for one problem: what scoring adds to each row, weight x Of(tile).
struct TilePriorValues {
  double weight = 0;
  double network_share = 1;  // what the folds' standardised mean counts (TilePrior::network_share)
  std::map<TritonTile, double> values;  // mean 0, std 1 over the table; lower = faster
  int64_t measurements = 0;  // the problem's own measured configurations they follow (TilePrior::For; 0 or >= 2)
  // A configuration the table lacks (no measured problem ran it) gets the largest value;
  // 0 with no table at all.
  double Of(const TritonTile& tile) const;
};

struct TilePrior {
  double weight = 1.0;  // what a unit of the prior counts against a unit of the model's scores
  // How the measured problems are weighed by shape (MeasuredSlowdowns::Near).
  ShapeBandwidth bandwidth;
  int64_t problems = 0;  // measured problems it was built from
  // The measured problems' tables, rounded to 1e-4 (so that the published JSON holds
  // exactly what the trainer evaluated with).
  MeasuredSlowdowns measured;
  // Without measured problems: a fixed table per dtype, and "*" for a dtype without one
  // (manifests written before the tables were kept, and hand-made priors in tests).
  std::map<std::string, std::map<TritonTile, double>> values;
  static constexpr char kAnyDtype[] = "*";

  // What each measured problem says of a configuration. Off (excess 0): its log slowdown
  // s, so that 1.00x and 1.02x differ by 0.02 and 3x and 6x by 0.69, and the far end
  // dominates the average. On: log(s - 1 + excess), which separates the configurations
  // near each problem's fastest (what an autotuner measures first) and compresses the
  // far end, plus guard x the configuration's largest log s over the nearest problems,
  // so that one fast on most of them but far off on one does not come first. The
  // defaults were chosen on protocols that never see the test splits (docs/results.md
  // "Real hardware").
  struct NearEnd {
    double excess = 0;  // > 0: on
    double guard = 0;
    bool on() const { return excess > 0; }
  };
  static constexpr NearEnd kNearEndDefault{0.1, 0.25};
  NearEnd near_end;

  // The network was trained on what the prior leaves (TrainOptions::tile_prior_training):
  // its standardised scores plus the prior ranked the training rows, so fine-tuning adds
  // the prior too. False: the network learned the order alone.
  bool residual = false;

  // What the network's standardised scores count beside the prior, in [0, 1]: the
  // published score is network_share x the folds' mean + weight x the prior. Trained
  // against the prior at 1, the network's share is then chosen on the folds' validation
  // problems (each with the prior built without its shape), as the network helps the
  // prior on problems it never saw; manifests without the key: 1.
  double network_share = 1.0;

  // How it scores, in one line: "0.25 x the network's standardised scores + 1 x the
  // prior of 60 measured problems", and when the share is 0, that the prior ranks alone.
  std::string Summary() const;

  // The values for `problem`: from `measured` when it has problems, else from `values`.
  // leave_shape_out: without the measured problems of its shape (MeasuredSlowdowns::Near).
  TilePriorValues For(const GemmProblem& problem, bool leave_shape_out = false) const;
  // The same after some of the problem's configurations were measured (`own`: a search's
  // earlier rounds): every measured problem's table shifted by what `own` says of this
  // one (TileCorrection over their expected log slowdowns, MeasuredSlowdowns::Shifted)
  // before they are averaged. A fixed table (no measured problems) cannot follow them:
  // For(problem) then, and measurements 0.
  TilePriorValues For(const GemmProblem& problem, const std::vector<MeasuredTile>& own,
                      bool leave_shape_out = false) const;

  std::string ToJson() const;
  // Errors (INVALID_ARGUMENT) name `what` and the key.
  static absl::StatusOr<TilePrior> FromJson(const std::string& json, absl::string_view what);
};

// The network shares a training run validates (TilePrior::network_share).
inline constexpr double kNetworkShares[] = {0, 0.25, 0.5, 0.75, 1};

// The share whose mean validation score over the folds is highest (ties: the larger
// share, as trained), from each fold's score per share; 1 when `per_fold` is empty or a
// fold lacks a share.
double ChooseNetworkShare(const std::vector<std::map<double, double>>& per_fold);

// At most this many measured problems are kept in a prior, so that a manifest stays well
// under its 1 MiB bound (about 2 KiB a problem: 288 values of at most 7 characters).
inline constexpr int64_t kMaxTilePriorProblems = 200;

// The prior of the measured problems `known` summarises, with `weight` and `bandwidth`.
// More than kMaxTilePriorProblems with measured runtimes: INVALID_ARGUMENT naming how many.
absl::StatusOr<TilePrior> BuildTilePrior(const std::vector<KnownTileProblem>& known, double weight,
                                         const ShapeBandwidth& bandwidth);

}  // namespace tgraph
