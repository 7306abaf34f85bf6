// HLO text (model/hlo/hlo_text.h): the real graphsage_tf module as XLA printed it, with
// hand-checked features; hand-written modules that give the graph their proto gives;
// every attribute the features read; errors naming line and column; a fuzz.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/layout_space.h"
#include "model/core/opcodes.h"
#include "model/hlo/featurize.h"
#include "model/hlo/hlo_print.h"
#include "model/hlo/hlo_text.h"
#include "tests/hlo_test_util.h"

using namespace tgraph;
using tgraph::hlo::FeaturizeModule;
using tgraph::hlo::ParseHloText;

namespace {

const std::string kGraphsage = std::string(TGRAPH_REAL_DATA) + "/hlo/graphsage_tf.hlo";

// The node of the instruction named `name`.
int64_t NodeNamed(const hlo::ModuleGraph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].instruction == name) return static_cast<int64_t>(i);
  FAIL("no instruction " << name);
  return -1;
}

std::vector<float> Feat(const hlo::ModuleGraph& g, int64_t node, int from, int to) {
  return std::vector<float>(g.graph.feat(node) + from, g.graph.feat(node) + to);
}

bool HasEdge(const hlo::ModuleGraph& g, int64_t u, int64_t v) {
  for (size_t e = 0; e + 1 < g.graph.edge_index.size(); e += 2)
    if (g.graph.edge_index[e] == u && g.graph.edge_index[e + 1] == v) return true;
  return false;
}

}  // namespace

TEST_CASE("HLO text: the real graphsage_tf module featurizes, with hand-checked dot, reshape and reduce", "[hlo][text]") {
  const std::string text = *ReadFile(kGraphsage);
  CHECK(hlo::LooksLikeHloText(text));
  auto module = hlo::ParseModule(text, "graphsage_tf.hlo");  // detected as text
  REQUIRE(module.ok());
  CHECK(module->computations_size() == 5);
  CHECK(module->entry_computation_name() == module->computations(4).name());
  auto g = FeaturizeModule(*module, "graphsage_tf.hlo");
  REQUIRE(g.ok());
  CHECK(g->graph.num_nodes == 138);
  int dots = 0, reshapes = 0;
  for (int64_t n : g->default_config_nodes) (g->nodes[n].opcode == "dot" ? dots : reshapes) += 1;
  CHECK(dots == 7);
  CHECK(reshapes == 20);
  // %MatMul_1.10 = bf16[1,128]{1,0} dot(%embedding_lookup.3, %MatMul_1.9), lhs_contracting_dims={1}, ...
  const int64_t dot = NodeNamed(*g, "MatMul_1.10");
  CHECK(g->nodes[dot].opcode == "dot");
  CHECK(g->graph.node_opcode[dot] == OpcodeId("dot"));
  CHECK(g->graph.feat(dot)[2 + 13] == 1.0f);                                           // BF16
  CHECK(Feat(*g, dot, 21, 29) == std::vector<float>{1, 128, 0, 0, 0, 0, 129, 128});   // dims, sum, product
  CHECK(Feat(*g, dot, 134, 140) == std::vector<float>{1, 0, 0, 0, 0, 0});             // minor_to_major
  CHECK(HasEdge(*g, dot, NodeNamed(*g, "embedding_lookup.3")));
  CHECK(HasEdge(*g, dot, NodeNamed(*g, "MatMul_1.9")));
  CHECK(g->first_operands[dot] == std::array<int64_t, 2>{NodeNamed(*g, "embedding_lookup.3"), NodeNamed(*g, "MatMul_1.9")});
  // %shape.22 = s32[1]{0} reshape(%mul_2.1)
  const int64_t reshape = NodeNamed(*g, "shape.22");
  CHECK(g->graph.feat(reshape)[2 + 4] == 1.0f);                                      // S32
  CHECK(Feat(*g, reshape, 21, 29) == std::vector<float>{1, 0, 0, 0, 0, 0, 1, 1});
  CHECK(HasEdge(*g, reshape, NodeNamed(*g, "mul_2.1")));
  // %Mean.30 = f32[1,50]{1,0} reduce(%Mean.27, %Mean.29), dimensions={1}, to_apply=%meanaggregator_1_Mean-reduction.1
  const int64_t reduce = NodeNamed(*g, "Mean.30");
  CHECK(g->graph.feat(reduce)[2 + 11] == 1.0f);                                      // F32
  CHECK(Feat(*g, reduce, 21, 29) == std::vector<float>{1, 50, 0, 0, 0, 0, 51, 50});
  CHECK(Feat(*g, reduce, 31, 37) == std::vector<float>{1, 0, 0, 0, 0, 0});            // dimensions
  CHECK(HasEdge(*g, reduce, NodeNamed(*g, "add.1")));  // the call edge to the reducer's root
  CHECK(g->graph.feat(NodeNamed(*g, "add.1"))[0] == 1.0f);  // is_root
  // Parameters: parameter_number.
  CHECK(g->graph.feat(NodeNamed(*g, "y.1"))[30] == 1.0f);
}

