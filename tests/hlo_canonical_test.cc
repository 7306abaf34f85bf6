// Today's XLA dumps (tests/data/real/hlo/jax: one JAX module as text and as proto,
// before and after XLA's passes) and the canonical order (model/hlo/canonical_order.h):
// text and proto of one module give one graph, hash and rows; any order of a module's
// computations and instructions gives the same graph; the source tables and `%x#k`
// operands today's text has; modules after optimization warned.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>

#include "model/core/file_util.h"
#include "model/core/layout_space.h"
#include "model/hlo/canonical_order.h"
#include "model/hlo/featurize.h"
#include "model/hlo/hlo_print.h"
#include "model/hlo/hlo_text.h"
#include "tests/hlo_test_util.h"

using namespace tgraph;
using tgraph::hlo::FeaturizeModule;
using tgraph::hlo::ParseHloText;
using tgraph::hlo::ParseModule;

namespace {

const std::string kReal = TGRAPH_REAL_DATA;
const std::string kJax = kReal + "/hlo/jax/mlp_train_step.";

hlo::ModuleGraph Featurize(const std::string& bytes, const std::string& what) {
  auto m = ParseModule(bytes, what);
  REQUIRE(m.ok());
  auto g = FeaturizeModule(*m, what);
  REQUIRE(g.ok());
  return *g;
}

std::vector<std::string> ConfigurableInstructions(const hlo::ModuleGraph& g) {
  return hlo::InstructionNames(g.nodes, g.default_config_nodes);
}

// Everything a registration keeps of a module: the graph, its hash, its configurable
// nodes in row order and their layout space (what rows are legal).
void CheckSameGraph(const hlo::ModuleGraph& a, const hlo::ModuleGraph& b) {
  CHECK(a.graph.num_nodes == b.graph.num_nodes);
  CHECK(a.graph.node_feat == b.graph.node_feat);
  CHECK(a.graph.node_opcode == b.graph.node_opcode);
  CHECK(a.graph.edge_index == b.graph.edge_index);
  CHECK(a.node_splits == b.node_splits);
  CHECK(a.default_config_nodes == b.default_config_nodes);
  CHECK(a.first_operands == b.first_operands);
  CHECK(ConfigurableInstructions(a) == ConfigurableInstructions(b));
  CHECK(GraphContentHash(a.graph, a.default_config_nodes) == GraphContentHash(b.graph, b.default_config_nodes));
  const LayoutSpace sa = LayoutSpaceOf(a.graph, a.default_config_nodes, &a.first_operands);
  const LayoutSpace sb = LayoutSpaceOf(b.graph, b.default_config_nodes, &b.first_operands);
  REQUIRE(sa.nodes.size() == sb.nodes.size());
  for (size_t j = 0; j < sa.nodes.size(); ++j)
    for (int g = 0; g < kConfigGroups; ++g) {
      CHECK(sa.nodes[j].groups[g].rank == sb.nodes[j].groups[g].rank);
      CHECK(sa.nodes[j].groups[g].candidates == sb.nodes[j].groups[g].candidates);
    }
}

// `module` with its computations and each computation's instructions shuffled.
xla::HloModuleProto Shuffled(xla::HloModuleProto module, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto shuffle = [&](auto* field) {
    for (int i = field->size() - 1; i > 0; --i) field->SwapElements(i, static_cast<int>(rng() % (i + 1)));
  };
  for (xla::HloComputationProto& c : *module.mutable_computations()) shuffle(c.mutable_instructions());
  shuffle(module.mutable_computations());
  return module;
}

}  // namespace

TEST_CASE("today's JAX dumps: text and proto of one module give one graph, hash, row order and layout space",
          "[hlo][canonical][real]") {
  for (const char* stage : {"before_optimizations", "sm_9.0a_gpu_after_optimizations"}) {
    INFO(stage);
    const hlo::ModuleGraph text = Featurize(*ReadFile(kJax + stage + ".txt"), "text");
    const hlo::ModuleGraph proto = Featurize(*ReadFile(kJax + stage + ".hlo.pb"), "proto");
    CheckSameGraph(text, proto);
    CHECK(text.module_name == "jit_step");
  }
  const hlo::ModuleGraph before = Featurize(*ReadFile(kJax + "before_optimizations.txt"), "before");
  // 269 instructions: the 5 dots of the forward and backward MLP and 11 reshapes, no warning.
  CHECK(before.graph.num_nodes == 269);
  CHECK(before.default_config_nodes.size() == 16);
  CHECK(before.warnings.empty());
  CHECK_FALSE(before.after_optimizations);
  const std::vector<std::string> names = ConfigurableInstructions(before);
  CHECK(std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.rfind("dot_general.", 0) == 0; }) == 5);
  // The first dot of the forward pass: x (f32[128,784]) times p[0][0] (f32[784,512]).
  const auto dot5 = std::find(names.begin(), names.end(), "dot_general.5");
  REQUIRE(dot5 != names.end());
  const int64_t node = before.default_config_nodes[static_cast<size_t>(dot5 - names.begin())];
  CHECK(before.graph.feat(node)[21] == 128);
  CHECK(before.graph.feat(node)[22] == 512);
  CHECK(before.nodes[static_cast<size_t>(before.first_operands[static_cast<size_t>(node)][0])].instruction == "x.1");
  CHECK(before.nodes[static_cast<size_t>(before.first_operands[static_cast<size_t>(node)][1])].instruction == "p_0__0_.1");
}

