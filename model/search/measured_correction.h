// What a graph's own measurements say about its layouts, as a correction to a model's
// scores while searching that graph (SearchOptions::correction, model/search/layout_search.h).
//
// A fine-tuned network learns slowly from the few hundred measurements one graph gets; a
// linear model of the layout choices fits them at once. This is kernel ridge regression
// of the measurements' standardised log runtimes on one indicator per (node, group,
// layout value): the kernel of two rows is the number of layout groups they share, so
// the fit needs no feature table, only the rows. A prediction is in standard deviations
// of the measured log runtimes, lower meaning faster, 0 the measurements' mean; it
// shrinks towards 0 for rows unlike any measured one and for few measurements (the
// ridge penalty), so that the search follows what the graph's own measurements say
// where the model has not learned it.
//
// Bounded: at most kMaxMeasurements rows are fitted (the fastest, when given more): each
// group's layouts numbered (2 bytes per group and fitted row, a fifth of the rows' own
// bytes), an n x n kernel counted over those numbers (vectorised) and a Cholesky solve
// (n x n doubles). A prediction costs one look-up
// per layout group (the fitted weights summed per group and layout value), so a search
// pays about as much for it as for reading its rows.
//
// Exploration: Uncertainty is the same model's posterior standard deviation at a row
// (kernel ridge regression is a Gaussian process's posterior mean; the ridge its noise),
// over its prior's: 0 where the measurements pin the row down, 1 for a row sharing no
// layout with any of them. A search that subtracts a multiple of it from its fitness
// prefers, among rows it predicts alike, those the measurements say least about (an
// upper confidence bound, as Bayesian optimisation explores). It costs one comparison
// of small integers per group and fitted row (vectorised) and an n x n triangular solve.
// Batches: AddPending conditions the uncertainty on a row chosen but not measured yet, so
// that a round's proposals, chosen one at a time, spread over what the measurements
// leave unknown (SearchOptions::spread_proposals).
// Torch-free; immutable after Fit except for AddPending, so any number of threads may
// call Predict and Uncertainty on a correction nobody adds pending rows to (a search
// adds them to its own copy).
#pragma once

#include <cstdint>
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
  // files' configurations differ by 2e-5, about their noise): standardised,
  // that noise would outweigh the model's scores; this keeps it as small as it is.
  static constexpr double kMinSpread = 0.01;

  // rows: count x nc x 18 layout values; runtimes: count measured runtimes (> 0).
  // INVALID_ARGUMENT for sizes that disagree, a runtime <= 0, or fewer than
  // kMinMeasurements rows; ridge must be > 0.
  static absl::StatusOr<MeasuredCorrection> Fit(const std::vector<int8_t>& rows, const std::vector<int64_t>& runtimes,
                                                int64_t nc, double ridge = 1.0);

  // The row's predicted standardised log runtime (nc x 18 values).
  double Predict(const int8_t* row) const;
  // The posterior standard deviation at the row over the prior's, in [0, 1]; shrunk as
  // predictions are when the runtimes' spread is below kMinSpread (times spread /
  // kMinSpread), since exploring where runtimes differ by noise alone gains nothing.
  double Uncertainty(const int8_t* row) const;

  // Conditions Uncertainty on `row` (nc x 18 values) as if it had been measured, every
  // prediction unchanged (a Gaussian process's posterior mean does not move for an
  // observation at its own prediction): proposals chosen one at a time, each after those
  // before it are pending, explore different unknowns instead of all the same one
  // (batch upper confidence bounds, GP-BUCB). Costs one Uncertainty; after p pending
  // rows an Uncertainty costs p more row comparisons. Not thread-safe.
  void AddPending(const int8_t* row);

  // One row's solve against the fitted and pending rows, for a caller that watches the
  // uncertainty of the same rows while adding pending ones: Refresh brings it up to
  // date at the cost of the pending rows added since (a group comparison and a dot
  // product each), not a whole Uncertainty. z holds measurements() + pending values.
  struct RowState {
    std::vector<double> z;
    double norm = 0;  // |z|^2
  };
  RowState State(const int8_t* row) const;
  void Refresh(const int8_t* row, RowState* state) const;
  double Uncertainty(const RowState& state) const;

  // The fitted rows, fastest first (measurements() of them): row i's layouts (nc x 18
  // values written to out), its standardised log runtime, and what the fit predicts for
  // it when it is left out of the fit (kernel ridge regression's closed form: the target
  // minus its dual weight over the diagonal of (K + ridge I)^-1; costs an n x n
  // triangular inverse, n^3 / 6 multiply-adds).
  void FittedRow(int64_t i, int8_t* out) const;
  const std::vector<double>& targets() const { return targets_; }
  std::vector<double> LeaveOneOut() const;

  int64_t measurements() const { return measurements_; }
  int64_t pending() const { return static_cast<int64_t>(pending_diag_.size()); }

 private:
  struct Value {
    int8_t layout[kLayoutSlots];
    double weight;  // the dual weights of the fitted rows with this layout in this group
  };
  // Fit's steps: each group's distinct layouts among the fitted rows and which one each
  // row holds; then the kernel of shared groups, its Cholesky factor and the dual
  // weights of the standardised targets `y`, summed per layout.
  void IndexLayouts(const std::vector<const int8_t*>& rows);
  void Solve(std::vector<double> y);
  int64_t measurements_ = 0;
  int64_t groups_ = 0;                     // nc x 3
  std::vector<std::vector<Value>> values_;  // per group
  // Per group, per fitted row: the index of its layout in values_[group] (groups x n),
  // and the Cholesky factor of the fitted rows' kernel plus ridge (n x n, lower).
  std::vector<uint16_t> value_of_;
  std::vector<double> chol_;
  std::vector<double> targets_, dual_;  // the fitted rows' standardised log runtimes, and (K + ridge I)^-1 of them
  double spread_share_ = 1;  // the runtimes' spread over the unit (below 1 where kMinSpread holds)
  double ridge_ = 1;
  // Pending rows (AddPending): their layouts (pending x nc x 18) and their rows of the
  // extended Cholesky factor: pending row p's n + p values left of the diagonal, and its
  // diagonal.
  std::vector<int8_t> pending_rows_;
  std::vector<std::vector<double>> pending_chol_;
  std::vector<double> pending_diag_;


};

// How much of the correction a search should add to a model's scores, from how well each
// predicts the graph's measurements (stacking): the measurements' standardised log
// runtimes y regressed on the model's scores z of the same rows and the correction's
// leave-one-out predictions c (least squares with an intercept), weight = b_c / b_z,
// within [0, max_weight]: max_weight where the model adds nothing (b_z <= 0), 0 where the
// correction adds nothing beside the model (b_c <= 0). A model that ranks the measured
// rows well gets little correction (and, in a search, little exploration of the
// correction's unknowns); a model that does not gets max_weight. With fewer than
// kMinBlendRows rows, or rows that do not vary, max_weight.
struct CorrectionBlend {
  double weight = 0;
  double model_coef = 0, correction_coef = 0;  // b_z, b_c
  int64_t rows = 0;
};
inline constexpr int64_t kMinBlendRows = 8;
CorrectionBlend BlendCorrection(const std::vector<double>& model, const std::vector<double>& loo,
                                const std::vector<double>& targets, double max_weight);

}  // namespace tgraph