TEST_CASE("HLO text: a hand-written module gives the graph its proto gives, whatever the spelling", "[hlo][text]") {
  // The module of the test "hand-computed features of windows, convolution numbers, slices
  // and padding" (tests/hlo_test.cc), written as text: computations out of order (the
  // entry first), no '%' prefixes, operands with shapes, comments, skipped attributes.
  const std::string text = R"(HloModule small, entry_computation_layout={(f32[8,16])->f32[8,16]}

ENTRY main {
  p = f32[8,16] parameter(0), metadata={op_type="Placeholder" op_name="p"}
  k = f32[8,16] parameter(1), sharding={devices=[2,1]0,1}
  /* a convolution */ conv = f32[8,16] convolution(f32[8,16] p, f32[8,16] k), window={size=3x3 stride=1x2 pad=1_2x1_2 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, batch_group_count=1, backend_config="{\"a\": \"}{\"}"
  s = f32[8,16] slice(conv), slice={[0:4], [1:5], [2:6]}
  ROOT pad = f32[8,16] pad(s, c), padding=2_-1_7, frontend_attributes={_xla="x,y"}
  c = f32[] constant({ {1, 2}, {3, 4} })
}
)";
  // "c" is used before it is defined: an error naming it. Define it first, and compare.
  CHECK_THAT(HloTextError(text), Catch::Contains("line 8, column 31: operand 'c' is not an instruction defined before it"));
  std::string fixed = text;
  const std::string c_line = "  c = f32[] constant({ {1, 2}, {3, 4} })\n";
  fixed.erase(fixed.find(c_line), c_line.size());
  fixed.insert(fixed.find("  p = "), c_line);
  auto parsed = ParseHloText(fixed, "m.hlo");
  REQUIRE(parsed.ok());
  auto g = FeaturizeModule(*parsed, "m.hlo");
  REQUIRE(g.ok());
  // The proto of tests/hlo_test.cc's module gave these. In the canonical order
  // (canonical_order.h) the root's operands come first: p, k, conv, s, then c, then pad.
  std::vector<std::string> order;
  for (const hlo::NodeSource& n : g->nodes) order.push_back(n.instruction);
  CHECK(order == std::vector<std::string>{"p", "k", "conv", "s", "c", "pad"});
  const float* f = g->graph.feat(NodeNamed(*g, "conv"));
  CHECK(std::vector<float>(f + 37, f + 45) == std::vector<float>{3, 3, 0, 0, 0, 0, 6, 9});   // size
  CHECK(std::vector<float>(f + 45, f + 53) == std::vector<float>{1, 2, 0, 0, 0, 0, 3, 2});   // stride
  CHECK(std::vector<float>(f + 53, f + 61) == std::vector<float>{1, 1, 0, 0, 0, 0, 2, 1});   // padding low
  CHECK(std::vector<float>(f + 61, f + 69) == std::vector<float>{2, 2, 0, 0, 0, 0, 4, 4});   // padding high
  CHECK(std::vector<float>(f + 85, f + 93) == std::vector<float>{0, 1, 0, 0, 0, 0, 1, 1});   // reversal, counts
  CHECK(std::vector<float>(f + 93, f + 109) == std::vector<float>{0, 3, 1, 2, 0, 0, 2, 3, 0, 1, 0, 0, 0, 3, 1, 1});
  CHECK(g->graph.feat(NodeNamed(*g, "k"))[30] == 1.0f);  // parameter_number 1
  const float* s = g->graph.feat(NodeNamed(*g, "s"));
  CHECK(std::vector<float>(s + 109, s + 121) == std::vector<float>{0, 1, 3, 0, 1, 1, 3, 1, 4, 5, 15, 120});
  const float* p = g->graph.feat(NodeNamed(*g, "pad"));
  CHECK(std::vector<float>(p + 125, p + 133) == std::vector<float>{2, 0, 2, 2, -1, 0, -1, -1});
  CHECK(p[0] == 1.0f);  // the root
  // conv(p, k), s(conv), pad(s, c)
  CHECK(g->graph.edge_index == std::vector<int64_t>{2, 0, 2, 1, 3, 2, 5, 3, 5, 4});
  CHECK(g->default_config_nodes == std::vector<int64_t>{2});
}

TEST_CASE("HLO text: tuples, tokens, calls of every kind, callees put first in call order, ids in text order",
          "[hlo][text]") {
  const std::string text = R"(HloModule calls

ENTRY %main (a: f32[4]) -> (f32[4], s32[]) {
  %a = f32[4]{0} parameter(0)
  %i = s32[] constant(0)
  %t = (f32[4]{0}, s32[]) tuple(%a, %i)
  %w = (f32[4]{0}, s32[]) while(%t), condition=%cond, body=%body
  %tok = token[] after-all()
  %b = pred[] constant(true)
  %r = f32[4]{0:T(256)} conditional(%b, %a, %a), branch_computations={%body2, %body2}
  %f = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused
  %srt = f32[4]{0} sort(%a), dimensions={0}, is_stable=true, to_apply=%less
  %ds = f32[2]{0} dynamic-slice(%a, %i), dynamic_slice_sizes={2}
  ROOT %out = (f32[4]{0}, s32[]) tuple(%f, %i), control-predecessors={%srt}
}

%cond (t: (f32[4], s32[])) -> pred[] {
  %t = (f32[4]{0}, s32[]) parameter(0)
  ROOT %c = pred[] constant(false)
}

%body (t: (f32[4], s32[])) -> (f32[4], s32[]) {
  ROOT %t = (f32[4]{0}, s32[]) parameter(0)
}

%body2 (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4]{0} parameter(0)
}

%fused (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}

