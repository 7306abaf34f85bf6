#include "model/train/train_step.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/nn/loss.h"

namespace tgraph {

std::unique_ptr<torch::optim::AdamW> MakeOptimizer(RankingNet& net, double lr, double weight_decay) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& item : net.named_parameters()) (item.value().dim() >= 2 ? decay : no_decay).push_back(item.value());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(lr));
  static_cast<torch::optim::AdamWOptions&>(groups.back().options()).weight_decay(weight_decay);
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(lr));
  static_cast<torch::optim::AdamWOptions&>(groups.back().options()).weight_decay(0.0);
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(lr));
}

ConfigRows SelectRows(const GraphData& g, const std::vector<int64_t>& rows, RowStorage* storage) {
  ConfigRows r;
  r.count = static_cast<int64_t>(rows.size());
  if (!g.tile_feat.empty()) {
    storage->tile.resize(rows.size() * kTileConfigDim);
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(g.tile_feat.data() + rows[i] * kTileConfigDim, kTileConfigDim, storage->tile.data() + i * kTileConfigDim);
    r.tile = storage->tile.data();
    return r;
  }
  storage->layout = g.LayoutRows(rows);
  r.layout = storage->layout.data();
  r.num_config_nodes = g.configs.num_config_nodes;
  return r;
}

ConfigRows RowsOf(const GraphData& g, RowStorage* storage) {
  if (!g.tile_feat.empty()) {
    ConfigRows r;
    r.count = g.num_configs();
    r.tile = g.tile_feat.data();
    return r;
  }
  std::vector<int64_t> all(static_cast<size_t>(g.num_configs()));
  std::iota(all.begin(), all.end(), 0);
  return SelectRows(g, all, storage);
}

std::vector<int64_t> SampleRows(const GraphData& g, int64_t batch, Rng& rng) {
  std::vector<int64_t> rows(static_cast<size_t>(g.num_configs()));
  std::iota(rows.begin(), rows.end(), 0);
  rng.Shuffle(rows);
  rows.resize(static_cast<size_t>(std::min<int64_t>(batch, g.num_configs())));
  return rows;
}

int64_t ReferenceMembers(int64_t count, double query_share) {
  const int64_t queries = std::llround(query_share * static_cast<double>(count));
  return std::clamp<int64_t>(count - queries, 1, std::max<int64_t>(1, count));
}

double AccumulateGradients(RankingNet& net, const GraphTensors& tensors, const GraphData& g,
                           const std::vector<int64_t>& rows, double weight, double query_share, RankingLoss loss_kind) {
  torch::Tensor target = torch::empty({static_cast<int64_t>(rows.size())}, torch::kFloat32);
  for (size_t i = 0; i < rows.size(); ++i) target[static_cast<int64_t>(i)] = static_cast<float>(g.target[rows[i]]);
  RowStorage storage;
  const ConfigRows selected = SelectRows(g, rows, &storage);
  std::vector<int64_t> in_order(rows.size());
  std::iota(in_order.begin(), in_order.end(), 0);
  const ConfigBatch b = GatherConfigs(selected, in_order, 0, in_order.size());
  ScoreMode mode;
  mode.members = ReferenceMembers(static_cast<int64_t>(rows.size()), query_share);
  torch::Tensor scores = net.Score(tensors, b, nullptr, mode);
  if (!g.prior_offset.empty()) {
    // As the published model scores: the network standardised, plus the prior.
    torch::Tensor offset = torch::empty({static_cast<int64_t>(rows.size())}, torch::kFloat32);
    for (size_t i = 0; i < rows.size(); ++i) offset[static_cast<int64_t>(i)] = static_cast<float>(g.prior_offset[rows[i]]);
    scores = (scores - scores.mean()) / (scores.std(/*unbiased=*/false) + 1e-3) + offset;
  }
  torch::Tensor loss = RankingLossValue(loss_kind, scores, target);
  (weight == 1.0 ? loss : loss * weight).backward();
  return loss.item<double>();
}

void ApplyGradients(RankingNet& net, torch::optim::AdamW& opt, double lr, double clip_norm) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
  torch::nn::utils::clip_grad_norm_(net.parameters(), clip_norm);
  opt.step();
}

double SumGradients(RankingNet& net, Collective& collective, double loss) {
  const std::vector<torch::Tensor> params = net.parameters();
  int64_t total = 0;
  for (const torch::Tensor& p : params) total += p.numel();
  const int64_t flags = total, loss_at = total + static_cast<int64_t>(params.size());
  torch::Tensor flat = torch::zeros({loss_at + 1}, torch::kFloat32);
  float* f = flat.data_ptr<float>();
  int64_t at = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& grad = params[i].grad();
    if (grad.defined()) {
      const torch::Tensor g = grad.contiguous();
      std::copy_n(g.data_ptr<float>(), g.numel(), f + at);
      f[flags + static_cast<int64_t>(i)] = 1.0f;
    }
    at += params[i].numel();
  }
  f[loss_at] = static_cast<float>(loss);
  collective.AllReduceSum(flat);
  f = flat.data_ptr<float>();
  at = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor p = params[i];
    if (f[flags + static_cast<int64_t>(i)] > 0) {  // some rank's graphs reached it
      if (!p.grad().defined()) p.mutable_grad() = torch::empty_like(p);
      torch::Tensor grad = p.mutable_grad();
      std::copy_n(f + at, p.numel(), grad.data_ptr<float>());
    }
    at += p.numel();
  }
  return f[loss_at];
}

double TrainStep(RankingNet& net, torch::optim::AdamW& opt, const GraphTensors& tensors, const GraphData& g,
                 const std::vector<int64_t>& rows, double lr, double clip_norm, double query_share,
                 RankingLoss loss_kind) {
  opt.zero_grad();
  const double loss = AccumulateGradients(net, tensors, g, rows, 1.0, query_share, loss_kind);
  ApplyGradients(net, opt, lr, clip_norm);
  return loss;
}

}  // namespace tgraph
