#include "model/core/graph.h"

#include "model/core/config_rows.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "model/core/sha256.h"

namespace tgraph {
namespace {

absl::Status Invalid(absl::string_view what, absl::string_view key, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "': ", msg));
}

absl::Status CheckRuntimes(const std::vector<int64_t>& r, int64_t c, absl::string_view what,
                           absl::string_view key) {
  if (static_cast<int64_t>(r.size()) != c)
    return Invalid(what, key, absl::StrCat("has ", r.size(), " entries, expected ", c, " (one per config)"));
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] < 0) return Invalid(what, key, absl::StrCat("entry ", i, " is negative (", r[i], ")"));
  return absl::OkStatus();
}

}  // namespace

std::vector<double> TileTargets(const TileGraph& g) {
  std::vector<double> t(g.config_runtime.size(), 0.0);
  for (size_t k = 0; k < t.size(); ++k)
    if (g.config_runtime_normalizers[k] > 0)
      t[k] = static_cast<double>(g.config_runtime[k]) / static_cast<double>(g.config_runtime_normalizers[k]);
  return t;
}

absl::Status ValidateNodeGraph(const NodeGraph& g, absl::string_view what) {
  const int64_t n = g.num_nodes;
  if (n <= 0) return Invalid(what, "node_feat", "graph has no nodes");
  if (static_cast<int64_t>(g.node_feat.size()) != n * kNodeFeatDim)
    return Invalid(what, "node_feat", absl::StrCat("has ", g.node_feat.size(), " values, expected ", n, " x ",
                                                   kNodeFeatDim));
  for (size_t i = 0; i < g.node_feat.size(); ++i)
    if (!std::isfinite(g.node_feat[i]))
      return Invalid(what, "node_feat", absl::StrCat("value at node ", i / kNodeFeatDim, ", feature ",
                                                     i % kNodeFeatDim, " is not finite"));
  if (static_cast<int64_t>(g.node_opcode.size()) != n)
    return Invalid(what, "node_opcode", absl::StrCat("has ", g.node_opcode.size(), " entries, expected ", n,
                                                     " (one per node)"));
  for (int64_t i = 0; i < n; ++i)
    if (g.node_opcode[i] < 0 || g.node_opcode[i] >= kNumOpcodes)
      return Invalid(what, "node_opcode", absl::StrCat("node ", i, " has opcode ", g.node_opcode[i],
                                                       ", expected 0..", kNumOpcodes - 1));
  if (g.edge_index.size() % 2 != 0) return Invalid(what, "edge_index", "must have shape (m, 2)");
  for (size_t e = 0; e < g.edge_index.size(); ++e)
    if (g.edge_index[e] < 0 || g.edge_index[e] >= n)
      return Invalid(what, "edge_index", absl::StrCat("edge ", e / 2, " refers to node ", g.edge_index[e],
                                                      ", expected 0..", n - 1));
  return absl::OkStatus();
}

absl::Status ValidateNodeSplits(const std::vector<int64_t>& splits, int64_t n, absl::string_view what) {
  if (splits.empty()) return absl::OkStatus();
  if (splits.front() != 0)
    return Invalid(what, "node_splits", absl::StrCat("entry 0 is ", splits.front(),
                                                     ", expected 0 (boundaries run from 0 to n = ", n, ")"));
  for (size_t i = 1; i < splits.size(); ++i)
    if (splits[i] < splits[i - 1] || splits[i] > n)
      return Invalid(what, "node_splits", absl::StrCat("entry ", i, " is ", splits[i], ", expected ", splits[i - 1],
                                                       "..", n, " (non-decreasing boundaries up to n)"));
  if (splits.back() != n)
    return Invalid(what, "node_splits", absl::StrCat("the last entry is ", splits.back(), ", expected n = ", n,
                                                     " (boundaries run from 0 to n)"));
  return absl::OkStatus();
}

