#include "model/core/measured_correction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "model/core/graph.h"

namespace tgraph {
namespace {

// Cholesky factor of the n x n symmetric matrix in the lower triangle of a (in place;
// diagonals floored at sqrt(floor)).
void CholeskyInPlace(std::vector<double>& a, size_t n, double floor) {
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    a[j * n + j] = std::sqrt(std::max(d, floor));
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / a[j * n + j];
    }
  }
}

// x = (L L^T)^-1 b for the lower factor L.
std::vector<double> CholeskySolve(const std::vector<double>& l, size_t n, std::vector<double> x) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < i; ++k) x[i] -= l[i * n + k] * x[k];
    x[i] /= l[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {
    for (size_t k = i + 1; k < n; ++k) x[i] -= l[k * n + i] * x[k];
    x[i] /= l[i * n + i];
  }
  return x;
}

// Automatic relevance determination: the group weights w and noise s2 maximising the
// marginal likelihood of y under y = sum_g Phi_g b_g + e, b_g ~ N(0, w_g I), e ~ N(0, s2 I)
// (Phi_g: group g's one-hot layouts), by EM. value_of: groups x n layout numbers;
// distinct: each group's count of distinct layouts. Returns the weights (constant
// groups: the varying ones' mean) and sets *s2.
std::vector<double> LearnRelevance(const std::vector<uint16_t>& value_of, const std::vector<size_t>& distinct,
                                   const std::vector<double>& y, int iterations, double* s2) {
  const size_t n = y.size(), groups = distinct.size();
  std::vector<size_t> varying;
  for (size_t g = 0; g < groups; ++g)
    if (distinct[g] > 1) varying.push_back(g);
  std::vector<double> w(groups, varying.empty() ? 1.0 : 1.0 / static_cast<double>(varying.size()));
  *s2 = 0.1;
  if (varying.empty()) return w;
  const double constant_share = static_cast<double>(groups - varying.size());
  std::vector<double> c(n * n), inv(n * n), a_v;
  for (int it = 0; it < iterations; ++it) {
    // C = sum_g w_g [same layout] + s2 I; constant groups add their weights everywhere.
    double constant = 0;
    for (size_t g = 0; g < groups; ++g)
      if (distinct[g] <= 1) constant += w[g];
    std::fill(c.begin(), c.end(), constant);
    for (size_t g : varying) {
      const uint16_t* of = &value_of[g * n];
      const double wg = w[g];
      for (size_t i = 0; i < n; ++i) {
        double* row = &c[i * n];
        for (size_t j = 0; j <= i; ++j) row[j] += of[j] == of[i] ? wg : 0.0;
      }
    }
    for (size_t i = 0; i < n; ++i) c[i * n + i] += *s2;
    CholeskyInPlace(c, n, 1e-12);
    const std::vector<double> alpha = CholeskySolve(c, n, y);
    // C^-1, column by column.
    for (size_t j = 0; j < n; ++j) {
      std::vector<double> e(n, 0.0);
      e[j] = 1;
      const std::vector<double> col = CholeskySolve(c, n, std::move(e));
      for (size_t i = 0; i < n; ++i) inv[i * n + j] = col[i];
    }
    double trace = 0, alpha_sq = 0;
    for (size_t i = 0; i < n; ++i) {
      trace += inv[i * n + i];
      alpha_sq += alpha[i] * alpha[i];
    }
    std::vector<double> next = w;
    double varying_sum = 0;
    for (size_t g : varying) {
      const uint16_t* of = &value_of[g * n];
      a_v.assign(distinct[g], 0.0);
      double t = 0;  // sum over pairs of rows with the same layout of C^-1
      for (size_t i = 0; i < n; ++i) {
        a_v[of[i]] += alpha[i];
        const double* row = &inv[i * n];
        for (size_t j = 0; j < n; ++j) t += of[j] == of[i] ? row[j] : 0.0;
      }
      double m_sq = 0;
      for (double v : a_v) m_sq += v * v;
      const double wg = w[g], d = static_cast<double>(distinct[g]);
      next[g] = std::max((wg * wg * m_sq + d * wg - wg * wg * t) / d, 1e-9);
      varying_sum += next[g];
    }
    const double mean = varying_sum / static_cast<double>(varying.size());
    for (size_t g = 0; g < groups; ++g)
      if (distinct[g] <= 1) next[g] = mean;
    const double s4 = *s2 * *s2, nd = static_cast<double>(n);
    *s2 = std::max((s4 * alpha_sq + nd * *s2 - s4 * trace) / nd, 1e-4);
    w = std::move(next);
  }
  (void)constant_share;
  return w;
}

}  // namespace

