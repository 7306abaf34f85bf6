// The ranking losses training minimises, in one place for the trainer and fine-tuning.
#pragma once

#include <torch/types.h>

#include "model/core/ranking_loss.h"

namespace tgraph {

// mean over all ordered pairs (i, j) of I[r_i > r_j] * max(0, 1 - (s_i - s_j)):
// a slower config (larger runtime) should score at least 1 higher. The paper sums;
// the mean keeps the scale independent of the batch size. [C] scores, [C] runtimes.
torch::Tensor PairwiseHingeLoss(const torch::Tensor& scores, const torch::Tensor& runtimes);

// The hinge of each pair (i slower than j) weighted by w_j = 1 / log2(2 + rank_j), rank_j
// the faster member's place among the C runtimes (0 = fastest; ties share the lower
// place): NDCG's discount, so the fastest's pairs weigh 1, the tenth's 0.29, the
// hundredth's 0.15. Scaled so that it equals PairwiseHingeLoss when every weight is 1:
// sum(w hinge) / sum(w) x pairs / C^2, whatever the batch size.
torch::Tensor TopWeightedHingeLoss(const torch::Tensor& scores, const torch::Tensor& runtimes);

// ListNet's cross-entropy -sum_i t_i log p_i, p = softmax(-kListwiseSharpness x scores)
// (lower scores faster) and t = softmax(-log(runtimes) / kListwiseTemperature): a
// configuration 5% slower than another weighs 1.05^-20, about e^-1, of it in the target,
// so t sits on the sample's few nearly fastest. The sharpness lets a score distribution of unit spread
// (the standardised scores a tile model with a prior trains on) put most of p on one
// configuration of 128; a network trained alone learns any scale it needs.
// [C] scores, [C] runtimes (> 0).
inline constexpr double kListwiseTemperature = 0.05;
inline constexpr double kListwiseSharpness = 2.0;
torch::Tensor ListwiseLoss(const torch::Tensor& scores, const torch::Tensor& runtimes);

torch::Tensor RankingLossValue(RankingLoss loss, const torch::Tensor& scores, const torch::Tensor& runtimes);

}  // namespace tgraph
