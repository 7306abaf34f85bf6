// The way back (model/hlo/apply_layouts.h): a layout row written into a module's HLO
// text. On the real unet_3d module, rows of the real file come back as the layouts of the
// re-featurized module; on hand-written modules, the exact text of every kind of change;
// bad rows and inputs are errors naming what is wrong.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/layout_space.h"
#include "model/hlo/apply_layouts.h"
#include "model/hlo/featurize.h"
#include "model/hlo/hlo_print.h"
#include "model/hlo/hlo_text.h"

using namespace tgraph;
using tgraph::hlo::ApplyLayoutRow;
using tgraph::hlo::WrittenLayoutRow;

namespace {

// The real unet_3d module as text (our printer: the text featurizes as the proto does,
// hlo_text_test.cc) and its layout tuning runs.
struct RealUnet {
  std::string text;
  LayoutGraph runs;
  std::vector<std::string> configurable;  // the runs' configurable instructions, in row order
};

RealUnet ReadRealUnet() {
  xla::ModuleTuningData d;
  REQUIRE(d.ParseFromString(*ReadFile(std::string(TGRAPH_REAL_DATA) + "/module_tuning_data_layout.pb")));
  auto t = hlo::FeaturizeLayoutTuning(d, "unet");
  REQUIRE(t.ok());
  std::vector<std::string> configurable;
  for (int64_t n : t->graph.node_config_ids) configurable.push_back(t->module.nodes[static_cast<size_t>(n)].instruction);
  return {hlo::PrintHloText(d.module()), t->graph, configurable};
}

hlo::ModuleGraph Featurize(const std::string& text) {
  auto proto = hlo::ParseHloText(text, "applied.hlo");
  REQUIRE(proto.ok());
  auto g = hlo::FeaturizeModule(*proto, "applied.hlo");
  REQUIRE(g.ok());
  return *g;
}

// A node's layout features (node_feat 134..139: its minor-to-major, zero-padded).
std::vector<int> LayoutFeatures(const hlo::ModuleGraph& g, int64_t node) {
  std::vector<int> v;
  for (int d = 0; d < 6; ++d) v.push_back(static_cast<int>(g.graph.feat(node)[134 + d]));
  return v;
}

std::vector<int8_t> Row(std::initializer_list<std::initializer_list<int>> per_node_groups) {
  std::vector<int8_t> row;
  for (const auto& node : per_node_groups) {
    std::vector<int8_t> v(18, -1);
    size_t i = 0;
    for (int x : node) v[i++] = static_cast<int8_t>(x);
    row.insert(row.end(), v.begin(), v.end());
  }
  return row;
}

}  // namespace