absl::Status ValidateConfigurableNodes(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids,
                                       absl::string_view what) {
  if (absl::Status s = ValidateNodeGraph(graph, what); !s.ok()) return s;
  const int64_t n = graph.num_nodes, nc = static_cast<int64_t>(node_config_ids.size());
  if (nc == 0) return Invalid(what, "node_config_ids", "is empty: a layout graph needs configurable nodes");
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < nc; ++i) {
    const int64_t id = node_config_ids[i];
    if (id < 0 || id >= n)
      return Invalid(what, "node_config_ids", absl::StrCat("entry ", i, " is ", id, ", expected 0..", n - 1));
    if (seen[id]) return Invalid(what, "node_config_ids", absl::StrCat("node ", id, " is listed twice"));
    seen[id] = true;
  }
  return absl::OkStatus();
}

absl::Status ValidateLayoutGraph(const LayoutGraph& g, absl::string_view what, bool allow_no_configs) {
  if (absl::Status s = ValidateConfigurableNodes(g.graph, g.node_config_ids, what); !s.ok()) return s;
  const int64_t n = g.graph.num_nodes, nc = g.num_config_nodes(), c = g.num_configs;
  if (c < 0 || (c == 0 && !allow_no_configs))
    return Invalid(what, "node_config_feat",
                   "has no configurations (a graph-only file, as tgraph-featurize module writes: rank "
                   "configurations for it with tgraph-client rank --configs)");
  if (static_cast<int64_t>(g.config_feat.size()) != c * nc * kConfigFeatDim)
    return Invalid(what, "node_config_feat", absl::StrCat("has ", g.config_feat.size(), " values, expected ", c,
                                                          " x ", nc, " x ", kConfigFeatDim));
  if (std::string bad = FirstBadLayoutConfigValue(g.config_feat.data(), g.config_feat.size(), nc); !bad.empty())
    return Invalid(what, "node_config_feat", bad);
  if (absl::Status s = CheckRuntimes(g.config_runtime, c, what, "config_runtime"); !s.ok()) return s;
  if (absl::Status s = ValidateNodeSplits(g.node_splits, n, what); !s.ok()) return s;
  return absl::OkStatus();
}

absl::Status ValidateTileGraph(const TileGraph& g, absl::string_view what) {
  if (absl::Status s = ValidateNodeGraph(g.graph, what); !s.ok()) return s;
  const int64_t c = g.num_configs;
  if (c <= 0) return Invalid(what, "config_feat", "has no configurations");
  if (static_cast<int64_t>(g.config_feat.size()) != c * kTileConfigDim)
    return Invalid(what, "config_feat", absl::StrCat("has ", g.config_feat.size(), " values, expected ", c,
                                                     " x ", kTileConfigDim));
  if (std::string bad = FirstBadTileConfigValue(g.config_feat.data(), g.config_feat.size()); !bad.empty())
    return Invalid(what, "config_feat", bad);
  if (absl::Status s = CheckRuntimes(g.config_runtime, c, what, "config_runtime"); !s.ok()) return s;
  if (absl::Status s = CheckRuntimes(g.config_runtime_normalizers, c, what, "config_runtime_normalizers");
      !s.ok())
    return s;
  return absl::OkStatus();
}

std::string GraphContentHash(const NodeGraph& g, const std::vector<int64_t>& node_config_ids) {
  Sha256 h;
  static constexpr char kTag[] = "tgraph.graph.v1\n";
  h.Update(kTag, sizeof(kTag) - 1);
  h.U64(static_cast<uint64_t>(g.num_nodes));
  // Canonicalise -0.0 to +0.0 in chunks, so equal values always hash equally.
  std::vector<float> chunk;
  constexpr size_t kChunk = 1 << 16;
  for (size_t i = 0; i < g.node_feat.size(); i += kChunk) {
    const size_t len = std::min(kChunk, g.node_feat.size() - i);
    chunk.assign(g.node_feat.begin() + i, g.node_feat.begin() + i + len);
    for (float& v : chunk)
      if (v == 0.0f) v = 0.0f;
    h.Update(chunk.data(), len * sizeof(float));
  }
  h.Update(g.node_opcode.data(), g.node_opcode.size() * sizeof(int32_t));
  h.U64(static_cast<uint64_t>(g.num_edges()));
  h.Update(g.edge_index.data(), g.edge_index.size() * sizeof(int64_t));
  h.U64(node_config_ids.size());
  h.Update(node_config_ids.data(), node_config_ids.size() * sizeof(int64_t));
  return h.HexDigest();
}

}  // namespace tgraph
