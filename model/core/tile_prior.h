// What the measured problems say of a tile configuration before a model does: its mean
// log slowdown over the training problems of the same dtype (the mean-slowdown baseline,
// tile_baselines.h), standardised over the dtype's configurations. A tile model's
// published scores add weight x this value to the folds' standardised mean
// (ScoringOptions::tile_prior, model/nn/scoring.h): with 36 problem shapes to learn from,
// the network's order and the measured average each get the top configurations wrong
// in different places, and their sum ranks better than either (docs/results.md, "Real
// hardware"). Training and its validation score the network alone.
//
// Torch-free. Built once (the trainer, from its run's graphs; a manifest's JSON) and then
// only read, from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/tile_baselines.h"
#include "model/core/tile_space.h"

namespace tgraph {

struct TilePrior {
  double weight = 1.0;    // what a unit of the prior counts against a unit of the model's scores
  int64_t problems = 0;   // measured problems it was built from
  // Per dtype, and "*" over every dtype: configuration -> standardised mean log slowdown
  // (mean 0, std 1 over the table; lower = faster).
  std::map<std::string, std::map<TritonTile, double>> values;

  // The value of `tile` for a problem of `dtype`: that dtype's table, or "*"'s for a dtype
  // no measured problem had; a configuration the table lacks (measured nowhere) gets the
  // table's largest value. 0 with no table at all.
  double Of(absl::string_view dtype, const TritonTile& tile) const;

  std::string ToJson() const;
  // Errors (INVALID_ARGUMENT) name `what` and the key.
  static absl::StatusOr<TilePrior> FromJson(const std::string& json, absl::string_view what);
};

// The prior of the measured problems `known` summarises, with `weight`.
TilePrior BuildTilePrior(const TileBaselines& known, double weight);

}  // namespace tgraph
