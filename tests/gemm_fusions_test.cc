// XLA's Triton matrix-product fusions (model/hlo/gemm_fusions.h, model/tile/xla_gemm.h)
// on the real JAX MLP dump after XLA's GPU passes (tests/data/real/hlo/jax, sm_9.0a) and
// six JAX programs XLA compiled for an H100 without a GPU (hlo/jax-h100-aot: make_dumps.py
// beside them, which tests/xla_gpu_aot_test.py runs with JAX's CUDA plugin to check that
// today's install writes modules that read as these; this test needs no JAX):
// each fusion's problem and XLA's configuration against the module's text, read alike
// from text and proto; the files written; every refusal naming the fusion and the key.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/hlo/featurize.h"
#include "model/hlo/fusion_tiling.h"
#include "model/hlo/gemm_fusions.h"
#include "model/tile/xla_fusion_table.h"

using namespace tgraph;
using tgraph::hlo::FindGemmFusions;
using tgraph::hlo::GemmFusion;

namespace {

const std::string kAfter = std::string(TGRAPH_REAL_DATA) + "/hlo/jax/mlp_train_step.sm_9.0a_gpu_after_optimizations.";

std::vector<GemmFusion> FusionsOf(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  REQUIRE(bytes.ok());
  absl::StatusOr<xla::HloModuleProto> m = hlo::ParseModule(*bytes, path);
  REQUIRE(m.ok());
  absl::StatusOr<std::vector<GemmFusion>> f = FindGemmFusions(*m, path);
  REQUIRE(f.ok());
  return *f;
}

absl::Status FusionError(const std::string& text) {
  absl::StatusOr<xla::HloModuleProto> m = hlo::ParseModule(text, "m.hlo");
  REQUIRE(m.ok());
  return FindGemmFusions(*m, "m.hlo").status();
}

// A module of one nested GEMM fusion of f32[64,32] x f32[32,16], its configs given.
std::string OneFusion(const std::string& fusion_config, const std::string& dot_config = R"({"sizes":["32"]})") {
  return R"(HloModule one

%fused (p0: f32[64,32], p1: f32[32,16]) -> f32[64,16] {
  %p0 = f32[64,32]{1,0} parameter(0)
  %p1 = f32[32,16]{1,0} parameter(1)
  ROOT %d = f32[64,16]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config=)" +
         dot_config + R"(
}

ENTRY %main (a: f32[64,32], b: f32[32,16]) -> f32[64,16] {
  %a = f32[64,32]{1,0} parameter(0)
  %b = f32[32,16]{1,0} parameter(1)
  ROOT %f = f32[64,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused, backend_config=)" +
         fusion_config + "\n}\n";
}

}  // namespace

