#include "model/core/layout_space.h"

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

int64_t LayoutSpaceBytes(const LayoutSpace& space) {
  int64_t bytes = static_cast<int64_t>(space.nodes.capacity() * sizeof(NodeSpace));
  for (const NodeSpace& n : space.nodes) {
    for (const GroupSpace& g : n.groups) bytes += static_cast<int64_t>(g.candidates.capacity() * sizeof(GroupLayout));
    bytes += static_cast<int64_t>(n.users.capacity() * sizeof(GroupUse));
  }
  return bytes;
}

bool IsElementwiseOpcode(int opcode) {
  switch (opcode) {
    case 1: case 2: case 7: case 15: case 17: case 19: case 20: case 25: case 30: case 32: case 37: case 38:
    case 40: case 49: case 50: case 51: case 52: case 53: case 54: case 55: case 57: case 58: case 59: case 60:
    case 65: case 66: case 71: case 73: case 80: case 81: case 83: case 87: case 88: case 89: case 90: case 91:
    case 94: case 95: case 96: case 103: case 107: case 118: case 120:
      return true;
    default:
      return false;
  }
}

namespace {

// Each configurable node's users (NodeSpace::users): a walk from its output along
// consumers, through elementwise instructions only, to the configurable nodes it feeds.
// Without operand order (`exact` false) a user's input and kernel groups both count when
// their rank is the output's.
void AddUsers(const NodeGraph& graph, const std::vector<std::vector<int64_t>>& operands,
              const FirstOperands* first_operands, LayoutSpace* s) {
  const int64_t n = graph.num_nodes;
  std::vector<std::vector<int64_t>> consumers(static_cast<size_t>(n));
  for (int64_t u = 0; u < n; ++u)
    for (int64_t v : operands[u]) consumers[v].push_back(u);
  std::vector<int64_t> config_of(static_cast<size_t>(n), -1);
  for (size_t j = 0; j < s->nodes.size(); ++j) config_of[s->nodes[j].node] = static_cast<int64_t>(j);
  constexpr int kMaxDepth = 8;
  constexpr int64_t kMaxUsers = 64;  // bounds the space's memory on wide fan-outs  // elementwise chains longer than this are not followed
  std::vector<int64_t> visited_by(static_cast<size_t>(n), -1);  // the walk (config index) that reached a node
  for (size_t j = 0; j < s->nodes.size(); ++j) {
    NodeSpace& ns = s->nodes[j];
    const int rank = ns.groups[0].rank;
    if (rank <= 0) continue;
    std::vector<std::pair<int64_t, int>> frontier = {{ns.node, 0}};
    visited_by[ns.node] = static_cast<int64_t>(j);
    while (!frontier.empty() && static_cast<int64_t>(ns.users.size()) < kMaxUsers) {
      const auto [from, depth] = frontier.back();
      frontier.pop_back();
      for (int64_t u : consumers[from]) {
        const int64_t k = config_of[u];
        if (k >= 0) {
          const NodeSpace& user = s->nodes[static_cast<size_t>(k)];
          for (int g = 1; g < kConfigGroups; ++g) {
            const bool operand = first_operands ? (*first_operands)[u][g - 1] == from : true;
            if (operand && user.groups[g].rank == rank) ns.users.push_back({k, g});
          }
        } else if (depth < kMaxDepth && IsElementwiseOpcode(graph.node_opcode[u]) &&
                   visited_by[u] != static_cast<int64_t>(j)) {
          visited_by[u] = static_cast<int64_t>(j);
          frontier.emplace_back(u, depth + 1);
        }
      }
    }
    std::sort(ns.users.begin(), ns.users.end(), [](const GroupUse& a, const GroupUse& b) {
      return a.config != b.config ? a.config < b.config : a.group < b.group;
    });
    ns.users.erase(std::unique(ns.users.begin(), ns.users.end(),
                               [](const GroupUse& a, const GroupUse& b) { return a.config == b.config && a.group == b.group; }),
                   ns.users.end());
  }
}

}  // namespace

const char* LayoutGroupName(int group) {
  static const char* const kNames[] = {"output", "input", "kernel"};
  return group >= 0 && group < kConfigGroups ? kNames[group] : "?";
}

LayoutSpace LayoutSpaceOf(const NodeGraph& graph, const std::vector<int64_t>& config_ids,
                          const FirstOperands* first_operands) {
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
  AddUsers(graph, operands, exact ? first_operands : nullptr, &s);
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
          return absl::StrCat("config ", c, ", configurable node ", j, " (node ", n.node, ", opcode ", n.opcode, "), ",
                              LayoutGroupName(g), " group ", Shown(values), ": ", why);
      }
  return "";
}

}  // namespace tgraph
