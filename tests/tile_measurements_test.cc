// A tile kernel's measurements in the measurement store (model/store/measurement_store.h),
// on the real H100 kernel graphs (tests/data/real/gpu-tiles/hlo): tile shards that the
// tile loaders read, kept apart by kernel, the index a server's searches read (medians,
// bounded, rebuilt from the shards), precise refusals; and the prior with a kernel's
// measured problems joined (MeasuredSlowdowns::With).
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/npy.h"
#include "model/hlo/featurize.h"
#include "model/store/measurement_store.h"
#include "model/tile/tile_baselines.h"
#include "model/tile/tile_space.h"
#include "tests/test_util.h"

using namespace tgraph;
namespace fs = std::filesystem;

namespace {

// The featurized graph of a real kernel's HLO (what RegisterGraph with as_kernel keeps).
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

const TritonTile kA{128, 128, 64, 4, 3}, kB{64, 128, 64, 4, 3}, kC{128, 256, 64, 8, 3};

MeasurementReport TileReport(const std::string& stem, const std::string& hash, const std::vector<TritonTile>& tiles,
                             const std::vector<int64_t>& ns, const TileKernelId& kernel = {"matmul_kernel", "ab12"}) {
  MeasurementReport r;
  r.collection = *ParseCollection("tile@h100-triton");
  r.graph_hash = hash;
  r.graph = KernelGraph(stem);
  const GemmProblem p = *GemmProblemOfGraph(r.graph, stem);
  for (const TritonTile& t : tiles) {
    const auto row = TritonTileFeatures(p, t, 132);
    r.tile_config_feat.insert(r.tile_config_feat.end(), row.begin(), row.end());
  }
  r.num_configs = static_cast<int64_t>(tiles.size());
  r.runtime_ns = ns;
  r.kernel = kernel;
  r.source = "test farm";
  return r;
}

const KnownTileProblem* Find(const std::vector<KnownTileProblem>& ps, const std::string& name) {
  for (const KnownTileProblem& p : ps)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("a tile report is stored as a tile npz naming its kernel, and indexed at its runtimes' median",
          "[measurements][tile]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  absl::StatusOr<AppendResult> a = store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kA, kB}, {2000, 3000}));
  REQUIRE(a.ok());
  CHECK(a->path.find("/npz/tile/@h100-triton/train/aa01.m") != std::string::npos);
  // A tile npz the loaders read: rows, runtimes, the fastest as normalizer; the kernel and
  // source under their keys.
  absl::StatusOr<TileGraph> g = LoadTileGraph(a->path);
  REQUIRE(g.ok());
  CHECK(g->num_configs == 2);
  CHECK(TritonTileOfRow(g->config_feat.data() + kTileConfigDim) == kB);
  CHECK(g->config_runtime == std::vector<int64_t>{2000, 3000});
  CHECK(g->config_runtime_normalizers == std::vector<int64_t>{2000, 2000});
  absl::StatusOr<NpzArchive> npz = ReadNpz(a->path);
  REQUIRE(npz.ok());
  const NpyArray& kernel = npz->at("tgraph_kernel");
  CHECK(std::string(kernel.bytes.begin(), kernel.bytes.end()) == "matmul_kernel@ab12");
  // Repeats: the (upper) median per configuration; another kernel's report stays its own.
  REQUIRE(store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kA}, {1000})).ok());
  REQUIRE(store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kA}, {5000})).ok());
  REQUIRE(store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kC}, {100}, {"matmul_kernel", "cd34"})).ok());
  const auto mine = store.KernelProblems("tile@h100-triton", "matmul_kernel@ab12");
  REQUIRE(mine->size() == 1);
  const KnownTileProblem& p = mine->front();
  CHECK(p.problem.Name() == "bf16 128x256x1024");
  CHECK(p.tiles == std::vector<TritonTile>{kB, kA});  // sorted
  CHECK(p.runtime == std::vector<double>{3000, 2000});  // kA: 2000, 1000, 5000 -> 2000
  const auto other = store.KernelProblems("tile@h100-triton", "matmul_kernel@cd34");
  REQUIRE(other->size() == 1);
  CHECK(other->front().tiles == std::vector<TritonTile>{kC});
  CHECK(store.KernelProblems("tile@h100-triton", "matmul_kernel")->empty());
  CHECK(store.KernelProblems("tile@h200-triton", "matmul_kernel@ab12")->empty());
  CHECK(store.Kernels("tile@h100-triton") == std::vector<std::string>{"matmul_kernel@ab12", "matmul_kernel@cd34"});

  // A store opened on the same directory reads the same index back from the shards.
  MeasurementStore again(dir.path());
  absl::StatusOr<std::vector<std::string>> skipped = again.LoadKernelIndex();
  REQUIRE(skipped.ok());
  CHECK(skipped->empty());
  const auto read = again.KernelProblems("tile@h100-triton", "matmul_kernel@ab12");
  REQUIRE(read->size() == 1);
  CHECK(read->front().runtime == p.runtime);
  absl::StatusOr<LoadedTileMeasurements> loaded = LoadTileMeasurements(dir.path(), *ParseCollection("tile@h100-triton"));
  REQUIRE(loaded.ok());
  CHECK(loaded->kernels.size() == 2);
  CHECK(loaded->kernels.at("matmul_kernel@cd34").front().runtime == std::vector<double>{100});
}

