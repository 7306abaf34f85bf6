// One optimisation step of the pairwise ranking loss on a sample of one graph's
// configurations, and the optimizer it uses: shared by the trainer (TrainFold) and
// fine-tuning (Finetune), so that both train the same way. Includes LibTorch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/features.h"
#include "model/rng.h"
#include "model/scoring.h"
#include "model/tgraph_net.h"
#include "model/train/train_data.h"

namespace tgraph {

// AdamW with weight decay on matrices only (biases and norms undecayed), as the paper.
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(RankingNet& net, double lr, double weight_decay);

// What a ConfigRows view of a GraphData's configurations points into.
struct RowStorage {
  std::vector<int8_t> layout;  // decompressed layout rows
  std::vector<float> tile;     // copied tile rows
};

// Configurations `rows` of g (in that order) as scoring and training take them:
// layout rows decompressed into storage, tile rows copied into it.
ConfigRows SelectRows(const GraphData& g, const std::vector<int64_t>& rows, RowStorage* storage);
// Every configuration of g (tile rows are not copied).
ConfigRows RowsOf(const GraphData& g, RowStorage* storage);

// min(batch, count) distinct configuration rows of g, drawn by rng.
std::vector<int64_t> SampleRows(const GraphData& g, int64_t batch, Rng& rng);

// Sets the learning rate, then forward, pairwise hinge loss against g's targets of
// `rows`, backward, gradient clipping and the optimizer step. Returns the loss.
double TrainStep(RankingNet& net, torch::optim::AdamW& opt, const GraphTensors& tensors, const GraphData& g,
                 const std::vector<int64_t>& rows, double lr, double clip_norm);

}  // namespace tgraph
