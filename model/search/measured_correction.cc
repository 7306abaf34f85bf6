#include "model/search/measured_correction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "model/core/cholesky.h"
#include "model/core/graph.h"

namespace tgraph {

namespace {

absl::Status CheckFitInputs(const std::vector<int8_t>& rows, const std::vector<int64_t>& runtimes, int64_t nc,
                            double ridge) {
  const int64_t count = static_cast<int64_t>(runtimes.size());
  if (nc <= 0 || static_cast<int64_t>(rows.size()) != count * nc * kConfigFeatDim)
    return absl::InvalidArgumentError(absl::StrCat("measured rows: ", rows.size(), " values for ", count,
                                                   " runtimes of ", nc, " configurable nodes (expected ",
                                                   count * std::max<int64_t>(nc, 0) * kConfigFeatDim, ")"));
  if (count < MeasuredCorrection::kMinMeasurements)
    return absl::InvalidArgumentError(absl::StrCat("measured rows: ", count, " measurements, at least ",
                                                   MeasuredCorrection::kMinMeasurements, " needed"));
  if (!(ridge > 0)) return absl::InvalidArgumentError("ridge must be > 0");
  for (int64_t i = 0; i < count; ++i)
    if (runtimes[i] <= 0)
      return absl::InvalidArgumentError(absl::StrCat("measured runtime ", i, " is ", runtimes[i], ", expected > 0"));
  return absl::OkStatus();
}

// The rows fitted: the fastest kMaxMeasurements (ties by position), the region a search
// works in, with their log runtimes standardised.
struct FitTargets {
  std::vector<const int8_t*> rows;
  std::vector<double> y;
  double spread_share = 1;  // the log runtimes' spread over the unit it is divided by
};

FitTargets FastestTargets(const std::vector<int8_t>& rows, const std::vector<int64_t>& runtimes, int64_t nc) {
  const int64_t count = static_cast<int64_t>(runtimes.size());
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return runtimes[a] < runtimes[b]; });
  order.resize(static_cast<size_t>(std::min(count, MeasuredCorrection::kMaxMeasurements)));
  const size_t n = order.size();
  FitTargets t;
  t.y.resize(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) {
    t.rows.push_back(&rows[static_cast<size_t>(order[i] * nc * kConfigFeatDim)]);
    t.y[i] = std::log(static_cast<double>(runtimes[order[i]]));
    mean += t.y[i] / static_cast<double>(n);
  }
  double var = 0;
  for (double v : t.y) var += (v - mean) * (v - mean) / static_cast<double>(n);
  const double sd = std::max(std::sqrt(var), MeasuredCorrection::kMinSpread);
  t.spread_share = std::sqrt(var) / sd;  // 1 unless the floor holds
  for (double& v : t.y) v = (v - mean) / sd;
  return t;
}

}  // namespace

absl::StatusOr<MeasuredCorrection> MeasuredCorrection::Fit(const std::vector<int8_t>& rows,
                                                           const std::vector<int64_t>& runtimes, int64_t nc,
                                                           double ridge) {
  if (absl::Status s = CheckFitInputs(rows, runtimes, nc, ridge); !s.ok()) return s;
  FitTargets t = FastestTargets(rows, runtimes, nc);
  MeasuredCorrection c;
  c.measurements_ = static_cast<int64_t>(t.rows.size());
  c.groups_ = nc * kConfigGroups;
  c.spread_share_ = t.spread_share;
  c.ridge_ = ridge;
  c.IndexLayouts(t.rows);
  c.Solve(std::move(t.y));
  return c;
}

