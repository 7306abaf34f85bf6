// The HLO featurizer (model/hlo/) against the real TpuGraphs files: featurizing the
// raw tuning data must reproduce the dataset's npz value for value; plus hand-computed
// features and every kind of bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <tuple>

#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/core/opcodes.h"
#include "model/hlo/featurize.h"
#include "tests/test_util.h"

using namespace tgraph;
using tgraph::hlo::FeaturizeModule;

namespace {

const std::string kReal = TGRAPH_REAL_DATA;

xla::ModuleTuningData RealLayoutTuning() {
  xla::ModuleTuningData d;
  const std::string bytes = *ReadFile(kReal + "/module_tuning_data_layout.pb");
  REQUIRE(d.ParseFromString(bytes));
  return d;
}

xla::TuningData RealTileTuning() {
  xla::TuningData d;
  REQUIRE(d.ParseFromString(*ReadFile(kReal + "/op_tuning_data.pb")));
  return d;
}

// A module of one computation from (name, opcode, operands) triples; ids 1..n, the last
// instruction is the root. Shapes: f32[8, 16].
xla::HloModuleProto SmallModule(const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>& insts) {
  xla::HloModuleProto m;
  m.set_name("small");
  xla::HloComputationProto* c = m.add_computations();
  c->set_name("main");
  c->set_id(1);
  int64_t id = 0;
  for (const auto& [name, opcode, operands] : insts) {
    xla::HloInstructionProto* i = c->add_instructions();
    i->set_name(name);
    i->set_opcode(opcode);
    i->set_id(++id);
    i->mutable_shape()->set_element_type(xla::F32);
    i->mutable_shape()->add_dimensions(8);
    i->mutable_shape()->add_dimensions(16);
    for (int64_t o : operands) i->add_operand_ids(o);
  }
  c->set_root_id(id);
  return m;
}

std::string ErrorOf(const xla::HloModuleProto& m, absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  auto r = FeaturizeModule(m, "m.pb");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == code);
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("featurizing the real layout tuning data reproduces the dataset's unet_3d file exactly", "[hlo]") {
  auto real = LoadLayoutGraph(kReal + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  REQUIRE(real.ok());
  auto t = hlo::FeaturizeLayoutTuning(RealLayoutTuning(), "module_tuning_data_layout.pb");
  REQUIRE(t.ok());
  const LayoutGraph& g = t->graph;
  CHECK(g.graph.num_nodes == 3163);
  CHECK(g.graph.node_feat == real->graph.node_feat);
  CHECK(g.graph.node_opcode == real->graph.node_opcode);
  CHECK(g.graph.edge_index == real->graph.edge_index);
  CHECK(g.node_config_ids == real->node_config_ids);
  CHECK(g.node_splits == real->node_splits);
  CHECK(g.node_splits == std::vector<int64_t>{0, 449, 453, 467, 471, 498, 502, 3163});
  // 122 runs: 10 with errors, 112 valid, each of which the dataset's file holds with
  // the same runtime.
  CHECK(t->stats.runs == 122);
  CHECK(t->stats.errors == 10);
  CHECK(t->stats.kept == 112);
  REQUIRE(g.num_configs == 112);
  std::multimap<std::string, int64_t> file_rows;
  const size_t row = static_cast<size_t>(real->num_config_nodes()) * kConfigFeatDim;
  for (int64_t c = 0; c < real->num_configs; ++c)
    file_rows.emplace(std::string(reinterpret_cast<const char*>(real->config(c)), row), real->config_runtime[c]);
  int64_t matched = 0;
  for (int64_t c = 0; c < g.num_configs; ++c) {
    auto [lo, hi] = file_rows.equal_range(std::string(reinterpret_cast<const char*>(g.config(c)), row));
    bool same_runtime = false;
    for (auto it = lo; it != hi; ++it) same_runtime |= it->second == g.config_runtime[c];
    matched += same_runtime;
  }
  CHECK(matched == 112);
  // Same graph, same identity: the content hash the server caches by.
  CHECK(GraphContentHash(g.graph, g.node_config_ids) == GraphContentHash(real->graph, real->node_config_ids));
}

TEST_CASE("an HLO module alone gives the dataset's graph in the canonical order, its rows in the dataset's order",
          "[hlo]") {
  const xla::ModuleTuningData d = RealLayoutTuning();
  // The dataset's graph, in the order its tuning data (and the TpuGraphs encoder) has.
  auto t = hlo::FeaturizeLayoutTuning(d, "module_tuning_data_layout.pb");
  REQUIRE(t.ok());
  const hlo::ModuleGraph& encoder = t->module;
  // The three envelopes a user may hold: HloProto (XLA's *.hlo.pb), HloModuleProto,
  // and the tuning data itself (its module is field 1, as in HloProto).
  xla::HloProto wrapped;
  *wrapped.mutable_hlo_module() = d.module();
  for (const std::string& bytes : {wrapped.SerializeAsString(), d.module().SerializeAsString(), d.SerializeAsString()}) {
    auto proto = hlo::ParseModule(bytes, "x.hlo.pb");
    REQUIRE(proto.ok());
    auto m = FeaturizeModule(*proto, "x.hlo.pb");
    REQUIRE(m.ok());
    CHECK(m->module_name == "main__.10904");
    CHECK(m->graph.num_nodes == 3163);
    CHECK(m->graph.num_edges() == 5112);
    CHECK(m->warnings.empty());
    CHECK_FALSE(m->after_optimizations);
    // Node for node the same instruction, features and opcode; edge for edge the same
    // edges: the same graph, its computations in call order (canonical_order.h).
    std::map<std::pair<std::string, std::string>, int64_t> canonical;
    for (size_t i = 0; i < m->nodes.size(); ++i)
      canonical[{m->nodes[i].computation, m->nodes[i].instruction}] = static_cast<int64_t>(i);
    REQUIRE(canonical.size() == 3163);
    std::vector<int64_t> to(3163);
    int64_t moved = 0, same_features = 0;
    for (size_t i = 0; i < encoder.nodes.size(); ++i) {
      to[i] = canonical.at({encoder.nodes[i].computation, encoder.nodes[i].instruction});
      moved += to[i] != static_cast<int64_t>(i);
      same_features += std::equal(encoder.graph.feat(static_cast<int64_t>(i)), encoder.graph.feat(static_cast<int64_t>(i)) + 140,
                                  m->graph.feat(to[i]));
      CHECK(m->graph.node_opcode[static_cast<size_t>(to[i])] == encoder.graph.node_opcode[i]);
    }
    CHECK(same_features == 3163);
    CHECK(moved > 0);  // XLA wrote this proto's computations in creation order
    std::set<std::pair<int64_t, int64_t>> edges, mapped;
    for (size_t e = 0; e < m->graph.edge_index.size(); e += 2) edges.insert({m->graph.edge_index[e], m->graph.edge_index[e + 1]});
    for (size_t e = 0; e < encoder.graph.edge_index.size(); e += 2)
      mapped.insert({to[static_cast<size_t>(encoder.graph.edge_index[e])], to[static_cast<size_t>(encoder.graph.edge_index[e + 1])]});
    CHECK(edges == mapped);
    // Within each computation XLA's own order is kept: the instructions of main__.10904
    // (nodes 502..) did not move.
    for (int64_t i = 502; i < 3163; ++i) CHECK(to[static_cast<size_t>(i)] == i);
    // Every convolution, dot and reshape was tuned, and they come in the dataset's row
    // order: the file's configurations rank on the module as they are.
    REQUIRE(m->default_config_nodes.size() == static_cast<size_t>(d.config_index_to_node_size()));
    for (int j = 0; j < d.config_index_to_node_size(); ++j)
      CHECK(m->default_config_nodes[static_cast<size_t>(j)] == to[static_cast<size_t>(d.config_index_to_node(j))]);
    for (int64_t id : m->default_config_nodes) {
      const int op = m->graph.node_opcode[static_cast<size_t>(id)];
      CHECK((op == op::kConvolution || op == op::kDot || op == op::kReshape));
    }
    // Names for building configuration rows.
    const hlo::NodeSource& first = m->nodes[static_cast<size_t>(m->default_config_nodes[0])];
    CHECK(first.opcode == "reshape");
    CHECK_FALSE(first.instruction.empty());
    CHECK_FALSE(first.computation.empty());
  }
}

TEST_CASE("the real tile tuning data gives 15 kernels with hand-checked values", "[hlo]") {
  auto t = hlo::FeaturizeTileTuning(RealTileTuning(), "op_tuning_data.pb");
  REQUIRE(t.ok());
  REQUIRE(t->graphs.size() == 15);
  CHECK(t->skipped.empty());
  const std::vector<int64_t> configs = {61, 579, 16, 16, 16, 23, 10, 11, 5, 3, 3, 2, 3, 2, 2};
  const std::vector<int64_t> nodes = {20, 31, 52, 56, 30, 21, 2, 2, 7, 44, 13, 10, 2, 2, 2};
  for (size_t k = 0; k < 15; ++k) {
    INFO("kernel " << k << " " << t->graphs[k].name);
    CHECK(t->graphs[k].num_configs == configs[k]);
    CHECK(t->graphs[k].graph.num_nodes == nodes[k]);
    REQUIRE(ValidateTileGraph(t->graphs[k], "k").ok());
  }
  // Kernel 1 (fusion.191): 581 runs, 2 with errors dropped.
  CHECK(t->stats[1].runs == 581);
  CHECK(t->stats[1].errors == 2);
  // Kernel 0 (fusion.232): its first run is the default, output bounds [2, 26, 4, 2],
  // 57,188 ns; no kernel or input bounds (their product is 0, not 1).
  const TileGraph& k0 = t->graphs[0];
  CHECK(k0.name.rfind("fusion.232_", 0) == 0);
  CHECK(k0.config_runtime[0] == 57188);
  CHECK(k0.config_runtime_normalizers == std::vector<int64_t>(61, 57188));
  const std::vector<float> f0(k0.config_feat.begin(), k0.config_feat.begin() + kTileConfigDim);
  CHECK(f0 == std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0,                // kernel bounds, sum, product
                                 2, 26, 4, 2, 0, 0, 34, 2 * 26 * 4 * 2,  // output bounds
                                 0, 0, 0, 0, 0, 0, 0, 0});               // input bounds
  // Kernel 6 (copy.24): parameter bf16[32,5,5,256] with layout {3,0,2,1} -> copy with
  // layout {3,2,1,0}, the root.
  const TileGraph& copy = t->graphs[6];
  CHECK(copy.name.rfind("copy.24_", 0) == 0);
  CHECK(copy.graph.node_opcode == std::vector<int32_t>{op::kParameter, op::kCopy});
  CHECK(copy.graph.edge_index == std::vector<int64_t>{1, 0});
  for (int node = 0; node < 2; ++node) {
    const float* f = copy.graph.feat(node);
    CHECK(f[0] == (node == 1 ? 1.0f : 0.0f));  // is_root
    CHECK(f[15] == 1.0f);                      // element type bf16
    CHECK(f[13] == 0.0f);                      // not f32
    CHECK(std::vector<float>(f + 21, f + 29) == std::vector<float>{32, 5, 5, 256, 0, 0, 298, 32 * 5 * 5 * 256});
    CHECK(f[44] == 1.0f);                      // window size product of no window: 1
    CHECK(f[43] == 0.0f);
  }
  CHECK(std::vector<float>(copy.graph.feat(0) + 134, copy.graph.feat(0) + 140) == std::vector<float>{3, 0, 2, 1, 0, 0});
  CHECK(std::vector<float>(copy.graph.feat(1) + 134, copy.graph.feat(1) + 140) == std::vector<float>{3, 2, 1, 0, 0, 0});
}

TEST_CASE("hand-computed features of windows, convolution numbers, slices and padding", "[hlo]") {
  xla::HloModuleProto m = SmallModule({{"p", "parameter", {}}, {"k", "parameter", {}}, {"conv", "convolution", {1, 2}},
                                       {"s", "slice", {3}}, {"pad", "pad", {4}}});
  xla::HloComputationProto* c = m.mutable_computations(0);
  c->mutable_instructions(1)->set_parameter_number(1);
  xla::HloInstructionProto* conv = c->mutable_instructions(2);
  for (int d = 0; d < 2; ++d) {
    xla::WindowDimension* w = conv->mutable_window()->add_dimensions();
    w->set_size(3);
    w->set_stride(d + 1);
    w->set_padding_low(1);
    w->set_padding_high(2);
    w->set_window_dilation(1);
    w->set_base_dilation(1);
    w->set_window_reversal(d == 1);
  }
  xla::ConvolutionDimensionNumbers* cd = conv->mutable_convolution_dimension_numbers();
  cd->set_input_batch_dimension(0);
  cd->set_input_feature_dimension(3);
  cd->add_input_spatial_dimensions(1);
  cd->add_input_spatial_dimensions(2);
  cd->set_kernel_input_feature_dimension(2);
  cd->set_kernel_output_feature_dimension(3);
  cd->add_kernel_spatial_dimensions(0);
  cd->add_kernel_spatial_dimensions(1);
  cd->set_output_batch_dimension(0);
  cd->set_output_feature_dimension(3);
  conv->set_feature_group_count(1);
  conv->set_batch_group_count(1);
  xla::HloInstructionProto* slice = c->mutable_instructions(3);
  for (int d = 0; d < 3; ++d) {
    auto* s = slice->add_slice_dimensions();
    s->set_start(d);
    s->set_limit(d + 4);
    s->set_stride(1);
  }
  auto* pd = c->mutable_instructions(4)->mutable_padding_config()->add_dimensions();
  pd->set_edge_padding_low(2);
  pd->set_edge_padding_high(-1);
  pd->set_interior_padding(7);  // not featurized
  auto g = FeaturizeModule(m, "m.pb");
  REQUIRE(g.ok());
  const float* f = g->graph.feat(2);
  CHECK(f[13] == 1.0f);  // f32
  CHECK(std::vector<float>(f + 37, f + 45) == std::vector<float>{3, 3, 0, 0, 0, 0, 6, 9});   // size
  CHECK(std::vector<float>(f + 45, f + 53) == std::vector<float>{1, 2, 0, 0, 0, 0, 3, 2});   // stride
  CHECK(std::vector<float>(f + 53, f + 61) == std::vector<float>{1, 1, 0, 0, 0, 0, 2, 1});   // padding low
  CHECK(std::vector<float>(f + 61, f + 69) == std::vector<float>{2, 2, 0, 0, 0, 0, 4, 4});   // padding high
  CHECK(std::vector<float>(f + 85, f + 93) == std::vector<float>{0, 1, 0, 0, 0, 0, 1, 1});   // reversal, counts
  CHECK(std::vector<float>(f + 93, f + 109) ==
        std::vector<float>{0, 3, 1, 2, 0, 0, 2, 3, 0, 1, 0, 0, 0, 3, 1, 1});
  CHECK(g->graph.feat(1)[30] == 1.0f);  // parameter_number
  const float* s = g->graph.feat(3);
  CHECK(std::vector<float>(s + 109, s + 121) == std::vector<float>{0, 1, 3, 0, 1, 1, 3, 1, 4, 5, 15, 120});
  const float* p = g->graph.feat(4);
  CHECK(std::vector<float>(p + 125, p + 133) == std::vector<float>{2, 0, 2, 2, -1, 0, -1, -1});
  CHECK(p[0] == 1.0f);  // the root
  // Edges: [consumer, producer], sorted.
  CHECK(g->graph.edge_index == std::vector<int64_t>{2, 0, 2, 1, 3, 2, 4, 3});
  CHECK(g->default_config_nodes == std::vector<int64_t>{2});
  CHECK(g->node_splits == std::vector<int64_t>{0, 5});
}

TEST_CASE("a dot's input and kernel groups take their own operand's rank from the module", "[hlo]") {
  // dot(rhs3, lhs2): operand 0 is rank 3, operand 1 rank 2, though the sorted edges list
  // the rank-2 parameter (node 0) first.
  xla::HloModuleProto m = SmallModule({{"lhs2", "parameter", {}}, {"rhs3", "parameter", {}}, {"d", "dot", {2, 1}}});
  xla::HloComputationProto* c = m.mutable_computations(0);
  c->mutable_instructions(1)->set_parameter_number(1);
  c->mutable_instructions(1)->mutable_shape()->add_dimensions(4);  // f32[8, 16, 4]
  auto g = FeaturizeModule(m, "m.pb");
  REQUIRE(g.ok());
  CHECK(g->first_operands == FirstOperands{{-1, -1}, {-1, -1}, {1, 0}});
  CHECK(g->graph.edge_index == std::vector<int64_t>{2, 0, 2, 1});
  const LayoutSpace exact = LayoutSpaceOf(g->graph, {2}, &g->first_operands);
  REQUIRE(exact.nodes.size() == 1u);
  CHECK(exact.nodes[0].groups[0].rank == 2);
  CHECK(exact.nodes[0].groups[1].rank == 3);
  CHECK(exact.nodes[0].groups[2].rank == 2);
  CHECK(exact.nodes[0].groups[1].candidates.size() == 7u);  // the default + 6 ordered pairs of 3 dims
  CHECK(exact.nodes[0].groups[2].candidates.size() == 3u);  // the default, [0, 1], [1, 0]
  // From the arrays alone (no operand order): both groups accept rank 3 and propose for
  // rank 2, a superset of the exact space's rows.
  const LayoutSpace arrays = LayoutSpaceOf(g->graph, {2});
  CHECK(arrays.nodes[0].groups[1].rank == 3);
  CHECK(arrays.nodes[0].groups[2].rank == 3);
  CHECK(arrays.nodes[0].groups[1].candidates.size() == 3u);
  // A kernel layout naming dimension 2 is legal for the arrays' space, not the module's.
  std::vector<int8_t> row(18, -1);
  row[12] = 2;
  row[13] = 0;
  CHECK(FirstIllegalLayoutRow(arrays, row.data(), 1).empty());
  CHECK_THAT(FirstIllegalLayoutRow(exact, row.data(), 1),
             Catch::Contains("kernel group [2, 0, -1, -1, -1, -1]: dimension 2 is not a dimension of the rank-2 tensor"));
}

TEST_CASE("computations: callees first, call edges to the callee's root, splits after while/cond/cluster", "[hlo]") {
  xla::HloModuleProto m;
  m.set_name("calls");
  auto add_comp = [&](const std::string& name, int64_t id, int count, int64_t first_id) {
    xla::HloComputationProto* c = m.add_computations();
    c->set_name(name);
    c->set_id(id);
    for (int i = 0; i < count; ++i) {
      xla::HloInstructionProto* inst = c->add_instructions();
      inst->set_name(absl::StrCat(name, ".", i));
      inst->set_opcode(i == 0 ? "parameter" : "add");
      inst->set_id(first_id + i);
      if (i > 0) {
        inst->add_operand_ids(first_id + i - 1);
        inst->add_operand_ids(first_id + i - 1);  // duplicate operands: one edge
      }
    }
    c->set_root_id(first_id + count - 1);
    return c;
  };
  add_comp("body.while", 10, 2, 100);   // nodes 0-1, root node 1
  add_comp("helper", 11, 3, 200);       // nodes 2-4, root node 4
  xla::HloComputationProto* entry = add_comp("entry", 12, 2, 300);  // nodes 5-6
  entry->mutable_instructions(1)->set_opcode("while");
  entry->mutable_instructions(1)->add_called_computation_ids(10);
  entry->mutable_instructions(1)->add_called_computation_ids(11);
  auto g = FeaturizeModule(m, "m.pb");
  REQUIRE(g.ok());
  CHECK(g->graph.edge_index == std::vector<int64_t>{1, 0, 3, 2, 4, 3, 6, 1, 6, 4, 6, 5});
  CHECK(g->node_splits == std::vector<int64_t>{0, 2, 7});
  CHECK(g->graph.node_opcode[6] == 102);  // while
  CHECK(g->nodes[3].computation == "helper");
  CHECK(g->nodes[3].instruction == "helper.1");
  CHECK(g->nodes[3].instruction_id == 201);
}

TEST_CASE("bad HLO input: precise errors naming the computation and instruction, never a crash", "[hlo]") {
  const auto ok = SmallModule({{"a", "parameter", {}}, {"b", "negate", {1}}});
  REQUIRE(FeaturizeModule(ok, "m.pb").ok());

  CHECK_THAT(ErrorOf(SmallModule({{"a", "parameter", {}}, {"b", "negate", {9}}})),
             Catch::Contains("m.pb: computation 'main', instruction 'b' (id 2): operand id 9 is not an instruction of "
                             "this computation"));
  CHECK_THAT(ErrorOf(SmallModule({{"a", "negate", {2}}, {"b", "negate", {1}}})),
             Catch::Contains("instruction 'a' (id 1): operand id 2 ('b') does not come before it: a cycle"));
  CHECK_THAT(ErrorOf(SmallModule({{"a", "negate", {1}}})), Catch::Contains("does not come before it"));

  xla::HloModuleProto dup = ok;
  dup.mutable_computations(0)->mutable_instructions(1)->set_id(1);
  CHECK_THAT(ErrorOf(dup), Catch::Contains("instruction 'b' (id 1): its id is used by another instruction"));

  xla::HloModuleProto rootless = ok;
  rootless.mutable_computations(0)->set_root_id(77);
  CHECK_THAT(ErrorOf(rootless), Catch::Contains("computation 'main': root_id 77 is not the id of one of its"));

  xla::HloModuleProto wide = ok;
  for (int d = 0; d < 5; ++d) wide.mutable_computations(0)->mutable_instructions(1)->mutable_shape()->add_dimensions(2);
  CHECK_THAT(ErrorOf(wide), Catch::Contains("instruction 'b' (id 2): its shape has 7 dimensions"));

  xla::HloModuleProto calls = ok;
  calls.mutable_computations(0)->mutable_instructions(1)->add_called_computation_ids(5);
  CHECK_THAT(ErrorOf(calls), Catch::Contains("calls computation id 5, which the module does not have"));
  // A call to a computation that comes later: a cycle of calls, or callers first.
  xla::HloComputationProto* later = calls.add_computations();
  *later = calls.computations(0);
  later->set_id(5);
  later->set_name("later");
  CHECK_THAT(ErrorOf(calls), Catch::Contains("calls computation id 5, which does not come before its caller"));
  // A computation that calls itself (as text, refused as a cycle of calls) is a cycle,
  // not the edges (1,0), (1,2), (2,1) it once became.
  xla::HloModuleProto self = ok;
  self.mutable_computations(0)->mutable_instructions(1)->add_called_computation_ids(1);
  CHECK_THAT(ErrorOf(self),
             Catch::Contains("computation 'main', instruction 'b' (id 2): calls computation id 1, its own: a cycle of calls"));

  CHECK_THAT(ErrorOf(xla::HloModuleProto()), Catch::Contains("no computations"));
  auto limited = FeaturizeModule(ok, "m.pb", hlo::Limits{1, {}});
  REQUIRE_FALSE(limited.ok());
  CHECK(limited.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(limited.status().message()), Catch::Contains("2 instructions, over the limit of 1"));

  // Names that are not printable ASCII never leave the featurizer as such.
  auto odd = SmallModule({{"a", "parameter", {}}, {std::string("b\xff\n", 3), "negate", {7}}});
  CHECK_THAT(ErrorOf(odd), Catch::Contains("instruction 'b?\?' (id 2)"));

  // A name of any length is cut in messages.
  auto longname = SmallModule({{"a", "parameter", {}}, {std::string(100000, 'x'), "negate", {7}}});
  const std::string msg = ErrorOf(longname);
  CHECK(msg.size() < 400);
  CHECK_THAT(msg, Catch::Contains("...(100000 bytes)' (id 2)"));

  // An opcode XLA knows but the table lacks is id 0, as upstream, with a warning; its
  // asynchronous form too. One XLA does not know is refused, as XLA refuses it.
  auto newer = FeaturizeModule(
      SmallModule({{"a", "parameter", {}}, {"b", "topk", {1}}, {"c", "ragged-all-to-all-start", {2}}}), "m.pb");
  REQUIRE(newer.ok());
  CHECK(newer->graph.node_opcode[1] == 0);
  CHECK(newer->graph.node_opcode[2] == 0);
  REQUIRE(newer->warnings.size() == 2);
  CHECK_THAT(newer->warnings[0], Catch::Contains("'ragged-all-to-all-start'"));
  CHECK_THAT(newer->warnings[1], Catch::Contains("'topk'"));
  CHECK_THAT(ErrorOf(SmallModule({{"a", "parameter", {}}, {"b", "frobnicate", {1}}})),
             Catch::Contains("instruction 'b' (id 2): unknown opcode 'frobnicate': not one of XLA's"));
  CHECK_THAT(ErrorOf(SmallModule({{"a", "parameter", {}}, {"b", "frobnicate-start", {1}}})),
             Catch::Contains("unknown opcode 'frobnicate-start'"));
}

TEST_CASE("ParseModule refuses what is not an HLO module", "[hlo]") {
  auto err = [](const std::string& bytes) {
    auto r = hlo::ParseModule(bytes, "in.pb");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::StartsWith("in.pb: "));
    return std::string(r.status().message());
  };
  CHECK_THAT(err(""), Catch::Contains("empty"));
  CHECK_THAT(err(*ReadFile(kReal + "/npz/tile/xla/train/retinanet.2x2.fp32_-342c949e14733d96.npz")),
             Catch::Contains("not"));
  const std::string good = RealLayoutTuning().module().SerializeAsString();
  CHECK_THAT(err(good.substr(0, good.size() / 2)), Catch::Contains("not"));
  CHECK_THAT(err(std::string("\x0a\x03" "abc", 5)), Catch::Contains("no computations with instructions"));
  CHECK_THAT(err(*ReadFile(kReal + "/op_tuning_data.pb")), Catch::Contains("not an HLO module"));
}

