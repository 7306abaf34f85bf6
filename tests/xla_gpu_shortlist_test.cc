// Which model makes XLA's shortlist (client/xla_gpu_shortlist.h): a fusion model or the
// GPU's Triton tile model, never one of another kind unless asked, and what is said.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "client/xla_gpu_shortlist.h"

using namespace tgraph;

namespace {

ModelInfo Model(const std::string& collection, const std::string& kernel = "", bool synthetic = false) {
  ModelInfo m;
  m.collection = collection;
  m.synthetic_only = synthetic;
  if (!kernel.empty()) m.tile_space = "{\"kernel\": \"" + kernel + "\", \"gpu\": \"NVIDIA H100 80GB HBM3\"}";
  return m;
}

}  // namespace

TEST_CASE("xla-gpu ranks with the fusion model asked for, and with the GPU's only Triton tile model when it is not "
          "loaded",
          "[xla_gpu]") {
  const std::vector<ModelInfo> loaded = {Model("layout:xla:random", "", true), Model("tile@h100-xla"),
                                         Model("tile@h100-triton", "triton-gemm")};
  absl::StatusOr<ShortlistModel> fusion = ChooseShortlistModel(loaded, "tile@h100-xla", false);
  REQUIRE(fusion.ok());
  CHECK_FALSE(fusion->triton);
  CHECK(fusion->label == "the fusion model tile@h100-xla");
  CHECK(fusion->warnings.empty());
  absl::StatusOr<ShortlistModel> triton = ChooseShortlistModel(loaded, "tile@a100-xla", false);
  REQUIRE(triton.ok());
  CHECK(triton->triton);
  CHECK(triton->collection == "tile@h100-triton");
  CHECK_THAT(triton->label, Catch::StartsWith("the Triton tile model tile@h100-triton (NVIDIA H100 80GB HBM3), over "
                                              "XLA's configurations with split_k 1 and one CTA"));
  REQUIRE(triton->warnings.size() == 1);
  CHECK(triton->warnings[0] ==
        "no model is loaded for collection 'tile@a100-xla': ranking with the GPU's Triton tile model tile@h100-triton");
  CHECK(ChooseShortlistModel(loaded, "", false)->collection == "tile@h100-triton");
}

TEST_CASE("xla-gpu refuses a model of another kind naming why, unless asked to use it anyway", "[xla_gpu]") {
  const std::vector<ModelInfo> loaded = {Model("layout:xla:random"), Model("tile:xla", "", true),
                                         Model("tile@syn", "", true), Model("tile@conv", "triton-conv")};
  const auto why = [&](const std::string& c) {
    absl::StatusOr<ShortlistModel> m = ChooseShortlistModel(loaded, c, false);
    CHECK(m.status().code() == absl::StatusCode::kFailedPrecondition);
    return std::string(m.status().message());
  };
  CHECK_THAT(why("tile:xla"), Catch::StartsWith("'tile:xla' is a TPU tile collection of TpuGraphs' kind: its 24 "
                                                "values mean other things than XLA's GPU GEMM configurations"));
  CHECK_THAT(why("layout:xla:random"), Catch::StartsWith("'layout:xla:random' is a layout collection"));
  CHECK_THAT(why("tile@syn"), Catch::StartsWith("'tile@syn' was trained on synthetic data only"));
  CHECK_THAT(why("tile@conv"), Catch::StartsWith("'tile@conv' is a tile space of the kernel 'triton-conv'"));
  absl::StatusOr<ShortlistModel> anyway = ChooseShortlistModel(loaded, "tile:xla", true);
  REQUIRE(anyway.ok());
  REQUIRE(anyway->warnings.size() == 1);
  CHECK_THAT(anyway->warnings[0], Catch::StartsWith("--allow_any_model: 'tile:xla' is a TPU tile collection"));
  // Nothing to rank with: what is loaded is named; several Triton models: one must be named.
  absl::StatusOr<ShortlistModel> none = ChooseShortlistModel(loaded, "tile@h100-xla", false);
  CHECK(none.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(none.status().message()),
             Catch::StartsWith("no model is loaded for collection 'tile@h100-xla' (loaded: layout:xla:random, "
                               "tile:xla, tile@syn, tile@conv), and no Triton tile model"));
  const std::vector<ModelInfo> two = {Model("tile@h100-triton", "triton-gemm"), Model("tile@h200-triton", "triton-gemm")};
  absl::StatusOr<ShortlistModel> which = ChooseShortlistModel(two, "", false);
  CHECK(which.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(which.status().message()),
             Catch::Contains("several Triton tile models (tile@h100-triton, tile@h200-triton): give --collection"));
}

TEST_CASE("the Triton tile model's graph of a problem is the matrix product XLA writes for jnp.dot", "[xla_gpu]") {
  CHECK(GemmModuleText(128, 256, 64, "bf16") ==
        "HloModule jit_dot, entry_computation_layout={(bf16[128,64]{1,0}, bf16[64,256]{1,0})->bf16[128,256]{1,0}}\n\n"
        "ENTRY main.1 {\n  a.1 = bf16[128,64]{1,0} parameter(0)\n  b.1 = bf16[64,256]{1,0} parameter(1)\n"
        "  ROOT dot_general.1 = bf16[128,256]{1,0} dot(a.1, b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "}\n");
}
