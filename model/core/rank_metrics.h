// Ranking metrics of the two papers: Kendall's tau (TGraph eq. 9), ordered pair
// accuracy, top-K slowdown error (TpuGraphs eq. 1), M_tile (TGraph eq. 10), and the
// official 1,000-configuration evaluation subset. Lower score = predicted faster.
#pragma once

#include <cstdint>
#include <vector>

namespace tgraph {

// A total order on doubles for every sort of scores and runtimes: ordinary values by
// <, NaN after everything (NaNs equal to each other). A plain < is not a strict weak
// order once a NaN appears, and sorting with it is undefined behaviour (a hang or a
// crash): a NaN from a broken model must only ever rank last.
inline bool TotalLess(double a, double b) { return b != b ? a == a : a < b; }
inline bool TotalEqual(double a, double b) { return a != a ? b != b : a == b; }

// tau = 2 / (n (n-1)) * sum_{i<j} sgn(s_i - s_j) sgn(r_i - r_j); a tie in either list
// contributes 0. O(n log n). NaN when n < 2 (no pairs) or when a score or runtime is
// NaN (a broken model's ranking has no tau). Sizes must match.
double KendallTau(const std::vector<double>& scores, const std::vector<double>& runtimes);

// Fraction of pairs with r_i > r_j that the scores order the same way (s_i > s_j
// strictly). NaN when no pair has distinct runtimes.
double OrderedPairAccuracy(const std::vector<double>& scores, const std::vector<double>& runtimes);

// min runtime among the k lowest scores / min runtime overall - 1. Score ties at the
// cut are broken by config index. k is clamped to [1, n]. NaN when the best runtime is 0
// or n == 0.
double TopKError(const std::vector<double>& scores, const std::vector<double>& runtimes, int64_t k);

// M_tile = 2 - (min runtime among the 5 lowest scores) / (min runtime overall)
//        = 1 - TopKError(k = 5).
double TileScore(const std::vector<double>& scores, const std::vector<double>& runtimes);

// Measurements an autotuner makes when it measures configurations in score order (ties
// by index) until one runs within `tolerance` of the fastest (runtime <= (1 + tolerance)
// x best): that one's 1-based position. NaN when the best runtime is 0 or n == 0.
double MeasurementsToWithin(const std::vector<double>& scores, const std::vector<double>& runtimes,
                            double tolerance = 0.01);

// What a uniformly random order gives, in expectation over all orders: top-K error
// (E[min of k runtimes drawn without replacement] / best - 1) and measurements until one
// within tolerance of the fastest ((n + 1) / (g + 1) for g such configurations). NaN as
// above.
double ExpectedRandomTopKError(const std::vector<double>& runtimes, int64_t k);
double ExpectedRandomMeasurementsToWithin(const std::vector<double>& runtimes, double tolerance = 0.01);

// The official layout evaluation subset: configurations sorted by runtime (stable, by
// index on ties) and every m-th taken, positions round_down(i (n-1) / (size-1)) for
// i = 0..size-1, so the fastest and the slowest are always in. Returns config indices,
// fastest first. All n configs (sorted) when n <= size.
std::vector<int64_t> OfficialEvalSubset(const std::vector<double>& runtimes, int64_t size = 1000);

// Whether the fold spread points at ranking errors: the configurations cut into four
// near-equal groups by spread (lowest first; ties by index), and per group the mean
// absolute rank error |predicted rank - true rank| / n (ranks 0..n-1 by score and by
// runtime, ties by index). All NaN when n < 4 or every spread is equal (one fold).
struct SpreadQuartiles {
  double rank_error[4];
};
SpreadQuartiles RankErrorBySpread(const std::vector<double>& scores, const std::vector<double>& spread,
                                  const std::vector<double>& runtimes);

// Mean of the finite values (NaN-skipping); NaN when there are none.
double FiniteMean(const std::vector<double>& values);
// The median of the finite values; NaN when there are none.
double FiniteMedian(std::vector<double> values);

// Ranking: config indices sorted by score, fastest first (ties by index; NaN scores
// last), cut to top_k when top_k > 0.
std::vector<int64_t> RankByScore(const std::vector<double>& score, int64_t top_k = 0);

}  // namespace tgraph
