#include "model/core/rank_metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace tgraph {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Pair counts needed by Knight's O(n log n) Kendall algorithm.
struct PairCounts {
  double total = 0;     // n (n-1) / 2
  double tied_s = 0;    // pairs tied in scores
  double tied_r = 0;    // pairs tied in runtimes
  double tied_both = 0; // pairs tied in both
  double discordant = 0;
  // Pairs tied in neither list are concordant or discordant.
  double untied() const { return total - tied_s - tied_r + tied_both; }
  double concordant() const { return untied() - discordant; }
};

double TiePairs(int64_t run) { return 0.5 * static_cast<double>(run) * static_cast<double>(run - 1); }

PairCounts CountPairs(const std::vector<double>& s, const std::vector<double>& r) {
  assert(s.size() == r.size());
  const int64_t n = static_cast<int64_t>(s.size());
  PairCounts pc;
  pc.total = TiePairs(n);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return !TotalEqual(s[a], s[b]) ? TotalLess(s[a], s[b]) : TotalLess(r[a], r[b]);
  });
  for (int64_t i = 0; i < n;) {  // ties in s, and in (s, r)
    int64_t j = i;
    while (j < n && TotalEqual(s[idx[j]], s[idx[i]])) ++j;
    pc.tied_s += TiePairs(j - i);
    for (int64_t a = i; a < j;) {
      int64_t b = a;
      while (b < j && TotalEqual(r[idx[b]], r[idx[a]])) ++b;
      pc.tied_both += TiePairs(b - a);
      a = b;
    }
    i = j;
  }
  // Discordant pairs = inversions of r in this order (strict), counted by merge sort.
  std::vector<double> v(n), tmp(n);
  for (int64_t i = 0; i < n; ++i) v[i] = r[idx[i]];
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      int64_t a = lo, b = mid, k = lo;
      while (a < mid && b < hi) {
        if (TotalLess(v[b], v[a])) {
          pc.discordant += static_cast<double>(mid - a);
          tmp[k++] = v[b++];
        } else {
          tmp[k++] = v[a++];
        }
      }
      while (a < mid) tmp[k++] = v[a++];
      while (b < hi) tmp[k++] = v[b++];
    }
    std::swap(v, tmp);
  }
  for (int64_t i = 0; i < n;) {  // v is now sorted: ties in r
    int64_t j = i;
    while (j < n && TotalEqual(v[j], v[i])) ++j;
    pc.tied_r += TiePairs(j - i);
    i = j;
  }
  return pc;
}

bool AnyNaN(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

}  // namespace

double KendallTau(const std::vector<double>& scores, const std::vector<double>& runtimes) {
  if (scores.size() < 2 || scores.size() != runtimes.size() || AnyNaN(scores) || AnyNaN(runtimes)) return kNaN;
  const PairCounts pc = CountPairs(scores, runtimes);
  return (pc.concordant() - pc.discordant) / pc.total;
}

double OrderedPairAccuracy(const std::vector<double>& scores, const std::vector<double>& runtimes) {
  if (scores.size() != runtimes.size()) return kNaN;
  const PairCounts pc = CountPairs(scores, runtimes);
  const double comparable = pc.total - pc.tied_r;
  if (comparable <= 0) return kNaN;
  return pc.concordant() / comparable;
}

double TopKError(const std::vector<double>& scores, const std::vector<double>& runtimes, int64_t k) {
  const int64_t n = static_cast<int64_t>(scores.size());
  if (n == 0 || runtimes.size() != scores.size()) return kNaN;
  k = std::clamp<int64_t>(k, 1, n);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    return !TotalEqual(scores[a], scores[b]) ? TotalLess(scores[a], scores[b]) : a < b;
  });
  double best_k = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < k; ++i) best_k = std::min(best_k, runtimes[idx[i]]);
  const double best = *std::min_element(runtimes.begin(), runtimes.end());
  if (!(best > 0)) return kNaN;
  return best_k / best - 1.0;
}

double MeasurementsToWithin(const std::vector<double>& scores, const std::vector<double>& runtimes,
                            double tolerance) {
  if (scores.empty() || runtimes.size() != scores.size()) return kNaN;
  const double best = *std::min_element(runtimes.begin(), runtimes.end());
  if (!(best > 0)) return kNaN;
  const std::vector<int64_t> order = RankByScore(scores);
  for (size_t i = 0; i < order.size(); ++i)
    if (runtimes[static_cast<size_t>(order[i])] <= (1.0 + tolerance) * best) return static_cast<double>(i + 1);
  return kNaN;  // unreachable: the fastest is within any tolerance >= 0
}