TEST_CASE("apply: rows of the real unet_3d file come back as the re-featurized module's layouts", "[hlo][apply]") {
  const RealUnet unet = ReadRealUnet();
  const hlo::ModuleGraph before = Featurize(unet.text);
  // The runs' rows are in the module's row order: the same instructions, one by one.
  std::vector<std::string> configurable;
  for (int64_t n : before.default_config_nodes) configurable.push_back(before.nodes[static_cast<size_t>(n)].instruction);
  REQUIRE(configurable == unet.configurable);
  auto written_before = WrittenLayoutRow(unet.text, "unet.hlo");
  REQUIRE(written_before.ok());
  const int64_t nc = unet.runs.num_config_nodes();
  // The first runs, and runs whose groups fix 1, 3 and 4 dimensions (the real file's
  // partial groups), so that every kind of group of the file is applied.
  std::vector<int64_t> rows = {0, 1, 2, 3};
  for (int want : {1, 3, 4}) {
    for (int64_t c = 0; c < unet.runs.num_configs; ++c) {
      const int8_t* r = unet.runs.config_feat.data() + c * nc * 18;
      bool found = false;
      for (int64_t i = 0; i < nc * 3 && !found; ++i)
        found = std::count_if(r + i * 6, r + i * 6 + 6, [](int8_t x) { return x >= 0; }) == want;
      if (found) {
        rows.push_back(c);
        break;
      }
    }
  }
  REQUIRE(rows.size() == 7);
  int64_t copies = 0, layouts_written = 0;
  for (int64_t c : rows) {
    INFO("run " << c);
    const std::vector<int8_t> row(unet.runs.config_feat.begin() + c * nc * 18,
                                  unet.runs.config_feat.begin() + (c + 1) * nc * 18);
    auto applied = ApplyLayoutRow(unet.text, row, "unet.hlo");
    REQUIRE(applied.ok());
    const hlo::ModuleGraph after = Featurize(applied->text);
    // The same configurable instructions, in the same order; one node per copy more.
    REQUIRE(after.default_config_nodes.size() == before.default_config_nodes.size());
    for (size_t j = 0; j < after.default_config_nodes.size(); ++j)
      CHECK(after.nodes[after.default_config_nodes[j]].instruction ==
            before.nodes[before.default_config_nodes[j]].instruction);
    CHECK(after.graph.num_nodes == before.graph.num_nodes + applied->copies);
    copies += applied->copies;
    layouts_written += applied->layouts_written;
    auto written = WrittenLayoutRow(applied->text, "applied.hlo");
    REQUIRE(written.ok());
    int64_t groups_set = 0;
    for (int64_t j = 0; j < nc; ++j) {
      const int64_t node = after.default_config_nodes[static_cast<size_t>(j)];
      for (int g = 0; g < 3; ++g) {
        const int8_t* want = row.data() + j * 18 + g * 6;
        const int8_t* got = written->data() + j * 18 + g * 6;
        const int8_t* was = written_before->data() + j * 18 + g * 6;
        const int k = static_cast<int>(std::count_if(want, want + 6, [](int8_t x) { return x >= 0; }));
        if (k == 0) {  // the compiler default: the module's layout as it was
          CHECK(std::vector<int8_t>(got, got + 6) == std::vector<int8_t>(was, was + 6));
          continue;
        }
        ++groups_set;
        CHECK(std::vector<int8_t>(got, got + k) == std::vector<int8_t>(want, want + k));
        // And as the node features the model reads: the node's own (output) or its operand's.
        const int64_t tensor = g == 0 ? node : after.first_operands[static_cast<size_t>(node)][g - 1];
        REQUIRE(tensor >= 0);
        const std::vector<int> feat = LayoutFeatures(after, tensor);
        for (int d = 0; d < k; ++d) CHECK(feat[static_cast<size_t>(d)] == want[d]);
      }
    }
    CHECK(groups_set > 0);
    // Applying the same row again changes nothing: every group is already satisfied.
    auto again = ApplyLayoutRow(applied->text, row, "applied.hlo");
    REQUIRE(again.ok());
    CHECK(again->text == applied->text);
    CHECK(again->copies + again->layouts_written == 0);
  }
  WARN("unet_3d: " << rows.size() << " rows applied: " << layouts_written << " layouts written, " << copies
                   << " copies");
  CHECK(copies > 0);  // both ways of setting an operand's layout were taken
  CHECK(layouts_written > 0);
}

