#include "model/train/train_step.h"

#include <algorithm>
#include <numeric>

#include "model/loss.h"

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

ConfigRows RowsOf(const GraphData& g, std::vector<int8_t>* storage) {
  ConfigRows r;
  r.count = g.num_configs();
  if (!g.tile_feat.empty()) {
    r.tile = g.tile_feat.data();
    return r;
  }
  std::vector<int64_t> all(static_cast<size_t>(r.count));
  std::iota(all.begin(), all.end(), 0);
  *storage = g.LayoutRows(all);
  r.layout = storage->data();
  r.num_config_nodes = g.configs.num_config_nodes;
  return r;
}

std::vector<int64_t> SampleRows(const GraphData& g, int64_t batch, Rng& rng) {
  std::vector<int64_t> rows(static_cast<size_t>(g.num_configs()));
  std::iota(rows.begin(), rows.end(), 0);
  rng.Shuffle(rows);
  rows.resize(static_cast<size_t>(std::min<int64_t>(batch, g.num_configs())));
  return rows;
}

double TrainStep(RankingNet& net, torch::optim::AdamW& opt, const GraphTensors& tensors, const GraphData& g,
                 const std::vector<int64_t>& rows, double lr, double clip_norm) {
  ConfigBatch b;
  torch::Tensor target = torch::empty({static_cast<int64_t>(rows.size())}, torch::kFloat32);
  for (size_t i = 0; i < rows.size(); ++i) target[static_cast<int64_t>(i)] = static_cast<float>(g.target[rows[i]]);
  if (g.tile_feat.empty()) {
    const std::vector<int8_t> cfg = g.LayoutRows(rows);
    b.layout = MakeLayoutConfigTensor(cfg.data(), static_cast<int64_t>(rows.size()), g.configs.num_config_nodes);
  } else {
    b.tile = torch::empty({static_cast<int64_t>(rows.size()), kTileConfigDim});
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(g.tile_feat.data() + rows[i] * kTileConfigDim, kTileConfigDim,
                  b.tile.data_ptr<float>() + i * kTileConfigDim);
  }
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
  opt.zero_grad();
  torch::Tensor loss = PairwiseHingeLoss(net.Score(tensors, b), target);
  loss.backward();
  torch::nn::utils::clip_grad_norm_(net.parameters(), clip_norm);
  opt.step();
  return loss.item<double>();
}

}  // namespace tgraph
