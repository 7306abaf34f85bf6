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
  // Array graphs name the node by opcode and index (a module's by instruction: hlo_apply_test.cc).
  const std::string where = "config 1, configurable node " + std::to_string(dot) + " (dot, node " +
                            std::to_string(space.nodes[dot].node) + "), ";
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

TEST_CASE("layout space: the one-group neighbours of a real row change exactly one group to another candidate",
          "[layout_space]") {
  auto g = LoadLayoutGraph(kReal + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  REQUIRE(g.ok());
  const LayoutSpace space = LayoutSpaceOf(g->graph, g->node_config_ids);
  const int64_t nc = g->num_config_nodes();
  const size_t row = static_cast<size_t>(nc * kConfigFeatDim);
  // The best measured row: where the real search ended.
  const int64_t best = std::min_element(g->config_runtime.begin(), g->config_runtime.end()) - g->config_runtime.begin();
  const int8_t* base = g->config(best);
  size_t expected = 0;
  for (int64_t j = 0; j < nc; ++j)
    for (int group = 0; group < kConfigGroups; ++group) {
      const auto& cands = space.nodes[j].groups[group].candidates;
      const GroupLayout own = GroupOf(*g, best, j, group);
      expected += cands.size() - static_cast<size_t>(std::count(cands.begin(), cands.end(), own));
    }
  const std::vector<int8_t> near = OneGroupNeighbours(space, base);
  REQUIRE(near.size() == expected * row);
  REQUIRE(expected > static_cast<size_t>(nc));
  std::set<std::vector<int8_t>> distinct;
  for (size_t k = 0; k < expected; ++k) {
    const int8_t* r = near.data() + k * row;
    distinct.emplace(r, r + row);
    int changed = 0;
    for (int64_t j = 0; j < nc; ++j)
      for (int group = 0; group < kConfigGroups; ++group) {
        const size_t at = static_cast<size_t>(j * kConfigFeatDim + group * kLayoutSlots);
        if (std::equal(r + at, r + at + kLayoutSlots, base + at)) continue;
        ++changed;
        const auto& cands = space.nodes[j].groups[group].candidates;
        CHECK(std::any_of(cands.begin(), cands.end(),
                          [&](const GroupLayout& l) { return std::equal(l.begin(), l.end(), r + at); }));
      }
    CHECK(changed == 1);
  }
  CHECK(distinct.size() == expected);
  CHECK(FirstIllegalLayoutRow(space, near.data(), static_cast<int64_t>(expected)).empty());
}
