// In-memory TpuGraphs graphs (layout and tile), their invariants and their content hash.
// The types are plain structs; npz loading and saving lives in graph_io.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"

namespace tgraph {

inline constexpr int kNodeFeatDim = 140;       // node_feat columns
inline constexpr int kNumericFeatDim = 134;    // node_feat[0:134]: numeric and one-hot
inline constexpr int kLayoutFeatBegin = 134;   // node_feat[134:140]: output layout, minor-to-major
inline constexpr int kLayoutSlots = 6;
inline constexpr int kShapeDimsBegin = 21;     // node_feat[21:27]: shape_dimensions_0..5
inline constexpr int kConfigFeatDim = 18;      // node_config_feat: output, input, kernel groups of 6
inline constexpr int kConfigGroups = 3;
inline constexpr int kTileConfigDim = 24;      // config_feat of the tile collection
inline constexpr int kNumOpcodes = 121;        // opcode ids are in [0, 120], docs/format.md

// HLO opcode ids used by the code (docs/format.md).
namespace op {
inline constexpr int kAdd = 2, kBroadcast = 13, kConstant = 24, kConvert = 25, kConvolution = 26,
                     kCopy = 27, kDivide = 32, kDot = 34, kExponential = 37, kMaximum = 57,
                     kMultiply = 59, kParameter = 63, kReduce = 70, kReduceWindow = 72, kReshape = 75,
                     kRsqrt = 81, kSubtract = 95, kTanh = 96, kTranspose = 98, kTuple = 100,
                     kIota = 48, kConcatenate = 22, kSlice = 92, kSelect = 83, kCompare = 20,
                     kSelectAndScatter = 84, kCustomCall = 31, kFusion = 41;
}  // namespace op

// What every graph has: nodes in topological order with features and opcodes, and
// edges as [consumer, producer] pairs (edge_index row [u, v]: u consumes v's output).
struct NodeGraph {
  int64_t num_nodes = 0;
  std::vector<float> node_feat;        // num_nodes x 140, row-major
  std::vector<int32_t> node_opcode;    // num_nodes
  std::vector<int64_t> edge_index;     // num_edges x 2, row-major
  int64_t num_edges() const { return static_cast<int64_t>(edge_index.size() / 2); }
  const float* feat(int64_t node) const { return node_feat.data() + node * kNodeFeatDim; }
};

// A layout-collection graph: the configuration is one 18-value layout per configurable node.
struct LayoutGraph {
  std::string name;                      // file stem, e.g. "resnet_v1_50"
  NodeGraph graph;
  std::vector<int64_t> node_config_ids;  // nc ascending-or-not indices of configurable nodes
  int64_t num_configs = 0;               // c
  std::vector<int8_t> config_feat;       // c x nc x 18, values in {-1..5}
  std::vector<int64_t> config_runtime;   // c
  std::vector<int64_t> node_splits;      // optional computation boundaries 0 = s_0 <= ... <= s_k = n; may be empty

  int64_t num_config_nodes() const { return static_cast<int64_t>(node_config_ids.size()); }
  const int8_t* config(int64_t c) const {
    return config_feat.data() + c * num_config_nodes() * kConfigFeatDim;
  }
};

// A tile-collection graph: the configuration is one 24-float tile shape per kernel.
struct TileGraph {
  std::string name;
  NodeGraph graph;
  int64_t num_configs = 0;
  std::vector<float> config_feat;                   // c x 24
  std::vector<int64_t> config_runtime;              // c
  std::vector<int64_t> config_runtime_normalizers;  // c
};

// The tile collection's ranking target per config: config_runtime /
// config_runtime_normalizers (0 where the normalizer is 0, e.g. hidden test runtimes).
std::vector<double> TileTargets(const TileGraph& g);

// Invariants of docs/format.md: sizes agree, opcodes in range, edges and config ids
// in range, config values in {-1..5}, features finite, runtimes non-negative.
// `what` (usually the file path) prefixes every error, which also names the key.
absl::Status ValidateNodeGraph(const NodeGraph& g, absl::string_view what);
// allow_no_configs: accept c = 0, a graph-only file (tgraph-featurize module writes one;
// tgraph-client rank --configs ranks configurations for it). Elsewhere such a file is
// refused with a message that says so.
absl::Status ValidateLayoutGraph(const LayoutGraph& g, absl::string_view what, bool allow_no_configs = false);
// The graph (ValidateNodeGraph) and its configurable nodes: at least one, each a node,
// none twice. Part of ValidateLayoutGraph.
absl::Status ValidateConfigurableNodes(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids,
                                       absl::string_view what);
absl::Status ValidateTileGraph(const TileGraph& g, absl::string_view what);

// node_splits of docs/format.md: empty, or boundaries from 0 to n inclusive, non-decreasing
// (e.g. [0, 324, 372] for 372 nodes).
absl::Status ValidateNodeSplits(const std::vector<int64_t>& splits, int64_t n, absl::string_view what);


// Content hash: lowercase hex SHA-256 of this canonical little-endian encoding:
//   "tgraph.graph.v1\n"
//   u64 n, then n*140 float32 node_feat (-0.0 written as +0.0),
//   n int32 node_opcode,
//   u64 m, then m*2 int64 edge_index,
//   u64 nc, then nc int64 node_config_ids (nc = 0 for tile graphs).
// Configurations and runtimes are not part of the identity of a graph.
std::string GraphContentHash(const NodeGraph& g, const std::vector<int64_t>& node_config_ids);

}  // namespace tgraph