void MeasuredCorrection::IndexLayouts(const std::vector<const int8_t*>& rows) {
  const size_t n = rows.size();
  values_.resize(static_cast<size_t>(groups_));
  value_of_.resize(static_cast<size_t>(groups_) * n);
  for (int64_t g = 0; g < groups_; ++g) {
    std::vector<Value>& values = values_[static_cast<size_t>(g)];
    for (size_t i = 0; i < n; ++i) {
      const int8_t* l = rows[i] + g * kLayoutSlots;
      auto at = std::find_if(values.begin(), values.end(),
                             [&](const Value& v) { return std::memcmp(v.layout, l, kLayoutSlots) == 0; });
      if (at == values.end()) {
        values.push_back({});
        std::memcpy(values.back().layout, l, kLayoutSlots);
        values.back().weight = 0;
        at = values.end() - 1;
      }
      value_of_[static_cast<size_t>(g) * n + i] = static_cast<uint16_t>(at - values.begin());
    }
  }
}

void MeasuredCorrection::Solve(std::vector<double> y) {
  const size_t n = y.size();
  // K: the groups each pair of rows shares, counted over the value indices (vectorised).
  std::vector<uint32_t> shared(n * n, 0);
  for (int64_t g = 0; g < groups_; ++g) {
    const uint16_t* of = &value_of_[static_cast<size_t>(g) * n];
    for (size_t i = 0; i < n; ++i) {
      uint32_t* row = &shared[i * n];
      const uint16_t v = of[i];
      for (size_t j = 0; j <= i; ++j) row[j] += of[j] == v;
    }
  }
  // (K + ridge I) w = y, K symmetric positive semi-definite: Cholesky.
  std::vector<double> a(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) a[i * n + j] = shared[i * n + j] + (i == j ? ridge_ : 0.0);
  CholeskyFactor(&a, n, ridge_);  // >= ridge in exact arithmetic
  std::vector<double> w = y;
  CholeskySolve(a, n, &w);
  chol_ = std::move(a);
  targets_ = std::move(y);
  dual_ = w;
  // A prediction is sum_i w_i x (groups shared with row i) = sum over groups of the
  // weights of the fitted rows holding the same layout there.
  for (int64_t g = 0; g < groups_; ++g)
    for (size_t i = 0; i < n; ++i)
      values_[static_cast<size_t>(g)][value_of_[static_cast<size_t>(g) * n + i]].weight += w[i];
}

MeasuredCorrection::RowState MeasuredCorrection::State(const int8_t* row) const {
  const size_t n = static_cast<size_t>(measurements_);
  // k_i: the groups the row shares with fitted row i.
  std::vector<uint32_t> shared(n, 0);
  for (int64_t g = 0; g < groups_; ++g) {
    const std::vector<Value>& values = values_[static_cast<size_t>(g)];
    for (size_t v = 0; v < values.size(); ++v)
      if (std::memcmp(values[v].layout, row + g * kLayoutSlots, kLayoutSlots) == 0) {
        const uint16_t* of = &value_of_[static_cast<size_t>(g) * n];
        const uint16_t value = static_cast<uint16_t>(v);
        for (size_t i = 0; i < n; ++i) shared[i] += of[i] == value;
        break;
      }
  }
  // z = L^-1 k over the fitted rows, then the pending ones.
  RowState s;
  s.z.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    double t = shared[i];
    const double* l = &chol_[i * n];
    for (size_t j = 0; j < i; ++j) t -= l[j] * s.z[j];
    s.z[i] = t / l[i];
    s.norm += s.z[i] * s.z[i];
  }
  Refresh(row, &s);
  return s;
}

void MeasuredCorrection::Refresh(const int8_t* row, RowState* s) const {
  const size_t n = static_cast<size_t>(measurements_);
  const size_t row_bytes = static_cast<size_t>(groups_) * kLayoutSlots;
  for (size_t p = s->z.size() - n; p < pending_diag_.size(); ++p) {
    const int8_t* other = &pending_rows_[p * row_bytes];
    double t = 0;  // the groups shared with pending row p
    for (int64_t g = 0; g < groups_; ++g)
      t += std::memcmp(other + g * kLayoutSlots, row + g * kLayoutSlots, kLayoutSlots) == 0;
    const std::vector<double>& l = pending_chol_[p];
    for (size_t j = 0; j < n + p; ++j) t -= l[j] * s->z[j];
    s->z.push_back(t / pending_diag_[p]);
    s->norm += s->z.back() * s->z.back();
  }
}

