#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>

#include "model/core/eval_report.h"
#include "model/core/rank_metrics.h"

using namespace tgraph;

namespace {

int Sgn(double x) { return (x > 0) - (x < 0); }

// Equation 9 of the TGraph paper, literally, O(n^2).
double BruteTau(const std::vector<double>& s, const std::vector<double>& r) {
  const size_t n = s.size();
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) sum += Sgn(s[i] - s[j]) * Sgn(r[i] - r[j]);
  return 2.0 * sum / (static_cast<double>(n) * (n - 1));
}

double BruteOpa(const std::vector<double>& s, const std::vector<double>& r) {
  double good = 0, total = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (r[i] > r[j]) {
        ++total;
        good += s[i] > s[j];
      }
  return good / total;
}

}  // namespace

TEST_CASE("Kendall's tau: hand-computed values", "[metrics]") {
  CHECK(KendallTau({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1.0));
  CHECK(KendallTau({4, 3, 2, 1}, {10, 20, 30, 40}) == Approx(-1.0));
  // One tie in the scores: pairs sum to 5 of 6, tau = 2/(4*3) * 5.
  CHECK(KendallTau({1, 2, 2, 3}, {1, 3, 2, 4}) == Approx(5.0 / 6.0));
  // A tie in the runtimes counts 0: +1 - 1 + 0 = 0.
  CHECK(KendallTau({3, 1, 2}, {5, 5, 1}) == Approx(0.0));
  // Degenerate: all runtimes equal -> every pair is a tie -> 0; one config -> undefined.
  CHECK(KendallTau({1, 2, 3}, {7, 7, 7}) == 0.0);
  CHECK(KendallTau({5, 5, 5}, {1, 2, 3}) == 0.0);
  CHECK(std::isnan(KendallTau({1}, {1})));
  CHECK(std::isnan(KendallTau({}, {})));
}

TEST_CASE("Kendall's tau and OPA equal the O(n^2) definitions on random data with ties", "[metrics]") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 2 + static_cast<int>(gen() % 60);
    std::vector<double> s(n), r(n);
    for (int i = 0; i < n; ++i) {
      s[i] = static_cast<double>(gen() % 10);  // many ties
      r[i] = static_cast<double>(gen() % 8);
    }
    REQUIRE(KendallTau(s, r) == Approx(BruteTau(s, r)).margin(1e-12));
    bool comparable = false;
    for (int i = 1; i < n; ++i) comparable |= r[i] != r[0];
    if (comparable) REQUIRE(OrderedPairAccuracy(s, r) == Approx(BruteOpa(s, r)).margin(1e-12));
  }
}

TEST_CASE("ordered pair accuracy: hand-computed values", "[metrics]") {
  CHECK(OrderedPairAccuracy({1, 2, 3}, {1, 2, 3}) == Approx(1.0));
  CHECK(OrderedPairAccuracy({3, 2, 1}, {1, 2, 3}) == Approx(0.0));
  CHECK(OrderedPairAccuracy({1, 2, 2, 3}, {1, 3, 2, 4}) == Approx(5.0 / 6.0));  // a score tie is not ordered
  CHECK(OrderedPairAccuracy({3, 1, 2}, {5, 5, 1}) == Approx(0.5));            // runtime ties are skipped
  CHECK(std::isnan(OrderedPairAccuracy({1, 2}, {4, 4})));
  CHECK(std::isnan(OrderedPairAccuracy({1}, {4})));
}

TEST_CASE("top-K slowdown error: hand-computed values", "[metrics]") {
  const std::vector<double> s = {0.5, 0.1, 0.9, 0.3}, r = {10, 30, 5, 20};
  // Predicted order: 1 (30), 3 (20), 0 (10), 2 (5); best 5.
  CHECK(TopKError(s, r, 1) == Approx(5.0));
  CHECK(TopKError(s, r, 2) == Approx(3.0));
  CHECK(TopKError(s, r, 3) == Approx(1.0));
  CHECK(TopKError(s, r, 4) == Approx(0.0));
  CHECK(TopKError(s, r, 100) == Approx(0.0));  // K clamped to n
  // Ties in scores are cut by index: configs 0 and 1 tie, 0 comes first.
  CHECK(TopKError({1, 1, 2}, {8, 4, 2}, 1) == Approx(3.0));
  CHECK(TopKError({1}, {3}, 1) == 0.0);
  CHECK(std::isnan(TopKError({1, 2}, {0, 0}, 1)));  // hidden (zero) runtimes
}

TEST_CASE("M_tile: hand-computed values", "[metrics]") {
  // Perfect ranking: the best config is predicted first.
  CHECK(TileScore({1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}) == Approx(1.0));
  // Reversed: the top 5 predicted are runtimes 6..2, best of them 2, best overall 1: 2 - 2/1 = 0.
  CHECK(TileScore({1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1}) == Approx(0.0));
  // Best of top 5 is 1.25x the best: 2 - 1.25.
  CHECK(TileScore({1, 2, 3, 4, 5, 6}, {9, 9, 5, 9, 9, 4}) == Approx(0.75));
  // Fewer than 5 configs: all are in the top 5.
  CHECK(TileScore({3, 1}, {2, 7}) == Approx(1.0));
}