TEST_CASE("apply: layouts set, copies for parameters and conflicts, the result's layout kept, all else verbatim",
          "[hlo][apply]") {
  const std::string text = R"(HloModule test_apply, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0})->f32[4,64]{1,0}}

ENTRY %main (a: f32[8,16], b: f32[16,32]) -> f32[4,64] {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,32]{1,0} parameter(1)
  %neg = f32[8,16] negate(f32[8,16] %a), metadata={op_name="x"}
  %dot.1 = f32[8,32]{1,0:T(8,128)} dot(%neg, f32[16,32]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %r = f32[4,64] reshape(%dot.1) /* a comment */
}
)";
  // dot.1: output {0,1} (its tiling dropped); input {0,1} on neg, which has no layout
  // (set there); kernel {0,1} on the parameter b (a copy). r: output {0,1} (the root: a
  // copy back to the result's default layout); input {1,0} on dot.1, now {0,1} (a copy).
  const std::vector<int8_t> row = Row({{0, 1, -1, -1, -1, -1, 0, 1, -1, -1, -1, -1, 0, 1},
                                       {0, 1, -1, -1, -1, -1, 1, 0}});
  auto applied = ApplyLayoutRow(text, row, "m.hlo");
  REQUIRE(applied.ok());
  CHECK(applied->text == R"(HloModule test_apply, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0})->f32[4,64]{1,0}}

ENTRY %main (a: f32[8,16], b: f32[16,32]) -> f32[4,64] {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,32]{1,0} parameter(1)
  %neg = f32[8,16]{0,1} negate(f32[8,16] %a), metadata={op_name="x"}
  %b.kernel.dot.1 = f32[16,32]{0,1} copy(%b)
  %dot.1 = f32[8,32]{0,1} dot(%neg, f32[16,32]{0,1} %b.kernel.dot.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %dot.1.input.r = f32[8,32]{1,0} copy(%dot.1)
  %r = f32[4,64]{0,1} reshape(%dot.1.input.r)
  ROOT %r.result = f32[4,64]{1,0} copy(%r) /* a comment */
}
)");
  CHECK(applied->layouts_written == 3);
  CHECK(applied->copies == 3);
  CHECK(applied->changes.size() == 6);
  // What a stock XLA takes as written: the kernel's layout as parameter b's, and r's as
  // the program's result; the other three need a compiler that honours them.
  REQUIRE(applied->entry_layouts.size() == 2);
  const hlo::EntryLayout& result = applied->entry_layouts[0];
  CHECK(result.result);
  CHECK(result.index == -1);
  CHECK(result.name == "r");
  CHECK(result.shape == "f32[4,64]");
  CHECK(result.minor_to_major == std::vector<int64_t>{0, 1});
  CHECK(result.asked_by == "r output");
  CHECK(result.jax == "Format(Layout(major_to_minor=(1, 0)), sharding)");
  const hlo::EntryLayout& b = applied->entry_layouts[1];
  CHECK_FALSE(b.result);
  CHECK(b.index == 1);
  CHECK(b.name == "b");
  CHECK(b.shape == "f32[16,32]");
  CHECK(b.asked_by == "dot.1 kernel");
  CHECK(applied->needs_hook == std::vector<std::string>{"dot.1 output {0,1}", "dot.1 input {0,1}", "r input {1,0}"});
  auto written = WrittenLayoutRow(applied->text, "applied.hlo");
  REQUIRE(written.ok());
  CHECK(*written == Row({{0, 1, -1, -1, -1, -1, 0, 1, -1, -1, -1, -1, 0, 1}, {0, 1, -1, -1, -1, -1, 1, 0}}));

  SECTION("a group fixes the most minor dimensions; the others keep their order in the layout written before") {
    const std::string t = R"(HloModule m
ENTRY e {
  p = f32[2,3,4,5]{1,3,2,0} parameter(0)
  ROOT r = f32[6,20] reshape(p)
}
)";
    auto a = ApplyLayoutRow(t, Row({{0, -1, -1, -1, -1, -1, 2, -1}}), "m.hlo");
    REQUIRE(a.ok());
    // r has no layout: {0, then the default's 1}; p is a parameter: a copy, {2, then 1,3,0}.
    CHECK(a->text == R"(HloModule m
ENTRY e {
  p = f32[2,3,4,5]{1,3,2,0} parameter(0)
  %p.input.r = f32[2,3,4,5]{2,1,3,0} copy(%p)
  r = f32[6,20]{0,1} reshape(%p.input.r)
  ROOT %r.result = f32[6,20]{1,0} copy(%r)
}
)");
  }
  SECTION("comments inside a layout or an operand that an edit replaces are kept beside what replaces them") {
    std::string commented = text;
    const std::string dot_layout = "f32[8,32]{1,0:T(8,128)} dot(";
    commented.replace(commented.find(dot_layout), dot_layout.size(), "f32[8,32]{1,0:T(8,128) /* tiled */} dot(");
    const std::string kernel = "f32[16,32]{1,0} %b)";
    commented.replace(commented.find(kernel), kernel.size(), "f32[16,32]{1,0} /* weights */ %b)");
    auto a = ApplyLayoutRow(commented, row, "m.hlo");
    REQUIRE(a.ok());
    CHECK_THAT(a->text, Catch::Contains("%dot.1 = f32[8,32]{0,1} /* tiled */ dot(%neg, f32[16,32]{0,1} "
                                        "%b.kernel.dot.1 /* weights */)"));
  }
  SECTION("a text with Windows line endings gets them on the lines an edit adds too") {
    const auto crlf = [](std::string t) {
      std::string out;
      for (char c : t) out += c == '\n' ? std::string("\r\n") : std::string(1, c);
      return out;
    };
    auto a = ApplyLayoutRow(crlf(text), row, "m.hlo");
    REQUIRE(a.ok());
    CHECK(a->text == crlf(applied->text));
  }
  SECTION("the compiler default everywhere, or layouts already there, change nothing") {
    auto same = ApplyLayoutRow(text, std::vector<int8_t>(2 * 18, -1), "m.hlo");
    REQUIRE(same.ok());
    CHECK(same->text == text);
    auto kept = ApplyLayoutRow(text, Row({{1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 0}}), "m.hlo");
    REQUIRE_FALSE(kept.ok());  // two configurable nodes: a row of one is the wrong size
    auto satisfied = ApplyLayoutRow(text, Row({{1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 0}, {}}), "m.hlo");
    REQUIRE(satisfied.ok());
    CHECK(satisfied->text == text);
  }
}