%less (x: f32[], y: f32[]) -> pred[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %lt = pred[] compare(%x, %y), direction=LT
}
)";
  auto m = ParseHloText(text, "calls.hlo");
  REQUIRE(m.ok());
  REQUIRE(m->computations_size() == 6);
  // The canonical order (canonical_order.h). main's instructions: walks from the unused
  // ones by name (ds, r, srt, tok, w), then from the root (out), operands first.
  std::vector<std::string> names;
  for (const auto& c : m->computations()) names.push_back(c.name());
  const auto& main = m->computations(5);
  std::vector<std::string> order;
  for (const auto& inst : main.instructions()) order.push_back(inst.name());
  CHECK(order == std::vector<std::string>{"a", "i", "ds", "b", "r", "srt", "tok", "t", "w", "f", "out"});
  // Callees before their callers, in the order main's instructions call them (a while's
  // body before its condition, as XLA's proto lists them, though the text writes the
  // condition first); the entry last.
  CHECK(names == std::vector<std::string>{"body2", "less", "body", "cond", "fused", "main"});
  CHECK(m->entry_computation_name() == "main");
  auto inst = [&](const std::string& name) -> const xla::HloInstructionProto& {
    return main.instructions(static_cast<int>(std::find(order.begin(), order.end(), name) - order.begin()));
  };
  CHECK(inst("a").id() == 1);  // ids in text order
  CHECK(inst("ds").id() == 10);
  CHECK(main.root_id() == inst("out").id());
  CHECK(inst("t").shape().element_type() == xla::TUPLE);
  CHECK(inst("t").shape().tuple_shapes_size() == 2);
  CHECK(inst("tok").shape().element_type() == xla::TOKEN);
  CHECK(inst("w").called_computation_ids_size() == 2);  // body, condition
  REQUIRE(inst("r").opcode() == "conditional");
  CHECK(inst("r").called_computation_ids_size() == 2);  // both branches
  REQUIRE(inst("r").shape().layout().minor_to_major_size() == 1);
  CHECK(inst("r").shape().layout().minor_to_major(0) == 0);  // tiling after ':' skipped
  CHECK(inst("f").called_computation_ids_size() == 1);       // the fusion's calls
  CHECK(inst("f").fusion_kind() == "kLoop");
  CHECK(inst("srt").is_stable());
  REQUIRE(inst("ds").dynamic_slice_sizes_size() == 1);
  CHECK(inst("ds").dynamic_slice_sizes(0) == 2);
  auto g = FeaturizeModule(*m, "calls.hlo");
  REQUIRE(g.ok());
  CHECK(g->graph.num_nodes == 20);
  // The while node's call edges reach the roots of body and cond (nodes: body2 0, less
  // 1-3, body 4, cond 5-6, fused 7-8, main from 9).
  const int64_t w = NodeNamed(*g, "w");
  CHECK(w == 9 + 8);
  CHECK(HasEdge(*g, w, 4));  // body's root %t
  CHECK(HasEdge(*g, w, 6));  // cond's root %c
}

TEST_CASE("HLO text: malformed modules are errors naming line, column and what was expected", "[hlo][text]") {
  // Text without the HloModule line is a sequence of computations: a misspelt keyword
  // reads as a computation's name.
  CHECK_THAT(HloTextError("HloModul x"), Catch::Contains("m.hlo: line 1, column 10: expected '{' opening computation "
                                                         "'HloModul', got 'x'"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b f32[2] negate(a)\n}"),
             Catch::Contains("line 4, column 5: expected '=' after the instruction name 'b'"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2,x] parameter(0)\n}"),
             Catch::Contains("line 3, column 13: expected a dimension size, got 'x'"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n"),
             Catch::Contains("expected '}' closing computation 'e', got the end of the text"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  ROOT a = f32[2] map(b), to_apply=f\n}"),
             Catch::Contains("line 3, column 23: operand 'b' is not an instruction defined before it"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT r = f32[2] map(a), to_apply=%f\n}"),
             Catch::Contains("line 4, column 27: calls computation 'f', which the module does not have"));
  CHECK_THAT(HloTextError("HloModule m\nf {\n  ROOT a = f32[] call(), to_apply=g\n}\ng {\n  ROOT b = f32[] call(), to_apply=f\n}"),
             Catch::Contains("is part of a cycle of calls"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT c = f32[2] convolution(a, a), window={size=3xq}\n}"),
             Catch::Contains("line 4, column 45: window: size of dimension 1: expected a number, got 'q'"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  a = f32[2] negate(a)\n}"),
             Catch::Contains("line 4, column 3: instruction name 'a' is used twice in 'e'"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n}"), Catch::Contains("computation 'e' has no instructions"));
  // XLA's parser takes an instruction nested in another's operands; ours says where it is.
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = (f32[2]) opt-barrier((f32[2]) "
                          "tuple(a))\n}"),
             Catch::Contains("line 4, column 42: operand 'tuple(...)' is an instruction written inside another's "
                             "operands, which tgraph does not read: define it on a line of its own"));
  // An opcode XLA does not know is refused where it is written, as XLA refuses it: a typo
  // is not a node of opcode id 0, nor a parameter an undefined operand.
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT d = f32[2,2] dto(a, a)\n}"),
             Catch::Contains("m.hlo: line 4, column 21: unknown opcode 'dto' (instruction 'd'): not one of XLA's"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] paramter(0)\n  ROOT n = f32[2] negate(a)\n}"),
             Catch::Contains("line 3, column 14: unknown opcode 'paramter' (instruction 'a')"));
  std::string deep = "HloModule m\nENTRY e {\n  ROOT a = ";
  for (int i = 0; i < 100; ++i) deep += "(";
  CHECK_THAT(HloTextError(deep), Catch::Contains("tuple shapes nested at most 32 deep"));
}