TEST_CASE("a corrupt tile shard is left out and named, the others indexed", "[measurements][tile]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  REQUIRE(store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kA}, {10})).ok());
  absl::StatusOr<AppendResult> bad = store.Append(TileReport("gemm_f32_128x256x256", "bb02", {kA}, {20}));
  REQUIRE(bad.ok());
  fs::resize_file(bad->path, 100);
  MeasurementStore again(dir.path());
  absl::StatusOr<std::vector<std::string>> skipped = again.LoadKernelIndex();
  REQUIRE(skipped.ok());
  REQUIRE(skipped->size() == 1);
  CHECK_THAT(skipped->front(), Catch::StartsWith(bad->path));
  const auto problems = again.KernelProblems("tile@h100-triton", "matmul_kernel@ab12");
  REQUIRE(problems->size() == 1);
  CHECK(problems->front().name == "aa01");
}

TEST_CASE("the kernel index keeps the most recently reported problems, at most kMaxKernelProblems",
          "[measurements][tile]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  const MeasurementReport base = TileReport("gemm_bf16_128x256x1024", "0", {kA}, {10});
  for (int64_t i = 0; i <= kMaxKernelProblems; ++i) {
    MeasurementReport r = base;
    r.graph_hash = absl::StrCat(absl::Hex(1000 + i));
    REQUIRE(store.Append(r).ok());
  }
  const auto problems = store.KernelProblems("tile@h100-triton", "matmul_kernel@ab12");
  CHECK(static_cast<int64_t>(problems->size()) == kMaxKernelProblems);
  CHECK(Find(*problems, absl::StrCat(absl::Hex(1000))) == nullptr);  // the first reported went first
  CHECK(Find(*problems, absl::StrCat(absl::Hex(1000 + kMaxKernelProblems))) != nullptr);
}

TEST_CASE("bad tile reports are refused naming the field, and nothing is written", "[measurements][tile]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  const auto refused = [&](MeasurementReport r, const std::string& what) {
    absl::StatusOr<AppendResult> a = store.Append(r);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(a.status().message()), Catch::Contains(what));
  };
  const MeasurementReport good = TileReport("gemm_bf16_128x256x1024", "aa01", {kA, kB}, {2000, 3000});
  MeasurementReport r = good;
  r.kernel = {};
  refused(r, "kernel.name");
  r = good;
  r.kernel.name = "matmul kernel";
  refused(r, "kernel.name");
  r = good;
  r.kernel.source_hash = "XYZ";
  refused(r, "kernel.source_hash");
  r = good;
  r.tile_config_feat.pop_back();
  refused(r, "tile rows: 47 values for 2 rows of 24");
  r = good;
  r.tile_config_feat[30] = std::nanf("");
  refused(r, "row 1, value 6 is not finite");
  r = good;
  r.runtime_ns[1] = 0;
  refused(r, "runtimes_ns[1]");
  r = good;
  r.graph.node_opcode.assign(r.graph.node_opcode.size(), 0);
  refused(r, "report for graph aa01");
  CHECK_FALSE(fs::exists(dir.path() + "/npz"));
  CHECK(store.KernelProblems("tile@h100-triton", "matmul_kernel@ab12")->empty());
  // A kernel's key reads back; a bad one is refused naming it.
  CHECK(ParseTileKernelKey("matmul_kernel@ab12", "k")->source_hash == "ab12");
  CHECK(ParseTileKernelKey("matmul_kernel", "k")->source_hash.empty());
  CHECK_FALSE(ParseTileKernelKey("matmul_kernel@", "k").ok());
}