TEST_CASE("apply: bad rows and inputs are errors naming the node, the group or the line", "[hlo][apply]") {
  const std::string text = "HloModule m\nENTRY e {\n  a = f32[4,4] parameter(0)\n  ROOT d = f32[4,4] dot(a, a)\n}\n";
  const auto error = [](const absl::StatusOr<hlo::AppliedLayouts>& r) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  CHECK(error(ApplyLayoutRow(text, std::vector<int8_t>(17, -1), "m.hlo")) ==
        "m.hlo: the row: 17 values; the module has 1 configurable nodes, so a row has 1 x 18 = 18");
  CHECK(error(ApplyLayoutRow(text, Row({{7}}), "m.hlo")) ==
        "m.hlo: the row: configurable node 0 (dot 'd'), slot 0 is 7, expected -1..5");
  const std::string twice = error(ApplyLayoutRow(text, Row({{1, 1}}), "m.hlo"));
  CHECK(twice == "m.hlo: the row: config 0, configurable node 0 (dot 'd', node 1), output group [1, 1, -1, -1, -1, -1]: "
                 "dimension 1 appears twice");
  const std::string rank = error(ApplyLayoutRow(text, Row({{-1, -1, -1, -1, -1, -1, 2}}), "m.hlo"));
  CHECK_THAT(rank, Catch::Contains("input group"));
  CHECK_THAT(error(ApplyLayoutRow("HloModule m\nENTRY e {\n  a = f32[4 parameter(0)\n}\n", Row({{}}), "m.hlo")),
             Catch::StartsWith("m.hlo: line 3, column"));
  CHECK_THAT(error(ApplyLayoutRow(std::string("\x0a\x05main", 6), Row({{}}), "m.pb")),
             Catch::Contains("not HLO text"));
  CHECK_THAT(error(ApplyLayoutRow("HloModule m\nENTRY e {\n  ROOT a = f32[4] parameter(0)\n}\n", Row({{}}), "m.hlo")),
             Catch::Contains("no convolution, dot or reshape"));
}

TEST_CASE("apply: random legal rows of the real graphsage module always read back as their layouts", "[hlo][apply][fuzz]") {
  const std::string text = *ReadFile(std::string(TGRAPH_REAL_DATA) + "/hlo/graphsage_tf.hlo");
  const hlo::ModuleGraph g = Featurize(text);
  const LayoutSpace space = LayoutSpaceOf(g.graph, g.default_config_nodes, &g.first_operands);
  const size_t nc = g.default_config_nodes.size();
  std::mt19937 rng(7);
  int64_t copies = 0, written = 0;
  for (int iter = 0; iter < 200; ++iter) {
    // Each group: a candidate the space proposes, cut to a random prefix.
    std::vector<int8_t> row(nc * 18, -1);
    for (size_t j = 0; j < nc; ++j)
      for (int gr = 0; gr < 3; ++gr) {
        const auto& cands = space.nodes[j].groups[gr].candidates;
        const auto& c = cands[std::uniform_int_distribution<size_t>(0, cands.size() - 1)(rng)];
        const int k = std::uniform_int_distribution<int>(1, 6)(rng);
        for (int d = 0; d < k; ++d) row[j * 18 + gr * 6 + d] = c[d];
      }
    auto applied = ApplyLayoutRow(text, row, "graphsage_tf.hlo");
    REQUIRE(applied.ok());
    copies += applied->copies;
    written += applied->layouts_written;
    auto back = WrittenLayoutRow(applied->text, "applied.hlo");
    REQUIRE(back.ok());
    for (size_t i = 0; i < nc * 3; ++i) {
      const int8_t* want = row.data() + i * 6;
      const int k = static_cast<int>(std::find(want, want + 6, -1) - want);
      INFO("iteration " << iter << ", group " << i);
      CHECK(std::vector<int8_t>(back->begin() + i * 6, back->begin() + i * 6 + k) == std::vector<int8_t>(want, want + k));
    }
  }
  CHECK(copies > 0);
  CHECK(written > 0);
}

