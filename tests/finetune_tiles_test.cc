// tgraph-train finetune of a tile collection (model/train/finetune_tiles.h): a farm's
// measurements of one kernel, from the measurement store, join the published prior,
// tagged with their kernel; published only when they rank the farm's own problems
// (each without its shape) at least as well; one kernel at a time. The problems are the
// real H100 kernel graphs (tests/data/real/gpu-tiles/hlo) with runtimes the test chose,
// so that each figure is known by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "model/core/file_util.h"
#include "model/hlo/featurize.h"
#include "model/nn/model_io.h"
#include "model/store/measurement_store.h"
#include "model/store/registry.h"
#include "model/tile/tile_prior.h"
#include "model/tile/tile_space.h"
#include "model/train/finetune.h"
#include "tests/model_fixtures.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

const TritonTile kA{128, 128, 64, 4, 3}, kB{64, 128, 64, 4, 3}, kC{128, 256, 64, 8, 3};
const char* const kK1 = "matmul_kernel@ab12";
const char* const kCollection = "tile@h100-triton";

NodeGraph KernelGraph(const std::string& stem) {
  const std::string path = std::string(TGRAPH_REAL_DATA) + "/gpu-tiles/hlo/" + stem + ".hlo";
  absl::StatusOr<std::string> text = ReadFile(path);
  REQUIRE(text.ok());
  absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(*text, path);
  REQUIRE(module.ok());
  absl::StatusOr<hlo::ModuleGraph> m = hlo::FeaturizeModule(*module, path);
  REQUIRE(m.ok());
  return m->graph;
}

// A report of kA, kB, kC at `ns` for the real kernel `stem`.
void Report(MeasurementStore& store, const std::string& stem, const std::string& hash, const std::vector<int64_t>& ns,
            const TileKernelId& kernel = {"matmul_kernel", "ab12"}) {
  MeasurementReport r;
  r.collection = *ParseCollection(kCollection);
  r.graph_hash = hash;
  r.graph = KernelGraph(stem);
  const GemmProblem p = *GemmProblemOfGraph(r.graph, stem);
  for (const TritonTile& t : {kA, kB, kC}) {
    const auto row = TritonTileFeatures(p, t, 132);
    r.tile_config_feat.insert(r.tile_config_feat.end(), row.begin(), row.end());
  }
  r.num_configs = 3;
  r.runtime_ns = ns;
  r.kernel = kernel;
  const absl::Status appended = store.Append(r).status();
  INFO(appended.message());
  REQUIRE(appended.ok());
}

// A published tile model whose prior holds one measured problem, bf16 128x256x1024,
// where kA is fastest and kC slowest; the network's share 0 (the prior alone ranks).
struct World {
  ModelWorld w{7, {"tile:xla"}};
  std::string store = w.dir.path() + "/store";
  World() {
    KnownTileProblem base;
    base.name = "gemm_bf16_128x256x1024";
    base.problem = {"bf16", 128, 256, 1024};
    base.tiles = {kA, kB, kC};
    base.runtime = {1000, 2000, 3000};
    TilePrior prior = *BuildTilePrior({base}, 1.0, ShapeBandwidth{});
    prior.network_share = 0;
    w.tile_prior = prior;
    w.Publish(kCollection, 2);
  }
  FinetuneOptions Options() const {
    FinetuneOptions o;
    o.registry = w.registry;
    o.collection = kCollection;
    o.measurements = store;
    o.work_dir = w.dir.path() + "/work";
    o.min_heldout_configs = 4;
    o.progress = false;
    return o;
  }
};

size_t ProblemsFor(const Manifest& m, const std::string& kernel) {
  return m.tile_prior->measured.ForKernel(kernel, {}).problems().size();
}

}  // namespace

