// The TGraph paper's preprocessing (section 2.2): pruning to configurable nodes and
// their neighbours, config de-duplication, base-7 config compression, -1 re-padding of
// node_feat[134:140], and feature standardisation statistics.
// Pure functions: any thread; results are the caller's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/graph.h"

namespace tgraph {

// ---- Pruning ---------------------------------------------------------------------

struct PrunedGraph {
  NodeGraph graph;                         // kept nodes (original order), edges among them re-indexed
  std::vector<int64_t> original_ids;       // new node index -> original node index
  std::vector<int64_t> config_node_index;  // per entry of node_config_ids: its new node index
};

// Keeps every configurable node and every node that is a direct producer or consumer
// of one; keeps the edges whose both ends are kept. node_config_ids must be valid.
PrunedGraph PruneGraph(const NodeGraph& g, const std::vector<int64_t>& node_config_ids);

// ---- Configuration de-duplication --------------------------------------------------

// Merges identical configuration rows, keeping each row's first position and the
// smallest runtime among its copies. Returns how many rows were removed.
int64_t DeduplicateConfigs(LayoutGraph* g);

// ---- Lossless base-7 compression ---------------------------------------------------

// One 6-slot layout group (values -1..5) <-> one integer in [0, 7^6):
// code = sum_k (v_k + 1) * 7^k, slot 0 least significant.
inline constexpr uint32_t kLayoutCodeCount = 117649;  // 7^6
uint32_t EncodeLayoutGroup(const int8_t* six);
void DecodeLayoutGroup(uint32_t code, int8_t* six);

struct CompressedConfigs {
  int64_t num_configs = 0;
  int64_t num_config_nodes = 0;
  std::vector<uint32_t> codes;  // num_configs x num_config_nodes x 3

  static CompressedConfigs Compress(const int8_t* config_feat, int64_t num_configs, int64_t num_config_nodes);
  // Writes rows.size() x nc x 18 values to out, in the order of rows.
  void DecompressRows(const std::vector<int64_t>& rows, int8_t* out) const;
  size_t bytes() const { return codes.size() * sizeof(uint32_t); }
};

// ---- node_feat[134:140] re-padding -------------------------------------------------

// Rank of a node's output: the number of non-zero shape_dimensions_0..5.
int NodeRank(const float* node_feat_row);
// Sets node_feat[134 + k] = -1 for k >= rank, so that a 0 means "axis 0" only.
void RepadLayoutFeatures(NodeGraph* g);

// ---- Feature statistics -------------------------------------------------------------

// Per-feature mean and standard deviation of node_feat[0:134] over all nodes of a set
// of graphs (population std). A feature with zero variance standardises to 0.
struct FeatureStats {
  int64_t count = 0;
  std::vector<double> mean = std::vector<double>(kNumericFeatDim, 0.0);
  std::vector<double> std = std::vector<double>(kNumericFeatDim, 0.0);

  static FeatureStats Compute(const std::vector<const NodeGraph*>& graphs);
  // Chan et al.'s parallel merge, so statistics can be built incrementally.
  void Merge(const FeatureStats& other);
  // out[k] = (in[k] - mean[k]) / std[k], or 0 where std[k] is 0.
  void Standardize(const float* node_feat_row, float* out134) const;

  std::string ToJson() const;
  static absl::StatusOr<FeatureStats> FromJson(const std::string& json, absl::string_view what);
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<FeatureStats> Load(const std::string& path);
};

}  // namespace tgraph
