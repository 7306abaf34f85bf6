#include "model/scoring.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "model/config_rows.h"
#include "model/rng.h"

namespace tgraph {

ConfigBatch GatherConfigs(const ConfigRows& rows, const std::vector<int64_t>& idx, size_t begin, size_t end) {
  const int64_t n = static_cast<int64_t>(end - begin);
  ConfigBatch b;
  if (rows.layout) {
    const int64_t row = rows.num_config_nodes * kConfigFeatDim;
    b.layout = torch::empty({n, rows.num_config_nodes, kConfigFeatDim}, torch::kInt64);
    int64_t* p = b.layout.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const int8_t* src = rows.layout + idx[begin + i] * row;
      LayoutValueIndices(src, row, p + i * row);
    }
  } else {
    b.tile = torch::empty({n, kTileConfigDim}, torch::kFloat32);
    float* p = b.tile.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(rows.tile + idx[begin + i] * kTileConfigDim, kTileConfigDim, p + i * kTileConfigDim);
  }
  return b;
}

void StandardizeInPlace(std::vector<double>& v) {
  if (v.empty()) return;
  const double n = static_cast<double>(v.size());
  double mean = 0;
  for (double x : v) mean += x;
  mean /= n;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / n);
  // All equal (or one configuration): no order to keep, every score 0.
  for (double& x : v) x = sd > 0 ? (x - mean) / sd : x - mean;
}

std::vector<int64_t> BatchBounds(int64_t count, int64_t batch_size) {
  std::vector<int64_t> bounds = {0};
  if (count <= 0) return bounds;
  const int64_t batches = (count + std::max<int64_t>(1, batch_size) - 1) / std::max<int64_t>(1, batch_size);
  const int64_t base = count / batches, larger = count % batches;  // the first `larger` get one more
  for (int64_t b = 0; b < batches; ++b) bounds.push_back(bounds.back() + base + (b < larger ? 1 : 0));
  return bounds;
}

ScoreResult ScoreConfigs(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& o) {
  torch::NoGradGuard no_grad;
  const int64_t c = rows.count;
  const int64_t batch = std::max<int64_t>(1, o.batch_size);
  const std::vector<int64_t> bounds = BatchBounds(c, batch);
  // All of a request's configs in one batch: permutations cannot change the scores.
  const int passes = c <= batch ? 1 : std::max(1, o.tta);
  std::vector<std::vector<int64_t>> orders(passes, std::vector<int64_t>(c));
  Rng rng(o.seed);
  for (int p = 0; p < passes; ++p) {
    std::iota(orders[p].begin(), orders[p].end(), 0);
    if (passes > 1) rng.Shuffle(orders[p]);
  }
  ScoreResult r;
  r.score.assign(c, 0.0);
  r.spread.assign(c, 0.0);
  std::vector<double> fold_score(c), sum_sq(c, 0.0), previous_mean(c), mean(c);
  for (const FoldModel& f : folds) {
    std::fill(fold_score.begin(), fold_score.end(), 0.0);
    int run = 0;  // passes this fold ran
    StaticEncoding local;
    const StaticEncoding* cache = f.cache;
    if (!cache) {
      local = f.net->Precompute(graph);
      cache = &local;
    }
    for (const std::vector<int64_t>& order : orders) {
      for (size_t b = 0; b + 1 < bounds.size(); ++b) {
        if (o.cancelled && o.cancelled()) {
          r.cancelled = true;
          return r;
        }
        const int64_t begin = bounds[b], end = bounds[b + 1];
        const torch::Tensor s =
            f.net->Score(graph, GatherConfigs(rows, order, static_cast<size_t>(begin), static_cast<size_t>(end)), cache)
                .to(torch::kFloat64)
                .contiguous();
        const double* sp = s.data_ptr<double>();
        for (int64_t i = begin; i < end; ++i) fold_score[order[i]] += sp[i - begin];
        ++r.batches;
      }
      ++run;
      ++r.passes;
      if (o.pass_means) {
        std::vector<double> m(c);
        for (int64_t i = 0; i < c; ++i) m[i] = fold_score[i] / run;
        o.pass_means->push_back(std::move(m));
      }
      if (o.tta_agreement <= 0 || run == passes) continue;
      // Stop once another pass no longer changes the ranking (to the agreed tau).
      for (int64_t i = 0; i < c; ++i) mean[i] = fold_score[i] / run;
      if (run >= 2 && KendallTau(mean, previous_mean) >= o.tta_agreement) break;
      std::swap(mean, previous_mean);
    }
    for (int64_t i = 0; i < c; ++i) fold_score[i] /= run;
    StandardizeInPlace(fold_score);
    for (int64_t i = 0; i < c; ++i) {
      r.score[i] += fold_score[i];
      sum_sq[i] += fold_score[i] * fold_score[i];
    }
  }
  const double k = static_cast<double>(std::max<size_t>(1, folds.size()));
  for (int64_t i = 0; i < c; ++i) {
    r.score[i] /= k;
    r.spread[i] = std::sqrt(std::max(0.0, sum_sq[i] / k - r.score[i] * r.score[i]));
  }
  return r;
}