TEST_CASE("today's JAX dumps: the module after XLA's passes registers with a warning naming the dump to send",
          "[hlo][canonical][real]") {
  for (const char* ext : {".txt", ".hlo.pb"}) {
    const hlo::ModuleGraph after = Featurize(*ReadFile(kJax + "sm_9.0a_gpu_after_optimizations" + ext), "after");
    CHECK(after.after_optimizations);
    CHECK(after.graph.num_nodes == 330);  // 16 get-tuple-elements the text writes as %x#k
    CHECK(after.default_config_nodes.size() == 5);
    REQUIRE(after.warnings.size() == 1);
    CHECK_THAT(after.warnings[0], Catch::StartsWith("module jit_step was dumped after XLA's optimization passes "
                                                    "(19 fusion instructions): its convolutions and dots sit inside "
                                                    "fusions, so only 5 of its 330 instructions are configurable"));
    CHECK_THAT(after.warnings[0], Catch::Contains("*.before_optimizations.txt"));
  }
  // A library call XLA's GPU passes put in place of a convolution is named; a program's
  // own custom call is not a sign.
  const std::string library = R"(HloModule m
ENTRY e {
  a = f32[1,8,8,4]{3,2,1,0} parameter(0)
  k = f32[3,3,4,4]{3,2,1,0} parameter(1)
  c = (f32[1,8,8,4]{3,2,1,0}, u8[0]{0}) custom-call(a, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward", backend_config={"x":1}
  ROOT r = f32[1,8,8,4]{3,2,1,0} get-tuple-element(c), index=0
})";
  const hlo::ModuleGraph cudnn = Featurize(library, "cudnn");
  REQUIRE(cudnn.warnings.size() == 1);
  CHECK_THAT(cudnn.warnings[0], Catch::Contains("(1 custom calls to library kernels such as __cudnn$convForward)"));
  CHECK_THAT(cudnn.warnings[0], Catch::Contains("sit inside fusions and library calls"));
  std::string own = library;
  own.replace(own.find("__cudnn$convForward"), 19, "Sharding");
  CHECK(Featurize(own, "own").warnings.empty());
}

TEST_CASE("canonical order: any order of a module's computations and instructions gives the same graph",
          "[hlo][canonical][real]") {
  std::vector<std::pair<std::string, std::string>> modules;
  for (const char* f : {"graphsage_tf.hlo", "pytorch_xla_mlp_train_step.hlo", "pytorch_xla_llama_decoder_layer.hlo",
                        "jax_fft3d_compiled.hlo", "jax/mlp_train_step.before_optimizations.txt",
                        "jax/mlp_train_step.sm_9.0a_gpu_after_optimizations.hlo.pb"})
    modules.emplace_back(f, *ReadFile(kReal + "/hlo/" + f));
  modules.emplace_back("unet_3d", *ReadFile(kReal + "/module_tuning_data_layout.pb"));
  for (const auto& [name, bytes] : modules) {
    INFO(name);
    auto module = ParseModule(bytes, name);
    REQUIRE(module.ok());
    auto reference = FeaturizeModule(*module, name);
    REQUIRE(reference.ok());
    // The text printed from it, and its proto shuffled five ways, put back in order.
    std::vector<xla::HloModuleProto> others = {*ParseHloText(hlo::PrintHloText(*module), name)};
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      xla::HloProto wrapped;
      *wrapped.mutable_hlo_module() = Shuffled(*module, seed);
      auto parsed = ParseModule(wrapped.SerializeAsString(), name);
      REQUIRE(parsed.ok());
      others.push_back(*parsed);
    }
    for (const xla::HloModuleProto& other : others) {
      auto g = FeaturizeModule(other, name);
      REQUIRE(g.ok());
      CheckSameGraph(*reference, *g);
    }
  }
}