absl::StatusOr<MeasuredCorrection> MeasuredCorrection::Fit(const std::vector<int8_t>& rows,
                                                           const std::vector<int64_t>& runtimes, int64_t nc,
                                                           double ridge, const std::vector<double>* group_weights,
                                                           int relevance_iterations) {
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
  const int64_t groups = nc * kConfigGroups;
  std::vector<float> weight(static_cast<size_t>(groups), 1.0f);
  if (group_weights) {
    if (static_cast<int64_t>(group_weights->size()) != groups)
      return absl::InvalidArgumentError(
          absl::StrCat("group weights: ", group_weights->size(), " values for ", groups, " groups"));
    double sum = 0;
    for (size_t g = 0; g < group_weights->size(); ++g) {
      const double w = (*group_weights)[g];
      if (!(w >= 0) || !std::isfinite(w))
        return absl::InvalidArgumentError(absl::StrCat("group weight ", g, " is ", w, ", expected finite and >= 0"));
      sum += w;
    }
    if (!(sum > 0)) return absl::InvalidArgumentError("group weights: all 0");
    for (size_t g = 0; g < weight.size(); ++g)
      weight[g] = static_cast<float>((*group_weights)[g] * static_cast<double>(groups) / sum);
  }
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
  const double spread_share = std::sqrt(var) / sd;  // 1 unless the floor holds
  for (double& v : y) v = (v - mean) / sd;

  // Each group's distinct layouts among the fitted rows, and which one each row holds.
  MeasuredCorrection c;
  c.measurements_ = static_cast<int64_t>(n);
  c.groups_ = groups;
  c.ridge_ = ridge;
  c.group_weight_ = std::move(weight);
  c.spread_share_ = spread_share;
  c.values_.resize(static_cast<size_t>(c.groups_));
  c.value_of_.resize(static_cast<size_t>(c.groups_) * n);
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
      c.value_of_[static_cast<size_t>(g) * n + i] = static_cast<uint16_t>(at - values.begin());
    }
  }

  if (relevance_iterations > 0) {
    std::vector<size_t> distinct(static_cast<size_t>(groups));
    for (int64_t g = 0; g < groups; ++g) distinct[static_cast<size_t>(g)] = c.values_[static_cast<size_t>(g)].size();
    double s2 = 0;
    const std::vector<double> learned = LearnRelevance(c.value_of_, distinct, y, relevance_iterations, &s2);
    double sum = 0;
    for (double v : learned) sum += v;
    const double scale = static_cast<double>(groups) / sum;  // weights summing to groups, the ridge alike
    for (size_t g = 0; g < learned.size(); ++g) c.group_weight_[g] = static_cast<float>(learned[g] * scale);
    ridge = s2 * scale;
    c.ridge_ = ridge;
  }
  // K: the weights of the groups each pair of rows shares, summed over the value indices
  // (vectorised).
  std::vector<float> shared(n * n, 0);
  for (int64_t g = 0; g < c.groups_; ++g) {
    const uint16_t* of = &c.value_of_[static_cast<size_t>(g) * n];
    const float w = c.group_weight_[static_cast<size_t>(g)];
    if (w == 0) continue;
    for (size_t i = 0; i < n; ++i) {
      float* row = &shared[i * n];
      const uint16_t v = of[i];
      for (size_t j = 0; j <= i; ++j) row[j] += of[j] == v ? w : 0.0f;
    }
  }
  // (K + ridge I) w = y, K symmetric positive semi-definite: Cholesky.
  std::vector<double> a(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) a[i * n + j] = shared[i * n + j] + (i == j ? ridge : 0.0);
  CholeskyInPlace(a, n, ridge);  // diagonals >= sqrt(ridge) in exact arithmetic
  const std::vector<double> w = CholeskySolve(a, n, y);
  c.chol_ = std::move(a);
  // A prediction is sum_i w_i x (weights of the groups shared with row i) = sum over
  // groups of the group's weight times the dual weights of the fitted rows holding the
  // same layout there.
  for (int64_t g = 0; g < c.groups_; ++g)
    for (size_t i = 0; i < n; ++i)
      c.values_[static_cast<size_t>(g)][c.value_of_[static_cast<size_t>(g) * n + i]].weight +=
          static_cast<double>(c.group_weight_[static_cast<size_t>(g)]) * w[i];
  return c;
}

