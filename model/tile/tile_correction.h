// What a tile problem's own measured configurations say of its other ones, for the rounds
// of a search after the first measurements (TilePrior::For with measurements).
//
// The prior expects each configuration's log slowdown on the problem from the measured
// problems of nearby shape. Once some of its configurations are measured, their log
// runtimes minus that expectation are the problem's residuals, up to one unknown constant
// (its fastest runtime). A Gaussian process over the configurations' parameters spreads
// them to the unmeasured ones: a configuration like the ones that ran faster than
// expected is expected faster too. Its kernel is exp(-d^2 / 2), d the Euclidean distance
// over (log2 BLOCK_M, log2 BLOCK_N, log2 BLOCK_K, log2 warps, stages): one doubling of a
// block or of the warps, or one stage more, is one length scale. The constant is
// estimated with the residuals (generalised least squares), so one measurement says
// nothing and two say which of them is the better direction. The noise (kernel units)
// says how much of a residual is the configuration's own rather than its neighbours':
// 1, chosen with the length scale by ranking each of the 72 H100 problems from the other
// shapes and 12 random splits of 6 held-out shapes, one measurement at a time (never the
// test splits): of the problems whose search needs more than the first pick, more are
// found sooner than later (docs/notebook).
//
// Bounded: one kernel row per distinct measured configuration the table has (at most the
// table's few hundred), an n x n Cholesky solve.
//
// Torch-free; a pure function, any thread.
#pragma once

#include <vector>

#include "model/tile/tile_space.h"

namespace tgraph {

// One measured configuration of the problem: its runtime (> 0; any unit, the same for
// every one: only ratios count).
struct MeasuredTile {
  TritonTile tile;
  double runtime = 0;
};

// The kernel of two configurations (above): 1 for the same one.
double TileKernel(const TritonTile& a, const TritonTile& b);

inline constexpr double kTileCorrectionNoise = 1.0;

// Per configuration of `tiles`, what the measurements add to its expected log slowdown
// `expected` (aligned with `tiles`; NaN: no expectation). A configuration measured more
// than once counts once, at its runs' geometric mean; measured configurations that are
// not in `tiles`, have no expectation, or have a runtime that is not > 0 are left out.
// All 0 with fewer than two left.
std::vector<double> TileCorrection(const std::vector<TritonTile>& tiles, const std::vector<double>& expected,
                                   const std::vector<MeasuredTile>& measured, double noise = kTileCorrectionNoise);

// How many distinct measured configurations TileCorrection would use.
size_t TileCorrectionMeasurements(const std::vector<TritonTile>& tiles, const std::vector<double>& expected,
                                  const std::vector<MeasuredTile>& measured);

}  // namespace tgraph