TEST_CASE("fuzz: mutated and truncated HLO modules are errors or graphs, never crashes", "[hlo][fuzz]") {
  const xla::TuningData tiles = RealTileTuning();
  std::mt19937_64 rng(7);
  int parsed = 0, rejected = 0;
  for (int k = 0; k < tiles.modules_size(); ++k) {
    const std::string good = tiles.modules(k).module().SerializeAsString();
    for (int trial = 0; trial < 60; ++trial) {
      std::string bad = good;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = rng() % bad.size();
        switch (rng() % 3) {
          case 0: bad[pos] = static_cast<char>(rng()); break;
          case 1: bad.resize(pos); break;
          default: bad.insert(pos, 1, static_cast<char>(rng())); break;
        }
        if (bad.empty()) bad = "x";
      }
      auto proto = hlo::ParseModule(bad, "fuzz.pb");
      if (!proto.ok()) { ++rejected; continue; }
      auto g = FeaturizeModule(*proto, "fuzz.pb", hlo::Limits{100000, {}});
      if (!g.ok()) { ++rejected; continue; }
      ++parsed;
      // Whatever was accepted is a valid graph.
      CHECK(ValidateNodeGraph(g->graph, "fuzz").ok());
      for (size_t e = 0; e < g->graph.edge_index.size(); e += 2) CHECK(g->graph.edge_index[e] > g->graph.edge_index[e + 1]);
    }
  }
  CHECK(parsed + rejected == 15 * 60);
  CHECK(rejected > 0);
}

