// The server on real GPU tile data (tile@h100-triton, from tests/data/real/gpu-tiles):
// a model with a tile space searches a matrix product's legal configurations, ranks
// rows, and refuses configurations outside the space, naming them and why.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "model/tile/tile_prior.h"
#include "model/tile/tile_space.h"
#include "model/hlo/tile_ingest.h"
#include "tests/model_fixtures.h"
#include "tests/server_process.h"

using namespace tgraph;

namespace {

const std::string kTiles = std::string(TGRAPH_REAL_DATA) + "/gpu-tiles";

[[noreturn]] void Die(const absl::Status& s) {
  std::fprintf(stderr, "tile world: %s\n", std::string(s.message()).c_str());
  std::abort();
}

// A registry with tile@h100-triton (random weights, the real tile space),
// tile@prior (the same with a heavy prior: its order is the prior's) and tile@no-space
// (a tile model without a space), and the ingested real data.
struct TileWorld {
  ModelWorld w{7, {"tile:xla"}};
  std::string root;
  TileSpace space;
  TilePrior measured_prior;
  TileWorld() {
    root = w.dir.path() + "/tiles";
    hlo::TileIngestOptions o;
    o.csv = kTiles + "/triton_gemm_h100.csv";
    o.hlo_dir = kTiles + "/hlo";
    o.out_root = root;
    if (!hlo::IngestTileMeasurements(o).ok()) std::abort();
    space = *LoadTileSpace(root + "/npz/tile/@h100-triton");
    w.tile_space = space;
    w.Publish("tile@h100-triton", 2);
    // The prior ranks bf16 configurations by BLOCK_K, then BLOCK_M, descending: at weight
    // 1,000 the network's scores (unit scale) cannot reorder them.
    TilePrior prior;
    prior.weight = 1000;
    for (const TritonTile& tile : space.Legal("bf16"))
      prior.values["bf16"][tile] = -static_cast<double>(tile.block_k * 1000 + tile.block_m) / 1e5;
    w.tile_prior = prior;
    w.Publish("tile@prior", 2);
    // The prior alone (a network that did not add to it on its validation problems).
    prior.weight = 1;
    prior.network_share = 0;
    prior.problems = 36;
    w.tile_prior = prior;
    w.Publish("tile@prior-alone", 2);
    // The prior of the training split's measured problems, alone (what tgraph-train
    // publishes when the network does not add to it), so that it can follow measurements.
    std::vector<KnownTileProblem> known;
    const Collection c = *ParseCollection("tile@h100-triton");
    const absl::StatusOr<std::vector<GraphFile>> train = ListSplit(root, c, "train");
    if (!train.ok()) Die(train.status());
    for (const GraphFile& f : *train) {
      absl::StatusOr<TileGraph> g = LoadTileGraph(f.path);
      if (!g.ok()) Die(g.status());
      absl::StatusOr<KnownTileProblem> k = KnownProblemOf(*g, f.path);
      if (!k.ok()) Die(k.status());
      known.push_back(std::move(*k));
    }
    absl::StatusOr<TilePrior> built = BuildTilePrior(known, 1.0, ShapeBandwidth{});
    if (!built.ok()) Die(built.status());
    measured_prior = std::move(*built);
    measured_prior.near_end = TilePrior::kNearEndDefault;
    measured_prior.network_share = 0;
    w.tile_prior = measured_prior;
    w.Publish("tile@measured-prior", 2);
    w.tile_prior.reset();
    w.tile_space.reset();
    w.Publish("tile@no-space", 1);
  }
};

NodeGraph KernelGraph(const std::string& stem) {
  absl::StatusOr<HloProgram> p = HloProgram::FromFile(kTiles + "/hlo/" + stem + ".hlo");
  if (!p.ok()) std::abort();
  return p->graph;
}

}  // namespace