TEST_CASE("canonical order: XLA's own instruction order is kept, callees before callers, the entry last",
          "[hlo][canonical][real]") {
  // The real unet_3d module, as XLA wrote it: every computation's instructions in XLA's
  // post order. The canonical order keeps each of them.
  xla::ModuleTuningData d;
  REQUIRE(d.ParseFromString(*ReadFile(kReal + "/module_tuning_data_layout.pb")));
  xla::HloModuleProto canonical = d.module();
  const hlo::Limits unlimited;
  hlo::WorkingMemory memory(unlimited, "unet");
  REQUIRE(hlo::CanonicalizeOrder(&canonical, &memory).ok());
  REQUIRE(canonical.computations_size() == 143);
  std::map<std::string, std::vector<std::string>> xla_order;
  for (const auto& c : d.module().computations())
    for (const auto& inst : c.instructions()) xla_order[c.name()].push_back(inst.name());
  std::map<int64_t, int> position;
  for (int i = 0; i < canonical.computations_size(); ++i) position[canonical.computations(i).id()] = i;
  for (int i = 0; i < canonical.computations_size(); ++i) {
    const auto& c = canonical.computations(i);
    std::vector<std::string> names;
    for (const auto& inst : c.instructions()) {
      names.push_back(inst.name());
      for (int64_t callee : inst.called_computation_ids()) CHECK(position.at(callee) < i);
    }
    CHECK(names == xla_order.at(c.name()));
  }
  CHECK(canonical.computations(142).name() == "main__.10904");
  // Reordering what is already in order changes nothing.
  xla::HloModuleProto again = canonical;
  REQUIRE(hlo::CanonicalizeOrder(&again, &memory).ok());
  CHECK(again.SerializeAsString() == canonical.SerializeAsString());
}

TEST_CASE("canonical order: unused instructions by parameter number and name, cycles left for the featurizer",
          "[hlo][canonical]") {
  // Unused parameters first by number, other unused instructions by name, the root last.
  auto m = ParseHloText(R"(HloModule m
ENTRY e {
  zeta = f32[2] parameter(2)
  y = f32[2] parameter(1)
  x = f32[2] parameter(0)
  b = f32[2] negate(x)
  a = f32[2] abs(x)
  ROOT r = f32[2] add(x, x)
})", "m.hlo");
  REQUIRE(m.ok());
  std::vector<std::string> order;
  for (const auto& inst : m->computations(0).instructions()) order.push_back(inst.name());
  CHECK(order == std::vector<std::string>{"y", "zeta", "x", "a", "b", "r"});
  // An instruction list with a cycle (a proto's ids can say anything): nothing is lost,
  // and the featurizer names the instruction that comes before its operand.
  xla::HloModuleProto cyclic;
  cyclic.set_name("cyclic");
  auto* c = cyclic.add_computations();
  c->set_name("e");
  c->set_id(1);
  c->set_root_id(3);
  for (int64_t id : {1, 2, 3}) {
    auto* inst = c->add_instructions();
    inst->set_id(id);
    inst->set_name("i" + std::to_string(id));
    inst->set_opcode(id == 1 ? "parameter" : "negate");
    inst->mutable_shape()->set_element_type(xla::F32);
  }
  c->mutable_instructions(1)->add_operand_ids(3);  // i2 uses i3, i3 uses i2
  c->mutable_instructions(2)->add_operand_ids(2);
  const hlo::Limits unlimited;
  hlo::WorkingMemory memory(unlimited, "cyclic");
  REQUIRE(hlo::CanonicalizeOrder(&cyclic, &memory).ok());
  CHECK(cyclic.computations(0).instructions_size() == 3);
  auto g = FeaturizeModule(cyclic, "cyclic.pb");
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("does not come before it: a cycle"));
}

TEST_CASE("HLO text: the source tables after the HloModule line are skipped, never read as computations",
          "[hlo][canonical][text]") {
  const std::string module = R"(HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}

FileNames
1 "/home/user/a \"quoted\" path.py"
2 "b.py"

FunctionNames
1 "<module>"

FileLocations
1 {file_name_id=1 function_name_id=1 line=88 end_line=88 column=8 end_column=11}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


ENTRY %e (a: f32[2]) -> f32[2] {
  %a = f32[2]{0} parameter(0)
  ROOT %n = f32[2]{0} negate(%a), metadata={op_name="neg" stack_frame_id=1}
})";
  auto m = ParseHloText(module, "m.hlo");
  REQUIRE(m.ok());
  CHECK(m->computations_size() == 1);
  // Empty tables, as the after-optimization dump may have them.
  std::string empty = module;
  for (const char* row : {"1 \"/home/user/a \\\"quoted\\\" path.py\"\n2 \"b.py\"\n", "1 \"<module>\"\n"})
    empty.erase(empty.find(row), std::string(row).size());
  REQUIRE(ParseHloText(empty, "m.hlo").ok());
  // A computation may bear a table's name.
  auto named = ParseHloText(
      "HloModule m\n\nFileNames {\n  ROOT a = f32[2] parameter(0)\n}\n\nENTRY e {\n  ROOT b = f32[2] parameter(0)\n}\n",
      "m.hlo");
  REQUIRE(named.ok());
  CHECK(named->computations(0).name() == "FileNames");
  auto both = ParseHloText("HloModule m\nStackFrames\n1 {file_location_id=1}\n\n%StackFrames (x: f32[2]) -> f32[2] {\n"
                           "  ROOT x = f32[2] parameter(0)\n}\n\nENTRY e {\n  a = f32[2] parameter(0)\n"
                           "  ROOT c = f32[2] call(a), to_apply=%StackFrames\n}\n",
                           "m.hlo");
  REQUIRE(both.ok());
  CHECK(both->computations_size() == 2);
  // Malformed rows: line, column and the table.
  CHECK_THAT(HloTextError("HloModule m\nFileNames\n1 \"a.py\"\n2 b.py\n"),
             Catch::Contains("line 4, column 3: expected a string or {...} after row 2 of the FileNames table"));
  CHECK_THAT(HloTextError("HloModule m\nFileNames\n1 \"a.py\n"), Catch::Contains("'\"' closing a string of the FileNames table"));
  CHECK_THAT(HloTextError("HloModule m\nStackFrames\n1 {file_location_id=1\n"),
             Catch::Contains("'}' closing a row of the StackFrames table"));
}