TEST_CASE("a tile fine-tune joins a kernel's measured problems to the prior and publishes when they rank better",
          "[finetune][tile]") {
  World world;
  {
    MeasurementStore store(world.store);
    // Both farm problems have kC fastest and kA slowest, against the prior's one problem.
    Report(store, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000});
    Report(store, "gemm_bf16_8192x256x1024", "f8192", {3100, 2100, 1100});
  }
  absl::StatusOr<FinetuneResult> r = Finetune(world.Options());
  REQUIRE(r.ok());
  // Each farm problem ranked without its shape: by the parent's one problem, exactly
  // reversed (tau -1); by the other farm problem (far nearer than M 128), in order (+1).
  CHECK(r->graphs == 2);
  CHECK(r->heldout_configs == 6);
  CHECK(r->parent_score == Approx(-1.0));
  CHECK(r->child_score == Approx(1.0));
  REQUIRE(r->published_version == 2);
  absl::StatusOr<LoadedModel> child = LoadModel(Registry(world.w.registry), kCollection, 2);
  REQUIRE(child.ok());
  const Manifest& m = child->manifest;
  CHECK(m.training.at("finetune_kernel") == kK1);
  CHECK(m.training.at("finetune_parent_version") == "1");
  CHECK(m.provenance.finetunes.size() == 1);
  CHECK(m.tile_prior->problems == 3);
  // The farm's problems count for their kernel only: another kernel's search, or one
  // naming no kernel, reads the collection's own problem alone.
  CHECK(ProblemsFor(m, kK1) == 3);
  CHECK(ProblemsFor(m, "") == 1);
  CHECK(ProblemsFor(m, "matmul_kernel@ffff") == 1);
  // A search of the kernel reads the fine-tuned problems once, the store's newer copy of
  // one of them replacing the published one.
  MeasurementStore again(world.store);
  REQUIRE(again.LoadKernelIndex().ok());
  const std::vector<KnownTileProblem> fresh = *again.KernelProblems(kCollection, kK1);
  CHECK(m.tile_prior->measured.ForKernel(kK1, fresh).problems().size() == 3);
  ScoringOptions so;
  CHECK(UseTilePrior(m, {"bf16", 4096, 256, 1024}, &so, {}, nullptr, kK1) == 0);
  CHECK(so.tile_prior->values.at(kC) < so.tile_prior->values.at(kA));  // the farm's order near M 4096
  ScoringOptions other;
  UseTilePrior(m, {"bf16", 4096, 256, 1024}, &other, {}, nullptr, "matmul_kernel@ffff");
  CHECK(other.tile_prior->values.at(kA) < other.tile_prior->values.at(kC));  // the collection's own order
  // The manifest keeps the tags: the prior read back is the same prior.
  absl::StatusOr<TilePrior> back = TilePrior::FromJson(m.tile_prior->ToJson(), "test");
  REQUIRE(back.ok());
  CHECK(back->measured.ForKernel(kK1, {}).problems().size() == 3);
  CHECK(back->measured.problems()[1].stored.size() == 5);
}

TEST_CASE("a tile fine-tune whose measurements rank their own problems worse publishes nothing", "[finetune][tile]") {
  World world;
  {
    MeasurementStore store(world.store);
    // The farm's two problems disagree: each ranks the other backwards.
    Report(store, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000});
    Report(store, "gemm_bf16_8192x256x1024", "f8192", {1000, 2000, 3000});
  }
  absl::StatusOr<FinetuneResult> r = Finetune(world.Options());
  REQUIRE(r.ok());
  // Parent: -1 on the first, +1 on the second (mean 0); child: -1 on both.
  CHECK(r->parent_score == Approx(0.0));
  CHECK(r->child_score == Approx(-1.0));
  CHECK(r->published_version == 0);
  CHECK(r->not_published.find("worse than its parent") != std::string::npos);
  CHECK(Registry(world.w.registry).LatestVersion(kCollection).value() == 1);
}

TEST_CASE("a tile fine-tune is judged only on the problems its model serves, not on variants its space refuses",
          "[finetune][tile]") {
  World world;
  TileSpace bf16;  // measured for bf16 with N and K multiples of 16 only
  bf16.gpu = "NVIDIA H100 80GB HBM3";
  bf16.sm_count = 132;
  bf16.block_m = {64, 128}, bf16.block_n = {128, 256}, bf16.block_k = {64};
  bf16.num_warps = {4, 8}, bf16.num_stages = {3};
  bf16.dtypes = {"bf16"}, bf16.variants = {"bf16"};
  world.w.tile_space = bf16;
  world.w.Publish(kCollection, 2);  // version 2: the parent, with the space
  {
    MeasurementStore store(world.store);
    // The served bf16 problems rank each other worse than the parent does...
    Report(store, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000});
    Report(store, "gemm_bf16_8192x256x1024", "f8192", {1000, 2000, 3000});
    // ...and two f32 problems, which the parent refuses, would agree with each other.
    Report(store, "gemm_f32_2048x256x1024", "a2048", {3000, 2000, 1000});
    Report(store, "gemm_f32_8192x256x1024", "a8192", {3100, 2100, 1100});
  }
  absl::StatusOr<FinetuneResult> r = Finetune(world.Options());
  REQUIRE(r.ok());
  CHECK(r->graphs == 2);
  CHECK(r->unserved == 2);
  CHECK(r->unserved_variants == std::vector<std::string>{"f32"});
  CHECK(r->child_score == Approx(-1.0));
  CHECK(r->published_version == 0);
  CHECK(r->not_published.find("worse than its parent") != std::string::npos);
  // With the served ones gone, what is left is no evidence at all, and says why.
  TempDir other;
  FinetuneOptions o = world.Options();
  o.measurements = other.path() + "/store";
  {
    MeasurementStore store(o.measurements);
    Report(store, "gemm_f32_2048x256x1024", "a2048", {3000, 2000, 1000});
    Report(store, "gemm_f32_8192x256x1024", "a8192", {3100, 2100, 1100});
  }
  r = Finetune(o);
  REQUIRE(r.ok());
  CHECK(r->published_version == 0);
  CHECK_THAT(r->not_published, Catch::Contains("0 measured problems of kernel matmul_kernel@ab12/NVIDIA H100 80GB HBM3 "
                                               "with 0 configurations "
                                               "(2 more of kernel variants this model refuses, f32, left out)"));
}