TEST_CASE("apply: an operand written with its shape gets the copy's shape, on the real PyTorch/XLA module",
          "[hlo][apply]") {
  const std::string text = *ReadFile(std::string(TGRAPH_REAL_DATA) + "/hlo/pytorch_xla_mlp_train_step.hlo");
  // dot's kernel {1,0}: its operand transpose.68 is laid out {0,1}, so a copy.
  auto applied = ApplyLayoutRow(text, Row({{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 0}, {}}), "mlp.hlo");
  REQUIRE(applied.ok());
  CHECK(applied->copies == 1);
  CHECK(applied->layouts_written == 0);
  const std::string before =
      "  %dot = f32[10,784]{0,1} dot(f32[32,10]{1,0} %divide.67, f32[784,32]{0,1} %transpose.68), lhs_contracting_dims";
  const std::string after =
      "  %transpose.68.kernel.dot = f32[784,32]{1,0} copy(%transpose.68)\n"
      "  %dot = f32[10,784]{0,1} dot(f32[32,10]{1,0} %divide.67, f32[784,32]{1,0} %transpose.68.kernel.dot), "
      "lhs_contracting_dims";
  REQUIRE(text.find(before) != std::string::npos);
  std::string expected = text;
  expected.replace(expected.find(before), before.size(), after);
  CHECK(applied->text == expected);
}

TEST_CASE("fuzz: apply on mutated real text is a module or an error, never a crash", "[hlo][apply][fuzz]") {
  const std::string text = *ReadFile(std::string(TGRAPH_REAL_DATA) + "/hlo/pytorch_xla_mlp_train_step.hlo");
  std::mt19937 rng(11);
  int applied = 0, refused = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) {  // a deleted, a duplicated or a replaced byte
      const size_t at = std::uniform_int_distribution<size_t>(0, t.size() - 1)(rng);
      switch (iter % 3) {
        case 0: t.erase(at, 1); break;
        case 1: t.insert(at, 1, t[at]); break;
        default: t[at] = "{}(),=%[]:0123456789abc \n"[std::uniform_int_distribution<int>(0, 25)(rng)];
      }
    }
    auto proto = hlo::ParseHloText(t, "m.hlo");
    size_t nc = 2;
    if (proto.ok())
      if (auto g = hlo::FeaturizeModule(*proto, "m.hlo"); g.ok()) nc = g->default_config_nodes.size();
    std::vector<int8_t> row(nc * 18, -1);
    for (size_t j = 0; j < nc; ++j) {  // any values: illegal ones must be refused, not crash
      row[j * 18] = static_cast<int8_t>(std::uniform_int_distribution<int>(-1, 2)(rng));
      row[j * 18 + 6] = static_cast<int8_t>(std::uniform_int_distribution<int>(-1, 2)(rng));
    }
    auto r = ApplyLayoutRow(t, row, "m.hlo");
    (r.ok() ? applied : refused) += 1;
    if (r.ok()) CHECK(hlo::ParseHloText(r->text, "applied.hlo").ok());
  }
  CHECK(applied > 0);
  CHECK(refused > 0);
}