TEST_CASE("one kernel's timings on two GPUs are indexed apart, and a shard naming no GPU counts as its collection's",
          "[measurements][tile]") {
  TempDir dir;
  {
    MeasurementStore store(dir.path());
    const TileKernelId h100{"matmul_kernel", "ab12", "NVIDIA H100 80GB HBM3", "9.0"};
    const TileKernelId h200{"matmul_kernel", "ab12", "NVIDIA H200", "9.0"};
    REQUIRE(store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kA}, {1000}, h100)).ok());
    REQUIRE(store.Append(TileReport("gemm_bf16_128x256x1024", "aa01", {kA}, {9000}, h200)).ok());
    REQUIRE(store.Append(TileReport("gemm_f32_128x256x256", "bb02", {kA}, {3000})).ok());  // written before GPUs were named
    CHECK(store.KernelProblems("tile@h100-triton", h100.Key())->front().runtime == std::vector<double>{1000});
    CHECK(store.KernelProblems("tile@h100-triton", h200.Key())->front().runtime == std::vector<double>{9000});
    CHECK(store.Kernels("tile@h100-triton") ==
          std::vector<std::string>{"matmul_kernel@ab12", "matmul_kernel@ab12/NVIDIA H100 80GB HBM3",
                                   "matmul_kernel@ab12/NVIDIA H200"});
  }
  // Read back with the collection's GPU known, the old shard joins that GPU's problems.
  MeasurementStore again(dir.path());
  REQUIRE(again.LoadKernelIndex({{"tile@h100-triton", "NVIDIA H100 80GB HBM3"}}).ok());
  CHECK(again.Kernels("tile@h100-triton") ==
        std::vector<std::string>{"matmul_kernel@ab12/NVIDIA H100 80GB HBM3", "matmul_kernel@ab12/NVIDIA H200"});
  CHECK(again.KernelProblems("tile@h100-triton", "matmul_kernel@ab12/NVIDIA H100 80GB HBM3")->size() == 2);
  CHECK(again.KernelProblems("tile@h100-triton", "matmul_kernel@ab12/NVIDIA H200")->size() == 1);
  // Keys read back whole; the GPU starts at the first '/'; bad GPU names are refused naming the field.
  absl::StatusOr<TileKernelId> k = ParseTileKernelKey("matmul_kernel@ab12/NVIDIA H100 80GB HBM3", "k");
  REQUIRE(k.ok());
  CHECK(k->name == "matmul_kernel");
  CHECK(k->source_hash == "ab12");
  CHECK(k->gpu == "NVIDIA H100 80GB HBM3");
  CHECK(ParseTileKernelKey("softmax/NVIDIA H200", "k")->gpu == "NVIDIA H200");
  CHECK_FALSE(ParseTileKernelKey("matmul_kernel@ab12/", "k").ok());
  CHECK(KernelKeyOnGpu("matmul_kernel@ab12", "NVIDIA H200") == "matmul_kernel@ab12/NVIDIA H200");
  CHECK(KernelKeyOnGpu("matmul_kernel@ab12/NVIDIA H200", "NVIDIA H100 80GB HBM3") == "matmul_kernel@ab12/NVIDIA H200");
  CHECK(KernelKeyOnGpu("matmul_kernel", "") == "matmul_kernel");
  for (const std::string gpu : {std::string(" H100"), std::string("H100\n"), std::string(129, 'x')}) {
    absl::Status s = ValidateTileKernel({"matmul_kernel", "", gpu}, "kernel");
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::StartsWith("kernel.gpu: "));
  }
  for (const std::string cc : {"9", "9.x", "9.0.1", ".0"}) {
    absl::Status s = ValidateTileKernel({"matmul_kernel", "", "NVIDIA H200", cc}, "kernel");
    CHECK_THAT(std::string(s.message()), Catch::StartsWith("kernel.compute_capability: "));
  }
  CHECK(ValidateTileKernel({"matmul_kernel", "", "NVIDIA H200", "10.0"}, "kernel").ok());
}

