// Which ranking loss training minimises: the name a flag and a manifest use. The losses
// themselves are in model/nn/loss.h (LibTorch); this header needs none.
#pragma once

#include <optional>
#include <string_view>

namespace tgraph {

enum class RankingLoss {
  // TGraph's (eq. 8): every ordered pair counts alike.
  kPairwiseHinge,
  // The same pairs, each weighted by how near the top its faster member is: a search
  // only ever measures the best few, so misordering two slow configurations costs it
  // nothing, and misordering the fastest with its runners-up costs it everything.
  kTopWeighted,
};

// "hinge" / "top"; nullopt for anything else.
inline std::optional<RankingLoss> ParseRankingLoss(std::string_view name) {
  if (name == "hinge") return RankingLoss::kPairwiseHinge;
  if (name == "top") return RankingLoss::kTopWeighted;
  return std::nullopt;
}

inline const char* RankingLossName(RankingLoss loss) {
  return loss == RankingLoss::kTopWeighted ? "top" : "hinge";
}

}  // namespace tgraph
