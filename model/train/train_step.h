// One optimisation step of the pairwise ranking loss on a sample of one graph's
// configurations, and the optimizer it uses: shared by the trainer (TrainFold) and
// fine-tuning (Finetune), so that both train the same way. Includes LibTorch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/nn/features.h"
#include "model/nn/loss.h"
#include "model/core/rng.h"
#include "model/nn/scoring.h"
#include "model/nn/tgraph_net.h"
#include "model/train/distributed.h"
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

// The default share of a step's configurations scored outside the softmax's reference.
constexpr double kDefaultQueryShare = 0.0;

// How many of a step's `count` sampled configurations form the cross-attention's
// reference when `query_share` of them are scored one at a time against it, as
// inference scores configurations outside its reference (model/nn/scoring.h): at least
// one, and all of them when the share rounds to none.
int64_t ReferenceMembers(int64_t count, double query_share);

// One step in parts, for steps over several graphs and ranks (model/train/trainer.h):
// AccumulateGradients runs forward and backward of one graph's sample (the first
// ReferenceMembers(rows, query_share) rows as the cross-attention's reference) and adds
// the gradients of `weight` x its ranking loss (model/nn/loss.h) to the parameters' .grad (the
// caller zeroes them once per step); it returns the loss, unweighted. SumGradients
// replaces every rank's gradients by their sum over the ranks (a parameter no rank's
// graphs reached keeps no gradient, as on one rank) and returns the sum of `loss`.
// ApplyGradients sets the learning rate, clips the gradients' norm and steps.
double AccumulateGradients(RankingNet& net, const GraphTensors& tensors, const GraphData& g,
                           const std::vector<int64_t>& rows, double weight, double query_share,
                           RankingLoss loss = RankingLoss::kPairwiseHinge);
double SumGradients(RankingNet& net, Collective& collective, double loss);
void ApplyGradients(RankingNet& net, torch::optim::AdamW& opt, double lr, double clip_norm);

// One graph's step (fine-tuning's): zero the gradients, AccumulateGradients with
// weight 1, ApplyGradients. Returns the loss.
double TrainStep(RankingNet& net, torch::optim::AdamW& opt, const GraphTensors& tensors, const GraphData& g,
                 const std::vector<int64_t>& rows, double lr, double clip_norm,
                 double query_share = kDefaultQueryShare, RankingLoss loss = RankingLoss::kPairwiseHinge);

}  // namespace tgraph
