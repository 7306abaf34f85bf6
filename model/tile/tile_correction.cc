#include "model/tile/tile_correction.h"

#include <array>
#include <cmath>
#include <map>

#include "model/core/cholesky.h"

namespace tgraph {

namespace {

// The measured configurations TileCorrection uses: index into `tiles` -> mean log runtime.
std::map<size_t, double> UsableMeasurements(const std::vector<TritonTile>& tiles, const std::vector<double>& expected,
                                            const std::vector<MeasuredTile>& measured) {
  std::map<TritonTile, size_t> index;
  for (size_t i = 0; i < tiles.size(); ++i) index.emplace(tiles[i], i);
  std::map<size_t, std::pair<double, int>> sums;
  for (const MeasuredTile& m : measured) {
    const auto it = index.find(m.tile);
    if (it == index.end() || !(m.runtime > 0) || !std::isfinite(m.runtime) || std::isnan(expected[it->second]))
      continue;
    auto& [sum, count] = sums[it->second];
    sum += std::log(m.runtime);
    ++count;
  }
  std::map<size_t, double> out;
  for (const auto& [i, s] : sums) out[i] = s.first / s.second;
  return out;
}

// A configuration's place in the kernel's space: (log2 BLOCK_M, log2 BLOCK_N, log2
// BLOCK_K, log2 warps, stages).
using Point = std::array<double, 5>;

Point PointOf(const TritonTile& t) {
  return {std::log2(static_cast<double>(t.block_m)), std::log2(static_cast<double>(t.block_n)),
          std::log2(static_cast<double>(t.block_k)), std::log2(static_cast<double>(t.num_warps)),
          static_cast<double>(t.num_stages)};
}

double Kernel(const Point& a, const Point& b) {
  double d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return std::exp(-d2 / 2);
}

}  // namespace

double TileKernel(const TritonTile& a, const TritonTile& b) { return Kernel(PointOf(a), PointOf(b)); }

size_t TileCorrectionMeasurements(const std::vector<TritonTile>& tiles, const std::vector<double>& expected,
                                  const std::vector<MeasuredTile>& measured) {
  return UsableMeasurements(tiles, expected, measured).size();
}

std::vector<double> TileCorrection(const std::vector<TritonTile>& tiles, const std::vector<double>& expected,
                                   const std::vector<MeasuredTile>& measured, double noise) {
  std::vector<double> out(tiles.size(), 0.0);
  const std::map<size_t, double> usable = UsableMeasurements(tiles, expected, measured);
  const size_t n = usable.size();
  if (n < 2) return out;
  std::vector<Point> points(tiles.size());
  for (size_t t = 0; t < tiles.size(); ++t) points[t] = PointOf(tiles[t]);
  std::vector<size_t> at;
  std::vector<double> residual;
  for (const auto& [i, log_runtime] : usable) {
    at.push_back(i);
    residual.push_back(log_runtime - expected[i]);
  }
  std::vector<double> l(n * n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) l[i * n + j] = Kernel(points[at[i]], points[at[j]]) + (i == j ? noise : 0.0);
  CholeskyFactor(&l, n, noise);
  // The unknown constant: b = 1' K^-1 r / 1' K^-1 1; then the dual weights K^-1 (r - b).
  std::vector<double> ones(n, 1.0), kr = residual;
  CholeskySolve(l, n, &ones);
  CholeskySolve(l, n, &kr);
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) num += kr[i], den += ones[i];
  const double b = num / den;
  std::vector<double> dual(n);
  for (size_t i = 0; i < n; ++i) dual[i] = kr[i] - b * ones[i];
  for (size_t t = 0; t < tiles.size(); ++t) {
    double f = 0;
    for (size_t i = 0; i < n; ++i) f += Kernel(points[t], points[at[i]]) * dual[i];
    out[t] = f;
  }
  return out;
}

}  // namespace tgraph
