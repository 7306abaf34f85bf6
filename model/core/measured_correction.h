// What a graph's own measurements say about its layouts, as a correction to a model's
// scores while searching that graph (SearchOptions::correction, model/nn/layout_search.h).
//
// A fine-tuned network learns slowly from the few hundred measurements one graph gets; a
// linear model of the layout choices fits them at once. This is kernel ridge regression
// of the measurements' standardised log runtimes on one indicator per (node, group,
// layout value): the kernel of two rows is the number of layout groups they share, so
// the fit needs no feature table, only the rows. A prediction is in standard deviations
// of the measured log runtimes, lower meaning faster, 0 the measurements' mean; it
// shrinks towards 0 for rows unlike any measured one and for few measurements (the
// ridge penalty). On the simulated farm (docs/results.md "A simulated farm"), three
// times this added to the fitness found faster configurations on every test split.
//
// Bounded: at most kMaxMeasurements rows are fitted (the fastest, when given more): an
// n x n kernel of row comparisons and a Cholesky solve. A prediction costs one look-up
// per layout group (the fitted weights summed per group and layout value), so a search
// pays about as much for it as for reading its rows.
// Torch-free; immutable after Fit, so any number of threads may call Predict.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/graph.h"

namespace tgraph {

class MeasuredCorrection {
 public:
  static constexpr int64_t kMaxMeasurements = 512;
  static constexpr int64_t kMinMeasurements = 4;  // fewer: nothing to learn
  // The unit of a prediction: the measured log runtimes' standard deviation, but never
  // less than this (1% of the runtime). Where every measurement lies within a fraction of
  // a percent of the others, what separates them is mostly noise (the real unet_3d
  // files' configurations differ by 2e-5, their noise, docs/results.md): standardised,
  // that noise would outweigh the model's scores; this keeps it as small as it is.
  static constexpr double kMinSpread = 0.01;

  // rows: count x nc x 18 layout values; runtimes: count measured runtimes (> 0).
  // INVALID_ARGUMENT for sizes that disagree, a runtime <= 0, or fewer than
  // kMinMeasurements rows; ridge must be > 0.
  static absl::StatusOr<MeasuredCorrection> Fit(const std::vector<int8_t>& rows, const std::vector<int64_t>& runtimes,
                                                int64_t nc, double ridge = 1.0,
                                                std::vector<std::pair<int64_t, int64_t>> links = {},
                                                double link_weight = 0.0);

  // The row's predicted standardised log runtime (nc x 18 values).
  double Predict(const int8_t* row) const;
  // EXPERIMENT: the posterior sd of the kernel model at row, over sqrt(groups) (0..1).
  double Uncertainty(const int8_t* row) const;

  int64_t measurements() const { return measurements_; }

 private:
  struct Value {
    int8_t layout[kLayoutSlots];
    double weight;  // the dual weights of the fitted rows with this layout in this group
  };
  int64_t measurements_ = 0;
  int64_t groups_ = 0;                     // nc x 3
  std::vector<std::vector<Value>> values_;  // per group
  std::vector<std::pair<int64_t, int64_t>> links_;  // EXPERIMENT: group pairs (flat g) whose equality is a feature
  std::vector<double> link_eq_, link_ne_;
  double link_weight_ = 0;
  std::vector<int8_t> fitted_;   // n rows
  std::vector<double> chol_;     // n x n lower
  int64_t row_bytes_ = 0;
};

}  // namespace tgraph