TEST_CASE("apply: a row of today's JAX module applies, reads back as the same rows, and says what JAX takes",
          "[hlo][apply][real]") {
  const std::string text = *ReadFile(std::string(TGRAPH_REAL_DATA) + "/hlo/jax/mlp_train_step.before_optimizations.txt");
  const hlo::ModuleGraph before = Featurize(text);
  const size_t nc = before.default_config_nodes.size();
  REQUIRE(nc == 16);
  // Every group takes its first candidate (model/core/layout_space.h) that the dump's
  // layout does not already begin with: a legal row unlike what XLA wrote.
  const LayoutSpace space = LayoutSpaceOf(before.graph, before.default_config_nodes, &before.first_operands);
  auto dumped = WrittenLayoutRow(text, "jax.hlo");
  REQUIRE(dumped.ok());
  std::vector<int8_t> row(nc * 18, -1);
  for (size_t j = 0; j < nc; ++j)
    for (int g = 0; g < 3; ++g)
      for (const GroupLayout& c : space.nodes[j].groups[g].candidates) {
        const int8_t* has = dumped->data() + j * 18 + g * 6;
        int k = 0;
        while (k < 6 && c[k] >= 0 && c[k] == has[k]) ++k;
        if (c[0] >= 0 && k < 6 && c[k] >= 0) {
          std::copy(c.begin(), c.end(), row.begin() + static_cast<long>(j * 18 + g * 6));
          break;
        }
      }
  auto applied = ApplyLayoutRow(text, row, "jax.hlo");
  REQUIRE(applied.ok());
  CHECK(applied->copies > 0);
  // Re-read: the same configurable instructions in the same row order, each group's
  // layout beginning with what the row asked.
  const hlo::ModuleGraph after = Featurize(applied->text);
  REQUIRE(after.default_config_nodes.size() == nc);
  for (size_t j = 0; j < nc; ++j)
    CHECK(after.nodes[after.default_config_nodes[j]].instruction == before.nodes[before.default_config_nodes[j]].instruction);
  auto written = WrittenLayoutRow(applied->text, "applied.hlo");
  REQUIRE(written.ok());
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] >= 0) CHECK((*written)[i] == row[i]);
  auto again = ApplyLayoutRow(applied->text, row, "applied.hlo");
  REQUIRE(again.ok());
  CHECK(again->text == applied->text);
  // The forward pass's first dot reads x (argument 13) and p[0][0] (argument 0): a
  // layout asked of them is theirs to give, as JAX's Format of that argument.
  std::map<int64_t, hlo::EntryLayout> arguments;
  for (const hlo::EntryLayout& e : applied->entry_layouts)
    if (!e.result) arguments[e.index] = e;
  REQUIRE(arguments.count(13));
  CHECK(arguments[13].name == "x");
  CHECK(arguments[13].shape == "f32[128,784]");
  CHECK(arguments[13].asked_by == "dot_general.5 input");
  CHECK(arguments[13].jax == absl::StrCat("Format(Layout(major_to_minor=",
                                          hlo::MajorToMinorTuple(arguments[13].minor_to_major), "), sharding)"));
  CHECK(applied->entry_layouts.size() + applied->needs_hook.size() > 0);
  for (const std::string& h : applied->needs_hook) CHECK_THAT(h, Catch::Matches(R"(\S+ (output|input|kernel) \{[0-9,]+\}.*)"));
}

TEST_CASE("apply: a tuple element used as %t#k gets a copy, as a parameter does", "[hlo][apply]") {
  const std::string text = R"(HloModule m
ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  t = (f32[4,8]{1,0}, f32[8,2]{1,0}) tuple(a, a)
  ROOT d = f32[4,2]{1,0} dot(t#0, t#1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)";
  auto applied = ApplyLayoutRow(text, Row({{-1, -1, -1, -1, -1, -1, 0, 1}}), "m.hlo");
  REQUIRE(applied.ok());
  CHECK(applied->text == R"(HloModule m
ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  t = (f32[4,8]{1,0}, f32[8,2]{1,0}) tuple(a, a)
  %t.0.input.d = f32[4,8]{0,1} copy(%t#0)
  ROOT d = f32[4,2]{1,0} dot(%t.0.input.d, t#1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)");
  CHECK(applied->needs_hook == std::vector<std::string>{"d input {0,1}"});
  auto written = WrittenLayoutRow(applied->text, "applied.hlo");
  REQUIRE(written.ok());
  CHECK(std::vector<int8_t>(written->begin() + 6, written->begin() + 8) == std::vector<int8_t>{0, 1});
}