TEST_CASE("official evaluation subset: every m-th config by runtime", "[metrics]") {
  std::vector<double> r(2000);
  for (int i = 0; i < 2000; ++i) r[i] = 2000 - i;  // config i has rank 1999 - i
  const std::vector<int64_t> sub = OfficialEvalSubset(r);
  REQUIRE(sub.size() == 1000);
  CHECK(sub.front() == 1999);  // fastest
  CHECK(sub.back() == 0);      // slowest
  CHECK(sub[1] == 1999 - 2);   // position floor(1 * 1999 / 999) = 2
  CHECK(sub[500] == 1999 - (500 * 1999 / 999));
  CHECK(std::set<int64_t>(sub.begin(), sub.end()).size() == 1000);
  // Small graphs keep every config, fastest first; ties keep index order.
  CHECK(OfficialEvalSubset({3, 1, 2, 1}) == std::vector<int64_t>{1, 3, 2, 0});
  CHECK(OfficialEvalSubset({5, 4, 3}, 2) == std::vector<int64_t>{2, 0});
  CHECK(OfficialEvalSubset({}).empty());
}

TEST_CASE("finite mean skips undefined per-graph metrics", "[metrics]") {
  CHECK(FiniteMean({1, 2, std::nan(""), 3}) == Approx(2.0));
  CHECK(std::isnan(FiniteMean({std::nan("")})));
  CHECK(std::isnan(FiniteMean({})));
}

TEST_CASE("rank error by spread quartile: hand-computed values", "[metrics]") {
  // Predicted ranks 0..7; true ranks swap configurations 4 and 7 (error 3/8 each) and 2
  // and 3 (error 1/8 each). Spreads put 4 and 7 in the highest quartile, 2 and 3 in the
  // third, the rest below.
  const std::vector<double> scores = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<double> runtimes = {10, 11, 13, 12, 17, 15, 16, 14};
  const std::vector<double> spread = {0.1, 0.2, 0.5, 0.6, 0.9, 0.3, 0.35, 0.8};
  const SpreadQuartiles q = RankErrorBySpread(scores, spread, runtimes);
  CHECK(q.rank_error[0] == Approx(0.0));        // configurations 0, 1
  CHECK(q.rank_error[1] == Approx(0.0));        // 5, 6
  CHECK(q.rank_error[2] == Approx(1.0 / 8));    // 2, 3
  CHECK(q.rank_error[3] == Approx(3.0 / 8));    // 7, 4
  // One fold (every spread equal) or too few configurations: nothing to say.
  CHECK(std::isnan(RankErrorBySpread(scores, std::vector<double>(8, 0.0), runtimes).rank_error[0]));
  CHECK(std::isnan(RankErrorBySpread({0, 1, 2}, {0.1, 0.2, 0.3}, {1, 2, 3}).rank_error[3]));
  // Through the evaluation report: per graph, and only with runtimes.
  const GraphEval e = EvaluateScores("g", 8, 8, scores, runtimes, false, {}, spread);
  CHECK(e.spread_error[3] == Approx(3.0 / 8));
  const GraphEval hidden = EvaluateScores("g", 8, 8, scores, std::vector<double>(8, 0.0), false, {}, spread);
  CHECK(std::isnan(hidden.spread_error[3]));
}

TEST_CASE("NaN scores never hang a metric or a ranking: they rank last, and tau is NaN", "[metrics]") {
  const double nan = std::nan("");
  // This input hung KendallTau's tie loop (NaN == NaN is false) before the total order.
  const std::vector<double> scores = {0.5, nan, 0.1, nan, 0.3};
  const std::vector<double> runtimes = {5, 1, 2, 3, 4};
  CHECK(std::isnan(KendallTau(scores, runtimes)));
  CHECK(std::isnan(KendallTau(std::vector<double>(1000, nan), std::vector<double>(1000, 1.0))));
  CHECK(std::isnan(KendallTau(runtimes, scores)));
  // Ordered by score, NaNs last in index order.
  CHECK(RankByScore(scores) == std::vector<int64_t>{2, 4, 0, 1, 3});
  CHECK(RankByScore(scores, 2) == std::vector<int64_t>{2, 4});
  // Top-K picks finite scores first: the 2 best scores are configs 2 and 4 (runtimes 2,
  // 4; the best runtime 1 is config 1, scored NaN): 2 / 1 - 1.
  CHECK(TopKError(scores, runtimes, 2) == Approx(1.0));
  // OPA and the evaluation subset sort NaN runtimes last too, without hanging.
  CHECK(OfficialEvalSubset({3, nan, 1, 2}, 10) == std::vector<int64_t>{2, 3, 0, 1});
  (void)OrderedPairAccuracy(scores, runtimes);
  CHECK(TotalLess(1.0, nan));
  CHECK_FALSE(TotalLess(nan, 1.0));
  CHECK_FALSE(TotalLess(nan, nan));
  CHECK(TotalEqual(nan, nan));
  CHECK(TotalEqual(-0.0, 0.0));
}
