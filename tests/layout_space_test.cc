// The layout search space (model/core/layout_space.h) against the real TpuGraphs files:
// every row they hold is legal, and what their autotuner tried is among the candidates;
// rows no compiler could apply are refused naming the row, node and group.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "model/core/graph_io.h"
#include "model/core/layout_space.h"

using namespace tgraph;

namespace {

const std::string kReal = TGRAPH_REAL_DATA;

const char* const kRealLayoutFiles[] = {
    "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz",
    "npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz",
    "npz/layout/xla/random/test/cd708819d3f5103afd6460b15e74eaf3.npz",
    "npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz",
    "npz/layout/nlp/random/test/23559853d9702baaaacbb0c83fd32266.npz",
};

GroupLayout GroupOf(const LayoutGraph& g, int64_t c, int64_t j, int group) {
  GroupLayout l;
  std::copy_n(g.config(c) + j * kConfigFeatDim + group * kLayoutSlots, kLayoutSlots, l.begin());
  return l;
}

}  // namespace

TEST_CASE("layout space: every row of the real files is legal, and their autotuner's layouts are candidates",
          "[layout_space]") {
  for (const char* name : kRealLayoutFiles) {
    INFO(name);
    auto g = LoadLayoutGraph(kReal + "/" + name);
    REQUIRE(g.ok());
    const LayoutSpace space = LayoutSpaceOf(g->graph, g->node_config_ids);
    REQUIRE(space.nodes.size() == g->node_config_ids.size());
    CHECK(FirstIllegalLayoutRow(space, g->config_feat.data(), g->num_configs).empty());
    int64_t groups = 0, covered = 0, ambiguous = 0;
    for (int64_t j = 0; j < g->num_config_nodes(); ++j) {
      const NodeSpace& n = space.nodes[j];
      for (int group = 0; group < kConfigGroups; ++group) {
        const std::vector<GroupLayout>& cand = n.groups[group].candidates;
        REQUIRE(!cand.empty());
        CHECK(std::all_of(cand[0].begin(), cand[0].end(), [](int8_t v) { return v == -1; }));
        CHECK(std::set<GroupLayout>(cand.begin(), cand.end()).size() == cand.size());
        std::set<GroupLayout> seen;
        for (int64_t c = 0; c < g->num_configs; ++c) seen.insert(GroupOf(*g, c, j, group));
        for (const GroupLayout& l : seen) {
          ++groups;
          if (std::find(cand.begin(), cand.end(), l) != cand.end()) ++covered;
          else if (group > 0 && n.opcode == op::kDot) ++ambiguous;  // operands of two ranks (the header says why)
          else FAIL_CHECK("node " << n.node << " opcode " << n.opcode << " group " << group << ": a layout of the file "
                                  << "is not a candidate");
        }
      }
    }
    CHECK(covered + ambiguous == groups);
    CHECK(ambiguous * 5 < groups);  // most of what the autotuner tried is proposed
  }
}

TEST_CASE("layout space: the candidates of each group are legal rows for it", "[layout_space]") {
  auto g = LoadLayoutGraph(kReal + "/npz/layout/nlp/random/test/23559853d9702baaaacbb0c83fd32266.npz");
  REQUIRE(g.ok());
  const LayoutSpace space = LayoutSpaceOf(g->graph, g->node_config_ids);
  const int64_t nc = g->num_config_nodes();
  // One row per candidate: that candidate in its group, the default everywhere else.
  std::vector<int8_t> rows;
  for (int64_t j = 0; j < nc; ++j)
    for (int group = 0; group < kConfigGroups; ++group)
      for (const GroupLayout& l : space.nodes[j].groups[group].candidates) {
        std::vector<int8_t> row(static_cast<size_t>(nc * kConfigFeatDim), -1);
        std::copy(l.begin(), l.end(), row.begin() + j * kConfigFeatDim + group * kLayoutSlots);
        rows.insert(rows.end(), row.begin(), row.end());
      }
  CHECK(rows.size() > static_cast<size_t>(nc * kConfigFeatDim * 3 * 2));
  CHECK(FirstIllegalLayoutRow(space, rows.data(), static_cast<int64_t>(rows.size()) / (nc * kConfigFeatDim)).empty());
}

