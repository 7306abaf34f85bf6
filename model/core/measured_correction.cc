#include "model/core/measured_correction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "model/core/graph.h"

namespace tgraph {

double MeasuredCorrection::Kernel(const int8_t* a, const int8_t* b) const {
  int shared = 0;
  for (int64_t at = 0; at < row_bytes_; at += kLayoutSlots) shared += std::memcmp(a + at, b + at, kLayoutSlots) == 0;
  return shared;
}

absl::StatusOr<MeasuredCorrection> MeasuredCorrection::Fit(const std::vector<int8_t>& rows,
                                                           const std::vector<int64_t>& runtimes, int64_t nc,
                                                           double ridge) {
  const int64_t row_bytes = nc * kConfigFeatDim;
  const int64_t count = static_cast<int64_t>(runtimes.size());
  if (nc <= 0 || static_cast<int64_t>(rows.size()) != count * row_bytes)
    return absl::InvalidArgumentError(absl::StrCat("measured rows: ", rows.size(), " values for ", count,
                                                   " runtimes of ", nc, " configurable nodes (expected ",
                                                   count * std::max<int64_t>(nc, 0) * kConfigFeatDim, ")"));
  if (count < kMinMeasurements)
    return absl::InvalidArgumentError(
        absl::StrCat("measured rows: ", count, " measurements, at least ", kMinMeasurements, " needed"));
  if (!(ridge > 0)) return absl::InvalidArgumentError("ridge must be > 0");
  for (int64_t i = 0; i < count; ++i)
    if (runtimes[i] <= 0)
      return absl::InvalidArgumentError(absl::StrCat("measured runtime ", i, " is ", runtimes[i], ", expected > 0"));

  // The fastest kMaxMeasurements (ties by position): the region a search works in.
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return runtimes[a] < runtimes[b]; });
  order.resize(static_cast<size_t>(std::min(count, kMaxMeasurements)));
  const size_t n = order.size();

  MeasuredCorrection c;
  c.row_bytes_ = row_bytes;
  c.rows_.resize(n * static_cast<size_t>(row_bytes));
  std::vector<double> y(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&c.rows_[i * row_bytes], &rows[static_cast<size_t>(order[i] * row_bytes)], static_cast<size_t>(row_bytes));
    y[i] = std::log(static_cast<double>(runtimes[order[i]]));
    mean += y[i] / static_cast<double>(n);
  }
  double var = 0;
  for (double v : y) var += (v - mean) * (v - mean) / static_cast<double>(n);
  const double sd = var > 0 ? std::sqrt(var) : 1.0;
  for (double& v : y) v = (v - mean) / sd;

  // (K + ridge I) w = y, K symmetric positive semi-definite: Cholesky.
  std::vector<double> a(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j)
      a[i * n + j] = c.Kernel(&c.rows_[i * row_bytes], &c.rows_[j * row_bytes]) + (i == j ? ridge : 0.0);
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    a[j * n + j] = std::sqrt(std::max(d, ridge));  // >= ridge in exact arithmetic
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / a[j * n + j];
    }
  }
  c.weights_ = y;
  for (size_t i = 0; i < n; ++i) {  // L z = y
    for (size_t k = 0; k < i; ++k) c.weights_[i] -= a[i * n + k] * c.weights_[k];
    c.weights_[i] /= a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {  // L^T w = z
    for (size_t k = i + 1; k < n; ++k) c.weights_[i] -= a[k * n + i] * c.weights_[k];
    c.weights_[i] /= a[i * n + i];
  }
  return c;
}

double MeasuredCorrection::Predict(const int8_t* row) const {
  double p = 0;
  for (size_t i = 0; i < weights_.size(); ++i) p += weights_[i] * Kernel(row, &rows_[i * static_cast<size_t>(row_bytes_)]);
  return p;
}

}  // namespace tgraph
