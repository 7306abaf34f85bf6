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

torch::Tensor RankingLossValue(RankingLoss loss, const torch::Tensor& scores, const torch::Tensor& runtimes);

}  // namespace tgraph