TEST_CASE("fusions: the real MLP dump's five Triton GEMM fusions, their problems and XLA's choices, alike from text "
          "and proto",
          "[hlo][fusions]") {
  const std::vector<GemmFusion> text = FusionsOf(kAfter + "txt");
  const std::vector<GemmFusion> proto = FusionsOf(kAfter + "hlo.pb");
  REQUIRE(text.size() == 5);
  REQUIRE(proto.size() == 5);
  // In the module's order; each line hand-read from the text: the dot's operand shapes and
  // dimension numbers, the fusion's output_tiles, num_warps and num_stages, the dot's sizes.
  struct Want {
    const char* name;
    const char* problem;
    const char* chosen;
    int nodes;
  };
  const Want want[] = {
      {"gemm_fusion_dot.2", "f32 x f32 -> f32 8x128x512x100", "64x32x64 sk1 s1 w4 c1", 3},
      {"gemm_fusion_dot.3", "f32 x f32 -> f32 16x128x10x32", "64x16x32 sk1 s1 w4 c1", 9},
      {"gemm_fusion_dot_general.8", "f32 x f32 -> f32 128x512x10 (rhs T)", "16x8x16 sk1 s1 w2 c1", 3},
      {"gemm_fusion_dot", "f32 x f32 -> f32 784x512x128 (lhs T)", "64x32x64 sk1 s1 w4 c1", 3},
      {"gemm_fusion_dot.1", "f32 x f32 -> f32 512x10x128 (lhs T)", "64x16x128 sk1 s1 w4 c1", 9},
  };
  for (size_t i = 0; i < 5; ++i) {
    INFO(want[i].name);
    CHECK(text[i].name == want[i].name);
    CHECK(text[i].kind == "__triton_nested_gemm_fusion");
    CHECK(text[i].problem.Name() == want[i].problem);
    CHECK(text[i].chosen.Name() == want[i].chosen);
    CHECK(proto[i].name == text[i].name);
    CHECK(proto[i].problem.Name() == text[i].problem.Name());
    CHECK(proto[i].chosen == text[i].chosen);
    auto gt = hlo::FeaturizeModule(text[i].module, "text");
    auto gp = hlo::FeaturizeModule(proto[i].module, "proto");
    REQUIRE(gt.ok());
    REQUIRE(gp.ok());
    CHECK(gt->graph.num_nodes == want[i].nodes);
    CHECK(gt->graph.node_feat == gp->graph.node_feat);
    CHECK(gt->graph.edge_index == gp->graph.edge_index);
    CHECK(gt->graph.node_opcode == gp->graph.node_opcode);
  }
  // gemm_fusion_dot.3's graph is the dot with its fused prologue: the bias broadcast and
  // add, and the ReLU's maximum, before the dot (its root).
  auto g = hlo::FeaturizeModule(text[1].module, "text");
  REQUIRE(g.ok());
  std::vector<std::string> opcodes;
  for (const auto& n : g->nodes) opcodes.push_back(n.opcode);
  CHECK(std::count(opcodes.begin(), opcodes.end(), "parameter") == 3);
  CHECK(std::count(opcodes.begin(), opcodes.end(), "maximum") == 1);
  CHECK(opcodes.back() == "dot");
}

TEST_CASE("fusions: a fusion's lone dot is its two operands and the dot, whose node reads as in the fused graph",
          "[hlo][fusions]") {
  for (const std::string ext : {"txt", "hlo.pb"}) {
    const std::vector<GemmFusion> fusions = FusionsOf(kAfter + ext);
    for (const GemmFusion& f : fusions) {
      auto lone = hlo::LoneDotModule(f, "m");
      REQUIRE(lone.ok());
      auto fused = hlo::FeaturizeModule(f.module, "fused");
      auto alone = hlo::FeaturizeModule(*lone, "lone");
      REQUIRE(fused.ok());
      REQUIRE(alone.ok());
      REQUIRE(alone->graph.num_nodes == 3);
      CHECK(alone->nodes[0].opcode == "parameter");
      CHECK(alone->nodes[1].opcode == "parameter");
      CHECK(alone->nodes[2].opcode == "dot");
      CHECK(alone->nodes[2].instruction == f.dot);
      CHECK(alone->nodes[2].computation == f.computation);  // what fusions.tsv's dot_node is found by
      CHECK(alone->graph.edge_index == std::vector<int64_t>{2, 0, 2, 1});
      // The dot's own features (its shape, dimension numbers, its operands' shapes) are
      // the fused graph's dot's: only the graph around it differs.
      int64_t dot = -1;
      for (size_t i = 0; i < fused->nodes.size(); ++i)
        if (fused->nodes[i].opcode == "dot") dot = static_cast<int64_t>(i);
      REQUIRE(dot >= 0);
      CHECK(std::vector<float>(alone->graph.feat(2), alone->graph.feat(2) + kNodeFeatDim) ==
            std::vector<float>(fused->graph.feat(dot), fused->graph.feat(dot) + kNodeFeatDim));
    }
  }
  GemmFusion broken = FusionsOf(kAfter + "txt")[0];
  broken.dot = "no_such_dot";
  auto refused = hlo::LoneDotModule(broken, "m.txt");
  REQUIRE_FALSE(refused.ok());
  CHECK(std::string(refused.status().message()) ==
        "m.txt: fusion gemm_fusion_dot.2: its computation has no product no_such_dot of known operands");
}