TEST_CASE("layout space: rows no compiler could apply are refused, naming the row, node and group", "[layout_space]") {
  auto g = LoadLayoutGraph(kReal + "/npz/layout/xla/random/test/cd708819d3f5103afd6460b15e74eaf3.npz");
  REQUIRE(g.ok());
  const LayoutSpace space = LayoutSpaceOf(g->graph, g->node_config_ids);
  const int64_t nc = g->num_config_nodes();
  // A dot with rank-2 output and a reshape whose output is a scalar (rank 0).
  int64_t dot = -1, scalar_reshape = -1;
  for (int64_t j = 0; j < nc; ++j) {
    const NodeSpace& n = space.nodes[j];
    if (dot < 0 && n.opcode == op::kDot && n.groups[0].rank == 2) dot = j;
    if (scalar_reshape < 0 && n.opcode == op::kReshape && n.groups[0].rank == 0) scalar_reshape = j;
  }
  REQUIRE(dot >= 0);
  REQUIRE(scalar_reshape >= 0);
  auto refused = [&](int64_t j, int group, std::vector<int8_t> values) {
    std::vector<int8_t> rows(g->config(0), g->config(0) + 2 * nc * kConfigFeatDim);  // two legal rows
    std::copy(values.begin(), values.end(), rows.begin() + (nc + j) * kConfigFeatDim + group * kLayoutSlots);
    return FirstIllegalLayoutRow(space, rows.data(), 2);
  };
  const std::string where = "config 1, configurable node " + std::to_string(dot) + " (node " +
                            std::to_string(space.nodes[dot].node) + ", opcode 34), ";
  CHECK(refused(dot, 0, {1, 1, -1, -1, -1, -1}) ==
        where + "output group [1, 1, -1, -1, -1, -1]: dimension 1 appears twice");
  CHECK(refused(dot, 0, {0, 2, -1, -1, -1, -1}) ==
        where + "output group [0, 2, -1, -1, -1, -1]: dimension 2 is not a dimension of the rank-2 tensor (expected "
                "0..1)");
  CHECK(refused(dot, 0, {1, -1, 0, -1, -1, -1}) ==
        where + "output group [1, -1, 0, -1, -1, -1]: dimension 0 follows a -1 (a layout lists dimensions "
                "minor-to-major, then -1s)");
  CHECK_THAT(refused(scalar_reshape, 0, {0, -1, -1, -1, -1, -1}),
             Catch::EndsWith("output group [0, -1, -1, -1, -1, -1]: this node has no such tensor: the group must be "
                             "all -1 (the compiler default)"));
  CHECK_THAT(refused(scalar_reshape, 2, {0, -1, -1, -1, -1, -1}), Catch::Contains("kernel group"));
  // A partial group (the real files have them) is legal.
  CHECK(refused(dot, 0, {1, -1, -1, -1, -1, -1}).empty());
}

namespace {

// A node of `shape` with `opcode` appended to g.
int64_t AddNode(NodeGraph& g, int opcode, std::vector<float> shape) {
  std::vector<float> row(kNodeFeatDim, 0.0f);
  std::copy(shape.begin(), shape.end(), row.begin() + kShapeDimsBegin);
  g.node_feat.insert(g.node_feat.end(), row.begin(), row.end());
  g.node_opcode.push_back(opcode);
  return g.num_nodes++;
}

void AddEdge(NodeGraph& g, int64_t user, int64_t operand) {
  g.edge_index.push_back(user);
  g.edge_index.push_back(operand);
}

}  // namespace

TEST_CASE("layout space: a node's users are the groups its output reaches directly or through elementwise ops only",
          "[layout_space]") {
  NodeGraph g;
  const int64_t x = AddNode(g, op::kParameter, {8, 16}), w = AddNode(g, op::kParameter, {16, 32});
  const int64_t dot = AddNode(g, op::kDot, {8, 32});
  AddEdge(g, dot, x);
  AddEdge(g, dot, w);
  const int64_t tanh = AddNode(g, op::kTanh, {8, 32});
  AddEdge(g, tanh, dot);
  const int64_t bias = AddNode(g, op::kParameter, {8, 32}), add = AddNode(g, op::kAdd, {8, 32});
  AddEdge(g, add, tanh);
  AddEdge(g, add, bias);
  const int64_t w2 = AddNode(g, op::kParameter, {32, 4}), dot2 = AddNode(g, op::kDot, {8, 4});
  AddEdge(g, dot2, add);  // through tanh and add: a user
  AddEdge(g, dot2, w2);
  const int64_t reshape = AddNode(g, op::kReshape, {256});
  AddEdge(g, reshape, dot);  // directly: a user
  const int64_t transpose = AddNode(g, op::kTranspose, {32, 8});
  AddEdge(g, transpose, tanh);
  const int64_t w3 = AddNode(g, op::kParameter, {8, 2}), dot3 = AddNode(g, op::kDot, {32, 2});
  AddEdge(g, dot3, transpose);  // through a transpose: not a user
  AddEdge(g, dot3, w3);
  const std::vector<int64_t> config_ids = {dot, dot2, reshape, dot3};
  auto users = [](const LayoutSpace& s, size_t j) {
    std::vector<std::pair<int64_t, int>> u;
    for (const GroupUse& x : s.nodes[j].users) u.emplace_back(x.config, x.group);
    return u;
  };
  using Uses = std::vector<std::pair<int64_t, int>>;
  SECTION("with operand order, only the group of the operand the output reaches") {
    FirstOperands first(static_cast<size_t>(g.num_nodes), {-1, -1});
    first[dot] = {x, w};
    first[dot2] = {add, w2};
    first[reshape] = {dot, -1};
    first[dot3] = {transpose, w3};
    const LayoutSpace s = LayoutSpaceOf(g, config_ids, &first);
    CHECK(users(s, 0) == Uses{{1, 1}, {2, 1}});
    CHECK(users(s, 1).empty());  // nothing consumes dot2
    CHECK(users(s, 3).empty());
  }
  SECTION("from edges alone, both operand groups of the output's rank") {
    const LayoutSpace s = LayoutSpaceOf(g, config_ids);
    CHECK(users(s, 0) == Uses{{1, 1}, {1, 2}, {2, 1}});
  }
}