double MeasuredCorrection::Uncertainty(const RowState& s) const {
  if (measurements_ == 0 || groups_ == 0) return 1.0;
  // Posterior variance: k(x, x) - k^T (K + ridge I)^-1 k = groups - |L^-1 k|^2.
  const double groups = static_cast<double>(groups_);
  return spread_share_ * std::sqrt(std::clamp((groups - s.norm) / groups, 0.0, 1.0));
}

double MeasuredCorrection::Uncertainty(const int8_t* row) const {
  if (measurements_ == 0 || groups_ == 0) return 1.0;
  return Uncertainty(State(row));
}

void MeasuredCorrection::AddPending(const int8_t* row) {
  if (groups_ == 0) return;
  // The extended factor's new row: L^-1 k, and the diagonal sqrt(k(x, x) + ridge - |L^-1 k|^2).
  RowState s = State(row);
  pending_diag_.push_back(std::sqrt(std::max(static_cast<double>(groups_) + ridge_ - s.norm, ridge_)));
  pending_chol_.push_back(std::move(s.z));
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

void MeasuredCorrection::FittedRow(int64_t i, int8_t* out) const {
  const size_t n = static_cast<size_t>(measurements_);
  for (int64_t g = 0; g < groups_; ++g)
    std::memcpy(out + g * kLayoutSlots,
                values_[static_cast<size_t>(g)][value_of_[static_cast<size_t>(g) * n + static_cast<size_t>(i)]].layout,
                kLayoutSlots);
}

std::vector<double> MeasuredCorrection::LeaveOneOut() const {
  const size_t n = static_cast<size_t>(measurements_);
  // diag((K + ridge I)^-1) = the squared column norms of L^-1, built a column at a time.
  std::vector<double> diag(n, 0.0), col(n);
  for (size_t j = 0; j < n; ++j) {
    std::fill(col.begin(), col.end(), 0.0);
    col[j] = 1.0 / chol_[j * n + j];
    diag[j] += col[j] * col[j];
    for (size_t i = j + 1; i < n; ++i) {
      double s = 0;
      const double* l = &chol_[i * n];
      for (size_t k = j; k < i; ++k) s -= l[k] * col[k];
      col[i] = s / l[i];
      diag[j] += col[i] * col[i];
    }
  }
  std::vector<double> loo(n);
  for (size_t i = 0; i < n; ++i) loo[i] = targets_[i] - dual_[i] / diag[i];
  return loo;
}

CorrectionBlend BlendCorrection(const std::vector<double>& model, const std::vector<double>& loo,
                                const std::vector<double>& targets, double max_weight) {
  CorrectionBlend b;
  b.weight = max_weight;
  const size_t n = targets.size();
  b.rows = static_cast<int64_t>(n);
  if (model.size() != n || loo.size() != n || b.rows < kMinBlendRows) return b;
  double mz = 0, mc = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mz += model[i] / static_cast<double>(n);
    mc += loo[i] / static_cast<double>(n);
    my += targets[i] / static_cast<double>(n);
  }
  double szz = 0, scc = 0, szc = 0, szy = 0, scy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double z = model[i] - mz, c = loo[i] - mc, y = targets[i] - my;
    szz += z * z;
    scc += c * c;
    szc += z * c;
    szy += z * y;
    scy += c * y;
  }
  const double det = szz * scc - szc * szc;
  if (!(szz > 0) || !(scc > 0) || !(det > 1e-12 * szz * scc)) return b;
  b.model_coef = (scc * szy - szc * scy) / det;
  b.correction_coef = (szz * scy - szc * szy) / det;
  if (b.model_coef <= 0) return b;
  b.weight = b.correction_coef <= 0 ? 0.0 : std::min(max_weight, b.correction_coef / b.model_coef);
  return b;
}

}  // namespace tgraph