double MeasuredCorrection::Solve(const int8_t* row, std::vector<double>* z) const {
  const size_t n = static_cast<size_t>(measurements_), m = pending_diag_.size();
  // k_i: the weights of the groups the row shares with fitted row i, then pending row p.
  std::vector<float> shared(n, 0);
  for (int64_t g = 0; g < groups_; ++g) {
    const float w = group_weight_[static_cast<size_t>(g)];
    if (w == 0) continue;
    const std::vector<Value>& values = values_[static_cast<size_t>(g)];
    for (size_t v = 0; v < values.size(); ++v)
      if (std::memcmp(values[v].layout, row + g * kLayoutSlots, kLayoutSlots) == 0) {
        const uint16_t* of = &value_of_[static_cast<size_t>(g) * n];
        const uint16_t value = static_cast<uint16_t>(v);
        for (size_t i = 0; i < n; ++i) shared[i] += of[i] == value ? w : 0.0f;
        break;
      }
  }
  z->assign(n + m, 0.0);
  double norm = 0;
  for (size_t i = 0; i < n; ++i) {
    double t = shared[i];
    const double* l = &chol_[i * n];
    for (size_t j = 0; j < i; ++j) t -= l[j] * (*z)[j];
    (*z)[i] = t / l[i];
    norm += (*z)[i] * (*z)[i];
  }
  const size_t row_bytes = static_cast<size_t>(groups_) * kLayoutSlots;
  for (size_t p = 0; p < m; ++p) {
    const int8_t* other = &pending_rows_[p * row_bytes];
    double t = 0;
    for (int64_t g = 0; g < groups_; ++g)
      if (std::memcmp(other + g * kLayoutSlots, row + g * kLayoutSlots, kLayoutSlots) == 0)
        t += group_weight_[static_cast<size_t>(g)];
    const std::vector<double>& l = pending_chol_[p];
    for (size_t j = 0; j < n + p; ++j) t -= l[j] * (*z)[j];
    (*z)[n + p] = t / pending_diag_[p];
    norm += (*z)[n + p] * (*z)[n + p];
  }
  return norm;
}

double MeasuredCorrection::Uncertainty(const int8_t* row) const {
  if (measurements_ == 0 || groups_ == 0) return 1.0;
  // Posterior variance: k(x, x) - k^T (K + ridge I)^-1 k = groups - |L^-1 k|^2.
  std::vector<double> z;
  const double groups = static_cast<double>(groups_);
  const double variance = groups - Solve(row, &z);
  return spread_share_ * std::sqrt(std::clamp(variance / groups, 0.0, 1.0));
}

void MeasuredCorrection::AddPending(const int8_t* row) {
  if (groups_ == 0) return;
  std::vector<double> z;
  const double d = static_cast<double>(groups_) + ridge_ - Solve(row, &z);
  pending_diag_.push_back(std::sqrt(std::max(d, ridge_)));
  pending_chol_.push_back(std::move(z));
  pending_rows_.insert(pending_rows_.end(), row, row + groups_ * kLayoutSlots);
}

double MeasuredCorrection::Predict(const int8_t* row) const {
  double p = 0;
  for (int64_t g = 0; g < groups_; ++g)
    for (const Value& v : values_[static_cast<size_t>(g)])
      if (std::memcmp(v.layout, row + g * kLayoutSlots, kLayoutSlots) == 0) {
        p += v.weight;
        break;
      }
  return p;
}

}  // namespace tgraph
