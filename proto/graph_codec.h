// Converts between the wire Graph (tgraph.v1) and model/ graph types, validating every
// field: shared by the server (decode) and the client library (encode).
// Pure functions: any thread; results are the caller's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/graph.h"
#include "model/core/layout_space.h"
#include "model/hlo/featurize.h"
#include "tgraph/v1/ranker.pb.h"

namespace tgraph {

struct WireGraph {
  NodeGraph graph;
  std::vector<int64_t> node_config_ids;
  // Graphs from an HLO module: its name, where each node came from, and featurization notes.
  std::string module_name;
  std::vector<hlo::NodeSource> sources;
  std::vector<std::string> warnings;
  FirstOperands first_operands;  // HLO modules: per node, operands 0 and 1 in order; empty for arrays
};

// INVALID_ARGUMENT naming the field ("graph.node_feat: ...") for any size, range or
// finiteness problem; RESOURCE_EXHAUSTED when num_nodes exceeds max_nodes.
absl::StatusOr<WireGraph> DecodeGraph(const v1::Graph& g, int64_t max_nodes);

// A serialized HLO module (RegisterGraphRequest.hlo_module) featurized with
// model/hlo: convolution, dot and reshape nodes configurable. INVALID_ARGUMENT
// ("hlo_module: computation '...', instruction '...': ...") for a module that does not
// parse or is not well formed; RESOURCE_EXHAUSTED over limits.max_instructions
// instructions, or when limits.reserve refuses the working memory (working_memory.h).
// `what` prefixes the messages (the request field, or a file name in the client).
absl::StatusOr<WireGraph> DecodeHloModule(absl::string_view bytes, const hlo::Limits& limits,
                                          absl::string_view what = "hlo_module");

// Either source of a registration request; INVALID_ARGUMENT when it has neither. A
// module's reader reserves its working memory through `limits`; arrays are decoded
// into one copy of the request's (the caller admits it up front). With as_kernel, a
// module is one kernel: no configurable nodes (INVALID_ARGUMENT for arrays).
absl::StatusOr<WireGraph> DecodeRegistration(const v1::RegisterGraphRequest& request, const hlo::Limits& limits);

// The bytes a decoded graph's arrays hold (what pruning it copies at most).
int64_t GraphBytes(const NodeGraph& graph);

void EncodeGraph(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids, v1::Graph* out);

// The graph's configurable nodes, in configuration-row order, as the response lists them.
void EncodeConfigurableNodes(const WireGraph& g, v1::RegisterGraphResponse* out);
// Their layout search space (`space` of the same nodes): the groups of each listed node.
void EncodeLayoutSpace(const LayoutSpace& space, v1::RegisterGraphResponse* out);

// ApplyLayoutsRequest: its row written into its HLO text (model/hlo/apply_layouts.h),
// the answer encoded into `out`. INVALID_ARGUMENT and RESOURCE_EXHAUSTED as
// ApplyLayoutRow gives them ("hlo_text: ...").
absl::Status ApplyLayouts(const v1::ApplyLayoutsRequest& request, const hlo::Limits& limits,
                          v1::ApplyLayoutsResponse* out);

// A response's layout search space (the groups of its configurable nodes). INVALID_ARGUMENT
// for a group that is not 3 per node or candidates that are not k x 6 bytes.
absl::StatusOr<LayoutSpace> DecodeLayoutSpace(const v1::RegisterGraphResponse& response);

}  // namespace tgraph