TEST_CASE("HLO text: layouts that are not a permutation, shapes past 2^62 elements, no ENTRY or two, and an unclosed "
          "comment are refused at their line and column",
          "[hlo][text]") {
  const auto with_shape = [](const std::string& shape) {
    return "HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n  ROOT b = " + shape + " negate(a)\n}";
  };
  CHECK_THAT(HloTextError(with_shape("f32[2,3]{7,0}")),
             Catch::Contains("line 4, column 12: instruction 'b': layout {7,0} of f32[2,3]{7,0} is not a permutation of "
                             "its 2 dimensions (0..1, each once)"));
  CHECK_THAT(HloTextError(with_shape("f32[2,3]{1,1}")), Catch::Contains("layout {1,1} of f32[2,3]{1,1} is not a permutation"));
  CHECK_THAT(HloTextError(with_shape("f32[2,3]{0}")), Catch::Contains("layout {0} of f32[2,3]{0} is not a permutation"));
  CHECK_THAT(HloTextError(with_shape("f32[2,3]{3,2,1,0}")), Catch::Contains("is not a permutation of its 2 dimensions"));
  CHECK_THAT(HloTextError(with_shape("f32[2,3]{4611686018427387904,0}")),
             Catch::Contains("layout {4611686018427387904,0} of f32[2,3]"));
  CHECK_THAT(HloTextError(with_shape("f32[4611686018427387904,16]")),
             Catch::Contains("line 4, column 12: instruction 'b': f32[4611686018427387904,16]{1,0} has more than 2^62 elements"));
  // Six dimensions of 2^62 once summed to -9.2e18 in the features; a zero among them
  // does not hide the others.
  CHECK_THAT(HloTextError(with_shape("f32[0,4611686018427387904,4611686018427387904]")),
             Catch::Contains("has more than 2^62 elements"));
  CHECK_THAT(HloTextError(with_shape("(f32[2,3]{1,0}, f32[2]{1})")), Catch::Contains("layout {1} of f32[2]{1}"));
  // What stays accepted: a permutation, no layout, an empty one, 2^62 exactly, dynamic.
  for (const char* ok : {"f32[2,3]{0,1}", "f32[2,3]", "f32[2,3]{}", "f32[4611686018427387904]", "f32[?,3]{1,0}",
                         "f32[2,3]{1,0:T(8,128)}"})
    CHECK(ParseHloText(with_shape(ok), "m.hlo").ok());

  const std::string two = "HloModule m\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\nENTRY f {\n  ROOT b = f32[2] parameter(0)\n}";
  CHECK_THAT(HloTextError(two),
             Catch::Contains("line 5, column 1: computation 'f' is a second ENTRY (the first: 'e', line 2); a module has "
                             "exactly one"));
  // Two modules in one file: said so, where the second starts.
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\nHloModule n\nENTRY f {\n"
                          "  ROOT b = f32[2] parameter(0)\n}"),
             Catch::Contains("line 5, column 1: a second 'HloModule' (the first module starts at line 1): one module "
                             "per file"));
  // An unclosed comment swallows the rest: refused where it opens, even when what came
  // before it is a whole module.
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\n/* trailing"),
             Catch::Contains("line 5, column 1: '/*' opens a comment that the text never closes"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  ROOT a = f32[2] /* parameter(0)\n}"),
             Catch::Contains("line 3, column 19: '/*' opens a comment"));
  CHECK(ParseHloText("HloModule m\nENTRY e {\n  ROOT a = f32[2] /* closed */ parameter(0)\n}", "m.hlo").ok());
}

TEST_CASE("HLO text reads as XLA's parser reads it: without the HloModule line, after any comment, the last "
          "computation the entry when none is marked", "[hlo][text]") {
  const std::string body =
      "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
      "main {\n  p = f32[8] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(p, z), dimensions={0}, "
      "to_apply=add\n}\n";
  const std::string with_line = "HloModule hlo_module\n\n" + body;
  // No ENTRY: the last computation is the entry, as in XLA.
  absl::StatusOr<xla::HloModuleProto> m = ParseHloText(with_line, "m.hlo");
  REQUIRE(m.ok());
  CHECK(m->entry_computation_name() == "main");
  // No HloModule line: the same module, named as our clients name an unnamed one; text
  // by content, never a protobuf.
  CHECK(hlo::LooksLikeHloText(body));
  CHECK(hlo::LooksLikeHloText("ENTRY %main (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2] parameter(0)\n}\n"));
  absl::StatusOr<xla::HloModuleProto> bare = ParseHloText(body, "bare.hlo");
  REQUIRE(bare.ok());
  CHECK(bare->name() == "hlo_module");
  CHECK(bare->SerializeAsString() == m->SerializeAsString());
  // After a comment block of any length (once: only the first 4,096 bytes were looked at).
  const std::string commented = "/* " + std::string(10000, '-') + " */\n// and a line comment\n" + with_line;
  CHECK(hlo::LooksLikeHloText(commented));
  absl::StatusOr<xla::HloModuleProto> after = ParseHloText(commented, "c.hlo");
  REQUIRE(after.ok());
  CHECK(after->SerializeAsString() == m->SerializeAsString());
  // Bytes that are neither: a serialized module is not taken for text.
  CHECK_FALSE(hlo::LooksLikeHloText(m->SerializeAsString()));
  CHECK_FALSE(hlo::LooksLikeHloText("main = 3"));
}

TEST_CASE("a tuple whose shape is left out has its operands' shapes, and another omitted shape is refused naming it",
          "[hlo][text]") {
  const auto module = [](const std::string& root) {
    return "HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0)\n  b = bf16[3,4]{0,1} parameter(1)\n  " + root + "\n}";
  };
  absl::StatusOr<xla::HloModuleProto> inferred = ParseHloText(module("ROOT t = tuple(a, b)"), "m.hlo");
  REQUIRE(inferred.ok());
  absl::StatusOr<xla::HloModuleProto> written =
      ParseHloText(module("ROOT t = (f32[2]{0}, bf16[3,4]{0,1}) tuple(a, b)"), "m.hlo");
  REQUIRE(written.ok());
  CHECK(inferred->SerializeAsString() == written->SerializeAsString());
  CHECK_THAT(HloTextError(module("ROOT n = negate(a)")),
             Catch::Contains("line 5, column 12: instruction 'n': its shape is omitted; tgraph infers a tuple's only "
                             "(its operands'): write the shape of this negate"));
}

TEST_CASE("fuzz: mutated header-less modules, long comments, omitted shapes and two modules are an error or a "
          "module, never a crash", "[hlo][text][fuzz]") {
  const std::string text =
      "/* " + std::string(5000, '=') + " */\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n}\nmain {\n  p = f32[8]{0} parameter(0)\n  z = f32[] constant(0)\n"
      "  r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n  ROOT t = tuple(r, p)\n}\n";
  const char* const alphabet = "%=(){}[],:#-_ \nxf0123ROOTENTRYHloModuletuple/*";
  CHECK(FuzzModuleReader(text, 29, 400, alphabet, 0) > 0);
  // A second module after it: every mutation still an error or a module.
  (void)FuzzModuleReader(text + "HloModule second\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\n", 31, 200, alphabet, 0);
}

