// Which ranking loss training minimises: the name a flag and a manifest use. The losses
// themselves are in model/nn/loss.h (LibTorch); this header needs none.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tgraph {

enum class RankingLoss {
  // TGraph's (eq. 8): every ordered pair counts alike.
  kPairwiseHinge,
  // The same pairs, each weighted by how near the top its faster member is: a search
  // only ever measures the best few, so misordering two slow configurations costs it
  // nothing, and misordering the fastest with its runners-up costs it everything.
  kTopWeighted,
  // Listwise (ListNet): the cross-entropy between a softmax of the runtimes, sharp enough
  // that only configurations within a few percent of the sample's fastest carry weight,
  // and a softmax of the scores. Pairs far from the top cost nothing, so the network
  // spends itself on which configurations are nearly fastest, what a search measures
  // first.
  kListwise,
};

// The names a flag takes, for usage errors.
inline constexpr char kRankingLossNames[] = "hinge, top or listwise";

// "hinge" / "top" / "listwise"; nullopt for anything else.
inline std::optional<RankingLoss> ParseRankingLoss(std::string_view name) {
  if (name == "hinge") return RankingLoss::kPairwiseHinge;
  if (name == "top") return RankingLoss::kTopWeighted;
  if (name == "listwise") return RankingLoss::kListwise;
  return std::nullopt;
}

inline const char* RankingLossName(RankingLoss loss) {
  switch (loss) {
    case RankingLoss::kTopWeighted:
      return "top";
    case RankingLoss::kListwise:
      return "listwise";
    case RankingLoss::kPairwiseHinge:
      break;
  }
  return "hinge";
}

// The loss a model was trained with, as its manifest's training flags record it ("loss"):
// fine-tuning continues with it unless told otherwise, since a network's scores have the
// scale and the emphasis its own loss gave them (a listwise model orders only its top,
// and hinge steps on it start by reordering the tail). The hinge for a manifest that
// does not say or names no loss this build knows (written before the flag existed).
inline RankingLoss TrainedLoss(const std::map<std::string, std::string>& training) {
  const auto it = training.find("loss");
  if (it == training.end()) return RankingLoss::kPairwiseHinge;
  return ParseRankingLoss(it->second).value_or(RankingLoss::kPairwiseHinge);
}

}  // namespace tgraph