TEST_CASE("LayoutConfigRow: per-node minor-to-major lists to an 18-value row", "[hlo]") {
  auto row = hlo::LayoutConfigRow({{{1, 0}, {0, 1}}, {}, {{3, 2, 1, 0}, {3, 2, 1, 0}, {0, 1, 2, 3}}});
  REQUIRE(row.ok());
  std::vector<int8_t> want(3 * 18, -1);
  want[0] = 1; want[1] = 0; want[6] = 0; want[7] = 1;
  for (int t = 0; t < 3; ++t)
    for (int d = 0; d < 4; ++d) want[36 + t * 6 + d] = static_cast<int8_t>(t < 2 ? 3 - d : d);
  CHECK(*row == want);
  CHECK_THAT(std::string(hlo::LayoutConfigRow({{{0}, {0}, {0}, {0}}}).status().message()),
             Catch::Contains("configurable node 0: 4 tensor layouts"));
  CHECK_THAT(std::string(hlo::LayoutConfigRow({{{0, 1, 2, 3, 4, 5, 0}}}).status().message()),
             Catch::Contains("configurable node 0: tensor 0 has 7 dimensions"));
  CHECK_THAT(std::string(hlo::LayoutConfigRow({{}, {{0, 6}}}).status().message()),
             Catch::Contains("configurable node 1: tensor 0, position 1 is 6"));
}