CATCH_TEST_CASE("server: a tile model with a real H100 tile space searches a matrix product's legal configurations",
                "[e2e][tile][real]") {
  TileWorld t;
  ServerProcess server(t.w.registry, t.w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  const NodeGraph graph = KernelGraph("gemm_bf16_2048x1024x1024");
  const GemmProblem problem{"bf16", 2048, 1024, 1024};
  SearchConfigsOptions o;
  o.collection = "tile@h100-triton";
  o.results = 5;
  absl::StatusOr<Proposals> p = client.Search(graph, {}, o);
  CATCH_REQUIRE(p.ok());
  CATCH_CHECK(p->evaluations == 260);  // every legal bf16 configuration: 288 less 28 refused
  CATCH_REQUIRE(p->count == 5);
  CATCH_REQUIRE(p->tile_names.size() == 5);
  CATCH_REQUIRE(p->tile_rows.size() == 5 * kTileConfigDim);
  for (int i = 0; i < 5; ++i) {
    const TritonTile tile = TritonTileOfRow(p->tile_rows.data() + i * kTileConfigDim);
    CATCH_CHECK(tile.Name() == p->tile_names[i]);
    CATCH_CHECK(t.space.CheckRow(problem, p->tile_rows.data() + i * kTileConfigDim, "proposal").ok());
    if (i > 0) CATCH_CHECK(p->scores[i - 1] <= p->scores[i]);
  }
  // The proposals measured: the next search leaves them out.
  o.exclude_tiles.assign(p->tile_rows.begin(), p->tile_rows.begin() + 3 * kTileConfigDim);
  absl::StatusOr<Proposals> next = client.Search(graph, {}, o);
  CATCH_REQUIRE(next.ok());
  CATCH_CHECK(next->evaluations == 257);
  const std::set<std::string> excluded(p->tile_names.begin(), p->tile_names.begin() + 3);
  for (const std::string& n : next->tile_names) CATCH_CHECK(excluded.count(n) == 0);
  CATCH_CHECK(next->tile_names[0] == p->tile_names[3]);

  // Ranking the whole legal space gives the search's order: one scoring for both.
  const std::vector<TritonTile> legal = t.space.Legal("bf16");
  std::vector<float> rows;
  for (const TritonTile& tile : legal) {
    const auto row = t.space.Row(problem, tile);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  RankOptions ro;
  ro.collection = "tile@h100-triton";
  absl::StatusOr<Ranking> r = client.RankTile(graph, rows.data(), static_cast<int64_t>(legal.size()), ro);
  CATCH_REQUIRE(r.ok());
  for (int i = 0; i < 5; ++i) CATCH_CHECK(legal[static_cast<size_t>(r->order[i])].Name() == p->tile_names[i]);

  // A model published with a prior ranks and searches with it: here the prior's order.
  ro.collection = o.collection = "tile@prior";
  o.exclude_tiles.clear();
  absl::StatusOr<Ranking> by_prior = client.RankTile(graph, rows.data(), static_cast<int64_t>(legal.size()), ro);
  absl::StatusOr<Proposals> searched = client.Search(graph, {}, o);
  CATCH_REQUIRE(by_prior.ok());
  CATCH_REQUIRE(searched.ok());
  for (int i = 0; i < 5; ++i) {
    const TritonTile& tile = legal[static_cast<size_t>(by_prior->order[i])];
    CATCH_CHECK(tile.block_k == t.space.block_k.back());
    CATCH_CHECK(tile.block_m == t.space.block_m.back());
    CATCH_CHECK(searched->tile_names[i] == tile.Name());
  }

  // A network at share 0: each score is the prior's value, with no spread.
  ro.collection = "tile@prior-alone";
  absl::StatusOr<Ranking> alone = client.RankTile(graph, rows.data(), static_cast<int64_t>(legal.size()), ro);
  CATCH_REQUIRE(alone.ok());
  for (size_t i = 0; i < legal.size(); ++i) {
    CATCH_CHECK(alone->scores[i] == Approx(-static_cast<double>(legal[i].block_k * 1000 + legal[i].block_m) / 1e5));
    CATCH_CHECK(alone->spread[i] == 0.0f);
  }
  // ListModels says how each model scores.
  absl::StatusOr<std::vector<ModelInfo>> models = client.ListModels();
  CATCH_REQUIRE(models.ok());
  std::map<std::string, ModelInfo> by_name;
  for (const ModelInfo& m : *models) by_name[m.collection] = m;
  CATCH_REQUIRE(by_name.count("tile@prior-alone"));
  CATCH_REQUIRE(by_name["tile@prior-alone"].tile_prior.has_value());
  CATCH_CHECK(by_name["tile@prior-alone"].tile_prior->network_share == 0);
  CATCH_CHECK(by_name["tile@prior-alone"].tile_prior->weight == 1);
  CATCH_CHECK(by_name["tile@prior-alone"].tile_prior->problems == 36);
  CATCH_CHECK_THAT(by_name["tile@prior-alone"].tile_prior->Summary(),
                   Catch::StartsWith("0 x the network's standardised scores + 1 x the prior of 36 measured problems "
                                     "(the prior alone ranks"));
  CATCH_CHECK(by_name["tile@prior"].tile_prior->network_share == 1);
  CATCH_CHECK_FALSE(by_name["tile@h100-triton"].tile_prior.has_value());
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: a tile search's prior follows the runtimes of the configurations measured so far",
                "[e2e][tile][real]") {
  TileWorld t;
  ServerProcess server(t.w.registry, t.w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  // A test-split problem (the prior never saw it) and its real runtimes.
  const std::string stem = "gemm_bf16_2048x256x1024";
  absl::StatusOr<TileGraph> file = LoadTileGraph(t.root + "/npz/tile/@h100-triton/test/" + stem + ".npz");
  CATCH_REQUIRE(file.ok());
  const KnownTileProblem truth = *KnownProblemOf(*file, stem);
  std::map<std::string, int64_t> runtime_ns;
  for (size_t i = 0; i < truth.tiles.size(); ++i) runtime_ns[truth.tiles[i].Name()] = file->config_runtime[i];
  const NodeGraph graph = KernelGraph(stem);
  SearchConfigsOptions o;
  o.collection = "tile@measured-prior";
  o.results = 5;
  absl::StatusOr<Proposals> first = client.Search(graph, {}, o);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(first->correction_measurements == 0);
  // The first three proposals measured, their runtimes sent: the prior follows them, and
  // the proposals are its order of the rest, as TilePrior::For computes it here.
  std::vector<MeasuredTile> own;
  for (int i = 0; i < 3; ++i) {
    o.exclude_tiles.insert(o.exclude_tiles.end(), first->tile_rows.begin() + i * kTileConfigDim,
                           first->tile_rows.begin() + (i + 1) * kTileConfigDim);
    o.exclude_runtimes_ns.push_back(runtime_ns.at(first->tile_names[static_cast<size_t>(i)]));
    own.push_back({*ParseTritonTile(first->tile_names[static_cast<size_t>(i)]),
                   static_cast<double>(o.exclude_runtimes_ns.back())});
  }
  absl::StatusOr<Proposals> next = client.Search(graph, {}, o);
  CATCH_REQUIRE(next.ok());
  CATCH_CHECK(next->correction_measurements == 3);
  const TilePriorValues expected = t.measured_prior.For(truth.problem, own);
  std::vector<TritonTile> rest;
  for (const TritonTile& tile : t.space.Legal("bf16"))
    if (std::none_of(own.begin(), own.end(), [&](const MeasuredTile& m) { return m.tile == tile; })) rest.push_back(tile);
  std::stable_sort(rest.begin(), rest.end(),
                   [&](const TritonTile& a, const TritonTile& b) { return expected.Of(a) < expected.Of(b); });
  CATCH_REQUIRE(next->tile_names.size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    CATCH_CHECK(next->tile_names[i] == rest[i].Name());
    CATCH_CHECK(next->scores[i] == Approx(expected.Of(rest[i])).epsilon(1e-5).margin(1e-5));
  }
  // Without the runtimes the same exclusions give the prior of other problems alone.
  const TilePriorValues frozen = t.measured_prior.For(truth.problem);
  bool reordered = false;
  for (size_t i = 0; i < 5; ++i) reordered |= frozen.Of(rest[i]) != Approx(expected.Of(rest[i])).epsilon(1e-6);
  CATCH_CHECK(reordered);
  // Runtimes that do not match the rows are refused naming the field.
  o.exclude_runtimes_ns.pop_back();
  absl::StatusOr<Proposals> bad = client.Search(graph, {}, o);
  CATCH_CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(bad.status().message()), Catch::Contains("exclude_runtimes_ns has 2 values for num_exclude 3"));
  o.exclude_runtimes_ns = {100, 0, 100};
  bad = client.Search(graph, {}, o);
  CATCH_CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(bad.status().message()), Catch::Contains("exclude_runtimes_ns[1] is 0, expected > 0"));
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: a tile row outside the model's space is refused naming the row and why", "[e2e][tile][real]") {
  TileWorld t;
  ServerProcess server(t.w.registry, t.w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  const NodeGraph graph = KernelGraph("gemm_f32_512x256x4096");
  const GemmProblem problem{"f32", 512, 256, 4096};
  const auto row = [&](const GemmProblem& p, const TritonTile& tile) {
    const auto r = t.space.Row(p, tile);
    return std::vector<float>(r.begin(), r.end());
  };
  RankOptions ro;
  ro.collection = "tile@h100-triton";
  // Row 1 is 128x128x128 w4 s3: the compiler refused it for f32 (not for bf16).
  std::vector<float> rows = row(problem, {64, 64, 32, 4, 2});
  const std::vector<float> refused = row(problem, {128, 128, 128, 4, 3});
  rows.insert(rows.end(), refused.begin(), refused.end());
  absl::StatusOr<Ranking> r = client.RankTile(graph, rows.data(), 2, ro);
  CATCH_REQUIRE_FALSE(r.ok());
  CATCH_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(r.status().message()),
                   Catch::Contains("tile_configs row 1: 128x128x128 w4 s3 is illegal for f32 on NVIDIA H100 80GB HBM3"));
  // A row computed for another problem: its grid columns are wrong for this kernel.
  const std::vector<float> other = row({"f32", 2048, 256, 4096}, {64, 64, 32, 4, 2});
  r = client.RankTile(graph, other.data(), 1, ro);
  CATCH_REQUIRE_FALSE(r.ok());
  CATCH_CHECK_THAT(std::string(r.status().message()),
                   Catch::Contains("tile_configs row 0: column 3 (CTAs) is 128, but 64x64x32 w4 s2 on f32 "
                                   "512x256x4096 gives 32"));
  // A configuration that is not a candidate at all.
  const std::vector<float> odd = row(problem, {48, 64, 32, 4, 2});
  r = client.RankTile(graph, odd.data(), 1, ro);
  CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("48x64x32 w4 s2 is not a candidate"));
  // Searching: layout-only fields are refused; a model without a tile space has nothing to search.
  SearchConfigsOptions so;
  so.collection = "tile@h100-triton";
  so.max_evaluations = 100;
  absl::StatusOr<Proposals> p = client.Search(graph, {}, so);
  CATCH_CHECK(p.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(p.status().message()), Catch::Contains("max_evaluations is for layout searches"));
  so.max_evaluations = 0;
  so.collection = "tile@no-space";
  p = client.Search(graph, {}, so);
  CATCH_CHECK(p.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(p.status().message()), Catch::Contains("its model has no tile space"));
  // A dtype the space never measured (f16: no refusals recorded, no runtimes learned
  // from) is not ranked or searched with a guess, whatever the rows.
  const std::string f16_text =
      "HloModule jit_dot\n\nENTRY main.1 {\n  a.1 = f16[512,4096]{1,0} parameter(0)\n"
      "  b.1 = f16[4096,256]{1,0} parameter(1)\n"
      "  ROOT dot_general.1 = f16[512,256]{1,0} dot(a.1, b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  absl::StatusOr<HloProgram> f16 = HloProgram::FromSerialized(f16_text, "f16.hlo");
  CATCH_REQUIRE(f16.ok());
  so.collection = ro.collection = "tile@h100-triton";
  p = client.Search(f16->graph, {}, so);
  CATCH_CHECK(p.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(p.status().message()),
                   Catch::Contains("the problem is f16 512x256x4096, but this triton-gemm space was measured on NVIDIA "
                                   "H100 80GB HBM3 for bf16 and f32 problems only"));
  const std::vector<float> f16_row = row({"f16", 512, 256, 4096}, {64, 64, 32, 4, 2});
  r = client.RankTile(f16->graph, f16_row.data(), 1, ro);
  CATCH_CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("for bf16 and f32 problems only"));
  // N and K not multiples of 16 (a real module, measured on an H200): the compiler
  // builds another kernel, which this space never measured.
  absl::StatusOr<HloProgram> unaligned =
      HloProgram::FromFile(std::string(TGRAPH_REAL_DATA) + "/gpu-tiles-h200/hlo/gemm_bf16_1000x700x700.hlo");
  CATCH_REQUIRE(unaligned.ok());
  p = client.Search(unaligned->graph, {}, so);
  CATCH_CHECK(p.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(p.status().message()),
                   Catch::Contains("the problem is bf16 1000x700x700, with N and K not multiples of 16 (kernel "
                                   "variant bf16/NK), but this triton-gemm space was measured on NVIDIA H100 80GB HBM3 "
                                   "for bf16 (N and K multiples of 16) only"));
  const std::vector<float> unaligned_row = row({"bf16", 1000, 700, 700}, {64, 64, 32, 4, 2});
  r = client.RankTile(unaligned->graph, unaligned_row.data(), 1, ro);
  CATCH_CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  // M alone not a multiple of 16 (a token count) is the same kernel: searched whole.
  absl::StatusOr<HloProgram> tokens =
      HloProgram::FromFile(std::string(TGRAPH_REAL_DATA) + "/gpu-tiles-h200/hlo/gemm_bf16_1000x512x512.hlo");
  CATCH_REQUIRE(tokens.ok());
  p = client.Search(tokens->graph, {}, so);
  CATCH_REQUIRE(p.ok());
  CATCH_CHECK(p->evaluations == 260);
  // The models list says what the space is.
  absl::StatusOr<std::vector<ModelInfo>> models = client.ListModels();
  CATCH_REQUIRE(models.ok());
  for (const ModelInfo& m : *models) {
    if (m.collection != "tile@h100-triton") continue;
    absl::StatusOr<TileSpace> space = TileSpace::FromJson(m.tile_space, "ListModels");
    CATCH_REQUIRE(space.ok());
    CATCH_CHECK(space->refused.at("f32").size() == 90);
    CATCH_CHECK(space->dtypes == std::set<std::string>{"bf16", "f32"});
    CATCH_CHECK(space->variants == std::set<std::string>{"bf16", "f32"});
  }
  CATCH_CHECK(server.Stop() == 0);
}
