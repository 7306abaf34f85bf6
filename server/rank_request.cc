#include "server/rank_request.h"

#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "model/config_rows.h"
#include "model/graph.h"

namespace tgraph {

absl::Status ValidateRankRequest(const RankRequest& q, CollectionKind kind, int64_t num_config_nodes, int num_folds,
                                 int64_t version, const RankLimits& limits) {
  const int64_t c = q.num_configs;
  if (c <= 0) return absl::InvalidArgumentError(absl::StrCat("num_configs must be positive, got ", c));
  if (c > limits.max_configs)
    return absl::ResourceExhaustedError(
        absl::StrCat("num_configs is ", c, ", over this server's limit of ", limits.max_configs, " per request"));
  const int64_t nc = num_config_nodes;
  if (kind == CollectionKind::kLayout) {
    if (nc == 0)
      return absl::InvalidArgumentError(absl::StrCat("collection ", q.collection,
                                                     " ranks layouts, but the graph has no node_config_ids"));
    if (!q.tile_configs.empty())
      return absl::InvalidArgumentError("tile_configs must be empty for a layout collection; use layout_configs");
    const size_t want = static_cast<size_t>(c) * static_cast<size_t>(nc) * kConfigFeatDim;
    if (q.layout_configs.size() != want)
      return absl::InvalidArgumentError(absl::StrCat("layout_configs has ", q.layout_configs.size(),
                                                     " bytes, expected num_configs x nc x 18 = ", c, " x ", nc,
                                                     " x 18 = ", want));
    if (std::string bad = FirstBadLayoutConfigValue(reinterpret_cast<const int8_t*>(q.layout_configs.data()), want, nc);
        !bad.empty())
      return absl::InvalidArgumentError(absl::StrCat("layout_configs: ", bad));
  } else {
    if (nc != 0)
      return absl::InvalidArgumentError(absl::StrCat("collection ", q.collection,
                                                     " ranks tile configs of a kernel graph without node_config_ids"));
    if (!q.layout_configs.empty())
      return absl::InvalidArgumentError("layout_configs must be empty for the tile collection; use tile_configs");
    const size_t want = static_cast<size_t>(c) * kTileConfigDim * sizeof(float);
    if (q.tile_configs.size() != want)
      return absl::InvalidArgumentError(absl::StrCat("tile_configs has ", q.tile_configs.size(),
                                                     " bytes, expected num_configs x 24 float32 = ", want));
    std::vector<float> values(static_cast<size_t>(c) * kTileConfigDim);
    std::memcpy(values.data(), q.tile_configs.data(), want);
    if (std::string bad = FirstBadTileConfigValue(values.data(), values.size()); !bad.empty())
      return absl::InvalidArgumentError(absl::StrCat("tile_configs: ", bad));
  }
  if (q.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", q.top_k));
  if (q.cascade && q.top_k <= 0)
    return absl::InvalidArgumentError("cascade needs top_k > 0: it re-scores the best configurations for the top k");
  if (q.tta < 0 || q.tta > limits.max_tta)
    return absl::InvalidArgumentError(absl::StrCat("tta must be in 0..", limits.max_tta, ", got ", q.tta));
  const int folds = num_folds;
  std::set<int> seen;
  for (int f : q.folds) {
    if (f < 0 || f >= folds)
      return absl::InvalidArgumentError(absl::StrCat("folds: ", f, " is not a fold of ", q.collection, " version ",
                                                     version, ", which has folds 0..", folds - 1));
    if (!seen.insert(f).second) return absl::InvalidArgumentError(absl::StrCat("folds: ", f, " is listed twice"));
  }
  return absl::OkStatus();
}

}  // namespace tgraph
