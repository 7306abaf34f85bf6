#include "model/nn/loss.h"

#include <torch/torch.h>

namespace tgraph {

torch::Tensor PairwiseHingeLoss(const torch::Tensor& scores, const torch::Tensor& runtimes) {
  const int64_t c = scores.size(0);
  torch::Tensor slower = (runtimes.unsqueeze(1) > runtimes.unsqueeze(0)).to(scores.dtype());  // [i, j]: r_i > r_j
  torch::Tensor hinge = torch::relu(1.0 - (scores.unsqueeze(1) - scores.unsqueeze(0)));
  return (slower * hinge).sum() / static_cast<double>(std::max<int64_t>(1, c * c));
}

}  // namespace tgraph
