#include "model/scoring.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/rng.h"

namespace tgraph {
namespace {

ConfigBatch Gather(const ConfigRows& rows, const std::vector<int64_t>& idx, size_t begin, size_t end) {
  const int64_t n = static_cast<int64_t>(end - begin);
  ConfigBatch b;
  if (rows.layout) {
    const int64_t row = rows.num_config_nodes * kConfigFeatDim;
    b.layout = torch::empty({n, rows.num_config_nodes, kConfigFeatDim}, torch::kInt64);
    int64_t* p = b.layout.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const int8_t* src = rows.layout + idx[begin + i] * row;
      for (int64_t k = 0; k < row; ++k) p[i * row + k] = static_cast<int64_t>(src[k]) + 1;
    }
  } else {
    b.tile = torch::empty({n, kTileConfigDim}, torch::kFloat32);
    float* p = b.tile.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(rows.tile + idx[begin + i] * kTileConfigDim, kTileConfigDim, p + i * kTileConfigDim);
  }
  return b;
}

}  // namespace

ScoreResult ScoreConfigs(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& o) {
  torch::NoGradGuard no_grad;
  const int64_t c = rows.count;
  const int64_t batch = std::max<int64_t>(1, o.batch_size);
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
  std::vector<double> fold_score(c), sum_sq(c, 0.0);
  for (const FoldModel& f : folds) {
    std::fill(fold_score.begin(), fold_score.end(), 0.0);
    StaticEncoding local;
    const StaticEncoding* cache = f.cache;
    if (!cache) {
      local = f.net->Precompute(graph);
      cache = &local;
    }
    for (const std::vector<int64_t>& order : orders) {
      for (int64_t begin = 0; begin < c; begin += batch) {
        if (o.cancelled && o.cancelled()) {
          r.cancelled = true;
          return r;
        }
        const int64_t end = std::min(c, begin + batch);
        const torch::Tensor s =
            f.net->Score(graph, Gather(rows, order, static_cast<size_t>(begin), static_cast<size_t>(end)), cache)
                .to(torch::kFloat64)
                .contiguous();
        const double* sp = s.data_ptr<double>();
        for (int64_t i = begin; i < end; ++i) fold_score[order[i]] += sp[i - begin];
        ++r.batches;
      }
    }
    for (int64_t i = 0; i < c; ++i) {
      const double v = fold_score[i] / passes;
      r.score[i] += v;
      sum_sq[i] += v * v;
    }
  }
  const double k = static_cast<double>(std::max<size_t>(1, folds.size()));
  for (int64_t i = 0; i < c; ++i) {
    r.score[i] /= k;
    r.spread[i] = std::sqrt(std::max(0.0, sum_sq[i] / k - r.score[i] * r.score[i]));
  }
  return r;
}

}  // namespace tgraph
