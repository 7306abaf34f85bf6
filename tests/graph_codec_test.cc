#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "proto/graph_codec.h"

using namespace tgraph;

namespace {

NodeGraph ThreeNodes() {
  NodeGraph g;
  g.num_nodes = 3;
  g.node_feat.assign(3 * kNodeFeatDim, 0.5f);
  g.node_opcode = {op::kParameter, op::kDot, op::kReshape};
  g.edge_index = {1, 0, 2, 1};
  return g;
}

std::string DecodeError(const v1::Graph& g, int64_t max_nodes = 1000) {
  auto r = DecodeGraph(g, max_nodes);
  REQUIRE_FALSE(r.ok());
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("wire graphs round trip and keep their content hash", "[codec]") {
  const NodeGraph g = ThreeNodes();
  v1::Graph wire;
  EncodeGraph(g, {1, 2}, &wire);
  CHECK(wire.node_feat().size() == 3 * 140 * 4);
  CHECK(wire.node_opcode().size() == 3);
  auto back = DecodeGraph(wire, 1000);
  REQUIRE(back.ok());
  CHECK(back->graph.node_feat == g.node_feat);
  CHECK(back->graph.node_opcode == g.node_opcode);
  CHECK(back->graph.edge_index == g.edge_index);
  CHECK(back->node_config_ids == std::vector<int64_t>{1, 2});
  CHECK(GraphContentHash(back->graph, back->node_config_ids) == GraphContentHash(g, {1, 2}));
  // Serialised through protobuf and parsed again: still the same.
  v1::Graph parsed;
  REQUIRE(parsed.ParseFromString(wire.SerializeAsString()));
  CHECK(DecodeGraph(parsed, 1000)->graph.node_feat == g.node_feat);
}

TEST_CASE("wire graph errors name the field and what was expected", "[codec]") {
  v1::Graph good;
  EncodeGraph(ThreeNodes(), {1}, &good);
  v1::Graph g = good;
  g.set_num_nodes(0);
  CHECK_THAT(DecodeError(g), Catch::Contains("graph.num_nodes must be positive"));
  g = good;
  auto big = DecodeGraph(g, 2);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().code() == absl::StatusCode::kResourceExhausted);
  g = good;
  g.mutable_node_feat()->pop_back();
  CHECK_THAT(DecodeError(g), Catch::Contains("graph.node_feat has 1679 bytes, expected 1680"));
  g = good;
  g.set_node_opcode("ab");
  CHECK_THAT(DecodeError(g), Catch::Contains("graph.node_opcode has 2 bytes, expected 3"));
  g = good;
  g.mutable_edge_index()->append("x");
  CHECK_THAT(DecodeError(g), Catch::Contains("not a multiple of 16"));
  g = good;
  const float nan = std::nanf("");
  std::memcpy(&(*g.mutable_node_feat())[4 * 141], &nan, 4);
  CHECK_THAT(DecodeError(g), Catch::Contains("graph: key 'node_feat': value at node 1, feature 1 is not finite"));
  g = good;
  int64_t bad_edge[2] = {2, 3};
  g.set_edge_index(bad_edge, sizeof bad_edge);
  CHECK_THAT(DecodeError(g), Catch::Contains("edge 0 refers to node 3"));
  g = good;
  (*g.mutable_node_opcode())[0] = static_cast<char>(200);
  CHECK_THAT(DecodeError(g), Catch::Contains("node 0 has opcode 200"));
  g = good;
  g.add_node_config_ids(5);
  CHECK_THAT(DecodeError(g), Catch::Contains("graph.node_config_ids[1] is 5, expected 0..2"));
  g = good;
  g.add_node_config_ids(1);
  CHECK_THAT(DecodeError(g), Catch::Contains("lists node 1 twice"));
}

TEST_CASE("a module registered as a kernel keeps every instruction and has no configurable node", "[codec]") {
  const std::string text =
      "HloModule jit_dot\n\nENTRY main.1 {\n  a.1 = bf16[128,64]{1,0} parameter(0)\n"
      "  b.1 = bf16[64,256]{1,0} parameter(1)\n"
      "  ROOT dot_general.1 = bf16[128,256]{1,0} dot(a.1, b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  v1::RegisterGraphRequest request;
  request.set_hlo_module(text);
  const absl::StatusOr<WireGraph> layout = DecodeRegistration(request, {});
  REQUIRE(layout.ok());
  REQUIRE(layout->node_config_ids.size() == 1);  // the dot, as a layout graph
  CHECK(layout->graph.node_opcode[static_cast<size_t>(layout->node_config_ids[0])] == op::kDot);
  request.set_as_kernel(true);
  const absl::StatusOr<WireGraph> kernel = DecodeRegistration(request, {});
  REQUIRE(kernel.ok());
  CHECK(kernel->node_config_ids.empty());
  CHECK(kernel->first_operands.empty());
  CHECK(kernel->graph.num_nodes == layout->graph.num_nodes);
  CHECK(kernel->graph.node_feat == layout->graph.node_feat);
  CHECK(GraphContentHash(kernel->graph, kernel->node_config_ids) !=
        GraphContentHash(layout->graph, layout->node_config_ids));
  // Arrays say themselves what is configurable.
  v1::RegisterGraphRequest arrays;
  arrays.mutable_graph();
  arrays.set_as_kernel(true);
  const absl::StatusOr<WireGraph> refused = DecodeRegistration(arrays, {});
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("as_kernel: for hlo_module only"));
}
