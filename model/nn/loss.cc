#include "model/nn/loss.h"

#include <torch/torch.h>

namespace tgraph {

namespace {

torch::Tensor SlowerPairs(const torch::Tensor& scores, const torch::Tensor& runtimes) {
  return (runtimes.unsqueeze(1) > runtimes.unsqueeze(0)).to(scores.dtype());  // [i, j]: r_i > r_j
}

torch::Tensor PairHinge(const torch::Tensor& scores) {
  return torch::relu(1.0 - (scores.unsqueeze(1) - scores.unsqueeze(0)));
}

}  // namespace

torch::Tensor PairwiseHingeLoss(const torch::Tensor& scores, const torch::Tensor& runtimes) {
  const int64_t c = scores.size(0);
  return (SlowerPairs(scores, runtimes) * PairHinge(scores)).sum() / static_cast<double>(std::max<int64_t>(1, c * c));
}

torch::Tensor TopWeightedHingeLoss(const torch::Tensor& scores, const torch::Tensor& runtimes) {
  const int64_t c = scores.size(0);
  const torch::Tensor slower = SlowerPairs(scores, runtimes);
  // rank_j = how many runtimes are strictly below r_j (ties share the lower place).
  const torch::Tensor rank = slower.sum(1);  // row i: pairs where i is slower = configs faster than i
  const torch::Tensor w = 1.0 / torch::log2(rank + 2.0);  // [C], the faster member's weight
  const torch::Tensor pair_w = slower * w.unsqueeze(0);   // [i, j]: weight of j
  const torch::Tensor total_w = pair_w.sum();
  if (total_w.item<double>() <= 0) return (scores * 0).sum();  // no ordered pair: no loss, a defined gradient
  const double pairs = slower.sum().item<double>();
  return (pair_w * PairHinge(scores)).sum() / total_w * (pairs / static_cast<double>(c * c));
}

torch::Tensor ListwiseLoss(const torch::Tensor& scores, const torch::Tensor& runtimes) {
  const torch::Tensor target = torch::softmax(-torch::log(runtimes.to(scores.dtype())) / kListwiseTemperature, 0);
  return -(target * torch::log_softmax(-kListwiseSharpness * scores, 0)).sum();
}

torch::Tensor RankingLossValue(RankingLoss loss, const torch::Tensor& scores, const torch::Tensor& runtimes) {
  switch (loss) {
    case RankingLoss::kTopWeighted:
      return TopWeightedHingeLoss(scores, runtimes);
    case RankingLoss::kListwise:
      return ListwiseLoss(scores, runtimes);
    case RankingLoss::kPairwiseHinge:
      break;
  }
  return PairwiseHingeLoss(scores, runtimes);
}

}  // namespace tgraph