TEST_CASE("opcode table: names and ids of docs/format.md", "[hlo]") {
  CHECK(OpcodeId("abs") == 1);
  CHECK(OpcodeId("convolution") == op::kConvolution);
  CHECK(OpcodeId("dot") == op::kDot);
  CHECK(OpcodeId("reshape") == op::kReshape);
  CHECK(OpcodeId("tan") == 120);
  CHECK(OpcodeId("no-such-op") == 0);
  CHECK(OpcodeName(op::kParameter) == "parameter");
  CHECK(OpcodeName(0).empty());
  CHECK(OpcodeName(121).empty());
  for (int id = 1; id <= 120; ++id) CHECK(OpcodeId(OpcodeName(id)) == id);
}

TEST_CASE("docs/format.md lists the opcode table the code uses", "[hlo]") {
  const absl::StatusOr<std::string> doc = ReadFile(std::string(TGRAPH_SOURCE_DIR) + "/docs/format.md");
  REQUIRE(doc.ok());
  const std::string table = doc->substr(doc->find("## HLO opcode ids"));
  std::map<int, std::string> listed;
  const std::regex cell("\\| (\\d+) `([a-z0-9-]+)` ");
  for (std::sregex_iterator it(table.begin(), table.end(), cell), end; it != end; ++it)
    listed[std::stoi((*it)[1])] = (*it)[2];
  REQUIRE(listed.size() == 120u);
  for (const auto& [id, name] : listed) CHECK(OpcodeName(id) == name);
}

