// What a graph's measurements predict (model/search/measured_correction.h): the kernel
// ridge regression against hand-computed values, against a runtime that is additive in
// the layout choices, and its refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "model/core/graph.h"
#include "model/search/measured_correction.h"
#include "model/core/rank_metrics.h"

using namespace tgraph;

namespace {

// One configurable node whose three groups all hold `v` as their first dimension.
std::vector<int8_t> OneNodeRow(int8_t out, int8_t in, int8_t kernel) {
  std::vector<int8_t> row(kConfigFeatDim, -1);
  row[0] = out;
  row[kLayoutSlots] = in;
  row[2 * kLayoutSlots] = kernel;
  return row;
}

}  // namespace

TEST_CASE("measured correction: rows sharing no group are fitted to a shrunk copy of their standardised log runtimes",
          "[correction]") {
  // Four rows, no group in common: K = 3 I, so with ridge 1 each weight is y / 4 and a
  // fitted row predicts 3/4 of its own standardised log runtime.
  std::vector<int8_t> rows;
  for (int8_t v = 0; v < 4; ++v) {
    const std::vector<int8_t> r = OneNodeRow(v, v, v);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  // Runtimes e^10, e^11, e^12, e^13 (as integers: log differences of 1 to 1e-4).
  std::vector<int64_t> runtimes;
  for (int k = 10; k < 14; ++k) runtimes.push_back(std::llround(std::exp(k)));
  auto c = MeasuredCorrection::Fit(rows, runtimes, 1, 1.0);
  REQUIRE(c.ok());
  CHECK(c->measurements() == 4);
  const double sd = std::sqrt(1.25);  // of 0, 1, 2, 3
  for (int i = 0; i < 4; ++i)
    CHECK(c->Predict(rows.data() + i * kConfigFeatDim) == Approx(0.75 * (i - 1.5) / sd).margin(1e-4));
  // A row like none of them: 0 (the mean). One sharing a group with the fastest and one
  // with the slowest: (y0 + y3) / 4 = 0. One sharing two groups with the slowest: 2 y3 / 4.
  CHECK(c->Predict(OneNodeRow(5, 5, 5).data()) == Approx(0.0).margin(1e-12));
  CHECK(c->Predict(OneNodeRow(0, 3, 5).data()) == Approx(0.0).margin(1e-4));
  CHECK(c->Predict(OneNodeRow(3, 3, 5).data()) == Approx(0.5 * 1.5 / sd).margin(1e-4));
  // Uncertainty, over the prior's 3 groups: K + I = 4 I, so a fitted row keeps
  // 3 - 3^2 / 4 = 0.75 of its variance (sd ratio 0.5), a row sharing one group with one
  // of them 3 - 1 / 4, a row sharing none all of it.
  for (int i = 0; i < 4; ++i) CHECK(c->Uncertainty(rows.data() + i * kConfigFeatDim) == Approx(0.5).margin(1e-12));
  CHECK(c->Uncertainty(OneNodeRow(0, 5, 5).data()) == Approx(std::sqrt(2.75 / 3)).margin(1e-12));
  CHECK(c->Uncertainty(OneNodeRow(0, 1, 5).data()) == Approx(std::sqrt(2.5 / 3)).margin(1e-12));
  CHECK(c->Uncertainty(OneNodeRow(5, 5, 5).data()) == 1.0);
}

TEST_CASE("measured correction: runtimes within a fraction of a percent are measured in units of 1%, not their spread",
          "[correction]") {
  // The same four unrelated rows, their runtimes 1e9 + k x 1e4 ns (1e-5 apart, as real
  // configurations of one program often are): each predicts 3/4 of its log runtime's
  // distance from the mean over kMinSpread, not over the runtimes' own spread.
  std::vector<int8_t> rows;
  std::vector<int64_t> runtimes;
  double mean = 0;
  for (int8_t v = 0; v < 4; ++v) {
    const std::vector<int8_t> r = OneNodeRow(v, v, v);
    rows.insert(rows.end(), r.begin(), r.end());
    runtimes.push_back(1'000'000'000 + 10'000 * v);
    mean += std::log(static_cast<double>(runtimes.back())) / 4;
  }
  auto c = MeasuredCorrection::Fit(rows, runtimes, 1, 1.0);
  REQUIRE(c.ok());
  REQUIRE(MeasuredCorrection::kMinSpread == 0.01);
  double spread = 0;  // of the log runtimes
  for (int64_t r : runtimes) spread += std::pow(std::log(static_cast<double>(r)) - mean, 2) / 4;
  spread = std::sqrt(spread);
  REQUIRE(spread < 2e-5);
  for (int i = 0; i < 4; ++i) {
    const double p = c->Predict(rows.data() + i * kConfigFeatDim);
    CHECK(p == Approx(0.75 * (std::log(static_cast<double>(runtimes[i])) - mean) / 0.01).margin(1e-9));
    CHECK(std::abs(p) < 2e-3);  // standardised by their own spread it would be about 1
    // Uncertainty shrinks alike: 0.5 (as in the first test) times spread / 1%.
    CHECK(c->Uncertainty(rows.data() + i * kConfigFeatDim) == Approx(0.5 * spread / 0.01).margin(1e-9));
  }
  CHECK(c->Uncertainty(OneNodeRow(5, 5, 5).data()) == Approx(spread / 0.01).margin(1e-9));
}

TEST_CASE("measured correction: fitted on 80 rows of an additive runtime, it orders 300 others by it",
          "[correction]") {
  constexpr int64_t nc = 6;
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> cost(0.0, 0.1);
  double table[nc][3][3];  // per node, group and choice: its share of the log runtime
  for (auto& node : table)
    for (auto& group : node)
      for (double& c : group) c = cost(gen);
  std::uniform_int_distribution<int> choice(0, 2);
  auto draw = [&](int64_t count, std::vector<int8_t>* rows, std::vector<double>* log_runtime) {
    for (int64_t i = 0; i < count; ++i) {
      double t = 10.0;
      for (int64_t j = 0; j < nc; ++j) {
        std::vector<int8_t> r(kConfigFeatDim, -1);
        for (int g = 0; g < kConfigGroups; ++g) {
          const int c = choice(gen);
          r[g * kLayoutSlots] = static_cast<int8_t>(c - 1);  // -1 (the default), 0 or 1
          t += table[j][g][c];
        }
        rows->insert(rows->end(), r.begin(), r.end());
      }
      log_runtime->push_back(t);
    }
  };
  std::vector<int8_t> train, test;
  std::vector<double> train_log, test_log;
  draw(80, &train, &train_log);
  draw(300, &test, &test_log);
  std::vector<int64_t> runtimes;
  for (double t : train_log) runtimes.push_back(std::llround(std::exp(t)));
  auto c = MeasuredCorrection::Fit(train, runtimes, nc);
  REQUIRE(c.ok());
  std::vector<double> predicted;
  for (size_t i = 0; i < test_log.size(); ++i) predicted.push_back(c->Predict(test.data() + i * nc * kConfigFeatDim));
  CHECK(KendallTau(predicted, test_log) > 0.75);
}

TEST_CASE("measured correction: keeps the fastest measurements past its bound, and refuses bad input", "[correction]") {
  std::vector<int8_t> rows;
  std::vector<int64_t> runtimes;
  for (int64_t i = 0; i < MeasuredCorrection::kMaxMeasurements + 10; ++i) {
    const std::vector<int8_t> r = OneNodeRow(static_cast<int8_t>(i % 3), static_cast<int8_t>(i % 2), -1);
    rows.insert(rows.end(), r.begin(), r.end());
    runtimes.push_back(1000 + i);
  }
  auto big = MeasuredCorrection::Fit(rows, runtimes, 1);
  REQUIRE(big.ok());
  CHECK(big->measurements() == MeasuredCorrection::kMaxMeasurements);

  const std::vector<int8_t> four(rows.begin(), rows.begin() + 4 * kConfigFeatDim);
  const std::vector<int64_t> four_runtimes = {5, 6, 7, 8};
  CHECK(MeasuredCorrection::Fit(four, four_runtimes, 1).ok());
  auto refused = [&](const std::vector<int8_t>& r, const std::vector<int64_t>& t, int64_t nc, double ridge = 1.0) {
    auto c = MeasuredCorrection::Fit(r, t, nc, ridge);
    CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(c.status().message());
  };
  CHECK(refused(four, four_runtimes, 2) == "measured rows: 72 values for 4 runtimes of 2 configurable nodes (expected 144)");
  CHECK(refused(four, {5, 6, 0, 8}, 1) == "measured runtime 2 is 0, expected > 0");
  CHECK(refused(std::vector<int8_t>(four.begin(), four.begin() + 3 * kConfigFeatDim), {5, 6, 7}, 1) ==
        "measured rows: 3 measurements, at least 4 needed");
  CHECK(refused(four, four_runtimes, 1, 0.0) == "ridge must be > 0");
}

namespace {

// x = A^-1 b by Gaussian elimination with partial pivoting (A n x n, row-major): an
// implementation independent of the correction's Cholesky.
std::vector<double> SolveDense(std::vector<double> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    for (size_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
    std::swap(b[col], b[pivot]);
    for (size_t r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / a[col * n + col];
      for (size_t k = col; k < n; ++k) a[r * n + k] -= f * a[col * n + k];
      b[r] -= f * b[col];
    }
  }
  std::vector<double> x(n);
  for (size_t r = n; r-- > 0;) {
    double s = b[r];
    for (size_t k = r + 1; k < n; ++k) s -= a[r * n + k] * x[k];
    x[r] = s / a[r * n + r];
  }
  return x;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Rows A = (0, 0, 0), B = (0, 1, 1), C = (1, 0, 2), D = (2, 2, 0) of one node, runtimes
// e^10..e^13.
void FourRows(std::vector<int8_t>* rows, std::vector<int64_t>* runtimes) {
  const int8_t v[4][3] = {{0, 0, 0}, {0, 1, 1}, {1, 0, 2}, {2, 2, 0}};
  for (int i = 0; i < 4; ++i) {
    const std::vector<int8_t> r = OneNodeRow(v[i][0], v[i][1], v[i][2]);
    rows->insert(rows->end(), r.begin(), r.end());
    runtimes->push_back(std::llround(std::exp(10 + i)));
  }
}

}  // namespace

TEST_CASE("measured correction: a pending row lowers the uncertainty as its measurement would, and moves no "
          "prediction",
          "[correction]") {
  std::vector<int8_t> rows;
  std::vector<int64_t> runtimes;
  FourRows(&rows, &runtimes);
  auto c = MeasuredCorrection::Fit(rows, runtimes, 1);
  REQUIRE(c.ok());
  const std::vector<int8_t> p1 = OneNodeRow(1, 1, 1), p2 = OneNodeRow(1, 2, 5);
  const std::vector<std::vector<int8_t>> queries = {p1, p2, OneNodeRow(1, 1, 5), OneNodeRow(0, 0, 0),
                                                    OneNodeRow(4, 4, 4)};
  std::vector<double> before;
  for (const auto& q : queries) before.push_back(c->Predict(q.data()));
  MeasuredCorrection pending = *c;
  pending.AddPending(p1.data());
  pending.AddPending(p2.data());
  CHECK(pending.pending() == 2);
  // The same rows measured (any runtimes: the uncertainty does not depend on them).
  std::vector<int8_t> six = rows;
  six.insert(six.end(), p1.begin(), p1.end());
  six.insert(six.end(), p2.begin(), p2.end());
  std::vector<int64_t> six_runtimes = runtimes;
  six_runtimes.push_back(std::llround(std::exp(11.5)));
  six_runtimes.push_back(std::llround(std::exp(12.5)));
  auto measured = MeasuredCorrection::Fit(six, six_runtimes, 1);
  REQUIRE(measured.ok());
  for (size_t i = 0; i < queries.size(); ++i) {
    CHECK(pending.Uncertainty(queries[i].data()) == Approx(measured->Uncertainty(queries[i].data())).margin(1e-9));
    CHECK(pending.Predict(queries[i].data()) == before[i]);
  }
  CHECK(pending.Uncertainty(p1.data()) < c->Uncertainty(p1.data()) - 0.1);
  // By hand, with p1 = (1, 1, 1) alone pending: K + I over A, B, C, D and p1 (shared
  // groups: A-B, A-C, A-D one each; p1 shares two with B, one with C), and a query
  // (1, 1, 5) sharing one group with B, one with C and two with p1.
  MeasuredCorrection one = *c;
  one.AddPending(p1.data());
  const std::vector<double> k_plus_ridge = {4, 1, 1, 1, 0,  //
                                            1, 4, 0, 0, 2,  //
                                            1, 0, 4, 0, 1,  //
                                            1, 0, 0, 4, 0,  //
                                            0, 2, 1, 0, 4};
  const std::vector<double> k = {0, 1, 1, 0, 2};
  const double variance = 3 - Dot(k, SolveDense(k_plus_ridge, k));
  CHECK(one.Uncertainty(OneNodeRow(1, 1, 5).data()) == Approx(std::sqrt(variance / 3)).margin(1e-9));
}

TEST_CASE("measured correction: a fitted row left out is predicted as a fit without it predicts it", "[correction]") {
  // Four unrelated rows (K = 3 I): left out, a row shares nothing with the rest, so the
  // fit without it predicts the mean, 0.
  {
    std::vector<int8_t> rows;
    std::vector<int64_t> runtimes;
    for (int8_t v = 0; v < 4; ++v) {
      const std::vector<int8_t> r = OneNodeRow(v, v, v);
      rows.insert(rows.end(), r.begin(), r.end());
      runtimes.push_back(std::llround(std::exp(10 + v)));
    }
    auto c = MeasuredCorrection::Fit(rows, runtimes, 1, 1.0);
    REQUIRE(c.ok());
    for (double p : c->LeaveOneOut()) CHECK(p == Approx(0.0).margin(1e-12));
  }
  // 12 rows of 3 nodes sharing layouts at random: for each row, the kernel ridge
  // regression refitted on the other 11 (same standardised targets), solved by Gaussian
  // elimination on the kernel counted here.
  constexpr int64_t nc = 3;
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> value(-1, 1);
  std::vector<int8_t> rows;
  std::vector<int64_t> runtimes;
  for (int i = 0; i < 12; ++i) {
    for (int64_t j = 0; j < nc; ++j) {
      const std::vector<int8_t> r = OneNodeRow(static_cast<int8_t>(value(gen)), static_cast<int8_t>(value(gen)),
                                               static_cast<int8_t>(value(gen)));
      rows.insert(rows.end(), r.begin(), r.end());
    }
    runtimes.push_back(1'000'000 + 37'000 * ((i * 7) % 12));  // distinct: the fitted order is by runtime
  }
  auto c = MeasuredCorrection::Fit(rows, runtimes, nc, 1.0);
  REQUIRE(c.ok());
  const size_t n = 12, row = nc * kConfigFeatDim;
  // FittedRow gives the rows back fastest first; targets() their standardised log runtimes.
  std::vector<std::vector<int8_t>> fitted(n, std::vector<int8_t>(row));
  for (size_t i = 0; i < n; ++i) c->FittedRow(static_cast<int64_t>(i), fitted[i].data());
  for (int i = 0; i < 12; ++i) {
    const size_t rank = static_cast<size_t>((i * 7) % 12);
    CHECK(std::equal(fitted[rank].begin(), fitted[rank].end(), rows.begin() + i * row));
  }
  const std::vector<double>& y = c->targets();
  REQUIRE(y.size() == n);
  CHECK(std::is_sorted(y.begin(), y.end()));
  auto shared = [&](size_t a, size_t b) {
    double s = 0;
    for (int64_t g = 0; g < nc * kConfigGroups; ++g)
      s += std::equal(fitted[a].begin() + g * kLayoutSlots, fitted[a].begin() + (g + 1) * kLayoutSlots,
                      fitted[b].begin() + g * kLayoutSlots);
    return s;
  };
  const std::vector<double> loo = c->LeaveOneOut();
  REQUIRE(loo.size() == n);
  for (size_t out = 0; out < n; ++out) {
    std::vector<size_t> keep;
    for (size_t i = 0; i < n; ++i)
      if (i != out) keep.push_back(i);
    std::vector<double> a(keep.size() * keep.size()), b(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      for (size_t j = 0; j < keep.size(); ++j) a[i * keep.size() + j] = shared(keep[i], keep[j]) + (i == j ? 1.0 : 0.0);
      b[i] = y[keep[i]];
    }
    const std::vector<double> w = SolveDense(a, b);
    double predicted = 0;
    for (size_t i = 0; i < keep.size(); ++i) predicted += w[i] * shared(out, keep[i]);
    CHECK(loo[out] == Approx(predicted).margin(1e-9));
  }
}

TEST_CASE("correction blend: the correction's weight is what it adds beside the model, within [0, max]",
          "[correction]") {
  // Two uncorrelated predictors over 16 rows: z = +-1 in blocks of 8, c = +-1 alternating.
  std::vector<double> z, c;
  for (int i = 0; i < 16; ++i) {
    z.push_back(i < 8 ? -1.0 : 1.0);
    c.push_back(i % 2 ? 1.0 : -1.0);
  }
  auto targets = [&](double bz, double bc) {
    std::vector<double> y;
    for (size_t i = 0; i < z.size(); ++i) y.push_back(0.5 + bz * z[i] + bc * c[i]);
    return y;
  };
  // y = z + 2c: b_z = 1, b_c = 2, weight 2.
  CorrectionBlend b = BlendCorrection(z, c, targets(1, 2), 3.0);
  CHECK(b.model_coef == Approx(1.0));
  CHECK(b.correction_coef == Approx(2.0));
  CHECK(b.weight == Approx(2.0));
  CHECK(b.rows == 16);
  // A model that explains everything: weight 0. A model that explains nothing, or the
  // opposite: the most. A correction worth more than the most: capped.
  CHECK(BlendCorrection(z, c, targets(0.7, 0), 3.0).weight == Approx(0.0).margin(1e-12));
  CHECK(BlendCorrection(z, c, targets(0, 1), 3.0).weight == 3.0);
  CHECK(BlendCorrection(z, c, targets(-1, 1), 3.0).weight == 3.0);
  CHECK(BlendCorrection(z, c, targets(0.5, -1), 3.0).weight == 0.0);
  CHECK(BlendCorrection(z, c, targets(1, 10), 3.0).weight == 3.0);
  // y = z + c exactly with z and c correlated (c = z + alternating +-1): the regression
  // still separates them (b_z = 1, b_c = 1).
  std::vector<double> c2, y2;
  for (size_t i = 0; i < z.size(); ++i) {
    c2.push_back(z[i] + c[i]);
    y2.push_back(z[i] + c2[i]);
  }
  b = BlendCorrection(z, c2, y2, 3.0);
  CHECK(b.model_coef == Approx(1.0));
  CHECK(b.correction_coef == Approx(1.0));
  CHECK(b.weight == Approx(1.0));
  // Too few rows, a constant predictor, or sizes that disagree: the most.
  REQUIRE(kMinBlendRows == 8);
  const std::vector<double> few_z(z.begin() + 4, z.begin() + 11), few_c(c.begin() + 4, c.begin() + 11);
  const std::vector<double> all_y = targets(1, 0), few_y(all_y.begin() + 4, all_y.begin() + 11);
  CHECK(BlendCorrection(few_z, few_c, few_y, 3.0).weight == 3.0);
  CHECK(BlendCorrection(std::vector<double>(16, 2.0), c, targets(0, 1), 3.0).weight == 3.0);
  CHECK(BlendCorrection(z, few_c, targets(1, 0), 3.0).weight == 3.0);
}
