// Converts between the wire Graph (tgraph.v1) and model/ graph types, validating every
// field: shared by the server (decode) and the client library (encode).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph.h"
#include "tgraph/v1/ranker.pb.h"

namespace tgraph {

struct WireGraph {
  NodeGraph graph;
  std::vector<int64_t> node_config_ids;
};

// INVALID_ARGUMENT naming the field ("graph.node_feat: ...") for any size, range or
// finiteness problem; RESOURCE_EXHAUSTED when num_nodes exceeds max_nodes.
absl::StatusOr<WireGraph> DecodeGraph(const v1::Graph& g, int64_t max_nodes);

void EncodeGraph(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids, v1::Graph* out);

}  // namespace tgraph