namespace {
std::pair<int, std::string> RunTool(const std::string& args) {
  return RunCommand(std::string(TGRAPH_FEATURIZE_BIN) + " " + args + " 2>&1");
}
}  // namespace

TEST_CASE("tgraph-featurize: module, layout and tile files every loader reads, errors that name the file", "[hlo][cli]") {
  TempDir dir;
  const std::string layout_pb = kReal + "/module_tuning_data_layout.pb", tile_pb = kReal + "/op_tuning_data.pb";
  auto [rc, out] = RunTool("layout --in " + layout_pb + " --out " + dir.path() + "/unet.npz --nodes_tsv " +
                           dir.path() + "/nodes.tsv");
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("122 runs: 112 kept, 10 with errors"));
  auto g = LoadLayoutGraph(dir.path() + "/unet.npz");
  REQUIRE(g.ok());
  auto real = LoadLayoutGraph(kReal + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  CHECK(g->graph.node_feat == real->graph.node_feat);
  CHECK(g->graph.edge_index == real->graph.edge_index);
  const std::string tsv = *ReadFile(dir.path() + "/nodes.tsv");
  CHECK(std::count(tsv.begin(), tsv.end(), '\n') == 63);  // header + 62 configurable nodes
  CHECK(tsv.rfind("row\tnode\tcomputation\tinstruction\topcode\n0\t443\t", 0) == 0);

  std::tie(rc, out) = RunTool("module --in " + layout_pb + " --out " + dir.path() + "/graph.npz");
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("3163 nodes, 5112 edges, 143 computations, 62 configurable nodes"));
  auto only = LoadLayoutGraph(dir.path() + "/graph.npz", /*allow_no_configs=*/true);
  REQUIRE(only.ok());
  CHECK(only->num_configs == 0);
  // The module alone: the dataset's graph in the canonical order (the test above matches
  // it node for node): the same feature rows, the same number of edges.
  auto rows = [](const LayoutGraph& g) {
    std::multiset<std::vector<float>> r;
    for (int64_t i = 0; i < g.graph.num_nodes; ++i) r.insert(std::vector<float>(g.graph.feat(i), g.graph.feat(i) + 140));
    return r;
  };
  CHECK(rows(*only) == rows(*real));
  CHECK(only->graph.num_edges() == real->graph.num_edges());
  CHECK(only->node_config_ids.size() == real->node_config_ids.size());

  std::tie(rc, out) = RunTool("tile --in " + tile_pb + " --out_dir " + dir.path() + "/tiles");
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("[15/15] "));  // progress, a line per kernel
  CHECK_THAT(out, Catch::Contains("15 kernels, 15 written"));
  int tiles = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/tiles")) {
    REQUIRE(LoadTileGraph(e.path().string()).ok());
    ++tiles;
  }
  CHECK(tiles == 15);

  std::tie(rc, out) = RunTool("module --in " + dir.path() + "/nope.pb --out " + dir.path() + "/x.npz");
  CHECK(rc == 1);
  CHECK_THAT(out, Catch::Contains("nope.pb"));
  const std::string cut = dir.path() + "/cut.pb";
  REQUIRE(WriteFileAtomic(cut, ReadFile(layout_pb)->substr(0, 5000)).ok());
  std::tie(rc, out) = RunTool("layout --in " + cut + " --out " + dir.path() + "/x.npz");
  CHECK(rc == 1);
  CHECK_THAT(out, Catch::Contains("cut.pb: not a serialized tpu_graphs.ModuleTuningData"));
  std::tie(rc, out) = RunTool("layout --in " + tile_pb + " --out " + dir.path() + "/x.npz");
  CHECK(rc == 1);
  CHECK_THAT(out, Catch::Contains("op_tuning_data.pb"));
  xla::HloProto nothing;
  *nothing.mutable_hlo_module() = SmallModule({{"a", "parameter", {}}, {"b", "negate", {1}}});
  REQUIRE(WriteFileAtomic(dir.path() + "/plain.hlo.pb", nothing.SerializeAsString()).ok());
  std::tie(rc, out) = RunTool("module --in " + dir.path() + "/plain.hlo.pb --out " + dir.path() + "/x.npz");
  CHECK(rc == 1);
  CHECK_THAT(out, Catch::Contains("plain.hlo.pb: module small has no convolution, dot or reshape instruction"));
  std::tie(rc, out) = RunTool("bogus");
  CHECK(rc == 2);  // a usage error (model/tools/tool.h)
  CHECK_THAT(out, Catch::Contains("unknown command 'bogus'"));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/x.npz"));  // nothing written on error
}