TEST_CASE("fusions: a block-scaled product (scaled-dot) is the product of its first two operands, its scales kept",
          "[hlo][fusions]") {
  const std::string text = R"(HloModule scaled

scaled_gemm {
  x = f8e4m3fn[256,512]{1,0} parameter(0)
  y = f8e4m3fn[512,64]{1,0} parameter(1)
  xs = f8e8m0fnu[256,16]{1,0} parameter(2)
  ys = f8e8m0fnu[16,64]{1,0} parameter(3)
  ROOT p = bf16[256,64]{1,0} scaled-dot(x, y, xs, ys), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={sizes:["64"]}
}

ENTRY main {
  a = f8e4m3fn[256,512]{1,0} parameter(0)
  b = f8e4m3fn[512,64]{1,0} parameter(1)
  as = f8e8m0fnu[256,16]{1,0} parameter(2)
  bs = f8e8m0fnu[16,64]{1,0} parameter(3)
  ROOT f = bf16[256,64]{1,0} fusion(a, b, as, bs), kind=kCustom, calls=scaled_gemm, backend_config={fusion_backend_config:{kind:"__triton_nested_gemm_fusion", block_level_fusion_config:{output_tiles:[{sizes:["128","32"]}], num_warps:"8", num_stages:"2", num_ctas:"1"}}}
}
)";
  auto module = hlo::ParseModule(text, "scaled.hlo");
  REQUIRE(module.ok());
  auto fusions = FindGemmFusions(*module, "scaled.hlo");
  REQUIRE(fusions.ok());
  REQUIRE(fusions->size() == 1);
  const GemmFusion& f = fusions->at(0);
  CHECK(f.dot == "p");
  CHECK(f.problem.Name() == "f8e4m3fn x f8e4m3fn -> bf16 256x64x512");
  CHECK(f.chosen.Name() == "128x32x64 sk1 s2 w8 c1");
  auto lone = hlo::LoneDotModule(f, "scaled.hlo");
  REQUIRE(lone.ok());
  auto g = hlo::FeaturizeModule(*lone, "lone");
  REQUIRE(g.ok());
  REQUIRE(g->graph.num_nodes == 5);  // four parameters and the product
  CHECK(g->nodes[4].opcode == "scaled-dot");
  CHECK(g->graph.edge_index == std::vector<int64_t>{4, 0, 4, 1, 4, 2, 4, 3});
}

TEST_CASE("fusions: a configuration's 24 values, hand-computed for the 8x128x512x100 fusion on 132 SMs",
          "[hlo][fusions]") {
  const GemmFusion f = FusionsOf(kAfter + "txt")[0];
  const std::array<float, kTileConfigDim> r = XlaGemmFeatures(f.problem, f.chosen, 132);
  // The tile 64x32x64, split_k 1; the grid: 2 programs along M, 16 along N, 2 K steps,
  // 8 x 2 x 16 = 256 programs in 2 waves, the tiles filled, the last wave 256 / 264;
  // warps 4, stages 1, 1 x (64 + 32) x 64 x 4 bytes = 24 KiB, 1 CTA.
  const float want[] = {64, 32, 64, 1, 0, 0, 161, 131072, 2, 16, 2, 2, 1, 256.0f / 264, 0, 0,
                        4, 1, 24, 1, 0, 0, 30, 96};
  const float grid_sum = 2 + 16 + 2 + 2 + 1 + 256.0f / 264, grid_product = 2 * 16 * 2 * 2 * 1 * 256.0f / 264;
  for (int i = 0; i < kTileConfigDim; ++i) {
    const float w = i == 14 ? grid_sum : i == 15 ? grid_product : want[i];
    INFO("column " << i);
    CHECK(r[i] == Approx(w));
  }
  const XlaGemmConfig back = XlaGemmConfigOfRow(r.data());
  CHECK(back == f.chosen);
}