TEST_CASE("HLO text: a tuple's element as an operand (%x#k) is the get-tuple-element the proto spells out",
          "[hlo][canonical][text]") {
  const std::string hidden = R"(HloModule m
ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  t = (f32[4,8]{1,0}, f32[8,2]{0,1}) tuple(a, a)
  d = f32[4,2]{1,0} dot(t#0, t#1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT s = f32[4,8]{1,0} add(t#0, a)
})";
  const std::string spelled = R"(HloModule m
ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  t = (f32[4,8]{1,0}, f32[8,2]{0,1}) tuple(a, a)
  g0 = f32[4,8]{1,0} get-tuple-element(t), index=0
  g1 = f32[8,2]{0,1} get-tuple-element(t), index=1
  d = f32[4,2]{1,0} dot(g0, g1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT s = f32[4,8]{1,0} add(g0, a)
})";
  const hlo::ModuleGraph h = Featurize(hidden, "hidden"), s = Featurize(spelled, "spelled");
  CheckSameGraph(h, s);
  // One element instruction per (tuple, index), with the element's shape and layout;
  // named as the text writes the operand.
  REQUIRE(h.graph.num_nodes == 6);  // a, t, t#0, t#1, d, s
  int64_t t1 = -1;
  for (size_t i = 0; i < h.nodes.size(); ++i)
    if (h.nodes[i].instruction == "t#1") t1 = static_cast<int64_t>(i);
  REQUIRE(t1 >= 0);
  CHECK(h.nodes[static_cast<size_t>(t1)].opcode == "get-tuple-element");
  CHECK(std::vector<float>(h.graph.feat(t1) + 21, h.graph.feat(t1) + 23) == std::vector<float>{8, 2});
  CHECK(std::vector<float>(h.graph.feat(t1) + 134, h.graph.feat(t1) + 136) == std::vector<float>{0, 1});
  // Printed as the text had it, and read back to the same graph.
  auto parsed = ParseHloText(hidden, "hidden");
  REQUIRE(parsed.ok());
  const std::string printed = hlo::PrintHloText(*parsed);
  CHECK_THAT(printed, Catch::Contains("dot(%t#0, %t#1)"));
  CHECK(printed.find("%t#0 =") == std::string::npos);
  CheckSameGraph(h, Featurize(printed, "printed"));
  // Errors: not a tuple, an index past its end, no index.
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] negate(a#0)\n}"),
             Catch::Contains("line 4, column 26: operand 'a#0': the instruction is not a tuple"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = (f32[2]) parameter(0)\n  ROOT b = f32[2] negate(a#1)\n}"),
             Catch::Contains("operand 'a#1': its tuple has 1 elements"));
  CHECK_THAT(HloTextError("HloModule m\nENTRY e {\n  a = (f32[2]) parameter(0)\n  ROOT b = f32[2] negate(a#)\n}"),
             Catch::Contains("expected a tuple index after 'a#'"));
}

TEST_CASE("fuzz: mutated and truncated dumps of today's XLA are an error or a module, never a crash or a hang",
          "[hlo][canonical][fuzz]") {
  // Both texts: source tables, `%x#k` operands, JSON backend configs, a schedule.
  for (const char* stage : {"before_optimizations", "sm_9.0a_gpu_after_optimizations"}) {
    // Half the edits land in the tables and the first computations, where the new constructs are.
    const int parsed = FuzzModuleReader(*ReadFile(kJax + stage + ".txt"), 11, 400,
                                        "%=(){}[],:#<>-_ \n\"xfs0123456789ROOTENTRYFileNamesStackFrames/*", 6000);
    CHECK(parsed > 0);
  }
}
