#include "model/core/measured_correction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "model/core/graph.h"

namespace tgraph {

namespace {

// Layout groups two rows share.
double SharedGroups(const int8_t* a, const int8_t* b, int64_t row_bytes) {
  int shared = 0;
  for (int64_t at = 0; at < row_bytes; at += kLayoutSlots) shared += std::memcmp(a + at, b + at, kLayoutSlots) == 0;
  return shared;
}

}  // namespace

absl::StatusOr<MeasuredCorrection> MeasuredCorrection::Fit(const std::vector<int8_t>& rows,
                                                           const std::vector<int64_t>& runtimes, int64_t nc,
                                                           double ridge,
                                                           std::vector<std::pair<int64_t, int64_t>> links,
                                                           double link_weight) {
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

  auto row_of = [&](size_t i) { return &rows[static_cast<size_t>(order[i] * row_bytes)]; };
  std::vector<double> y(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) {
    y[i] = std::log(static_cast<double>(runtimes[order[i]]));
    mean += y[i] / static_cast<double>(n);
  }
  double var = 0;
  for (double v : y) var += (v - mean) * (v - mean) / static_cast<double>(n);
  const double sd = std::max(std::sqrt(var), kMinSpread);
  for (double& v : y) v = (v - mean) / sd;

  // (K + ridge I) w = y, K symmetric positive semi-definite: Cholesky.
  std::vector<double> a(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j)
      a[i * n + j] = SharedGroups(row_of(i), row_of(j), row_bytes) + (i == j ? ridge : 0.0);
  auto eq = [&](const int8_t* r, const std::pair<int64_t, int64_t>& l) {
    return std::memcmp(r + l.first * kLayoutSlots, r + l.second * kLayoutSlots, kLayoutSlots) == 0;
  };
  if (link_weight > 0)
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j <= i; ++j) {
        int agree = 0;
        for (const auto& l : links) agree += eq(row_of(i), l) == eq(row_of(j), l);
        a[i * n + j] += link_weight * agree;
      }
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
  std::vector<double> w = y;
  for (size_t i = 0; i < n; ++i) {  // L z = y
    for (size_t k = 0; k < i; ++k) w[i] -= a[i * n + k] * w[k];
    w[i] /= a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {  // L^T w = z
    for (size_t k = i + 1; k < n; ++k) w[i] -= a[k * n + i] * w[k];
    w[i] /= a[i * n + i];
  }
  // A prediction is sum_i w_i x (groups shared with row i) = sum over groups of the
  // weights of the fitted rows holding the same layout there.
  MeasuredCorrection c;
  c.measurements_ = static_cast<int64_t>(n);
  c.groups_ = nc * kConfigGroups;
  c.values_.resize(static_cast<size_t>(c.groups_));
  for (int64_t g = 0; g < c.groups_; ++g) {
    std::vector<Value>& values = c.values_[static_cast<size_t>(g)];
    for (size_t i = 0; i < n; ++i) {
      const int8_t* l = row_of(i) + g * kLayoutSlots;
      auto at = std::find_if(values.begin(), values.end(),
                             [&](const Value& v) { return std::memcmp(v.layout, l, kLayoutSlots) == 0; });
      if (at == values.end()) {
        values.push_back({});
        std::memcpy(values.back().layout, l, kLayoutSlots);
        values.back().weight = 0;
        at = values.end() - 1;
      }
      at->weight += w[i];
    }
  }
  c.row_bytes_ = row_bytes;
  for (size_t i = 0; i < n; ++i) c.fitted_.insert(c.fitted_.end(), row_of(i), row_of(i) + row_bytes);
  c.chol_ = a;
  if (link_weight > 0) {
    c.links_ = links;
    c.link_weight_ = link_weight;
    c.link_eq_.assign(links.size(), 0.0);
    c.link_ne_.assign(links.size(), 0.0);
    for (size_t l = 0; l < links.size(); ++l)
      for (size_t i = 0; i < n; ++i) (eq(row_of(i), links[l]) ? c.link_eq_ : c.link_ne_)[l] += w[i];
  }
  return c;
}

double MeasuredCorrection::Uncertainty(const int8_t* row) const {
  const size_t n = static_cast<size_t>(measurements_);
  std::vector<double> v(n);
  double var = static_cast<double>(groups_);
  for (size_t i = 0; i < n; ++i) {
    double k = SharedGroups(row, &fitted_[i * static_cast<size_t>(row_bytes_)], row_bytes_);
    for (size_t j = 0; j < i; ++j) k -= chol_[i * n + j] * v[j];
    v[i] = k / chol_[i * n + i];
    var -= v[i] * v[i];
  }
  return std::sqrt(std::max(0.0, var) / static_cast<double>(groups_));
}

double MeasuredCorrection::Predict(const int8_t* row) const {
  double p = 0;
  for (size_t l = 0; l < links_.size(); ++l)
    p += link_weight_ * (std::memcmp(row + links_[l].first * kLayoutSlots, row + links_[l].second * kLayoutSlots,
                                     kLayoutSlots) == 0 ? link_eq_[l] : link_ne_[l]);
  for (int64_t g = 0; g < groups_; ++g)
    for (const Value& v : values_[static_cast<size_t>(g)])
      if (std::memcmp(v.layout, row + g * kLayoutSlots, kLayoutSlots) == 0) {
        p += v.weight;
        break;
      }
  return p;
}

}  // namespace tgraph
