#include "server/rank_request.h"

#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "model/core/config_rows.h"
#include "model/core/graph.h"
#include "model/search/search_policy.h"

namespace tgraph {

namespace {

// `count` configurations in `layout` or `tile` bytes (the fields `<prefix>layout_configs`
// and `<prefix>tile_configs`, counted by `count_field`) for a graph with
// `num_config_nodes` configurable nodes.
absl::Status ValidateRows(absl::string_view prefix, absl::string_view count_field, int64_t count,
                          absl::string_view layout, absl::string_view tile, const std::string& collection,
                          CollectionKind kind, int64_t num_config_nodes) {
  const int64_t c = count, nc = num_config_nodes;
  if (kind == CollectionKind::kLayout) {
    if (nc == 0)
      return absl::InvalidArgumentError(absl::StrCat("collection ", collection,
                                                     " ranks layouts, but the graph has no node_config_ids (no "
                                                     "configurable nodes: an HLO module without a convolution, dot "
                                                     "or reshape whose layout XLA chooses, or a tile graph)"));
    if (!tile.empty())
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "tile_configs must be empty for a layout collection; use ", prefix, "layout_configs"));
    const size_t want = static_cast<size_t>(c) * static_cast<size_t>(nc) * kConfigFeatDim;
    if (layout.size() != want)
      return absl::InvalidArgumentError(absl::StrCat(prefix, "layout_configs has ", layout.size(), " bytes, expected ",
                                                     count_field, " x nc x 18 = ", c, " x ", nc, " x 18 = ", want));
    if (std::string bad = FirstBadLayoutConfigValue(reinterpret_cast<const int8_t*>(layout.data()), want, nc);
        !bad.empty())
      return absl::InvalidArgumentError(absl::StrCat(prefix, "layout_configs: ", bad));
  } else {
    if (nc != 0)
      return absl::InvalidArgumentError(absl::StrCat("collection ", collection,
                                                     " ranks tile configs of a kernel graph without node_config_ids"));
    if (!layout.empty())
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "layout_configs must be empty for the tile collection; use ", prefix, "tile_configs"));
    const size_t want = static_cast<size_t>(c) * kTileConfigDim * sizeof(float);
    if (tile.size() != want)
      return absl::InvalidArgumentError(absl::StrCat(prefix, "tile_configs has ", tile.size(), " bytes, expected ",
                                                     count_field, " x 24 float32 = ", want));
    std::vector<float> values(static_cast<size_t>(c) * kTileConfigDim);
    std::memcpy(values.data(), tile.data(), want);
    if (std::string bad = FirstBadTileConfigValue(values.data(), values.size()); !bad.empty())
      return absl::InvalidArgumentError(absl::StrCat(prefix, "tile_configs: ", bad));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRankRequest(const RankRequest& q, CollectionKind kind, int64_t num_config_nodes, int num_folds,
                                 int64_t version, const RankLimits& limits) {
  const int64_t c = q.num_configs;
  if (c <= 0) return absl::InvalidArgumentError(absl::StrCat("num_configs must be positive, got ", c));
  if (c > limits.max_configs)
    return absl::ResourceExhaustedError(
        absl::StrCat("num_configs is ", c, ", over this server's limit of ", limits.max_configs, " per request"));
  if (absl::Status s = ValidateRows("", "num_configs", c, q.layout_configs, q.tile_configs, q.collection, kind,
                                    num_config_nodes);
      !s.ok())
    return s;
  const int64_t r = q.num_reference_configs;
  if (r < 0 || r > limits.max_reference)
    return absl::InvalidArgumentError(absl::StrCat("num_reference_configs must be in 0..", limits.max_reference,
                                                   " (the model's batch for this graph), got ", r));
  if (r == 0 && (!q.reference_layout_configs.empty() || !q.reference_tile_configs.empty()))
    return absl::InvalidArgumentError("reference configurations given but num_reference_configs is 0");
  if (r > 0)
    if (absl::Status s = ValidateRows("reference_", "num_reference_configs", r, q.reference_layout_configs,
                                      q.reference_tile_configs, q.collection, kind, num_config_nodes);
        !s.ok())
      return s;
  if (q.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", q.top_k));
  if (q.cascade && q.top_k <= 0)
    return absl::InvalidArgumentError("cascade needs top_k > 0: it re-scores the best configurations for the top k");
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

namespace {

// One runtime (ns, > 0) per excluded row, or none.
absl::Status ValidateExcludeRuntimes(const SearchRequest& q) {
  const int64_t runtimes = static_cast<int64_t>(q.exclude_runtimes_ns.size());
  if (runtimes > 0 && runtimes != q.num_exclude)
    return absl::InvalidArgumentError(absl::StrCat("exclude_runtimes_ns has ", runtimes, " values for num_exclude ",
                                                   q.num_exclude, " (one per excluded row, or none)"));
  for (int64_t i = 0; i < runtimes; ++i)
    if (q.exclude_runtimes_ns[static_cast<size_t>(i)] <= 0)
      return absl::InvalidArgumentError(absl::StrCat("exclude_runtimes_ns[", i, "] is ",
                                                     q.exclude_runtimes_ns[static_cast<size_t>(i)], ", expected > 0"));
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSearchRequest(const SearchRequest& q, CollectionKind kind, int64_t num_config_nodes,
                                   const RankLimits& limits) {
  if (q.num_results < 0 || q.num_results > 1000)
    return absl::InvalidArgumentError(absl::StrCat("num_results must be in 0..1000 (0: 10), got ", q.num_results));
  if (kind == CollectionKind::kTile) {
    for (const auto& [field, set] : {std::pair{"max_evaluations", q.max_evaluations != 0},
                                     {"num_start", q.num_start != 0},
                                     {"num_candidates", q.num_candidates != 0},
                                     {"max_changed_groups", q.max_changed_groups != 0},
                                     {"include_stored_measurements", q.include_stored}})
      if (set)
        return absl::InvalidArgumentError(absl::StrCat(field, " is for layout searches; a tile search scores every legal "
                                                              "configuration and takes only num_results, exclude rows, "
                                                              "their runtimes and a kernel (whose stored measurements "
                                                              "it joins)"));
    if (q.num_exclude < 0 || q.num_exclude > limits.max_configs)
      return absl::InvalidArgumentError(
          absl::StrCat("num_exclude must be in 0..", limits.max_configs, " (--max_configs), got ", q.num_exclude));
    if (absl::Status s = ValidateRows("exclude_", "num_exclude", q.num_exclude, q.exclude_layout_configs,
                                      q.exclude_tile_configs, q.collection, kind, num_config_nodes);
        !s.ok())
      return s;
    if (!q.kernel.name.empty() || !q.kernel.source_hash.empty())
      if (absl::Status s = ValidateTileKernel(q.kernel, "kernel"); !s.ok()) return s;
    return ValidateExcludeRuntimes(q);
  }
  if (!q.exclude_tile_configs.empty())
    return absl::InvalidArgumentError("exclude_tile_configs is for tile collections; use exclude_layout_configs");
  if (!q.kernel.name.empty() || !q.kernel.source_hash.empty())
    return absl::InvalidArgumentError("kernel is for tile searches (whose prior follows a kernel's measurements)");
  if (q.max_evaluations < 0 || q.max_evaluations > limits.max_configs)
    return absl::InvalidArgumentError(absl::StrCat("max_evaluations must be in 0..", limits.max_configs,
                                                   " (this server's --max_configs; 0: ", kDefaultSearchEvaluations,
                                                   "), got ", q.max_evaluations));
  if (q.max_changed_groups < -1)
    return absl::InvalidArgumentError(absl::StrCat("max_changed_groups must be -1 (the whole space), 0 (the server's "
                                                   "default, ", kDefaultSearchRadius, ") or a count of groups, got ",
                                                   q.max_changed_groups));
  for (const auto& [prefix, field, count, bytes] :
       {std::tuple{"exclude_", "num_exclude", q.num_exclude, q.exclude_layout_configs},
        std::tuple{"start_", "num_start", q.num_start, q.start_layout_configs},
        std::tuple{"candidate_", "num_candidates", q.num_candidates, q.candidate_layout_configs}}) {
    if (count < 0 || count > limits.max_configs)
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be in 0..", limits.max_configs, " (--max_configs), got ", count));
    if (absl::Status s = ValidateRows(prefix, field, count, bytes, "", q.collection, kind, num_config_nodes); !s.ok())
      return s;
  }
  return ValidateExcludeRuntimes(q);
}

}  // namespace tgraph