TEST_CASE("HLO text with a UTF-8 byte order mark reads as the same module, by content detection too", "[hlo][text]") {
  const std::string text = *ReadFile(kGraphsage);
  const std::string bom = "\xEF\xBB\xBF" + text;
  absl::StatusOr<xla::HloModuleProto> plain = hlo::ParseModule(text, "g.hlo"), marked = hlo::ParseModule(bom, "g.hlo");
  REQUIRE(plain.ok());
  REQUIRE(marked.ok());  // it was "not a serialized xla.HloProto"
  CHECK(plain->SerializeAsString() == marked->SerializeAsString());
  CHECK_THAT(HloTextError("\xEF\xBB\xBFHloModule m\nENTRY e {\n  ROOT a = f32[2]{7} parameter(0)\n}"),
             Catch::Contains("line 3, column 12: instruction 'a'"));  // columns as an editor shows them
}

TEST_CASE("HLO proto: an instruction whose layout is not a permutation or whose shape is too large is refused by name",
          "[hlo]") {
  absl::StatusOr<xla::HloModuleProto> m =
      ParseHloText("HloModule m\nENTRY e {\n  a = f32[2,3]{1,0} parameter(0)\n  ROOT b = f32[2,3]{1,0} negate(a)\n}", "m.hlo");
  REQUIRE(m.ok());
  xla::HloModuleProto bad = *m;
  xla::HloInstructionProto* b = bad.mutable_computations(0)->mutable_instructions(1);
  REQUIRE(b->name() == "b");
  b->mutable_shape()->mutable_layout()->set_minor_to_major(0, 7);
  absl::StatusOr<hlo::ModuleGraph> g = FeaturizeModule(bad, "m.pb");
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(g.status().message()),
             Catch::Contains("m.pb: computation 'e', instruction 'b' (id 2): layout {7,0} of f32[2,3]{7,0} is not a permutation"));
  bad = *m;
  bad.mutable_computations(0)->mutable_instructions(1)->mutable_shape()->set_dimensions(0, int64_t{1} << 61);
  g = FeaturizeModule(bad, "m.pb");
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("instruction 'b' (id 2): f32[2305843009213693952,3]"));
  bad.mutable_computations(0)->mutable_instructions(1)->mutable_shape()->set_dimensions(0, -5);
  g = FeaturizeModule(bad, "m.pb");
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("dimension 0 of f32[-5,3]{1,0} is -5"));
  CHECK(FeaturizeModule(*m, "m.pb").ok());
}

TEST_CASE("fuzz: mutated and truncated HLO text is an error or a module, never a crash or a hang", "[hlo][text][fuzz]") {
  const int parsed = FuzzModuleReader(*ReadFile(kGraphsage), 7, 1500, "%=(){}[],:<>-_ \n\"xfs0123456789ROOTENTRY/*");
  CHECK(parsed > 0);  // some edits land in skipped attributes
}

TEST_CASE("HLO text: a module of 40,000 instructions and several MB parses", "[hlo][text]") {
  // Its speed is a benchmark's figure, not a timed test.
  std::string text = "HloModule big\nENTRY e {\n  a0 = f32[8,128]{1,0} parameter(0)\n";
  for (int i = 1; i < 40000; ++i)
    text += "  a" + std::to_string(i) + " = f32[8,128]{1,0} add(a" + std::to_string(i - 1) + ", a0), metadata={op_name=\"x\"}\n";
  text += "}\n";
  CHECK(text.size() > 2000000);
  auto m = ParseHloText(text, "big.hlo");
  REQUIRE(m.ok());
  CHECK(m->computations(0).instructions_size() == 40000);
}

TEST_CASE("same program, same graph: the real unet_3d module printed as text featurizes and hashes as its proto",
          "[hlo][text]") {
  // module_tuning_data_layout.pb holds the module in field 1, as an xla.HloProto does.
  auto proto = hlo::ParseModule(*ReadFile(std::string(TGRAPH_REAL_DATA) + "/module_tuning_data_layout.pb"), "unet");
  REQUIRE(proto.ok());
  const std::string text = hlo::PrintHloText(*proto);
  CHECK(hlo::LooksLikeHloText(text));
  auto parsed = ParseHloText(text, "unet.hlo");
  REQUIRE(parsed.ok());
  auto a = FeaturizeModule(*proto, "unet.pb");
  auto b = FeaturizeModule(*parsed, "unet.hlo");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(b->graph.num_nodes == 3163);
  CHECK(b->graph.node_feat == a->graph.node_feat);
  CHECK(b->graph.node_opcode == a->graph.node_opcode);
  CHECK(b->graph.edge_index == a->graph.edge_index);
  CHECK(b->node_splits == a->node_splits);
  CHECK(b->default_config_nodes == a->default_config_nodes);
  CHECK(b->first_operands == a->first_operands);
  CHECK(GraphContentHash(b->graph, b->default_config_nodes) == GraphContentHash(a->graph, a->default_config_nodes));
  // And the text printed again from the parsed module is the same text.
  CHECK(hlo::PrintHloText(*parsed) == text);
}