TEST_CASE("fusions: the tile graphs and fusions.tsv are written, and an existing table is kept unless forced",
          "[hlo][fusions]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "tgraph_fusions_test").string();
  std::filesystem::remove_all(dir);
  const std::vector<GemmFusion> fusions = FusionsOf(kAfter + "txt");
  auto lines = hlo::WriteGemmFusions(fusions, dir, 132, false);
  REQUIRE(lines.ok());
  CHECK(lines->at(0) == "gemm_fusion_dot.2: f32 x f32 -> f32 8x128x512x100, chosen 64x32x64 sk1 s1 w4 c1, 3 nodes");
  auto tsv = ReadFile(dir + "/fusions.tsv");
  REQUIRE(tsv.ok());
  CHECK_THAT(*tsv, Catch::StartsWith("fusion\tcomputation\tkind\tdot\tdot_node\tnodes\tbatch\tm\tn\tk\t"));
  CHECK_THAT(*tsv, Catch::Contains("gemm_fusion_dot.2\tgemm_fusion_dot.2_computation\t__triton_nested_gemm_fusion\t"
                                   "dot.4\t2\t3\t8\t128\t512\t100\tf32\tf32\tf32\t0\t0\t64x32x64 sk1 s1 w4 c1\t64\t32\t"
                                   "64\t1\t1\t4\t1\t0\t0\t\t\tgemm_fusion_dot.2.npz\n"));
  // The table reads back as what was written: every fusion's problem and choice.
  auto records = ReadXlaFusionTables(dir);
  REQUIRE(records.ok());
  REQUIRE(records->size() == fusions.size());
  for (const GemmFusion& f : fusions) {
    const XlaFusionRecord& r = records->at(hlo::FileSafeName(f.name) + ".npz");
    CHECK(r.fusion == f.name);
    CHECK(r.problem.Name() == f.problem.Name());
    CHECK(r.chosen == f.chosen);
  }
  auto g = LoadTileGraph(dir + "/gemm_fusion_dot.3.npz");
  REQUIRE(g.ok());
  CHECK(g->graph.num_nodes == 9);
  REQUIRE(g->num_configs == 1);
  CHECK(g->config_feat[0] == 64);  // block_m
  CHECK(g->config_feat[2] == 32);  // block_k
  CHECK(g->config_runtime == std::vector<int64_t>{0});
  CHECK(g->config_runtime_normalizers == std::vector<int64_t>{1});
  auto again = hlo::WriteGemmFusions(fusions, dir, 132, false);
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(std::string(again.status().message()), Catch::Contains("fusions.tsv"));
  CHECK(hlo::WriteGemmFusions(fusions, dir, 132, true).ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("fusions: an older GEMM fusion's triton_gemm_config gives all seven parameters", "[hlo][fusions]") {
  const std::string text = OneFusion(
      R"({"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"32","block_n":"16",)"
      R"("block_k":"32","split_k":"2","num_stages":"3","num_warps":"4","num_ctas":"1"}}})",
      "{}");
  absl::StatusOr<xla::HloModuleProto> m = hlo::ParseModule(text, "m.hlo");
  REQUIRE(m.ok());
  auto f = FindGemmFusions(*m, "m.hlo");
  REQUIRE(f.ok());
  REQUIRE(f->size() == 1);
  CHECK(f->at(0).chosen.Name() == "32x16x32 sk2 s3 w4 c1");
  CHECK(f->at(0).problem.Name() == "f32 x f32 -> f32 64x16x32");
  // As older dumps and XLA's own tests write it: the FusionBackendConfig itself, without
  // the GpuBackendConfig around it, and split_k and num_ctas left at 1.
  m = hlo::ParseModule(OneFusion(R"({"kind":"__triton_gemm","triton_gemm_config":{"block_m":"64","block_n":"16",)"
                                 R"("block_k":"32","num_stages":"1","num_warps":"2"}})",
                                 "{}"),
                       "m.hlo");
  REQUIRE(m.ok());
  f = FindGemmFusions(*m, "m.hlo");
  REQUIRE(f.ok());
  REQUIRE(f->size() == 1);
  CHECK(f->at(0).chosen.Name() == "64x16x32 sk1 s1 w2 c1");
}

TEST_CASE("fusions: what cannot be read is refused, naming the fusion and the key", "[hlo][fusions]") {
  const std::string nested = R"({"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion",)";
  absl::Status s = FusionError(OneFusion(nested + R"("block_level_fusion_config":{"num_warps":"4","num_stages":1}}})"));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("fusion f: block_level_fusion_config: no output_tiles[0].sizes"));
  s = FusionError(OneFusion(nested + R"("block_level_fusion_config":{"output_tiles":[{"sizes":["16","8"]}],)"
                                     R"("num_stages":1}}})"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("fusion f: block_level_fusion_config: no 'num_warps'"));
  s = FusionError(OneFusion(nested + R"("block_level_fusion_config":{"output_tiles":[{"sizes":["16","x"]}],)"
                                     R"("num_warps":"4","num_stages":1}}})"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("output_tiles[0].sizes[1]: 'v' is \"x\", expected an integer"));
  s = FusionError(OneFusion(nested + R"("block_level_fusion_config":{"output_tiles":[{"sizes":["16","8"]}],)"
                                     R"("num_warps":"4","num_stages":1}}})",
                            "{}"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("its dot d has no contracting tile"));
  s = FusionError(OneFusion(nested + R"("block_level_fusion_config":{"output_tiles":[{"sizes":["16"]}],)"
                                     R"("num_warps":"4","num_stages":1}}})"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("block_level_fusion_config: the output tile [16] at dot d "
                                                       "f32[64,16]{1,0}: a tile of 1 sizes for 2 dimensions"));
  s = FusionError(OneFusion(R"({"fusion_backend_config":})"));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("m.hlo: fusion f: its backend_config is not JSON"));
  // No Triton GEMM fusion at all: the module before XLA's passes.
  s = FusionError("HloModule m\nENTRY e {\n  a = f32[2,2]{1,0} parameter(0)\n  ROOT d = f32[2,2]{1,0} dot(a, a), "
                  "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("has no Triton matrix-product fusion"));
}

TEST_CASE("fusions: every other real module, before XLA's GPU passes or compiled without Triton, has none",
          "[hlo][fusions]") {
  const std::string hlo = std::string(TGRAPH_REAL_DATA) + "/hlo/";
  for (const std::string name : {"graphsage_tf.hlo", "jax_fft3d_compiled.hlo", "pytorch_xla_llama_decoder_layer.hlo",
                                 "pytorch_xla_mlp_train_step.hlo", "jax/mlp_train_step.before_optimizations.txt",
                                 "jax/mlp_train_step.before_optimizations.hlo.pb"}) {
    INFO(name);
    absl::StatusOr<std::string> bytes = ReadFile(hlo + name);
    REQUIRE(bytes.ok());
    absl::StatusOr<xla::HloModuleProto> m = hlo::ParseModule(*bytes, name);
    REQUIRE(m.ok());
    const absl::Status s = FindGemmFusions(*m, name).status();
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("has no Triton matrix-product fusion"));
  }
}

TEST_CASE("fusions: a configuration's name reads back, and other text is refused", "[hlo][fusions]") {
  auto c = ParseXlaGemmConfig("64x32x64 sk1 s1 w4 c1");
  REQUIRE(c.ok());
  CHECK(c->block_m == 64);
  CHECK(c->block_k == 64);
  CHECK(c->num_warps == 4);
  CHECK(c->Name() == "64x32x64 sk1 s1 w4 c1");
  for (const char* bad : {"64x32x64 s1 w4 c1", "64x32 sk1 s1 w4 c1", "64x32x64 sk0 s1 w4 c1", "64x32x64 sk1 s1 c4 w1",
                          ""})
    CHECK_FALSE(ParseXlaGemmConfig(bad).ok());
}

namespace {

// A module of one nested GEMM fusion whose fused computation is `body` (its operands
// p0, p1 as the ENTRY passes them), its output tile `tile`.
std::string FusionOf(const std::string& params, const std::string& body, const std::string& result,
                     const std::string& tile) {
  return "HloModule m\n\nfused {\n" + body + "}\n\nENTRY main {\n" + params + "  ROOT f = " + result +
         " fusion(a, b), kind=kCustom, calls=fused, backend_config={\"fusion_backend_config\":{\"kind\":"
         "\"__triton_nested_gemm_fusion\",\"block_level_fusion_config\":{\"output_tiles\":[{\"sizes\":[" +
         tile + "]}],\"num_warps\":\"4\",\"num_stages\":\"3\",\"num_ctas\":\"1\"}}}\n}\n";
}

XlaGemmConfig ChosenOf(const std::string& text) {
  absl::StatusOr<xla::HloModuleProto> m = hlo::ParseModule(text, "m.hlo");
  REQUIRE(m.ok());
  absl::StatusOr<std::vector<GemmFusion>> f = FindGemmFusions(*m, "m.hlo");
  INFO(f.status().message());
  REQUIRE(f.ok());
  REQUIRE(f->size() == 1);
  return f->at(0).chosen;
}

}  // namespace

TEST_CASE("fusions: a tile over merged or split dimensions is the same elements over the others", "[hlo][fusions]") {
  CHECK(hlo::ReshapeTile({1536}, {64}, {12, 128}) == std::vector<int64_t>{1, 64});
  CHECK(hlo::ReshapeTile({1536}, {256}, {12, 128}) == std::vector<int64_t>{2, 128});
  CHECK(hlo::ReshapeTile({12, 128}, {2, 128}, {1536}) == std::vector<int64_t>{256});
  CHECK(hlo::ReshapeTile({256, 12, 128}, {32, 1, 64}, {256, 1536}) == std::vector<int64_t>{32, 64});
  CHECK(hlo::ReshapeTile({4, 1, 6}, {2, 1, 6}, {1, 24}) == std::vector<int64_t>{1, 12});
  CHECK(hlo::ReshapeTile({4, 6}, {2, 6}, {25}).empty());  // not the same elements
}

TEST_CASE("fusions: the output tile is read back over the dot through bitcasts, transposes, reshapes and epilogues",
          "[hlo][fusions]") {
  // What XLA writes for a product whose result it lays out otherwise: a bitcast of the
  // dot's bf16[1536,1024]{0,1} as bf16[1024,1536]{1,0}, the same bytes. The tile [64,128]
  // over the result is N 64, M 128.
  const std::string bf16 = "  a = bf16[1536,256]{1,0} parameter(0)\n  b = bf16[256,1024]{1,0} parameter(1)\n";
  CHECK(ChosenOf(FusionOf(bf16,
                          "  p0 = bf16[1536,256]{1,0} parameter(0)\n  p1 = bf16[256,1024]{1,0} parameter(1)\n"
                          "  d = bf16[1536,1024]{0,1} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                          "backend_config={\"sizes\":[\"32\"]}\n  ROOT t = bf16[1024,1536]{1,0} bitcast(d)\n",
                          "bf16[1024,1536]{1,0}", "\"64\",\"128\""))
            .Name() == "128x64x32 sk1 s3 w4 c1");
  // A batched product transposed: f32[64,127,32] (batch, M, N) as f32[64,32,127].
  const std::string f32 = "  a = f32[64,127,48]{2,1,0} parameter(0)\n  b = f32[64,48,32]{2,1,0} parameter(1)\n";
  CHECK(ChosenOf(FusionOf(f32,
                          "  p0 = f32[64,127,48]{2,1,0} parameter(0)\n  p1 = f32[64,48,32]{2,1,0} parameter(1)\n"
                          "  d = f32[64,127,32]{2,1,0} dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                          "rhs_batch_dims={0}, rhs_contracting_dims={1}, backend_config={\"sizes\":[\"16\"]}\n"
                          "  ROOT t = f32[64,32,127]{2,1,0} transpose(d), dimensions={0,2,1}\n",
                          "f32[64,32,127]{2,1,0}", "\"1\",\"16\",\"64\""))
            .Name() == "64x16x16 sk1 s3 w4 c1");
  // Heads split off N by a reshape, after a bias and a convert (the bias's broadcast is
  // not on the dot's path).
  const std::string heads = "  a = f32[256,512]{1,0} parameter(0)\n  b = f32[512,1536]{1,0} parameter(1)\n";
  CHECK(ChosenOf(FusionOf(heads,
                          "  p0 = f32[256,512]{1,0} parameter(0)\n  p1 = f32[512,1536]{1,0} parameter(1)\n"
                          "  d = f32[256,1536]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                          "backend_config={\"sizes\":[\"64\"]}\n  c = f32[] constant(1)\n"
                          "  bias = f32[256,1536]{1,0} broadcast(c), dimensions={}\n"
                          "  s = f32[256,1536]{1,0} add(d, bias)\n  h = bf16[256,1536]{1,0} convert(s)\n"
                          "  ROOT r = bf16[256,12,128]{2,1,0} reshape(h)\n",
                          "bf16[256,12,128]{2,1,0}", "\"32\",\"1\",\"64\""))
            .Name() == "32x64x64 sk1 s3 w4 c1");
  // A slice between them: refused, naming where.
  absl::Status s = FusionError(FusionOf(heads,
                                        "  p0 = f32[256,512]{1,0} parameter(0)\n  p1 = f32[512,1536]{1,0} parameter(1)\n"
                                        "  d = f32[256,1536]{1,0} dot(p0, p1), lhs_contracting_dims={1}, "
                                        "rhs_contracting_dims={0}, backend_config={\"sizes\":[\"64\"]}\n"
                                        "  ROOT r = f32[256,768]{1,0} slice(d), slice={[0:256], [0:768]}\n",
                                        "f32[256,768]{1,0}", "\"32\",\"64\""));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("fusion f: block_level_fusion_config: the output tile [32,64] at slice r f32[256,768]{1,0}: "
                             "a tile is followed through elementwise operations, transposes, broadcasts, bitcasts and "
                             "reshapes only"));
}

TEST_CASE("fusions: every Triton GEMM fusion of six JAX programs XLA compiled for an H100 is read, alike from text "
          "and proto",
          "[hlo][fusions]") {
  const std::string dir = std::string(TGRAPH_REAL_DATA) + "/hlo/jax-h100-aot/";
  const std::vector<std::pair<std::string, size_t>> programs = {{"decoder_bf16_infer", 13}, {"decoder_train", 43},
                                                                {"resnet_train", 3},       {"mlp_infer", 3},
                                                                {"attention_bf16", 2},     {"moe_batched", 2}};
  std::map<std::string, GemmFusion> train;
  for (const auto& [program, count] : programs) {
    INFO(program);
    const std::vector<GemmFusion> text = FusionsOf(dir + program + ".sm_9.0a_gpu_after_optimizations.txt");
    const std::vector<GemmFusion> proto = FusionsOf(dir + program + ".sm_9.0a_gpu_after_optimizations.hlo.pb");
    REQUIRE(text.size() == count);
    REQUIRE(proto.size() == count);
    std::map<std::string, std::string> by_name;
    for (const GemmFusion& f : proto) by_name[f.name] = f.problem.Name() + " " + f.chosen.Name();
    for (const GemmFusion& f : text) CHECK(by_name[f.name] == f.problem.Name() + " " + f.chosen.Name());
    if (program == "decoder_train")
      for (const GemmFusion& f : text) train[f.name] = f;
  }
  // The q/k/v projection's dot bf16[1536,1024]{0,1} is the fusion's bf16[1024,1536]{1,0}
  // by a bitcast: the tile [8,16] over the result is N 8, M 16.
  REQUIRE(train.count("gemm_fusion_dot.53") == 1);
  CHECK(train["gemm_fusion_dot.53"].problem.Name() == "bf16 x bf16 -> bf16 1536x1024x512 (lhs T, rhs T)");
  CHECK(train["gemm_fusion_dot.53"].chosen.Name() == "16x8x16 sk1 s1 w2 c1");
  // Batched: f32[2,1536,512]{1,2,0} as f32[2,512,1536]{2,1,0}; the tile [1,8,16] is
  // batch 1, N 8, M 16.
  REQUIRE(train.count("gemm_fusion_dot.92") == 1);
  CHECK(train["gemm_fusion_dot.92"].chosen.Name() == "16x8x16 sk1 s1 w2 c1");
  CHECK(train["gemm_fusion_dot.92"].problem.batch == 2);
}

TEST_CASE("fusions: a fusion that cannot be read is listed in the table with its reason, and the others are written",
          "[hlo][fusions]") {
  // Two fusions: one a plain product, the other sliced after its dot (not followed).
  const std::string text = R"(HloModule two

good {
  p0 = f32[64,32]{1,0} parameter(0)
  p1 = f32[32,16]{1,0} parameter(1)
  ROOT d = f32[64,16]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"sizes":["32"]}
}

sliced {
  q0 = f32[64,32]{1,0} parameter(0)
  q1 = f32[32,16]{1,0} parameter(1)
  e = f32[64,16]{1,0} dot(q0, q1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"sizes":["32"]}
  ROOT s = f32[32,16]{1,0} slice(e), slice={[0:32], [0:16]}
}

ENTRY main {
  a = f32[64,32]{1,0} parameter(0)
  b = f32[32,16]{1,0} parameter(1)
  f = f32[64,16]{1,0} fusion(a, b), kind=kCustom, calls=good, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","16"]}],"num_warps":"4","num_stages":"2"}}}
  g = f32[32,16]{1,0} fusion(a, b), kind=kCustom, calls=sliced, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","16"]}],"num_warps":"4","num_stages":"2"}}}
  ROOT t = (f32[64,16]{1,0}, f32[32,16]{1,0}) tuple(f, g)
}
)";
  absl::StatusOr<xla::HloModuleProto> m = hlo::ParseModule(text, "two.hlo");
  REQUIRE(m.ok());
  CHECK(FindGemmFusions(*m, "two.hlo").status().code() == absl::StatusCode::kInvalidArgument);  // strict: refused
  std::vector<hlo::RefusedFusion> refused;
  absl::StatusOr<std::vector<GemmFusion>> read = FindGemmFusions(*m, "two.hlo", &refused);
  REQUIRE(read.ok());
  REQUIRE(read->size() == 1);
  CHECK(read->at(0).name == "f");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].name == "g");
  CHECK_THAT(refused[0].reason, Catch::StartsWith("two.hlo: fusion g: block_level_fusion_config: the output tile "
                                                  "[32,16] at slice s f32[32,16]{1,0}: a tile is followed through"));
  const std::string dir = (std::filesystem::temp_directory_path() / "tgraph_fusions_refused_test").string();
  std::filesystem::remove_all(dir);
  REQUIRE(hlo::WriteGemmFusions(*read, dir, 132, false, {}, "", refused).ok());
  auto tsv = ReadFile(dir + "/fusions.tsv");
  REQUIRE(tsv.ok());
  CHECK_THAT(*tsv, Catch::EndsWith("\n# refused\tg\t" + refused[0].reason + "\n"));
  auto records = ReadXlaFusionTables(dir);  // the comment line is skipped
  REQUIRE(records.ok());
  CHECK(records->size() == 1);
  std::filesystem::remove_all(dir);
  // Nothing readable: the first refusal is the error, with the list or without.
  std::string only_sliced = text;
  only_sliced.replace(only_sliced.find("  f = f32[64,16]"), only_sliced.find("  g = f32[32,16]") - only_sliced.find("  f = f32[64,16]"), "");
  only_sliced.replace(only_sliced.find("  ROOT t = "), only_sliced.find("\n}\n", only_sliced.find("  ROOT t = ")) - only_sliced.find("  ROOT t = "), "  ROOT t = f32[32,16]{1,0} copy(g)");
  absl::StatusOr<xla::HloModuleProto> one = hlo::ParseModule(only_sliced, "one.hlo");
  REQUIRE(one.ok());
  std::vector<hlo::RefusedFusion> all;
  CHECK(FindGemmFusions(*one, "one.hlo", &all).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(all.size() == 1);
}
