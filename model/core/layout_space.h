// The layout search space of a graph's configurable nodes: for each node (in
// configuration-row order) and each of its three groups (output, input, kernel), the
// rank of the group's tensor, which rows are legal, and the layouts an autotuner tries.
// Torch-free; pure functions (any thread).
//
// A group is legal when it is the compiler default (all -1) or a minor-to-major prefix:
// k >= 1 distinct dimensions of its tensor (each < the tensor's rank) followed by -1s.
// Every row of every real TpuGraphs file is legal by this rule (tested); a group whose
// node has no such tensor (a reshape's kernel, a scalar) must stay all -1.
//
// Ranks come from the graph as registered: the node's own rank (node_feat's non-zero
// shape dimensions) for the output group, its operands' for the input and kernel groups
// (operand 0 and operand 1). Graphs from an HLO module know their operands' order
// (FirstOperands), and each group gets its own operand's rank. Graphs registered as
// arrays have only edges, which do not keep operand order, so when a node's operands
// differ in rank the input and kernel groups accept the larger and propose layouts valid
// for the smaller: such a space accepts every row the exact one does.
//
// The candidates follow what the real files' autotuner tries (and the generator's
// LayoutCandidates, model/synth/cost_model.cc): the default first; convolutions choose
// which of their group's batch and feature dimensions (node_feat's convolution dimension
// numbers) is most minor; dots an ordered pair of their last three dimensions; reshapes
// of rank <= 3 every permutation, of higher rank the permutations of the last three
// dimensions (the rest kept major, in descending order); a rank-1 group [0].
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/core/graph.h"

namespace tgraph {

using GroupLayout = std::array<int8_t, kLayoutSlots>;

struct GroupSpace {
  int rank = 0;                         // the legality bound: dims of the group's tensor (0: none)
  std::vector<GroupLayout> candidates;  // candidates[0] is the compiler default (all -1)
};

struct NodeSpace {
  int64_t node = 0;  // node_config_ids entry
  int opcode = 0;
  std::string instruction;  // the HLO instruction's name (graphs from a module), else empty
  std::array<GroupSpace, kConfigGroups> groups;  // output, input, kernel
};

struct LayoutSpace {
  std::vector<NodeSpace> nodes;  // configuration-row order
};

// Per node of a graph: the nodes of its operands 0 and 1, in operand order (-1: none).
using FirstOperands = std::vector<std::array<int64_t, 2>>;

// The space of `graph`'s configurable nodes `config_ids` (as registered, before pruning),
// with exact operand ranks when `first_operands` (one entry per node) is given, and the
// instructions' names when `instructions` (one per configurable node, row order) is.
LayoutSpace LayoutSpaceOf(const NodeGraph& graph, const std::vector<int64_t>& config_ids,
                          const FirstOperands* first_operands = nullptr,
                          const std::vector<std::string>* instructions = nullptr);

// The rows one layout group away from `base` (a row of space.nodes.size() x 18 values):
// for each configurable node, each group and each of the group's candidates other than
// the base's own value, the base with that one group changed; appended in node, group,
// candidate order. Where a search lives: the neighbourhood of the compiler default and
// of the best row found. Pure; any thread.
std::vector<int8_t> OneGroupNeighbours(const LayoutSpace& space, const int8_t* base);

// The search's trust region's radius in layout groups (SearchOptions::radius,
// model/search/layout_search.h) when a request leaves it to the server, and the range of
// the generator's region collection (model/synth/search.h, RegionSearch): the models rank
// rows near the measured ones far better than the far rows a free search favours
// (docs/notebook/2026-11-27-trust-region.md).
inline constexpr int64_t kDefaultSearchRadius = 8;

// Memory a space holds, for byte budgets.
int64_t LayoutSpaceBytes(const LayoutSpace& space);

// "output", "input", "kernel".
const char* LayoutGroupName(int group);

// "configurable node J (convolution 'conv.3', node N)", or "(convolution, node N)" without
// a name: how messages name a configurable node of a row.
std::string ConfigurableNodeLabel(const LayoutSpace& space, int64_t j);

// The first illegal group of `count` rows (count x nodes x 18, values already in
// -1..5), described as "config C, configurable node J (convolution 'conv.3', node N),
// output group [4, 4, -1, -1, -1, -1]: dimension 4 appears twice" (the instruction's
// name when the space has it); empty when every row is legal.
std::string FirstIllegalLayoutRow(const LayoutSpace& space, const int8_t* rows, int64_t count);

}  // namespace tgraph