ScoreResult ScoreCascade(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& o, int64_t top_k, double fraction) {
  const int64_t c = rows.count;
  const int64_t keep = std::min<int64_t>(
      c, std::max<int64_t>(static_cast<int64_t>(std::ceil(fraction * static_cast<double>(c))), 2 * top_k));
  if (folds.size() <= 1 || top_k <= 0 || keep >= c) {
    ScoreResult r = ScoreConfigs(folds, graph, rows, o);
    r.rescored = c;
    return r;
  }
  ScoreResult first = ScoreConfigs({folds.front()}, graph, rows, o);
  if (first.cancelled) return first;
  const std::vector<int64_t> kept = RankByScore(first.score, keep);
  // The kept rows, gathered in their ranked order.
  std::vector<int8_t> layout;
  std::vector<float> tile;
  ConfigRows subset = rows;
  subset.count = keep;
  if (rows.layout) {
    const int64_t row = rows.num_config_nodes * kConfigFeatDim;
    layout.resize(static_cast<size_t>(keep * row));
    for (int64_t i = 0; i < keep; ++i) std::copy_n(rows.layout + kept[i] * row, row, layout.data() + i * row);
    subset.layout = layout.data();
  } else {
    tile.resize(static_cast<size_t>(keep * kTileConfigDim));
    for (int64_t i = 0; i < keep; ++i)
      std::copy_n(rows.tile + kept[i] * kTileConfigDim, kTileConfigDim, tile.data() + i * kTileConfigDim);
    subset.tile = tile.data();
  }
  const ScoreResult full = ScoreConfigs(folds, graph, subset, o);
  ScoreResult r;
  r.batches = first.batches + full.batches;
  r.passes = first.passes + full.passes;
  r.cancelled = full.cancelled;
  r.rescored = keep;
  r.spread.assign(c, 0.0);
  // The others after every kept one: their first-fold scores, shifted past the kept maximum.
  std::vector<bool> is_kept(c, false);
  for (int64_t i = 0; i < keep; ++i) is_kept[kept[i]] = true;
  double kept_max = -std::numeric_limits<double>::infinity(), rest_min = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < keep; ++i) kept_max = std::max(kept_max, full.score[i]);
  for (int64_t i = 0; i < c; ++i)
    if (!is_kept[i]) rest_min = std::min(rest_min, first.score[i]);
  const double shift = kept_max - rest_min + 1.0;
  r.score.resize(c);
  for (int64_t i = 0; i < c; ++i) r.score[i] = first.score[i] + shift;
  for (int64_t i = 0; i < keep; ++i) {
    r.score[kept[i]] = full.score[i];
    r.spread[kept[i]] = full.spread[i];
  }
  return r;
}

int PassesForAgreement(const std::vector<std::vector<double>>& pass_means, double agreement) {
  const int n = static_cast<int>(pass_means.size());
  for (int p = 1; p < n; ++p)
    if (KendallTau(pass_means[p - 1], pass_means.back()) >= agreement) return p;
  return n;
}

}  // namespace tgraph