TEST_CASE("a kernel's measured problems join the prior's tables over the union of configurations",
          "[measurements][tile]") {
  KnownTileProblem p1{"p1", {"bf16", 128, 256, 1024}, {kA, kB}, {1, 2}};
  KnownTileProblem p2{"p2", {"bf16", 512, 256, 1024}, {kB, kC}, {4, 1}};
  const MeasuredSlowdowns one({p1});
  const MeasuredSlowdowns both = one.With({p2});
  CHECK(both.tiles() == std::vector<TritonTile>{kB, kA, kC});
  REQUIRE(both.problems().size() == 2);
  // p1 as it was: kA 0, kB log 2, kC unmeasured; p2: kB log 4, kC 0, kA unmeasured.
  CHECK(both.problems()[0].log_slowdown[0] == Approx(std::log(2.0)));
  CHECK(both.problems()[0].log_slowdown[1] == 0);
  CHECK(std::isnan(both.problems()[0].log_slowdown[2]));
  CHECK(both.problems()[1].log_slowdown[0] == Approx(std::log(4.0)));
  CHECK(std::isnan(both.problems()[1].log_slowdown[1]));
  CHECK(both.problems()[1].log_slowdown[2] == 0);
  // The same tables as building from both at once.
  const MeasuredSlowdowns at_once({p1, p2});
  CHECK(at_once.tiles() == both.tiles());
  for (size_t q = 0; q < 2; ++q)
    for (size_t t = 0; t < 3; ++t) {
      const double a = at_once.problems()[q].log_slowdown[t], b = both.problems()[q].log_slowdown[t];
      CHECK(((std::isnan(a) && std::isnan(b)) || a == b));
    }
}

TEST_CASE("a pruned tuning's few measurements join the prior for their differences, levelled by their neighbours",
          "[measurements][tile]") {
  const TritonTile kD{32, 64, 32, 4, 2}, kE{256, 128, 64, 8, 4};
  // A fully measured problem: log slowdowns A 0, B 0.1, C 0.2, D 0.3, E 0.5.
  const KnownTileProblem full{"full", {"bf16", 128, 256, 1024}, {kA, kB, kC, kD, kE},
                              {1, std::exp(0.1), std::exp(0.2), std::exp(0.3), std::exp(0.5)}};
  const MeasuredSlowdowns base({full});
  const ShapeBandwidth bandwidth = ShapeBandwidth::Isotropic(1);
  const auto value = [](const MeasuredSlowdowns& m, size_t problem, const TritonTile& t) {
    const auto at = std::lower_bound(m.tiles().begin(), m.tiles().end(), t) - m.tiles().begin();
    return m.problems()[problem].log_slowdown[static_cast<size_t>(at)];
  };
  // Two of five measured (B 100, C 110): the offset is the mean of (log t - neighbours'
  // value), so B reads (0.3 - log 1.1) / 2 and C (0.3 + log 1.1) / 2, not 0 and log 1.1.
  const KnownTileProblem few{"h1", {"bf16", 256, 256, 1024}, {kB, kC}, {100, 110}, "mm@abc"};
  const MeasuredSlowdowns anchored = base.With({few}, &bandwidth);
  REQUIRE(anchored.problems().size() == 2);
  CHECK(value(anchored, 1, kB) == Approx((0.3 - std::log(1.1)) / 2));
  CHECK(value(anchored, 1, kC) == Approx((0.3 + std::log(1.1)) / 2));
  CHECK(std::isnan(value(anchored, 1, kA)));
  CHECK(value(anchored, 0, kE) == Approx(0.5));  // the base's own problem as it was
  const MeasuredSlowdowns plain = base.With({few});
  CHECK(value(plain, 1, kB) == 0);
  CHECK(value(plain, 1, kC) == Approx(std::log(1.1)));
  // The same through ForKernel, as a search reads the store's problems.
  CHECK(value(base.ForKernel("mm@abc", {few}, &bandwidth), 1, kC) == Approx((0.3 + std::log(1.1)) / 2));
  // A measurement far faster than its neighbours make it is floored at the fastest (0).
  const KnownTileProblem far{"h2", {"bf16", 256, 256, 1024}, {kB, kC}, {100, 1000}, "mm@abc"};
  const MeasuredSlowdowns floored = base.With({far}, &bandwidth);
  CHECK(value(floored, 1, kB) == 0);
  CHECK(value(floored, 1, kC) == Approx((0.3 + std::log(10.0)) / 2));
  // Three of five is not a pruned tuning's few: read from its own best, as before.
  const KnownTileProblem most{"h3", {"bf16", 256, 256, 1024}, {kA, kB, kC}, {3, 2, 4}, "mm@abc"};
  const MeasuredSlowdowns kept = base.With({most}, &bandwidth);
  CHECK(value(kept, 1, kB) == 0);
  CHECK(value(kept, 1, kA) == Approx(std::log(1.5)));
}