TEST_CASE("HLO text: lines of a real convolutional model read as XLA wrote them, with hand-checked convolutions",
          "[hlo][text]") {
  // The header and instruction lines below are verbatim from openxla/xla
  // xla/backends/cpu/benchmarks/hlo/ssd_mobilenet_tf.hlo (a TensorFlow SSD MobileNet v1,
  // Apache License 2.0; 108 kB, not copied whole): a tuple-valued entry layout, elided
  // literals `constant({...})`, `parameter_replication`, empty `dimensions={}`, a strided
  // padded convolution and a depthwise one (`feature_group_count`). Only the closing
  // ROOT tuple is ours.
  const std::string text = R"(HloModule cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0__XlaNumResourceArgs_0_.1, alias_passthrough_params=true, entry_computation_layout={(f32[1,300,300,3]{3,2,1,0})->(f32[1,1917,1,4]{3,2,1,0}, f32[1,1917,90]{2,1,0})}

ENTRY %cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0__XlaNumResourceArgs_0_.1 (arg0.1: f32[1,300,300,3]) -> (f32[1,1917,1,4], f32[1,1917,90]) {
  %Relu6.175 = bf16[] constant(0), metadata={op_type="Relu6" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_0/Relu6" source_file="dummy_file_name" source_line=10}
  %Relu6.177 = bf16[1,150,150,32]{3,2,1,0} broadcast(%Relu6.175), dimensions={}, metadata={op_type="Relu6" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_0/Relu6"}
  %arg0.1 = f32[1,300,300,3]{3,2,1,0} parameter(0), parameter_replication={false}, metadata={op_name="XLA_Args"}
  %reshape.1 = f32[1,300,300,3]{3,2,1,0} reshape(%arg0.1)
  %TensorArrayGatherV3-0-CastToBf16-0-AutoMixedPrecision.1 = bf16[1,300,300,3]{3,2,1,0} convert(%reshape.1), metadata={op_type="Cast" op_name="Preprocessor/map/TensorArrayStack/TensorArrayGatherV3-0-CastToBf16-0-AutoMixedPrecision" source_file="dummy_file_name" source_line=10}
  %Conv2D.68 = bf16[3,3,3,32]{3,2,1,0} constant({...}), metadata={op_type="Conv2D" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_0/Conv2D" source_file="dummy_file_name" source_line=10}
  %Conv2D.69 = bf16[1,150,150,32]{3,2,1,0} convolution(%TensorArrayGatherV3-0-CastToBf16-0-AutoMixedPrecision.1, %Conv2D.68), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f, metadata={op_type="Conv2D" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_0/Conv2D" source_file="dummy_file_name" source_line=10}
  %depthwise.39 = bf16[3,3,32,1]{3,2,1,0} constant({...}), metadata={op_type="DepthwiseConv2dNative" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_1_depthwise/depthwise" source_file="dummy_file_name" source_line=10}
  %depthwise.40 = bf16[3,3,1,32]{3,2,1,0} reshape(%depthwise.39), metadata={op_type="DepthwiseConv2dNative" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_1_depthwise/depthwise" source_file="dummy_file_name" source_line=10}
  %depthwise.41 = bf16[1,150,150,32]{3,2,1,0} convolution(%Relu6.177, %depthwise.40), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32, metadata={op_type="DepthwiseConv2dNative" op_name="FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_1_depthwise/depthwise" source_file="dummy_file_name" source_line=10}
  ROOT %out = (bf16[1,150,150,32]{3,2,1,0}, bf16[1,150,150,32]{3,2,1,0}) tuple(%Conv2D.69, %depthwise.41)
}
)";
  auto m = ParseHloText(text, "ssd_mobilenet_tf.hlo");
  REQUIRE(m.ok());
  auto g = FeaturizeModule(*m, "ssd_mobilenet_tf.hlo");
  REQUIRE(g.ok());
  CHECK(g->graph.num_nodes == 11);
  const int64_t conv = NodeNamed(*g, "Conv2D.69"), depthwise = NodeNamed(*g, "depthwise.41");
  // Two reshapes, two convolutions, in the canonical order (the root's operands first).
  CHECK(g->default_config_nodes == std::vector<int64_t>{NodeNamed(*g, "reshape.1"), conv, NodeNamed(*g, "depthwise.40"),
                                                        depthwise});
  CHECK(g->default_config_nodes == std::vector<int64_t>{1, 4, 8, 9});
  CHECK(Feat(*g, conv, 21, 29) == std::vector<float>{1, 150, 150, 32, 0, 0, 333, 720000});
  CHECK(Feat(*g, conv, 37, 45) == std::vector<float>{3, 3, 0, 0, 0, 0, 6, 9});    // window size
  CHECK(Feat(*g, conv, 45, 53) == std::vector<float>{2, 2, 0, 0, 0, 0, 4, 4});    // stride
  CHECK(Feat(*g, conv, 53, 61) == std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0});    // padding low (product 0)
  CHECK(Feat(*g, conv, 61, 69) == std::vector<float>{1, 1, 0, 0, 0, 0, 2, 1});    // padding high
  CHECK(Feat(*g, conv, 69, 85) == std::vector<float>{1, 1, 0, 0, 0, 0, 2, 1, 1, 1, 0, 0, 0, 0, 2, 1});  // dilations
  // b01f_01io->b01f: input batch 0, feature 3, spatial 1, 2; kernel in 2, out 3,
  // spatial 0, 1; output batch 0, feature 3.
  CHECK(Feat(*g, conv, 93, 107) == std::vector<float>{0, 3, 1, 2, 0, 0, 2, 3, 0, 1, 0, 0, 0, 3});
  CHECK(Feat(*g, conv, 134, 140) == std::vector<float>{3, 2, 1, 0, 0, 0});       // layout {3,2,1,0}
  // Group counts absent from the text are 1, as XLA's parser takes them and as XLA's
  // protos (the real TpuGraphs files') carry them.
  CHECK(Feat(*g, conv, 107, 109) == std::vector<float>{1, 1});
  CHECK(Feat(*g, depthwise, 107, 109) == std::vector<float>{32, 1});
  CHECK(Feat(*g, depthwise, 53, 61) == std::vector<float>{1, 1, 0, 0, 0, 0, 2, 1});
  CHECK(g->first_operands[depthwise] == std::array<int64_t, 2>{NodeNamed(*g, "Relu6.177"), NodeNamed(*g, "depthwise.40")});
  CHECK(g->graph.feat(NodeNamed(*g, "out"))[2 + 16] == 1.0f);  // TUPLE
  CHECK(g->graph.feat(NodeNamed(*g, "out"))[29] == 2.0f);      // its tuple shapes
}

TEST_CASE("HLO text: real modules as PyTorch/XLA and JAX wrote them read whole, with hand-checked dots",
          "[hlo][text]") {
  // tests/data/real/README.md has their provenance.
  SECTION("PyTorch/XLA: an MLP training step, operands written with their shapes, input_output_alias") {
    const std::string path = std::string(TGRAPH_REAL_DATA) + "/hlo/pytorch_xla_mlp_train_step.hlo";
    auto m = hlo::ParseModule(*ReadFile(path), path);
    REQUIRE(m.ok());
    CHECK(m->computations_size() == 5);
    CHECK(m->entry_computation_name() == "SyncTensorsGraph.142");
    auto g = FeaturizeModule(*m, path);
    REQUIRE(g.ok());
    CHECK(g->graph.num_nodes == 92);
    CHECK(g->warnings.empty());  // custom-call and iota are in the opcode table
    REQUIRE(g->default_config_nodes.size() == 2);
    const int64_t dot = NodeNamed(*g, "dot"), dot25 = NodeNamed(*g, "dot.25");
    CHECK(g->default_config_nodes == std::vector<int64_t>{dot, dot25});
    // %dot = f32[10,784]{0,1} dot(f32[32,10] %divide.67, f32[784,32]{0,1} %transpose.68)
    CHECK(Feat(*g, dot, 21, 29) == std::vector<float>{10, 784, 0, 0, 0, 0, 794, 7840});  // dims, sum, product
    CHECK(Feat(*g, dot, 134, 140) == std::vector<float>{0, 1, 0, 0, 0, 0});              // layout {0,1}
    CHECK(g->nodes[g->first_operands[dot][0]].instruction == "divide.67");
    CHECK(g->nodes[g->first_operands[dot][1]].instruction == "transpose.68");
    CHECK(Feat(*g, g->first_operands[dot][1], 134, 140) == std::vector<float>{0, 1, 0, 0, 0, 0});
    // %dot.25 = f32[32,10]{1,0} dot(f32[32,784]{1,0} %p4.24, f32[784,10]{0,1} %transpose.23)
    CHECK(Feat(*g, dot25, 21, 29) == std::vector<float>{32, 10, 0, 0, 0, 0, 42, 320});
    CHECK(Feat(*g, dot25, 134, 140) == std::vector<float>{1, 0, 0, 0, 0, 0});
    CHECK(HasEdge(*g, dot25, NodeNamed(*g, "p4.24")));
    // The reduction's call edge goes to its computation's root.
    CHECK(HasEdge(*g, NodeNamed(*g, "reduce.61"), NodeNamed(*g, "add.60")));
  }
  SECTION("JAX after optimizations: fusions, async all-to-all with nested tuple shapes, JSON backend_config") {
    const std::string path = std::string(TGRAPH_REAL_DATA) + "/hlo/jax_fft3d_compiled.hlo";
    auto m = hlo::ParseModule(*ReadFile(path), path);
    REQUIRE(m.ok());
    CHECK(m->computations_size() == 4);
    CHECK(m->entry_computation_name() == "main.34_spmd");
    auto g = FeaturizeModule(*m, path);
    REQUIRE(g.ok());
    CHECK(g->graph.num_nodes == 18);
    CHECK(g->default_config_nodes.empty());  // fft, transpose, fusion: nothing a layout row configures
    // The collectives XLA added after the opcode table was fixed are encoded as id 0, said
    // once each; and the module is one after XLA's passes (its fusions), said too.
    REQUIRE(g->warnings.size() == 3);
    CHECK(g->after_optimizations);
    CHECK_THAT(g->warnings[2], Catch::Contains("was dumped after XLA's optimization passes (3 fusion instructions)"));
    const int64_t start = NodeNamed(*g, "all-to-all-start"), done = NodeNamed(*g, "all-to-all-done");
    CHECK(g->graph.node_opcode[static_cast<size_t>(start)] == 0);
    CHECK(HasEdge(*g, done, start));  // its operand written with a nested tuple shape
    CHECK(Feat(*g, NodeNamed(*g, "param_0.1"), 134, 140) == std::vector<float>{1, 0, 2, 0, 0, 0});
    CHECK(HasEdge(*g, NodeNamed(*g, "loop_transpose_fusion"), NodeNamed(*g, "transpose.22.1")));
  }
}

TEST_CASE("HLO text: a real transformer layer as PyTorch/XLA wrote it, with hand-checked attention dots",
          "[hlo][text]") {
  const std::string path = std::string(TGRAPH_REAL_DATA) + "/hlo/pytorch_xla_llama_decoder_layer.hlo";
  auto m = hlo::ParseModule(*ReadFile(path), path);
  REQUIRE(m.ok());
  CHECK(m->computations_size() == 10);
  auto g = FeaturizeModule(*m, path);
  REQUIRE(g.ok());
  CHECK(g->graph.num_nodes == 204);
  int dots = 0, reshapes = 0;
  for (int64_t n : g->default_config_nodes) (g->nodes[n].opcode == "dot" ? dots : reshapes) += 1;
  CHECK(dots == 13);
  CHECK(reshapes == 12);
  // Attention scores: %dot.101 = f32[4,4,1,128]{3,2,1,0} dot(f32[1,4,4,1024] %divide.100,
  // f32[128,4,4,1024] %custom-call.39), batch dims {1,2}, contracting {3}.
  const int64_t scores = NodeNamed(*g, "dot.101");
  CHECK(Feat(*g, scores, 21, 29) == std::vector<float>{4, 4, 1, 128, 0, 0, 137, 2048});
  CHECK(Feat(*g, scores, 134, 140) == std::vector<float>{3, 2, 1, 0, 0, 0});
  CHECK(g->nodes[g->first_operands[scores][0]].instruction == "divide.100");
  CHECK(g->nodes[g->first_operands[scores][1]].instruction == "custom-call.39");
  // The LM head: %dot.220 = f32[32000,4] dot(f32[4096,32000] %custom-call.199, f32[4096,4] %reshape.219).
  const int64_t head = NodeNamed(*g, "dot.220");
  CHECK(Feat(*g, head, 21, 29) == std::vector<float>{32000, 4, 0, 0, 0, 0, 32004, 128000});
  // Its layout space has the operands' own ranks: 2 and 2; the scores' kernel is rank 4.
  const LayoutSpace space = LayoutSpaceOf(g->graph, g->default_config_nodes, &g->first_operands);
  for (size_t j = 0; j < g->default_config_nodes.size(); ++j)
    if (g->default_config_nodes[j] == scores) {
      CHECK(space.nodes[j].groups[1].rank == 4);
      CHECK(space.nodes[j].groups[2].rank == 4);
    }
  // The KV-cache update: scatter calls its assignment computation, whose root is a parameter.
  CHECK(HasEdge(*g, NodeNamed(*g, "scatter.154"), NodeNamed(*g, "p1.157")));
}

TEST_CASE("HLO text: the narrow types read as XLA numbers them, and print back by name", "[hlo][text]") {
  // XLA's PrimitiveType numbers (xla/xla_data.proto), as the test environment's jaxlib
  // carries them: what XLA's own proto of the same module holds.
  const std::vector<std::pair<std::string, int>> types = {
      {"s1", 30},       {"s2", 26},       {"s4", 21},       {"u1", 31},         {"u2", 27},
      {"u4", 22},       {"f8e5m2", 19},   {"f8e4m3", 28},   {"f8e4m3fn", 20},   {"f8e4m3b11fnuz", 23},
      {"f8e3m4", 29},   {"f8e5m2fnuz", 24}, {"f8e4m3fnuz", 25}, {"f4e2m1fn", 32}, {"f8e8m0fnu", 33},
      {"f6e3m2fn", 35}, {"f6e2m3fn", 36}};
  std::string text = "HloModule narrow\n\nENTRY main {\n";
  for (size_t i = 0; i < types.size(); ++i)
    text += absl::StrCat("  p", i, " = ", types[i].first, "[4,8]{1,0} parameter(", i, ")\n");
  text += "  ROOT t = (f8e4m3fn[4,8]{1,0}, s4[4,8]{1,0}) tuple(p8, p2)\n}\n";
  auto module = ParseHloText(text, "narrow.hlo");
  REQUIRE(module.ok());
  const auto& entry = module->computations(0);
  int parameters = 0;
  for (const auto& inst : entry.instructions()) {
    if (inst.opcode() != "parameter") continue;
    ++parameters;
    const auto& [name, number] = types.at(static_cast<size_t>(inst.parameter_number()));
    CHECK(inst.shape().element_type() == number);
    CHECK(std::string(hlo::ElementTypeName(number)) == name);
  }
  CHECK(parameters == static_cast<int>(types.size()));
  // Printed by name, and read again as the same types.
  const std::string printed = hlo::PrintHloText(*module);
  CHECK_THAT(printed, Catch::Contains("f8e4m3b11fnuz[4,8]") && Catch::Contains("(f8e4m3fn[4,8]{1,0}, s4[4,8]{1,0})"));
  auto again = ParseHloText(printed, "printed.hlo");
  REQUIRE(again.ok());
  CHECK(hlo::PrintHloText(*again) == printed);
  // A name no XLA type has still reads (its features all zero), and prints as "other".
  auto odd = ParseHloText("HloModule o\n\nENTRY main {\n  ROOT p = f7e9[2]{0} parameter(0)\n}\n", "odd.hlo");
  REQUIRE(odd.ok());
  CHECK(std::string(hlo::ElementTypeName(odd->computations(0).instructions(0).shape().element_type())) == "other");
}

TEST_CASE("HLO text and proto: an opcode XLA added after the opcode table reads as id 0 with a warning, and one it does "
          "not know is refused in the proto too", "[hlo][text]") {
  auto parsed = ParseHloText("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT r = f32[4] erf(a)\n}", "m.hlo");
  REQUIRE(parsed.ok());
  auto g = FeaturizeModule(*parsed, "m.hlo");
  REQUIRE(g.ok());
  CHECK(g->graph.node_opcode[1] == 0);
  REQUIRE(g->warnings.size() == 1);
  CHECK(g->warnings[0] == "opcode 'erf' is not in the opcode table (docs/format.md): encoded as id 0");
  // The same module as a proto whose opcode is a typo.
  xla::HloModuleProto proto = *parsed;
  proto.mutable_computations(0)->mutable_instructions(1)->set_opcode("dto");
  auto bad = FeaturizeModule(proto, "m.hlo.pb");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("m.hlo.pb: computation 'e', instruction 'r' (id 2): unknown opcode 'dto': not one of XLA's"));
}

TEST_CASE("HLO text and proto: an unbounded dynamic dimension ('?', the smallest int64 in XLA's proto) gives one "
          "graph and one hash", "[hlo][text]") {
  const std::string text =
      "HloModule m\nENTRY e {\n  a = f32[?,32]{1,0} parameter(0)\n  b = f32[32,8]{1,0} parameter(1)\n"
      "  ROOT d = f32[?,8]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}";
  auto from_text = hlo::ParseModule(text, "m.hlo");
  REQUIRE(from_text.ok());
  CHECK(from_text->computations(0).instructions(0).shape().dimensions(0) == -1);
  // As XLA writes it: the proto's dimension is INT64_MIN (it was refused: "expected a
  // size >= 0 or -1").
  xla::HloModuleProto as_xla = *from_text;
  for (int i : {0, 2})
    as_xla.mutable_computations(0)->mutable_instructions(i)->mutable_shape()->set_dimensions(
        0, std::numeric_limits<int64_t>::min());
  auto from_proto = hlo::ParseModule(as_xla.SerializeAsString(), "m.hlo.pb");
  REQUIRE(from_proto.ok());
  auto g_text = FeaturizeModule(*from_text, "m.hlo");
  auto g_proto = FeaturizeModule(*from_proto, "m.hlo.pb");
  REQUIRE(g_text.ok());
  REQUIRE(g_proto.ok());
  CHECK(g_text->graph.node_feat == g_proto->graph.node_feat);
  CHECK(GraphContentHash(g_text->graph, g_text->default_config_nodes) ==
        GraphContentHash(g_proto->graph, g_proto->default_config_nodes));
}