TEST_CASE("a tile fine-tune learns from one kernel and says which when the store holds several", "[finetune][tile]") {
  World world;
  {
    MeasurementStore store(world.store);
    Report(store, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000});
    Report(store, "gemm_bf16_8192x256x1024", "f8192", {3100, 2100, 1100});
    Report(store, "gemm_bf16_2048x256x1024", "e2048", {1000, 2000, 3000}, {"softmax_kernel", ""});
  }
  FinetuneOptions o = world.Options();
  absl::StatusOr<FinetuneResult> r = Finetune(o);
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(r.status().message()).find("2 kernels") != std::string::npos);
  CHECK(std::string(r.status().message()).find("matmul_kernel@ab12, softmax_kernel") != std::string::npos);
  o.kernel = "matmul_kernel@0000";
  CHECK(Finetune(o).status().code() == absl::StatusCode::kNotFound);
  // The one problem of softmax_kernel is too little evidence: a result, nothing changed.
  o.kernel = "softmax_kernel";
  r = Finetune(o);
  REQUIRE(r.ok());
  CHECK(r->published_version == 0);
  CHECK(r->not_published.find("too little evidence: 1 measured problems") != std::string::npos);
  o.kernel = kK1;
  r = Finetune(o);
  REQUIRE(r.ok());
  CHECK(r->published_version == 2);
  // A layout collection has no kernel; base data is a layout fine-tune's.
  o.collection = "layout:xla:random";
  CHECK(Finetune(o).status().code() == absl::StatusCode::kInvalidArgument);
  o.collection = kCollection;
  o.base_data = world.w.data;
  CHECK(Finetune(o).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a tile fine-tune never learns from another GPU's timings of its kernel", "[finetune][tile]") {
  World world;  // its model has no tile space: no GPU named, as shards written before GPUs were
  {
    MeasurementStore store(world.store);
    Report(store, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000}, {"matmul_kernel", "ab12", "NVIDIA H200"});
    Report(store, "gemm_bf16_8192x256x1024", "f8192", {3100, 2100, 1100}, {"matmul_kernel", "ab12", "NVIDIA H200"});
  }
  FinetuneOptions o = world.Options();
  absl::StatusOr<FinetuneResult> r = Finetune(o);
  REQUIRE(r.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("of other GPUs, never joined: matmul_kernel@ab12/NVIDIA H200"));
  o.kernel = "matmul_kernel@ab12/NVIDIA H200";
  CHECK(Finetune(o).status().code() == absl::StatusCode::kNotFound);
  {
    MeasurementStore store(world.store);
    Report(store, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000});
    Report(store, "gemm_bf16_8192x256x1024", "f8192", {3100, 2100, 1100});
  }
  o.kernel = "";
  r = Finetune(o);
  REQUIRE(r.ok());
  CHECK(r->graphs == 2);  // its own GPU's two, not the H200's
  CHECK(r->published_version == 2);
}

TEST_CASE("a tile model whose prior is a fixed table cannot join measurements", "[finetune][tile]") {
  ModelWorld w{7, {"tile:xla"}};
  TilePrior table;
  table.values["bf16"][kA] = 0;
  w.tile_prior = table;
  w.Publish(kCollection, 1);
  const std::string store = w.dir.path() + "/store";
  {
    MeasurementStore s(store);
    Report(s, "gemm_bf16_2048x256x1024", "f2048", {3000, 2000, 1000});
  }
  FinetuneOptions o;
  o.registry = w.registry;
  o.collection = kCollection;
  o.measurements = store;
  o.work_dir = w.dir.path() + "/work";
  o.progress = false;
  CHECK(Finetune(o).status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("a prior's farm problem with half its tags is refused naming the key", "[finetune][tile]") {
  const std::string json =
      R"({"weight":1,"bandwidth":{"output":0.75,"k":0.5,"aspect":2},"problems":1,"tiles":["128x128x64 w4 s3"],)"
      R"("measured":[{"dtype":"bf16","m":128,"n":256,"k":1024,"log_slowdown":"0","kernel":"matmul_kernel@ab12"}]})";
  absl::StatusOr<TilePrior> p = TilePrior::FromJson(json, "manifest.json");
  REQUIRE(p.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(p.status().message()).find("measured[0].stored") != std::string::npos);
}