double ExpectedRandomTopKError(const std::vector<double>& runtimes, int64_t k) {
  const int64_t n = static_cast<int64_t>(runtimes.size());
  if (n == 0) return kNaN;
  k = std::clamp<int64_t>(k, 1, n);
  std::vector<double> r = runtimes;
  std::sort(r.begin(), r.end(), TotalLess);
  if (!(r[0] > 0)) return kNaN;
  // P(the minimum of k draws is the i-th smallest) = C(n-1-i, k-1) / C(n, k), i from 0.
  const auto log_choose = [](int64_t a, int64_t b) {
    return std::lgamma(double(a) + 1) - std::lgamma(double(b) + 1) - std::lgamma(double(a - b) + 1);
  };
  const double denominator = log_choose(n, k);
  double expected = 0;
  for (int64_t i = 0; i + k <= n; ++i) expected += std::exp(log_choose(n - 1 - i, k - 1) - denominator) * r[i];
  return expected / r[0] - 1.0;
}

double ExpectedRandomMeasurementsToWithin(const std::vector<double>& runtimes, double tolerance) {
  if (runtimes.empty()) return kNaN;
  const double best = *std::min_element(runtimes.begin(), runtimes.end());
  if (!(best > 0)) return kNaN;
  const double good = static_cast<double>(
      std::count_if(runtimes.begin(), runtimes.end(), [&](double r) { return r <= (1.0 + tolerance) * best; }));
  return (static_cast<double>(runtimes.size()) + 1.0) / (good + 1.0);
}

double TileScore(const std::vector<double>& scores, const std::vector<double>& runtimes) {
  return 1.0 - TopKError(scores, runtimes, 5);
}

std::vector<int64_t> OfficialEvalSubset(const std::vector<double>& runtimes, int64_t size) {
  const int64_t n = static_cast<int64_t>(runtimes.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return TotalLess(runtimes[a], runtimes[b]); });
  if (n <= size) return order;
  if (size <= 0) return {};
  if (size == 1) return {order.front()};
  std::vector<int64_t> out;
  out.reserve(size);
  for (int64_t i = 0; i < size; ++i) out.push_back(order[i * (n - 1) / (size - 1)]);
  return out;
}

double FiniteMedian(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double FiniteMean(const std::vector<double>& values) {
  double sum = 0;
  int64_t count = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++count;
    }
  return count ? sum / static_cast<double>(count) : kNaN;
}

std::vector<int64_t> RankByScore(const std::vector<double>& score, int64_t top_k) {
  std::vector<int64_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return TotalLess(score[a], score[b]); });
  if (top_k > 0 && top_k < static_cast<int64_t>(idx.size())) idx.resize(static_cast<size_t>(top_k));
  return idx;
}

SpreadQuartiles RankErrorBySpread(const std::vector<double>& scores, const std::vector<double>& spread,
                                  const std::vector<double>& runtimes) {
  SpreadQuartiles q;
  std::fill(std::begin(q.rank_error), std::end(q.rank_error), std::nan(""));
  const size_t n = scores.size();
  if (n < 4 || spread.size() != n || runtimes.size() != n) return q;
  if (std::all_of(spread.begin(), spread.end(), [&](double v) { return v == spread[0]; })) return q;
  const std::vector<int64_t> by_score = RankByScore(scores), by_runtime = RankByScore(runtimes),
                             by_spread = RankByScore(spread);
  std::vector<double> predicted(n), truth(n);
  for (size_t r = 0; r < n; ++r) {
    predicted[static_cast<size_t>(by_score[r])] = static_cast<double>(r);
    truth[static_cast<size_t>(by_runtime[r])] = static_cast<double>(r);
  }
  for (int g = 0; g < 4; ++g) {
    const size_t begin = g * n / 4, end = (g + 1) * n / 4;
    double sum = 0;
    for (size_t r = begin; r < end; ++r) {
      const size_t i = static_cast<size_t>(by_spread[r]);
      sum += std::fabs(predicted[i] - truth[i]) / static_cast<double>(n);
    }
    q.rank_error[g] = sum / static_cast<double>(end - begin);
  }
  return q;
}

}  // namespace tgraph
