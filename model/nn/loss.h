// The ranking loss of TGraph (eq. 8): pairwise hinge with margin 1.
#pragma once

#include <torch/types.h>

namespace tgraph {

// mean over all ordered pairs (i, j) of I[r_i > r_j] * max(0, 1 - (s_i - s_j)):
// a slower config (larger runtime) should score at least 1 higher. The paper sums;
// the mean keeps the scale independent of the batch size. [C] scores, [C] runtimes.
torch::Tensor PairwiseHingeLoss(const torch::Tensor& scores, const torch::Tensor& runtimes);

}  // namespace tgraph
