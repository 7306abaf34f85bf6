#include "model/core/layout_space.h"

#include "model/core/opcodes.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/core/preprocess.h"

namespace tgraph {
namespace {

// node_feat's convolution dimension numbers (docs/format.md, node_feat.tsv 93..106).
constexpr int kConvInputBatch = 93, kConvInputFeature = 94, kConvKernelInputFeature = 99,
              kConvKernelOutputFeature = 100, kConvOutputBatch = 105, kConvOutputFeature = 106;

GroupLayout Default() {
  GroupLayout l;
  l.fill(-1);
  return l;
}

GroupLayout Prefix(const std::vector<int>& dims) {
  GroupLayout l = Default();
  for (size_t i = 0; i < dims.size() && i < l.size(); ++i) l[i] = static_cast<int8_t>(dims[i]);
  return l;
}

// Ordered pairs of distinct dims among the last min(rank, 3): a dot's candidates.
void AddMinorPairs(int rank, std::vector<GroupLayout>* out) {
  for (int a = std::max(0, rank - 3); a < rank; ++a)
    for (int b = std::max(0, rank - 3); b < rank; ++b)
      if (a != b) out->push_back(Prefix({a, b}));
}

// A reshape's: every permutation of its last min(rank, 3) dims, the others after them
// in descending order (all of them: reshapes set the whole layout in the real files).
void AddReshapePermutations(int rank, std::vector<GroupLayout>* out) {
  const int k = std::min(rank, 3);
  std::vector<int> last(k);
  std::iota(last.begin(), last.end(), rank - k);
  do {
    std::vector<int> dims = last;
    for (int d = rank - k - 1; d >= 0; --d) dims.push_back(d);
    out->push_back(Prefix(dims));
  } while (std::next_permutation(last.begin(), last.end()));
}

// The candidates of one group of a node with `opcode` for a tensor of `rank`; `conv`
// the group's batch and feature dims for a convolution, else {-1, -1}.
std::vector<GroupLayout> Candidates(int opcode, int rank, std::array<int, 2> conv) {
  std::vector<GroupLayout> c = {Default()};
  if (rank <= 0) return c;
  if (rank == 1) {
    c.push_back(Prefix({0}));
    return c;
  }
  if (opcode == op::kReshape) {
    AddReshapePermutations(rank, &c);
  } else if (opcode == op::kConvolution && conv[0] != conv[1] && conv[0] >= 0 && conv[1] >= 0 && conv[0] < rank &&
             conv[1] < rank) {
    c.push_back(Prefix({conv[0], conv[1]}));
    c.push_back(Prefix({conv[1], conv[0]}));
  } else {
    AddMinorPairs(rank, &c);
  }
  return c;
}

std::string Shown(const int8_t* g) {
  std::vector<int> v(g, g + kLayoutSlots);
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

// Why group `g` (6 values) is not legal for a tensor of `rank`; empty when it is.
std::string GroupProblem(const int8_t* g, int rank) {
  int k = 0;
  while (k < kLayoutSlots && g[k] >= 0) ++k;
  for (int i = k; i < kLayoutSlots; ++i)
    if (g[i] >= 0)
      return absl::StrCat("dimension ", g[i], " follows a -1 (a layout lists dimensions minor-to-major, then -1s)");
  if (k > 0 && rank == 0) return "this node has no such tensor: the group must be all -1 (the compiler default)";
  bool seen[kLayoutSlots] = {};
  for (int i = 0; i < k; ++i) {
    if (g[i] >= rank)
      return absl::StrCat("dimension ", g[i], " is not a dimension of the rank-", rank, " tensor (expected 0..",
                          rank - 1, ")");
    if (seen[g[i]]) return absl::StrCat("dimension ", g[i], " appears twice");
    seen[g[i]] = true;
  }
  return "";
}

}  // namespace

std::vector<int8_t> OneGroupNeighbours(const LayoutSpace& space, const int8_t* base) {
  const size_t row = space.nodes.size() * kConfigFeatDim;
  std::vector<int8_t> out;
  for (size_t j = 0; j < space.nodes.size(); ++j)
    for (int g = 0; g < kConfigGroups; ++g)
      for (const GroupLayout& l : space.nodes[j].groups[g].candidates) {
        const size_t at = j * kConfigFeatDim + static_cast<size_t>(g * kLayoutSlots);
        if (std::equal(l.begin(), l.end(), base + at)) continue;
        out.insert(out.end(), base, base + row);
        std::copy(l.begin(), l.end(), out.end() - static_cast<std::ptrdiff_t>(row - at));
      }
  return out;
}

int64_t LayoutSpaceBytes(const LayoutSpace& space) {
  int64_t bytes = static_cast<int64_t>(space.nodes.capacity() * sizeof(NodeSpace));
  for (const NodeSpace& n : space.nodes) {
    for (const GroupSpace& g : n.groups) bytes += static_cast<int64_t>(g.candidates.capacity() * sizeof(GroupLayout));
    if (n.instruction.size() > 15) bytes += static_cast<int64_t>(n.instruction.capacity()) + 1;
  }
  return bytes;
}

std::string ConfigurableNodeLabel(const LayoutSpace& space, int64_t j) {
  if (j < 0 || j >= static_cast<int64_t>(space.nodes.size())) return absl::StrCat("configurable node ", j);
  const NodeSpace& n = space.nodes[static_cast<size_t>(j)];
  if (n.instruction.empty())
    return absl::StrCat("configurable node ", j, " (", OpcodeLabel(n.opcode), ", node ", n.node, ")");
  return absl::StrCat("configurable node ", j, " (", OpcodeLabel(n.opcode), " '", n.instruction, "', node ", n.node, ")");
}

const char* LayoutGroupName(int group) {
  static const char* const kNames[] = {"output", "input", "kernel"};
  return group >= 0 && group < kConfigGroups ? kNames[group] : "?";
}

LayoutSpace LayoutSpaceOf(const NodeGraph& graph, const std::vector<int64_t>& config_ids,
                          const FirstOperands* first_operands, const std::vector<std::string>* instructions) {
  const bool exact = first_operands != nullptr && static_cast<int64_t>(first_operands->size()) == graph.num_nodes;
  // Each node's operands, from the edges (u consumes v).
  std::vector<std::vector<int64_t>> operands(static_cast<size_t>(graph.num_nodes));
  for (int64_t e = 0; e < graph.num_edges(); ++e) {
    const int64_t u = graph.edge_index[2 * e], v = graph.edge_index[2 * e + 1];
    if (u >= 0 && u < graph.num_nodes && v >= 0 && v < graph.num_nodes) operands[u].push_back(v);
  }
  LayoutSpace s;
  for (int64_t n : config_ids) {
    NodeSpace ns;
    ns.node = n;
    if (instructions && s.nodes.size() < instructions->size()) ns.instruction = (*instructions)[s.nodes.size()];
    const float* f = graph.feat(n);
    ns.opcode = graph.node_opcode[static_cast<size_t>(n)];
    int lo = 0, hi = 0;  // the operands' smallest and largest ranks
    for (size_t i = 0; i < operands[n].size(); ++i) {
      const int r = NodeRank(graph.feat(operands[n][i]));
      lo = i == 0 ? r : std::min(lo, r);
      hi = std::max(hi, r);
    }
    const bool two = ns.opcode == op::kConvolution || ns.opcode == op::kDot;  // an input and a kernel
    auto dim = [&](int k) { return static_cast<int>(f[k]); };
    const std::array<std::array<int, 2>, kConfigGroups> conv = {
        std::array<int, 2>{dim(kConvOutputBatch), dim(kConvOutputFeature)},
        std::array<int, 2>{dim(kConvInputBatch), dim(kConvInputFeature)},
        std::array<int, 2>{dim(kConvKernelInputFeature), dim(kConvKernelOutputFeature)}};
    const int out_rank = NodeRank(f);
    int bound[kConfigGroups] = {out_rank, hi, two ? hi : 0};
    int propose[kConfigGroups] = {out_rank, lo, two ? lo : 0};
    if (exact) {  // operand k's own rank for group k + 1
      for (int k = 0; k < 2; ++k) {
        const int64_t o = (*first_operands)[static_cast<size_t>(n)][static_cast<size_t>(k)];
        const int r = (k == 1 && !two) || o < 0 || o >= graph.num_nodes ? 0 : NodeRank(graph.feat(o));
        bound[k + 1] = propose[k + 1] = r;
      }
    }
    for (int g = 0; g < kConfigGroups; ++g) {
      ns.groups[g].rank = bound[g];
      ns.groups[g].candidates = Candidates(ns.opcode, propose[g], conv[g]);
    }
    s.nodes.push_back(std::move(ns));
  }
  return s;
}

std::string FirstIllegalLayoutRow(const LayoutSpace& space, const int8_t* rows, int64_t count) {
  const int64_t nc = static_cast<int64_t>(space.nodes.size());
  for (int64_t c = 0; c < count; ++c)
    for (int64_t j = 0; j < nc; ++j)
      for (int g = 0; g < kConfigGroups; ++g) {
        const int8_t* values = rows + (c * nc + j) * kConfigFeatDim + g * kLayoutSlots;
        const NodeSpace& n = space.nodes[static_cast<size_t>(j)];
        if (std::string why = GroupProblem(values, n.groups[g].rank); !why.empty())
          return absl::StrCat("config ", c, ", ", ConfigurableNodeLabel(space, j), ", ", LayoutGroupName(g), " group ",
                              Shown(values), ": ", why);
      }
  return "";
}

}  // namespace tgraph
