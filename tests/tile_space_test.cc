// The Triton tile space, the ingest of real H100 measurements (tests/data/real/gpu-tiles)
// into tile@h100-triton, and the baselines a tile model is compared with.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/rank_metrics.h"
#include "model/tile/tile_baselines.h"
#include "model/tile/tile_orders.h"
#include "model/tile/tile_prior.h"
#include "model/tile/tile_space.h"
#include "model/hlo/featurize.h"
#include "model/hlo/tile_ingest.h"
#include "tests/test_util.h"

using namespace tgraph;
namespace fs = std::filesystem;

namespace {

const std::string kTiles = std::string(TGRAPH_REAL_DATA) + "/gpu-tiles";

TileSpace SmallSpace() {
  TileSpace s;
  s.gpu = "test GPU";
  s.sm_count = 132;
  s.block_m = {32, 64, 128}, s.block_n = {32, 128}, s.block_k = {32, 64};
  s.num_warps = {4, 8}, s.num_stages = {2, 3};
  s.refused["bf16"] = {{128, 128, 64, 8, 3}};
  s.dtypes = {"bf16", "f32"};
  s.variants = {"bf16", "f32"};
  return s;
}

// The real measurements, ingested once for every test that reads them.
const std::string& IngestedRoot() {
  static TempDir dir;
  static const bool done = [] {
    hlo::TileIngestOptions o;
    o.csv = kTiles + "/triton_gemm_h100.csv";
    o.hlo_dir = kTiles + "/hlo";
    o.out_root = dir.path();
    return hlo::IngestTileMeasurements(o).ok();
  }();
  REQUIRE(done);
  return dir.path();
}

// The CSV's runtime of one row, in ms, read independently of the ingest.
double CsvMs(const std::string& dtype, int m, int n, int k, const TritonTile& t) {
  std::ifstream f(kTiles + "/triton_gemm_h100.csv");
  const std::string prefix = dtype + "," + std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k) + "," +
                             std::to_string(t.block_m) + "," + std::to_string(t.block_n) + "," +
                             std::to_string(t.block_k) + "," + std::to_string(t.num_warps) + "," +
                             std::to_string(t.num_stages) + ",";
  for (std::string line; std::getline(f, line);)
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
  return -1;
}

}  // namespace

TEST_CASE("Triton tile features: the tile, the grid over the problem and the schedule, hand-computed", "[tile]") {
  // bf16 M=128, N=256, K=1024 with 64x128x32, 4 warps, 3 stages: 2 x 2 programs, 32 K
  // steps, one wave of 132 SMs (4 busy), tiles exactly cover C, shared memory 3 x (64 +
  // 128) x 32 x 2 bytes = 36 KiB.
  const std::array<float, kTileConfigDim> f =
      TritonTileFeatures({"bf16", 128, 256, 1024}, {64, 128, 32, 4, 3}, 132);
  const std::vector<float> want = {64, 128, 32, 0, 0, 0, 224, 262144,
                                   2,  2,   32, 1, 1, float(4.0 / 132), float(38 + 4.0 / 132), float(128 * 4.0 / 132),
                                   4,  3,   36, 0, 0, 0, 43, 432};
  for (int i = 0; i < kTileConfigDim; ++i) CHECK(f[i] == Approx(want[i]).epsilon(1e-6));
  // A tile that overhangs: M=100 with BLOCK_M 64 -> 2 programs covering 128 rows.
  const std::array<float, kTileConfigDim> g = TritonTileFeatures({"f32", 100, 32, 32}, {64, 32, 32, 4, 2}, 132);
  CHECK(g[8] == 2);
  CHECK(g[12] == Approx(100.0 / 128.0));
  CHECK(g[18] == Approx(2.0 * (64 + 32) * 32 * 4 / 1024));
  CHECK(TritonTileOfRow(f.data()) == TritonTile{64, 128, 32, 4, 3});
}

TEST_CASE("A GPU's occupancy of a configuration: shared memory, estimated registers, warps and CTA slots, hand-computed",
          "[tile]") {
  const GpuSpec h100 = *FindGpu("NVIDIA H100 80GB HBM3");
  CHECK(h100.sm_count == 132);
  CHECK(h100.measured);
  // bf16 128x128x64, 4 warps, 3 stages: 3 x 256 x 64 x 2 = 96 KiB + 1 KiB reserve; 233,472
  // bytes per SM hold 2. Registers: 128 x 128 / 128 threads = 128 + 32 = 160 a thread,
  // 20,480 a CTA: 3 fit. Warps: 16. So 2.
  CtaOccupancy big = OccupancyOf(h100, 128, 128, 64, 4, 3, 2);
  CHECK(big.shared_memory == 99328);
  CHECK(big.registers_per_thread == 160);
  CHECK(big.resident == 2);
  // 64x64x64 w4 s3: 49 KiB -> 4 by shared memory; 32 + 32 = 64 registers -> 8; so 4.
  CHECK(OccupancyOf(h100, 64, 64, 64, 4, 3, 2).resident == 4);
  // 32x32x32 w4 s2: 9 KiB -> 25, registers (8 + 32 = 40) -> 12, warps 16: registers bind.
  CHECK(OccupancyOf(h100, 32, 32, 32, 4, 2, 2).resident == 12);
  // 256x256 with 4 warps: the accumulator alone is 512 a thread, capped at 255 (a spill).
  CHECK(OccupancyOf(h100, 256, 256, 32, 4, 2, 2).registers_per_thread == 255);
  // An L4 (100 KiB an SM, 24 CTA slots): the same is bound by shared memory, 102,400 / 9,216.
  CHECK(OccupancyOf(*FindGpu("NVIDIA L4"), 32, 32, 32, 4, 2, 2).resident == 11);
  const absl::Status unknown = FindGpu("NVIDIA GeForce RTX 9090").status();
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(unknown.message()), Catch::Contains("GPU 'NVIDIA GeForce RTX 9090' is not in the table of GPUs "
                                                             "(model/tile/gpu_table.cc: 'NVIDIA H100 80GB HBM3', "
                                                             "'NVIDIA H200'"));
  for (const GpuSpec& g : KnownGpus()) CHECK(g.Validate(g.name).ok());
}

TEST_CASE("Triton tile features of the second set carry the GPU's waves and occupancy, hand-computed", "[tile]") {
  // The bf16 problem of 1,536 rows and a short K where 128x128 tiles (216 CTAs on 132 SMs)
  // are slower than 64x64 ones (864 CTAs): the first set sees one wave against seven;
  // the second that 2 and 4 CTAs fit an SM, so 1 wave against 2, both 82% full.
  const GpuSpec h100 = *FindGpu("NVIDIA H100 80GB HBM3");
  const GemmProblem p{"bf16", 1536, 2304, 256};
  const std::array<float, kTileConfigDim> big = TritonTileFeatures(p, {128, 128, 64, 4, 3}, h100);
  const std::array<float, kTileConfigDim> first = TritonTileFeatures(p, {128, 128, 64, 4, 3}, 132);
  // Columns 8-15 (the grid) are the first set's; 0-2 and 16-18 too.
  for (int i : {0, 1, 2, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}) CHECK(big[i] == first[i]);
  CHECK(big[3] == 216);      // CTAs: 12 x 18
  CHECK(big[4] == 0);        // 1536, 2304 and 256 are multiples of the blocks
  CHECK(big[5] == Approx(15.625));  // 1000 x 2 x 256 / (2 x 128 x 128)
  CHECK(big[6] == Approx(128 + 128 + 64 + 216 + 15.625));
  CHECK(big[7] == Approx(128.0 * 128 * 64 * 216 * 15.625).epsilon(1e-6));
  CHECK(big[19] == 2);
  CHECK(big[20] == 1);
  CHECK(big[21] == Approx(216.0 / 264));
  CHECK(big[22] == Approx(4 + 3 + 96 + 2 + 1 + 216.0 / 264));
  const std::array<float, kTileConfigDim> small = TritonTileFeatures(p, {64, 64, 64, 4, 3}, h100);
  CHECK(small[3] == 864);
  CHECK(small[5] == Approx(31.25));
  CHECK(small[11] == 7);  // waves of one CTA per SM: ceil(864 / 132)
  CHECK(small[19] == 4);
  CHECK(small[20] == 2);  // ceil(864 / 528)
  CHECK(small[21] == Approx(864.0 / 1056));
  // Padding: M=100 with BLOCK_M 64 covers 128 rows, K=100 with BLOCK_K 32 covers 128.
  const std::array<float, kTileConfigDim> padded = TritonTileFeatures({"f32", 100, 64, 100}, {64, 64, 32, 4, 2}, h100);
  CHECK(padded[4] == Approx(100.0 * (1 - 100.0 * 64 * 100 / (128.0 * 64 * 128))));
  // A space of the second set computes, checks and names its rows that way.
  TileSpace s = SmallSpace();
  s.gpu = h100.name;
  s.feature_set = 2;
  s.gpu_spec = h100;
  const GemmProblem q{"bf16", 512, 512, 512};
  CHECK(s.Row(q, {64, 128, 32, 4, 2}) == TritonTileFeatures(q, {64, 128, 32, 4, 2}, h100));
  CHECK(s.CheckRow(q, s.Row(q, {64, 128, 32, 4, 2}).data(), "row 0").ok());
  const absl::Status old_row = s.CheckRow(q, TritonTileFeatures(q, {64, 128, 32, 4, 2}, 132).data(), "row 1");
  CHECK_THAT(std::string(old_row.message()), Catch::Contains("row 1: column 3 (CTAs) is 0, but 64x128x32 w4 s2 on "
                                                             "bf16 512x512x512 gives 32"));
}

TEST_CASE("A tile space of the second feature set round-trips with its GPU, and an older one reads as the first", "[tile]") {
  TileSpace s = SmallSpace();
  s.gpu = "NVIDIA H200";
  s.feature_set = 2;
  s.gpu_spec = *FindGpu("NVIDIA H200");
  absl::StatusOr<TileSpace> back = TileSpace::FromJson(s.ToJson(), "space.json");
  REQUIRE(back.ok());
  CHECK(back->feature_set == 2);
  CHECK(back->gpu_spec.shared_memory_per_sm == 228 * 1024);
  CHECK(back->gpu_spec.measured);
  CHECK(back->ToJson() == s.ToJson());
  // Written before the table: no key, the first set, and no gpu_spec written back.
  absl::StatusOr<TileSpace> old = TileSpace::FromJson(SmallSpace().ToJson(), "old.json");
  REQUIRE(old.ok());
  CHECK(old->feature_set == 1);
  CHECK(old->ToJson().find("gpu_spec") == std::string::npos);
  nlohmann::json j = nlohmann::json::parse(s.ToJson());
  j["gpu_spec"].erase("registers_per_sm");
  CHECK_THAT(std::string(TileSpace::FromJson(j.dump(), "x.json").status().message()),
             Catch::Contains("x.json: key 'gpu_spec.registers_per_sm' missing or not an integer"));
  j = nlohmann::json::parse(s.ToJson());
  j["gpu_spec"]["sm_count"] = 114;
  CHECK_THAT(std::string(TileSpace::FromJson(j.dump(), "x.json").status().message()),
             Catch::Contains("gpu_spec describes NVIDIA H200 (114 SMs), but the space was measured on NVIDIA H200 (132 SMs)"));
  j = nlohmann::json::parse(s.ToJson());
  j["gpu_spec"]["shared_memory_per_cta"] = 300 * 1024;
  CHECK_THAT(std::string(TileSpace::FromJson(j.dump(), "x.json").status().message()),
             Catch::Contains("gpu_spec.shared_memory_per_cta must be bytes in 1..shared_memory_per_sm"));
  j["feature_set"] = 3;
  CHECK_THAT(std::string(TileSpace::FromJson(j.dump(), "x.json").status().message()),
             Catch::Contains("x.json: feature_set is 3, expected 1 or 2"));
}

TEST_CASE("A tile row is refused naming the configuration and why: not a candidate, illegal for the dtype, or another problem's", "[tile]") {
  const TileSpace s = SmallSpace();
  const GemmProblem p{"bf16", 512, 512, 512};
  const auto row = [&](const TritonTile& t) { return TritonTileFeatures(p, t, s.sm_count); };
  CHECK(s.CheckRow(p, row({64, 128, 32, 4, 2}).data(), "row 0").ok());
  const absl::Status refused = s.CheckRow(p, row({128, 128, 64, 8, 3}).data(), "tile_configs row 7");
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.message()), Catch::Contains("tile_configs row 7: 128x128x64 w8 s3 is illegal for bf16") &&
                                                 Catch::Contains("compiler refused it"));
  // The same configuration is legal for f32 (refusals are per dtype).
  CHECK(s.CheckRow({"f32", 512, 512, 512}, TritonTileFeatures({"f32", 512, 512, 512}, {128, 128, 64, 8, 3}, 132).data(),
                   "r")
            .ok());
  const absl::Status not_candidate = s.CheckRow(p, row({256, 128, 32, 4, 2}).data(), "row 1");
  CHECK_THAT(std::string(not_candidate.message()), Catch::Contains("256x128x32 w4 s2 is not a candidate"));
  // A row computed for another problem: the grid columns disagree.
  const std::array<float, kTileConfigDim> other = TritonTileFeatures({"bf16", 1024, 512, 512}, {64, 128, 32, 4, 2}, 132);
  const absl::Status wrong = s.CheckRow(p, other.data(), "row 2");
  CHECK_THAT(std::string(wrong.message()),
             Catch::Contains("column 8 (programs along M) is 16, but 64x128x32 w4 s2 on bf16 512x512x512 gives 8"));
  CHECK(s.Legal("bf16").size() == s.Candidates().size() - 1);
  CHECK(s.Legal("f32").size() == s.Candidates().size());
  CHECK(s.Candidates().size() == 3 * 2 * 2 * 2 * 2);
}

TEST_CASE("A problem of a dtype the space never measured is refused, and an older space reads its dtypes from its refusals",
          "[tile]") {
  const TileSpace s = SmallSpace();
  CHECK(s.CheckProblem({"bf16", 128, 256, 512}).ok());
  CHECK(s.CheckProblem({"f32", 128, 256, 512}).ok());  // measured, with no configuration refused
  const absl::Status f16 = s.CheckProblem({"f16", 128, 256, 512});
  CHECK(f16.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(f16.message()),
             Catch::Contains("the problem is f16 128x256x512, but this triton-gemm space was measured on test GPU for "
                             "bf16 and f32 problems only: which f16 configurations the compiler accepts"));
  CHECK_THAT(s.Summary(), Catch::StartsWith("triton-gemm measured on test GPU (132 SMs) for bf16, f32: 48 candidates"));
  // Written before the lists were kept: the dtypes with refusals were the measured ones,
  // each with N and K multiples of 16.
  nlohmann::json old = nlohmann::json::parse(s.ToJson());
  old.erase("dtypes");
  old.erase("variants");
  absl::StatusOr<TileSpace> back = TileSpace::FromJson(old.dump(), "old.json");
  REQUIRE(back.ok());
  CHECK(back->dtypes == std::set<std::string>{"bf16"});
  CHECK(back->variants == std::set<std::string>{"bf16"});
  // Refusals of a variant that was not measured, or no dtype at all, are not a space.
  nlohmann::json stray = nlohmann::json::parse(s.ToJson());
  stray["dtypes"] = {"f32"};
  stray.erase("variants");
  CHECK_THAT(std::string(TileSpace::FromJson(stray.dump(), "x.json").status().message()),
             Catch::Contains("x.json: refused: 'bf16' is not one of the measured variants (f32)"));
  stray["dtypes"] = nlohmann::json::array();
  CHECK_THAT(std::string(TileSpace::FromJson(stray.dump(), "x.json").status().message()),
             Catch::Contains("x.json: dtypes: no measured dtype"));
  stray["dtypes"] = {"bf16", "int8"};
  CHECK_THAT(std::string(TileSpace::FromJson(stray.dump(), "x.json").status().message()),
             Catch::Contains("x.json: dtypes: 'int8' is not bf16, f16 or f32"));
  stray["dtypes"] = "bf16";
  CHECK_THAT(std::string(TileSpace::FromJson(stray.dump(), "x.json").status().message()),
             Catch::Contains("key 'dtypes' missing or not a list of dtype names"));
}

TEST_CASE("N or K not a multiple of 16 is another kernel variant, with refusals of its own, refused where never "
          "measured",
          "[tile]") {
  CHECK(GemmProblem{"bf16", 128, 256, 512}.Variant() == "bf16");
  CHECK(GemmProblem{"bf16", 1000, 700, 700}.Variant() == "bf16/NK");
  CHECK(GemmProblem{"f32", 128, 700, 512}.Variant() == "f32/N");
  CHECK(GemmProblem{"f32", 3000, 256, 700}.Variant() == "f32/K");
  CHECK(GemmProblem{"bf16", 1000, 1024, 1024}.Variant() == "bf16");  // M only sizes the grid
  CHECK(VariantDtype("f32/NK") == "f32");
  CHECK(VariantDtype("bf16") == "bf16");
  CHECK(DescribeVariant("bf16") == "N and K multiples of 16");
  CHECK(DescribeVariant("bf16/K") == "K not a multiple of 16");
  CHECK(DescribeVariant("f32/NK") == "N and K not multiples of 16");

  // A space that measured N and K multiples of 16 only refuses the other kernels.
  TileSpace s = SmallSpace();
  const GemmProblem odd{"bf16", 1000, 700, 700};
  const absl::Status refused = s.CheckProblem(odd);
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.message()),
             Catch::Contains("the problem is bf16 1000x700x700, with N and K not multiples of 16 (kernel variant "
                             "bf16/NK), but this triton-gemm space was measured on test GPU for bf16 (N and K "
                             "multiples of 16) only: the compiler builds another kernel for such sizes"));
  CHECK(s.CheckProblem({"bf16", 1000, 704, 128}).ok());

  // Measured too, with what its compiler refused: 128x128x64 w8 s3 compiles there.
  s.variants.insert("bf16/NK");
  s.refused["bf16/NK"] = {{32, 32, 32, 4, 2}};
  CHECK(s.CheckProblem(odd).ok());
  CHECK(s.CheckProblem({"f32", 1000, 700, 700}).code() == absl::StatusCode::kFailedPrecondition);
  const TritonTile big{128, 128, 64, 8, 3}, small{32, 32, 32, 4, 2};
  CHECK(s.CheckRow(odd, TritonTileFeatures(odd, big, 132).data(), "row 0").ok());
  const absl::Status illegal = s.CheckRow(odd, TritonTileFeatures(odd, small, 132).data(), "row 1");
  CHECK_THAT(std::string(illegal.message()), Catch::Contains("row 1: 32x32x32 w4 s2 is illegal for bf16/NK on test GPU"));
  CHECK_FALSE(s.CheckRow({"bf16", 128, 256, 512}, TritonTileFeatures({"bf16", 128, 256, 512}, big, 132).data(), "r").ok());
  const std::vector<TritonTile> legal = s.Legal("bf16/NK");
  CHECK(legal.size() == s.Candidates().size() - 1);
  CHECK(std::find(legal.begin(), legal.end(), big) != legal.end());
  CHECK_THAT(s.Summary(), Catch::StartsWith("triton-gemm measured on test GPU (132 SMs) for bf16, bf16/NK, f32: 48 "
                                            "candidates; refused by the compiler: bf16 1, bf16/NK 1"));
  absl::StatusOr<TileSpace> back = TileSpace::FromJson(s.ToJson(), "space.json");
  REQUIRE(back.ok());
  CHECK(back->variants == s.variants);
  CHECK(back->refused == s.refused);
  for (const char* bad : {"bf16/KN", "bf16/", "bf16/M", "f16/K", "bf16/NN"}) {
    nlohmann::json j = nlohmann::json::parse(s.ToJson());
    j["variants"] = {"bf16", bad};
    j["refused"].erase("bf16/NK");
    CHECK_THAT(std::string(TileSpace::FromJson(j.dump(), "x.json").status().message()),
               Catch::Contains(std::string("x.json: variants: '") + bad + "' is not a measured dtype (bf16, f32) alone"));
  }

  // One file may measure both kernels: a configuration refused for one is timed for the other.
  absl::StatusOr<TileMeasurements> both = ParseTileCsv(
      "dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms\n"
      "bf16,128,128,128,32,32,32,4,2,refused\nbf16,128,128,128,64,32,32,4,2,0.01\n"
      "bf16,128,128,128,128,32,32,4,2,0.02\n"
      "bf16,128,100,128,32,32,32,4,2,0.02\nbf16,128,100,128,64,32,32,4,2,0.01\n"
      "bf16,128,100,128,128,32,32,4,2,0.03\n",
      "m.csv", "g", 132);
  INFO(both.status().message());
  REQUIRE(both.ok());
  CHECK(both->space.variants == std::set<std::string>{"bf16", "bf16/N"});
  CHECK(both->space.refused.at("bf16") == std::set<TritonTile>{{32, 32, 32, 4, 2}});
  CHECK(both->space.refused.count("bf16/N") == 0);
}

TEST_CASE("A tile space round-trips through JSON, and a bad one is refused naming the key", "[tile]") {
  const TileSpace s = SmallSpace();
  absl::StatusOr<TileSpace> back = TileSpace::FromJson(s.ToJson(), "space.json");
  REQUIRE(back.ok());
  CHECK(back->ToJson() == s.ToJson());
  CHECK(back->refused.at("bf16") == s.refused.at("bf16"));
  CHECK_THAT(std::string(TileSpace::FromJson("[1]", "x.json").status().message()), Catch::Contains("x.json: not a JSON object"));
  std::string no_warps = s.ToJson();
  no_warps.replace(no_warps.find("\"num_warps\""), 11, "\"warps\"");
  CHECK_THAT(std::string(TileSpace::FromJson(no_warps, "x.json").status().message()),
             Catch::Contains("key 'num_warps' missing"));
  TileSpace descending = s;
  descending.block_k = {64, 32};
  CHECK_THAT(std::string(TileSpace::FromJson(descending.ToJson(), "x.json").status().message()),
             Catch::Contains("block_k must list values in 1..65536 in ascending order"));
  TileSpace stray = s;
  stray.refused["f32"] = {{512, 32, 32, 4, 2}};
  CHECK_THAT(std::string(TileSpace::FromJson(stray.ToJson(), "x.json").status().message()),
             Catch::Contains("refused f32: 512x32x32 w4 s2 is not one of the candidates"));
  CHECK(ParseTritonTile("128x64x32 w8 s4")->Name() == "128x64x32 w8 s4");
  CHECK_FALSE(ParseTritonTile("128x64 w8 s4").ok());
}

TEST_CASE("The problem of a real matrix-product HLO module is read from its graph", "[tile][real]") {
  absl::StatusOr<std::string> text = ReadFile(kTiles + "/hlo/gemm_f32_512x4096x256.hlo");
  REQUIRE(text.ok());
  absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(*text, "gemm");
  REQUIRE(module.ok());
  absl::StatusOr<hlo::ModuleGraph> m = hlo::FeaturizeModule(*module, "gemm");
  REQUIRE(m.ok());
  absl::StatusOr<GemmProblem> p = GemmProblemOfGraph(m->graph, "gemm");
  REQUIRE(p.ok());
  CHECK(p->Name() == "f32 512x4096x256");
  // bf16 inputs accumulated into an f32 result (JAX's preferred_element_type) are a bf16
  // problem: the inputs decide the kernel. An A stored transposed is not this kernel.
  const auto problem_of = [](const std::string& a, const std::string& b, const std::string& c,
                             const std::string& contracting) {
    const std::string text = "HloModule m\n\nENTRY main {\n  a = " + a + " parameter(0)\n  b = " + b +
                             " parameter(1)\n  ROOT d = " + c + " dot(a, b), lhs_contracting_dims={" + contracting +
                             "}, rhs_contracting_dims={0}\n}\n";
    absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(text, "dot.hlo");
    REQUIRE(module.ok());
    absl::StatusOr<hlo::ModuleGraph> graph = hlo::FeaturizeModule(*module, "dot.hlo");
    REQUIRE(graph.ok());
    return GemmProblemOfGraph(graph->graph, "dot.hlo");
  };
  absl::StatusOr<GemmProblem> mixed = problem_of("bf16[512,256]{1,0}", "bf16[256,1024]{1,0}", "f32[512,1024]{1,0}", "1");
  REQUIRE(mixed.ok());
  CHECK(mixed->Name() == "bf16 512x1024x256");
  CHECK(problem_of("f16[512,256]{1,0}", "f16[256,1024]{1,0}", "f16[512,1024]{1,0}", "1")->Name() ==
        "f16 512x1024x256");
  CHECK_THAT(std::string(problem_of("bf16[256,512]{1,0}", "bf16[256,1024]{1,0}", "bf16[512,1024]{1,0}", "0")
                             .status()
                             .message()),
             Catch::Contains("dot.hlo: the dot's operand A (parameter 0) is 256 x 512; this kernel reads A as M x K "
                             "with M = 512 (A stored transposed is another kernel)"));
  // B as N x K: x @ W.T with W stored as it is.
  const std::string b_text =
      "HloModule m\n\nENTRY main {\n  a = bf16[512,256]{1,0} parameter(0)\n  b = bf16[1024,256]{1,0} parameter(1)\n"
      "  ROOT d = bf16[512,1024]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n";
  absl::StatusOr<hlo::ModuleGraph> bt = hlo::FeaturizeModule(*hlo::ParseModule(b_text, "bt.hlo"), "bt.hlo");
  REQUIRE(bt.ok());
  CHECK_THAT(std::string(GemmProblemOfGraph(bt->graph, "bt.hlo").status().message()),
             Catch::Contains("bt.hlo: the dot's operand B (parameter 1) is 1024 x 256; this kernel reads B as K x N = "
                             "256 x 1024 (B stored transposed is another kernel)"));
  // A module that is not one matrix product says so.
  absl::StatusOr<std::string> mlp = ReadFile(std::string(TGRAPH_REAL_DATA) + "/hlo/pytorch_xla_mlp_train_step.hlo");
  REQUIRE(mlp.ok());
  absl::StatusOr<hlo::ModuleGraph> g = hlo::FeaturizeModule(*hlo::ParseModule(*mlp, "mlp"), "mlp");
  REQUIRE(g.ok());
  CHECK_THAT(std::string(GemmProblemOfGraph(g->graph, "mlp").status().message()),
             Catch::Contains("mlp: a Triton matrix-product kernel graph has one dot; this one has 2"));
}

TEST_CASE("The real H100 measurements become tile@h100-triton: every timed row, in ns, split by shape", "[tile][real]") {
  const std::string& root = IngestedRoot();
  const Collection c = *ParseCollection("tile@h100-triton");
  absl::StatusOr<TileSpace> space = LoadTileSpace(root + "/npz/tile/@h100-triton");
  REQUIRE(space.ok());
  CHECK(space->refused.at("bf16").size() == 28);
  CHECK(space->refused.at("f32").size() == 90);
  CHECK(space->dtypes == std::set<std::string>{"bf16", "f32"});
  CHECK(space->Candidates().size() == 288);
  CHECK(space->sm_count == 132);
  CHECK(space->feature_set == 2);
  CHECK(space->gpu_spec.name == "NVIDIA H100 80GB HBM3");
  std::map<std::string, std::set<std::string>> shapes;  // split -> M_N_K
  int64_t problems = 0, rows = 0;
  for (const std::string& split : AllSplits()) {
    absl::StatusOr<std::vector<GraphFile>> files = ListSplit(root, c, split);
    REQUIRE(files.ok());
    for (const GraphFile& f : *files) {
      absl::StatusOr<TileGraph> g = LoadTileGraph(f.path);
      REQUIRE(g.ok());
      ++problems;
      rows += g->num_configs;
      absl::StatusOr<GemmProblem> p = GemmProblemOfGraph(g->graph, f.path);
      REQUIRE(p.ok());
      CHECK(hlo::ProblemStem(*p) == f.name);
      CHECK(g->num_configs == (p->dtype == "bf16" ? 260 : 198));
      shapes[split].insert(f.name.substr(f.name.find('_', 5) + 1));
      for (int64_t r = 0; r < g->num_configs; ++r)
        CHECK(space->CheckRow(*p, g->config_feat.data() + r * kTileConfigDim, f.name).ok());
    }
  }
  CHECK(problems == 72);
  CHECK(rows == 16488);
  CHECK(shapes["test"].size() == 6);
  CHECK(shapes["valid"].size() == 6);
  CHECK(shapes["train"].size() == 24);
  for (const std::string& s : shapes["test"]) CHECK(shapes["train"].count(s) + shapes["valid"].count(s) == 0);
  for (const std::string& s : shapes["valid"]) CHECK(shapes["train"].count(s) == 0);
  // One problem's rows against the CSV, read line by line here: runtime = ms x 1e6 ns,
  // normalizer = cuBLAS's time.
  std::string split_of;
  for (const auto& [split, set] : shapes)
    if (set.count("128x256x256")) split_of = split;
  absl::StatusOr<TileGraph> g = LoadTileGraph(root + "/npz/tile/@h100-triton/" + split_of + "/gemm_bf16_128x256x256.npz");
  REQUIRE(g.ok());
  int checked = 0;
  for (int64_t r = 0; r < g->num_configs; r += 37, ++checked) {
    const TritonTile t = TritonTileOfRow(g->config_feat.data() + r * kTileConfigDim);
    CHECK(g->config_runtime[r] == std::llround(CsvMs("bf16", 128, 256, 256, t) * 1e6));
  }
  CHECK(checked == 8);
  CHECK(g->config_runtime[1] == 22645);  // 32x32x32 w4 s3: 0.022645 ms, the CSV's third line
  // Its row carries the H100's occupancy: 32x32x32 w4 s3 on 128x256x256 is 4 x 8 = 32
  // CTAs, 12 resident per SM (registers bind, as above), one wave of 1,584 slots.
  CHECK(TritonTileOfRow(g->config_feat.data() + kTileConfigDim) == TritonTile{32, 32, 32, 4, 3});
  CHECK(g->config_feat[kTileConfigDim + 3] == 32);
  CHECK(g->config_feat[kTileConfigDim + 19] == 12);
  CHECK(g->config_feat[kTileConfigDim + 20] == 1);
  CHECK(g->config_feat[kTileConfigDim + 21] == Approx(32.0 / 1584));
  CHECK(g->config_runtime_normalizers[0] == 21613);  // cuBLAS: 0.021613 ms
  // Refused configurations are not rows.
  for (int64_t r = 0; r < g->num_configs; ++r)
    CHECK(space->refused.at("bf16").count(TritonTileOfRow(g->config_feat.data() + r * kTileConfigDim)) == 0);
}

TEST_CASE("The split seed chooses other test shapes, and an existing collection is never overwritten", "[tile][real]") {
  TempDir dir;
  hlo::TileIngestOptions o;
  o.csv = kTiles + "/triton_gemm_h100.csv";
  o.hlo_dir = kTiles + "/hlo";
  o.out_root = dir.path();
  o.split_seed = 1;
  REQUIRE(hlo::IngestTileMeasurements(o).ok());
  const Collection c = *ParseCollection("tile@h100-triton");
  std::set<std::string> seed1, seed0;
  const absl::StatusOr<std::vector<GraphFile>> test1 = ListSplit(dir.path(), c, "test");
  const absl::StatusOr<std::vector<GraphFile>> test0 = ListSplit(IngestedRoot(), c, "test");
  REQUIRE((test1.ok() && test0.ok()));
  for (const GraphFile& f : *test1) seed1.insert(f.name);
  for (const GraphFile& f : *test0) seed0.insert(f.name);
  CHECK(seed1.size() == 12);
  CHECK(seed1 != seed0);
  const absl::StatusOr<hlo::TileIngestSummary> again = hlo::IngestTileMeasurements(o);
  CHECK(again.status().code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("Seed 0 holds out the shapes docs/results.md reports on, and a dtype or the largest shapes can be held out instead", "[tile][real]") {
  const Collection c = *ParseCollection("tile@h100-triton");
  const auto names = [&](const std::string& root, const std::string& split) {
    std::set<std::string> out;
    const absl::StatusOr<std::vector<GraphFile>> files = ListSplit(root, c, split);
    REQUIRE(files.ok());
    for (const GraphFile& f : *files) out.insert(f.name);
    return out;
  };
  std::set<std::string> want;
  for (const char* shape : {"2048x256x1024", "2048x4096x4096", "512x256x4096", "512x4096x256", "8192x256x256", "8192x256x4096"})
    for (const char* dtype : {"bf16", "f32"}) want.insert(std::string("gemm_") + dtype + "_" + shape);
  CHECK(names(IngestedRoot(), "test") == want);

  const auto ingest = [&](const TempDir& dir, const std::string& hold_out) {
    hlo::TileIngestOptions o;
    o.csv = kTiles + "/triton_gemm_h100.csv";
    o.hlo_dir = kTiles + "/hlo";
    o.out_root = dir.path();
    o.hold_out = hold_out;
    return hlo::IngestTileMeasurements(o);
  };
  TempDir f32;
  REQUIRE(ingest(f32, "f32").ok());
  const std::set<std::string> test = names(f32.path(), "test");
  CHECK(test.size() == 36);
  for (const std::string& n : test) CHECK(n.rfind("gemm_f32_", 0) == 0);
  const std::set<std::string> valid = names(f32.path(), "valid"), train = names(f32.path(), "train");
  CHECK(valid.size() == 6);
  CHECK(train.size() == 30);
  for (const std::string& n : valid) CHECK(n.rfind("gemm_bf16_", 0) == 0);
  for (const std::string& n : train) CHECK(n.rfind("gemm_bf16_", 0) == 0);

  TempDir largest;
  REQUIRE(ingest(largest, "largest").ok());
  // The six shapes of the most multiply-adds (8192x4096x4096 first): no train or valid
  // shape is larger than any of them.
  const auto macs = [](const std::string& name) {
    const std::vector<std::string> d = absl::StrSplit(name.substr(name.find('_', 5) + 1), 'x');
    return std::stod(d[0]) * std::stod(d[1]) * std::stod(d[2]);
  };
  double smallest_test = 1e30, largest_other = 0;
  for (const std::string& n : names(largest.path(), "test")) smallest_test = std::min(smallest_test, macs(n));
  for (const char* split : {"train", "valid"})
    for (const std::string& n : names(largest.path(), split)) largest_other = std::max(largest_other, macs(n));
  CHECK(names(largest.path(), "test").size() == 12);
  CHECK(smallest_test >= largest_other);

  TempDir bad;
  const absl::StatusOr<hlo::TileIngestSummary> s = ingest(bad, "f16");
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.status().message()), Catch::Contains("hold_out 'f16': expected shape, largest or a dtype of"));
  CHECK_THAT(std::string(s.status().message()), Catch::Contains("(bf16, f32)"));
}

TEST_CASE("Problems measured apart become the test split, every problem of the main file training", "[tile][real]") {
  // The real CSV cut in two: three shapes (both dtypes) as if measured later.
  TempDir dir;
  const std::set<std::string> later = {"512,4096,256", "2048,256,1024", "8192,256,4096"};
  std::ifstream in(kTiles + "/triton_gemm_h100.csv");
  std::ofstream main_csv(dir.path() + "/main.csv"), new_csv(dir.path() + "/new.csv");
  std::string line;
  std::getline(in, line);
  main_csv << line << "\n";
  new_csv << line << "\n";
  int64_t new_lines = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    const bool is_new = later.count(absl::StrCat(f[1], ",", f[2], ",", f[3])) > 0;
    (is_new ? new_csv : main_csv) << line << "\n";
    new_lines += is_new;
  }
  main_csv.close();
  new_csv.close();
  CHECK(new_lines == 6 * 289);  // 288 candidates and cuBLAS, per problem
  hlo::TileIngestOptions o;
  o.csv = dir.path() + "/main.csv";
  o.hlo_dir = kTiles + "/hlo";
  o.test_csv = dir.path() + "/new.csv";
  o.test_hlo_dir = kTiles + "/hlo";
  o.out_root = dir.path() + "/root";
  const absl::StatusOr<hlo::TileIngestSummary> s = hlo::IngestTileMeasurements(o);
  REQUIRE(s.ok());
  CHECK(s->problems.at("test") == 6);
  CHECK(s->problems.at("valid") == 12);  // 6 shapes, both dtypes
  CHECK(s->problems.at("train") == 54);
  CHECK(s->configs.at("test") == 3 * (260 + 198));
  const Collection c = *ParseCollection("tile@h100-triton");
  std::set<std::string> test;
  const absl::StatusOr<std::vector<GraphFile>> files = ListSplit(o.out_root, c, "test");
  REQUIRE(files.ok());
  for (const GraphFile& f : *files) test.insert(f.name);
  CHECK(test == std::set<std::string>{"gemm_bf16_512x4096x256", "gemm_f32_512x4096x256", "gemm_bf16_2048x256x1024",
                                      "gemm_f32_2048x256x1024", "gemm_bf16_8192x256x4096", "gemm_f32_8192x256x4096"});
  absl::StatusOr<TileSpace> space = LoadTileSpace(o.out_root + "/npz/tile/@h100-triton");
  REQUIRE(space.ok());
  CHECK(space->refused.at("f32").size() == 90);

  // A problem in both files, another split asked for, or no such file: refused, nothing written.
  hlo::TileIngestOptions both = o;
  both.test_csv = kTiles + "/triton_gemm_h100.csv";
  both.out_root = dir.path() + "/both";
  CHECK_THAT(std::string(hlo::IngestTileMeasurements(both).status().message()),
             Catch::Contains("triton_gemm_h100.csv: bf16 128x256x256 is measured in " + o.csv +
                             " too: a problem is never in two splits"));
  hlo::TileIngestOptions dtype = both;
  dtype.test_csv = o.test_csv;
  dtype.hold_out = "f32";
  CHECK_THAT(std::string(hlo::IngestTileMeasurements(dtype).status().message()),
             Catch::Contains("hold_out 'f32' and test_csv"));
  dtype.hold_out = "shape";
  dtype.test_csv = dir.path() + "/missing.csv";
  CHECK_THAT(std::string(hlo::IngestTileMeasurements(dtype).status().message()), Catch::Contains("missing.csv"));
  CHECK_FALSE(fs::exists(dir.path() + "/both"));
}

TEST_CASE("A test file of another kernel, GPU or dtype than the main file's is refused naming what differs", "[tile]") {
  TempDir dir;
  const std::string header = "dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms\n";
  const auto write = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir.path() + "/" + name) << header << body;
    return dir.path() + "/" + name;
  };
  // bf16 only; candidates block_m 32, 64 and block_k 32, 64; 64x32x32 w4 s2 refused.
  const auto problem = [](const std::string& mnk, const std::string& refused_64x32x32) {
    return "bf16," + mnk + ",32,32,32,4,2,0.01\nbf16," + mnk + ",32,32,64,4,2,0.02\nbf16," + mnk + ",64,32,32,4,2," +
           refused_64x32x32 + "\nbf16," + mnk + ",64,32,64,4,2,0.03\n";
  };
  const std::string main_csv =
      write("main.csv", problem("128,128,128", "refused") + problem("256,128,128", "refused") + problem("512,128,128", "refused"));
  hlo::TileIngestOptions o;
  o.csv = main_csv;
  o.hlo_dir = dir.path();
  o.out_root = dir.path() + "/root";
  o.valid_shapes = 1;
  const auto error = [&](const std::string& test_body) {
    o.test_csv = write("new.csv", test_body);
    return std::string(hlo::IngestTileMeasurements(o).status().message());
  };
  // A file that agrees gets as far as the modules (none here).
  CHECK_THAT(error(problem("1024,128,128", "refused")), Catch::Contains("gemm_bf16_128x128x128.hlo"));
  CHECK_THAT(error(problem("1024,128,128", "0.05")),
             Catch::Contains("new.csv: 64x32x32 w4 s2 of bf16 is timed here but refused in " + main_csv));
  CHECK_THAT(error(problem("1024,128,128", "refused") + "bf16,1024,128,128,128,32,32,4,2,refused\n" +
                   "bf16,1024,128,128,128,32,64,4,2,refused\n"),
             Catch::Contains("new.csv: block_m takes 32, 64, 128, where " + main_csv + " has 32, 64"));
  std::string f32 = problem("1024,128,128", "refused");
  absl::StrReplaceAll({{"bf16", "f32"}}, &f32);
  CHECK_THAT(error(f32),
             Catch::Contains("new.csv: dtype f32 has no problem in " + main_csv + " (bf16)"));
  CHECK_THAT(error(problem("256,128,128", "refused")),
             Catch::Contains("new.csv: bf16 256x128x128 is measured in " + main_csv + " too"));
  // K not a multiple of 16: another kernel, which the main file never measured.
  CHECK_THAT(error(problem("1000,128,700", "refused")),
             Catch::Contains("new.csv: kernel variant bf16/K (K not a multiple of 16) has no problem in " + main_csv +
                             " (bf16): the compiler builds another kernel for it"));
  CHECK_FALSE(fs::exists(dir.path() + "/root"));
}

TEST_CASE("The real H200 measurements hold both kernel variants, each with the refusals its compiler made", "[tile][real]") {
  const std::string h200 = std::string(TGRAPH_REAL_DATA) + "/gpu-tiles-h200";
  TempDir dir;
  hlo::TileIngestOptions o;
  o.name = "h200-triton";
  o.gpu = "NVIDIA H200";
  o.csv = h200 + "/triton_gemm_h200.csv";
  o.hlo_dir = h200 + "/hlo";
  o.out_root = dir.path();
  const absl::StatusOr<hlo::TileIngestSummary> s = hlo::IngestTileMeasurements(o);
  INFO(s.status().message());
  REQUIRE(s.ok());
  CHECK(s->problems.at("train") + s->problems.at("valid") + s->problems.at("test") == 184);
  absl::StatusOr<TileSpace> space = LoadTileSpace(s->collection_dir);
  REQUIRE(space.ok());
  CHECK(space->variants == std::set<std::string>{"bf16", "bf16/NK", "f32", "f32/NK"});
  CHECK(space->refused.at("bf16").size() == 28);
  CHECK(space->refused.at("f32").size() == 90);
  CHECK(space->refused.count("bf16/NK") == 0);  // every bf16 candidate compiles
  CHECK(space->refused.at("f32/NK").size() == 92);
  for (const TritonTile& t : {TritonTile{256, 256, 32, 8, 2}, TritonTile{256, 256, 32, 8, 3}})
    CHECK((space->refused.at("f32/NK").count(t) == 1 && space->refused.at("f32").count(t) == 0));
  // A problem of each variant: its graph holds every configuration its compiler accepts.
  std::map<std::string, int64_t> configs;
  for (const std::string& split : {"train", "valid", "test"}) {
    const absl::StatusOr<std::vector<GraphFile>> files = ListSplit(o.out_root, *ParseCollection("tile@h200-triton"), split);
    REQUIRE(files.ok());
    for (const GraphFile& f : *files)
      if (f.name == "gemm_bf16_1000x700x700" || f.name == "gemm_f32_1000x700x700" || f.name == "gemm_bf16_256x512x512")
        configs[f.name] = LoadTileGraph(f.path)->num_configs;
  }
  CHECK(configs == std::map<std::string, int64_t>{
                       {"gemm_bf16_1000x700x700", 288}, {"gemm_f32_1000x700x700", 196}, {"gemm_bf16_256x512x512", 260}});
  // M alone not a multiple of 16 is the same kernel: a file of such problems (and of M
  // 6000) refuses exactly what the main file refuses for N and K multiples of 16, and
  // tests a model of it.
  hlo::TileIngestOptions m = o;
  m.test_csv = h200 + "/m_h200.csv";
  m.out_root = dir.path() + "/m";
  const absl::StatusOr<hlo::TileIngestSummary> ms = hlo::IngestTileMeasurements(m);
  INFO(ms.status().message());
  REQUIRE(ms.ok());
  CHECK(ms->problems.at("test") == 32);
  // The H100 file's space refuses the other variant's problems.
  absl::StatusOr<TileSpace> h100 = LoadTileSpace(IngestedRoot() + "/npz/tile/@h100-triton");
  REQUIRE(h100.ok());
  CHECK(h100->CheckProblem({"bf16", 1000, 700, 700}).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(h100->CheckProblem({"bf16", 1024, 512, 2048}).ok());
}

TEST_CASE("Bad tile measurements are refused naming the file, the line and the column", "[tile]") {
  const auto parse = [](const std::string& body) {
    return ParseTileCsv("dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms\n" + body, "m.csv", "g", 132);
  };
  CHECK_THAT(std::string(ParseTileCsv("dtype,M,N\n", "m.csv", "g", 132).status().message()),
             Catch::Contains("m.csv:1: header: is 'dtype,M,N', expected"));
  CHECK_THAT(std::string(parse("bf16,128,256,x,32,32,32,4,2,0.1\n").status().message()),
             Catch::Contains("m.csv:2: K: 'x' is not a positive integer"));
  CHECK_THAT(std::string(parse("bf16,128,256,256,32,32,32,4,2,-1\n").status().message()),
             Catch::Contains("m.csv:2: ms: '-1' is not a time in milliseconds"));
  CHECK_THAT(std::string(parse("bf16,1,1,1,32,32,32,4,2,refused\nbf16,2,2,2,32,32,32,4,2,0.1\n").status().message()),
             Catch::Contains("m.csv:3: ms: 32x32x32 w4 s2 is timed here but refused on line 2: a configuration is "
                             "legal or illegal for the whole kernel variant (bf16/NK: bf16, N and K not multiples of "
                             "16)"));
  CHECK_THAT(std::string(parse("bf16,1,1,1,32,32,32,4,2,refused\nbf16,1,1,1,32,32,32,4,2,refused\n").status().message()),
             Catch::Contains("m.csv:3: row: 32x32x32 w4 s2 of bf16 1x1x1 appears twice"));
  // Timed again: repeated measurements, their median kept (of two, the mean).
  absl::StatusOr<TileMeasurements> repeats =
      parse("bf16,1,1,1,32,32,32,4,2,0.1\nbf16,1,1,1,32,32,32,4,2,0.25\nbf16,1,1,1,32,32,32,4,3,0.3\n"
            "bf16,1,1,1,32,32,32,4,3,0.1\nbf16,1,1,1,32,32,32,4,3,0.2\nbf16,1,1,1,64,32,32,4,2,0.4\n"
            "bf16,1,1,1,64,32,32,4,3,0.4\n");
  REQUIRE(repeats.ok());
  CHECK(repeats->problems[0].runtime_ns.at({32, 32, 32, 4, 2}) == 175000);
  CHECK(repeats->problems[0].runtime_ns.at({32, 32, 32, 4, 3}) == 200000);
  CHECK(repeats->problems[0].repeated == 2);
  // bf16 1x1x1 lacks 64x32x32 w4 s2, which the other problem names.
  CHECK_THAT(std::string(parse("bf16,1,1,1,32,32,32,4,2,0.1\nbf16,1,1,1,32,32,32,4,3,0.1\n"
                               "bf16,2,2,2,32,32,32,4,2,0.1\nbf16,2,2,2,32,32,32,4,3,0.1\n"
                               "bf16,2,2,2,64,32,32,4,2,0.1\nbf16,2,2,2,64,32,32,4,3,0.1\n"
                               "bf16,1,1,1,64,32,32,4,3,0.1\n")
                             .status()
                             .message()),
             Catch::Contains("bf16 1x1x1 has 3 of the 4 candidate configurations"));
  absl::StatusOr<TileMeasurements> ok = parse("f32,8,8,8,32,32,32,4,2,0.001\nf32,8,8,8,32,32,32,4,3,0.0025\n"
                                                   "f32,8,8,8,cublas,,,,,0.002\n");
  REQUIRE(ok.ok());
  CHECK(ok->problems[0].runtime_ns.at({32, 32, 32, 4, 3}) == 2500);
  CHECK(ok->problems[0].library_ns == 2000);
}

TEST_CASE("An HLO module that computes another problem than its measurements is refused, and nothing is written", "[tile]") {
  TempDir dir;
  fs::create_directories(dir.path() + "/hlo");
  const std::string csv = dir.path() + "/m.csv";
  std::ofstream(csv) << "dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms\n"
                        "bf16,128,256,256,32,32,32,4,2,0.01\nbf16,128,256,256,32,32,32,4,3,0.02\n"
                        "bf16,512,256,256,32,32,32,4,2,0.01\nbf16,512,256,256,32,32,32,4,3,0.02\n";
  fs::copy_file(kTiles + "/hlo/gemm_bf16_128x256x256.hlo", dir.path() + "/hlo/gemm_bf16_128x256x256.hlo");
  fs::copy_file(kTiles + "/hlo/gemm_bf16_128x256x256.hlo", dir.path() + "/hlo/gemm_bf16_512x256x256.hlo");
  hlo::TileIngestOptions o;
  o.csv = csv;
  o.hlo_dir = dir.path() + "/hlo";
  o.out_root = dir.path() + "/root";
  o.test_shapes = 1;
  o.valid_shapes = 0;
  const absl::StatusOr<hlo::TileIngestSummary> s = hlo::IngestTileMeasurements(o);
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("gemm_bf16_512x256x256.hlo: the module computes bf16 128x256x256, but its measurements "
                             "are of bf16 512x256x256"));
  CHECK_FALSE(fs::exists(dir.path() + "/root"));
}

TEST_CASE("Measurements of a GPU the table does not have are refused naming the table, and nothing is written", "[tile]") {
  TempDir dir;
  hlo::TileIngestOptions o;
  o.csv = kTiles + "/triton_gemm_h100.csv";
  o.hlo_dir = kTiles + "/hlo";
  o.out_root = dir.path() + "/root";
  o.gpu = "NVIDIA H100";  // not the name the CUDA runtime gives the SXM part
  const absl::StatusOr<hlo::TileIngestSummary> s = hlo::IngestTileMeasurements(o);
  CHECK(s.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("GPU 'NVIDIA H100' is not in the table of GPUs (model/tile/gpu_table.cc"));
  CHECK_FALSE(fs::exists(dir.path() + "/root"));
  // The first feature set, for comparison: the same rows with the GPU's slots at 0.
  o.gpu = "NVIDIA H100 80GB HBM3";
  o.feature_set = 1;
  REQUIRE(hlo::IngestTileMeasurements(o).ok());
  absl::StatusOr<TileSpace> space = LoadTileSpace(o.out_root + "/npz/tile/@h100-triton");
  REQUIRE(space.ok());
  CHECK(space->feature_set == 1);
}

TEST_CASE("Orders made outside tgraph are read per problem and scored as a baseline, hand-computed", "[tile]") {
  absl::StatusOr<ExternalTileOrders> o = ParseTileOrders(
      "# method: a heuristic\n# made by hand\np1\t64x64x32 w4 s3\np1\t32x32x32 w4 s2\n\np2\t32x32x32 w4 s2\n",
      "o.tsv");
  REQUIRE(o.ok());
  CHECK(o->method == "a heuristic");
  CHECK(o->orders.at("p1") == std::vector<TritonTile>{{64, 64, 32, 4, 3}, {32, 32, 32, 4, 2}});
  // Rows A, B, C of 3, 1 and 2 ns: p1 lists B then A, so C (unlisted) comes last; p2 lists
  // A first.
  const TritonTile a{32, 32, 32, 4, 2}, b{64, 64, 32, 4, 3}, c{128, 64, 32, 4, 3};
  CHECK(ExternalOrderScores(o->orders.at("p1"), {a, b, c}) == std::vector<double>{1, 0, 4});
  KnownTileProblem p1{"p1", {"bf16", 64, 64, 64}, {a, b, c}, {3, 1, 2}}, p2{"p2", {"bf16", 64, 64, 64}, {a, b, c}, {3, 1, 2}};
  absl::StatusOr<MethodReport> m = ExternalOrderReport(*o, {p1, p2}, "tile@x", "test", "o.tsv");
  REQUIRE(m.ok());
  CHECK(m->method == "a heuristic");
  CHECK(m->report.graphs[0].top_error[0] == Approx(0));      // B, the fastest, first
  CHECK(m->report.graphs[0].to_within == 1);
  CHECK(m->report.graphs[1].top_error[0] == Approx(2));      // A: 3 / 1 - 1
  CHECK(m->report.graphs[1].to_within == 2);                 // then B and C unlisted, in row order: B second
  KnownTileProblem p3{"p3", {"f32", 8, 8, 8}, {a}, {1}};
  const absl::Status missing = ExternalOrderReport(*o, {p3}, "tile@x", "test", "o.tsv").status();
  CHECK(missing.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(missing.message()), Catch::Contains("o.tsv: no order of problem p3 (f32 8x8x8) of tile@x test"));
  const auto error = [](const std::string& text) { return std::string(ParseTileOrders(text, "o.tsv").status().message()); };
  CHECK_THAT(error("p1\t32x32x32 w4 s2\n"), Catch::Contains("o.tsv:1: expected '# method: NAME' first"));
  CHECK_THAT(error("# method:  \n"), Catch::Contains("o.tsv:1: the method's name is empty"));
  CHECK_THAT(error("# method: m\np1 32x32x32 w4 s2\n"), Catch::Contains("o.tsv:2: expected PROBLEM<TAB>CONFIGURATION, got 1"));
  CHECK_THAT(error("# method: m\np1\t32x32 w4 s2\n"), Catch::Contains("o.tsv:2: '32x32 w4 s2' is not a tile configuration"));
  CHECK_THAT(error("# method: m\np1\t32x32x32 w4 s2\np1\t32x32x32 w4 s2\n"),
             Catch::Contains("o.tsv:3: 32x32x32 w4 s2 is listed twice for p1"));
  CHECK_THAT(error(""), Catch::Contains("o.tsv:1: expected '# method: NAME' first"));
}

TEST_CASE("Measurements to within 1% and random order's expectations, hand-computed", "[tile][metrics]") {
  // Runtimes 100, 100.5, 103, 200; scores put 200 first, then 103, then 100.5.
  const std::vector<double> r = {100, 100.5, 103, 200};
  CHECK(MeasurementsToWithin({4, 3, 2, 1}, r, 0.01) == 3);  // 200, 103, then 100.5 (within 1%)
  CHECK(MeasurementsToWithin({1, 2, 3, 4}, r, 0.01) == 1);
  CHECK(MeasurementsToWithin({4, 3, 2, 1}, r, 0.0) == 4);
  CHECK(std::isnan(MeasurementsToWithin({1, 2}, {0, 0})));
  // Random order: 2 of 4 within 1% -> (4 + 1) / (2 + 1).
  CHECK(ExpectedRandomMeasurementsToWithin(r, 0.01) == Approx(5.0 / 3.0));
  // k = 2 of {1, 2, 3}: the minimum is 1 with probability 2/3, else 2: E = 4/3.
  CHECK(ExpectedRandomTopKError({3, 1, 2}, 2) == Approx(1.0 / 3.0));
  CHECK(ExpectedRandomTopKError({3, 1, 2}, 1) == Approx(1.0));  // mean 2 over best 1
  CHECK(ExpectedRandomTopKError({3, 1, 2}, 3) == Approx(0.0));
  CHECK(FiniteMedian({3, std::nan(""), 1, 2, 10}) == 2.5);
}

TEST_CASE("Tile baselines: the nearest problem of the dtype, mean slowdown, nearby problems, the fixed default first", "[tile]") {
  const TritonTile a{32, 32, 32, 4, 2}, b{64, 64, 32, 4, 2}, d = kFixedDefaultTile;
  const std::vector<TritonTile> tiles = {a, b, d};
  const auto problem = [&](const char* name, GemmProblem p, std::vector<double> runtime) {
    KnownTileProblem k;
    k.name = name;
    k.problem = std::move(p);
    k.tiles = tiles;
    k.runtime = std::move(runtime);
    return k;
  };
  std::vector<KnownTileProblem> known;
  known.push_back(problem("near", {"bf16", 128, 256, 256}, {10, 20, 40}));    // a fastest
  known.push_back(problem("far", {"bf16", 8192, 4096, 4096}, {40, 10, 20}));  // b fastest
  known.push_back(problem("f32", {"f32", 128, 256, 512}, {30, 20, 10}));      // another dtype: never used for bf16
  const TileBaselines base(known);
  const GemmProblem p{"bf16", 128, 256, 512};
  REQUIRE(base.Nearest(p) != nullptr);
  CHECK(base.Nearest(p)->name == "near");  // distance 1 (K) against 1 + 5 + 4
  CHECK(base.Scores(TileBaseline::kNearestProblem, p, tiles) == std::vector<double>{10, 20, 40});
  // Mean log slowdowns over bf16: a (0 + log 4) / 2, b (log 2 + 0) / 2, d (log 4 + log 2) / 2.
  const std::vector<double> mean = base.Scores(TileBaseline::kMeanSlowdown, p, tiles);
  CHECK(mean[0] == Approx(std::log(4.0) / 2));
  CHECK(mean[1] == Approx(std::log(2.0) / 2));
  CHECK(mean[2] == Approx(std::log(8.0) / 2));
  // Nearby problems: "far" is at squared log2 distance 6^2 + 4^2 + 3^2 = 61 against 1, a
  // relative weight of exp(-30): the order is "near"'s.
  const std::vector<double> nearby = base.Scores(TileBaseline::kNearbySlowdown, p, tiles);
  CHECK(RankByScore(nearby) == std::vector<int64_t>{0, 1, 2});
  CHECK(nearby[1] == Approx(std::log(2.0)).epsilon(1e-9));
  // A dtype nothing measured: every dtype's problems stand in (the nearest is "f32" at
  // distance 0; the mean over all three problems).
  const GemmProblem f16{"f16", 128, 256, 512};
  REQUIRE(base.Nearest(f16) != nullptr);
  CHECK(base.Nearest(f16)->name == "f32");
  CHECK(base.Scores(TileBaseline::kMeanSlowdown, f16, tiles)[0] == Approx((0 + std::log(4.0) + std::log(3.0)) / 3));
  CHECK(TileBaselines({}).Scores(TileBaseline::kMeanSlowdown, f16, tiles) == std::vector<double>{0, 0, 0});
  const std::vector<double> fixed = base.Scores(TileBaseline::kFixedDefault, p, tiles);
  CHECK(RankByScore(fixed) == std::vector<int64_t>{2, 1, 0});
  // The reports over one evaluated problem whose runtimes are 12, 11, 30.
  const std::vector<MethodReport> reports = TileBaselineReports(base, {problem("p", p, {12, 11, 30})}, "tile@x", "test");
  REQUIRE(reports.size() == 5);
  CHECK(reports[0].method == "nearest problem");
  CHECK(reports[0].report.median.top_error[0] == Approx(12.0 / 11 - 1));  // a first
  CHECK(reports[1].report.median.top_error[0] == Approx(0.0));            // b first
  CHECK(reports[2].method == "nearby problems' slowdown");
  CHECK(reports[2].report.median.top_error[0] == Approx(12.0 / 11 - 1));  // a first, as "near"
  CHECK(reports[3].report.median.top_error[0] == Approx(30.0 / 11 - 1));  // the default first
  CHECK(reports[3].report.median.to_within == 2);
  CHECK(reports[4].method == "random order (expected)");
  CHECK(reports[4].report.median.to_within == Approx(4.0 / 2.0));
  // The tables: medians (tau, top-1, top-3, top-5, top-10, to 1%, mean) and the worst
  // problem's (top-1, top-3, top-5, to 1%); one problem, so both are its own figures.
  // The default first: 30 / 11; best of its 3: 11 / 11; to 1%: 2 measurements.
  const std::vector<std::string> lines = absl::StrSplit(TileComparisonTable(reports), '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 12);
  const std::vector<std::string> fixed_median = absl::StrSplit(lines[4], ' ', absl::SkipEmpty());
  CHECK(std::vector<std::string>(fixed_median.end() - 6, fixed_median.end()) ==
        std::vector<std::string>{"2.727", "1.000", "1.000", "1.000", "2.0", "2.0"});
  CHECK_THAT(lines[6], Catch::StartsWith("method (the worst problem)"));
  const std::vector<std::string> fixed_worst = absl::StrSplit(lines[10], ' ', absl::SkipEmpty());
  CHECK(std::vector<std::string>(fixed_worst.end() - 4, fixed_worst.end()) ==
        std::vector<std::string>{"2.727", "1.000", "1.000", "2.0"});
  // Random order: expected best of 1 (12 + 11 + 30) / 3 over 11, of 3 the fastest.
  const std::vector<std::string> random_worst = absl::StrSplit(lines[11], ' ', absl::SkipEmpty());
  CHECK(std::vector<std::string>(random_worst.end() - 4, random_worst.end()) ==
        std::vector<std::string>{absl::StrFormat("%.3f", 53.0 / 33), "1.000", "1.000", "2.0"});
}

TEST_CASE("Measured problems of the same kernel variant stand in before nearer ones of another variant", "[tile]") {
  const TritonTile a{32, 32, 32, 4, 2}, b{64, 64, 32, 4, 2};
  const KnownTileProblem aligned{"aligned", {"bf16", 1024, 1024, 1024}, {a, b}, {10, 20}};  // a fastest
  const KnownTileProblem odd{"odd", {"bf16", 100, 100, 100}, {a, b}, {30, 10}};             // b fastest, 3x
  const KnownTileProblem f32{"f32", {"f32", 1000, 1000, 1000}, {a, b}, {10, 40}};
  const TileBaselines base({aligned, odd, f32});
  // 1000^3 is nearest aligned's shape, but its kernel is odd's: only odd counts.
  const GemmProblem p{"bf16", 1000, 1000, 1000};
  REQUIRE(base.Nearest(p) != nullptr);
  CHECK(base.Nearest(p)->name == "odd");
  const std::vector<double> near = base.slowdowns().Near(p, ShapeBandwidth{});
  CHECK(near[0] == Approx(std::log(3.0)));
  CHECK(near[1] == Approx(0.0));
  // An aligned problem: aligned alone.
  CHECK(base.Nearest({"bf16", 2048, 2048, 2048})->name == "aligned");
  CHECK(base.slowdowns().Near({"bf16", 2048, 2048, 2048}, ShapeBandwidth{})[1] == Approx(std::log(2.0)));
  // A variant nothing measured (bf16/K): the dtype's problems, both variants.
  CHECK(base.slowdowns().Near({"bf16", 1024, 1024, 1000}, ShapeBandwidth{0, 0, 0})[0] == Approx(std::log(3.0) / 2));
  CHECK(TileKinship(odd.problem, p) == 2);
  CHECK(TileKinship(aligned.problem, p) == 1);
  CHECK(TileKinship(f32.problem, p) == 0);
}

TEST_CASE("Measured slowdowns near a problem weigh each measured problem by its shape's distance", "[tile]") {
  const TritonTile a{32, 32, 32, 4, 2}, b{64, 64, 32, 4, 2}, c{128, 64, 32, 4, 2};
  KnownTileProblem p1{"p1", {"bf16", 128, 128, 128}, {a, b}, {10, 20}};
  KnownTileProblem p2{"p2", {"bf16", 256, 128, 128}, {a, b, c}, {20, 10, 40}};
  KnownTileProblem hidden{"hidden", {"bf16", 128, 128, 128}, {a, b}, {0, 0}};  // a test file: left out
  const MeasuredSlowdowns m({p1, p2, hidden});
  CHECK(m.tiles() == std::vector<TritonTile>{a, b, c});
  REQUIRE(m.problems().size() == 2);
  // At p1's shape p2 (one doubling away) weighs exp(-1/2); c only p2 measured.
  const double w = std::exp(-0.5), ln2 = std::log(2.0);
  // One bandwidth of 1 along log2 (M, N, K): at p1's shape p2 (one doubling away) weighs
  // exp(-1/2); c only p2 measured.
  const ShapeBandwidth one = ShapeBandwidth::Isotropic(1.0);
  const std::vector<double> near = m.Near({"bf16", 128, 128, 128}, one);
  CHECK(near[0] == Approx(w * ln2 / (1 + w)));
  CHECK(near[1] == Approx(ln2 / (1 + w)));
  CHECK(near[2] == Approx(2 * ln2));
  // Bandwidth 0: a plain mean. Bandwidth 2: a doubling weighs exp(-1/8).
  CHECK(m.Near({"bf16", 128, 128, 128}, ShapeBandwidth{0, 0, 0})[0] == Approx(ln2 / 2));
  CHECK(m.Near({"bf16", 128, 128, 128}, ShapeBandwidth::Isotropic(2.0))[0] == Approx(std::exp(-0.125) * ln2 / (1 + std::exp(-0.125))));
  // Far from both (2^39 and 2^40 larger in M): weights relative to the nearest (p2), no
  // underflow to 0/0.
  const std::vector<double> far = m.Near({"bf16", int64_t{1} << 47, 128, 128}, ShapeBandwidth::Isotropic(0.25));
  CHECK(far[0] == Approx(ln2));
  CHECK(far[1] == Approx(0.0).margin(1e-12));
  // A dtype nothing measured: every dtype's problems.
  CHECK(m.Near({"f32", 256, 128, 128}, one)[1] == Approx(w * ln2 / (1 + w)));
  // Leaving p1's shape out: p2 alone (and a dtype nothing else has falls back to all).
  CHECK(m.Near({"bf16", 128, 128, 128}, one, /*leave_shape_out=*/true)[0] == Approx(ln2));
  CHECK(m.Near({"bf16", 256, 128, 128}, one, /*leave_shape_out=*/true)[1] == Approx(ln2));
  // A configuration only another dtype's problem measured: NaN for this one.
  const KnownTileProblem f32{"f32", {"f32", 128, 128, 128}, {c}, {5}};
  // The default axes: M doubled moves log2 (M N) by 1 (bandwidth 0.75) and log2 (M / N)
  // by 1 (bandwidth 2): d^2 = 16/9 + 1/4.
  const double wd = std::exp(-(16.0 / 9 + 0.25) / 2);
  CHECK(m.Near({"bf16", 128, 128, 128}, ShapeBandwidth{})[0] == Approx(wd * ln2 / (1 + wd)));
  // The output transposed (256 x 128 asked, 128 x 256 measured): the same size, the aspect
  // 2 apart: d^2 = (2 / 2)^2, where along log2 (M, N, K) it is 2.
  KnownTileProblem wide{"wide", {"bf16", 128, 256, 128}, {a, b}, {10, 30}};
  const MeasuredSlowdowns m2({p2, wide});
  const double wt = std::exp(-0.5), ln3 = std::log(3.0);
  CHECK(m2.Near({"bf16", 256, 128, 128}, ShapeBandwidth{})[1] == Approx(wt * ln3 / (1 + wt)));
  CHECK(m2.Near({"bf16", 256, 128, 128}, one)[1] == Approx(std::exp(-1.0) * ln3 / (1 + std::exp(-1.0))));
  // K doubled: d^2 = (1 / 0.5)^2 = 4.
  KnownTileProblem deep{"deep", {"bf16", 256, 128, 256}, {a, b}, {10, 30}};
  CHECK(MeasuredSlowdowns({p2, deep}).Near({"bf16", 256, 128, 128}, ShapeBandwidth{})[1] ==
        Approx(std::exp(-2.0) * ln3 / (1 + std::exp(-2.0))));
  CHECK(std::isnan(MeasuredSlowdowns({p1, f32}).Near({"bf16", 128, 128, 128}, one)[2]));
}

TEST_CASE("Shape bandwidths parse from three numbers or one, and refuse the rest naming the flag", "[tile]") {
  absl::StatusOr<ShapeBandwidth> three = ParseShapeBandwidth("0.75,0.5,2", "--tile_prior_bandwidth");
  REQUIRE(three.ok());
  CHECK(three->output == 0.75);
  CHECK(three->k == 0.5);
  CHECK(three->aspect == 2);
  CHECK(three->ToString() == ShapeBandwidth{}.ToString());
  CHECK(ParseShapeBandwidth(three->ToString(), "x")->ToString() == "0.75,0.5,2");
  absl::StatusOr<ShapeBandwidth> iso = ParseShapeBandwidth("1", "x");
  REQUIRE(iso.ok());
  CHECK(iso->output == Approx(std::sqrt(2.0)));
  CHECK(iso->k == 1);
  CHECK(iso->aspect == Approx(std::sqrt(2.0)));
  // Along log2 (M, N, K) with bandwidth 1, (2M, N/2, 2K) is at d^2 = 3.
  CHECK(iso->DistanceSquared({"bf16", 256, 64, 256}, {"bf16", 128, 128, 128}) == Approx(3.0));
  CHECK(ParseShapeBandwidth("0", "x")->AllAlike());
  CHECK(ParseShapeBandwidth("0, 0, 0", "x")->AllAlike());
  CHECK(ShapeBandwidth{0, 0, 0}.DistanceSquared({"bf16", 128, 128, 128}, {"bf16", 8192, 128, 128}) == 0);
  for (const char* bad : {"", "1,2", "1,2,3,4", "0,1,1", "-1", "17", "nan", "inf", "fast", "1,,2"}) {
    INFO(bad);
    const absl::StatusOr<ShapeBandwidth> b = ParseShapeBandwidth(bad, "--tile_prior_bandwidth");
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(b.status().message()), Catch::StartsWith("--tile_prior_bandwidth: '") &&
                                                      Catch::Contains("OUTPUT,K,ASPECT"));
  }
}

TEST_CASE("Tile prior: the nearby problems' mean log slowdown for the problem asked about, standardised, and its JSON",
          "[tile]") {
  const TritonTile a{32, 32, 32, 4, 2}, b{64, 64, 32, 4, 2}, d = kFixedDefaultTile, unmeasured{128, 32, 32, 4, 2};
  const auto problem = [&](const char* name, GemmProblem p, std::vector<double> runtime) {
    KnownTileProblem k;
    k.name = name;
    k.problem = std::move(p);
    k.tiles = {a, b, d};
    k.runtime = std::move(runtime);
    return k;
  };
  const std::vector<KnownTileProblem> known = {problem("near", {"bf16", 128, 256, 256}, {10, 20, 40}),
                                               problem("far", {"bf16", 8192, 4096, 4096}, {40, 10, 20}),
                                               problem("f32", {"f32", 128, 256, 512}, {30, 20, 10})};
  absl::StatusOr<TilePrior> built = BuildTilePrior(known, 0.75, ShapeBandwidth::Isotropic(1.0));
  REQUIRE(built.ok());
  const TilePrior& prior = *built;
  CHECK(prior.weight == 0.75);
  CHECK(prior.bandwidth.k == 1.0);
  CHECK(prior.problems == 3);
  const double s = std::sqrt(1.5);
  const auto rounded = [](double v) { return Approx(v).margin(2e-4); };  // the tables keep 1e-4
  // At "near"'s shape "far" (squared distance 68) counts e^-34: "near"'s log slowdowns 0,
  // ln2, ln4; mean ln2, std ln2 sqrt(2/3): standardised -sqrt(3/2), 0, +sqrt(3/2).
  const TilePriorValues at_near = prior.For({"bf16", 128, 256, 256});
  CHECK(at_near.weight == 0.75);
  CHECK(at_near.Of(a) == rounded(-s));
  CHECK(at_near.Of(b) == rounded(0.0));
  CHECK(at_near.Of(d) == rounded(s));
  CHECK(at_near.Of(unmeasured) == rounded(s));  // measured nowhere: last
  // At "far"'s shape, "far"'s order: b, d, a.
  const TilePriorValues at_far = prior.For({"bf16", 8192, 4096, 4096});
  CHECK(at_far.Of(b) == rounded(-s));
  CHECK(at_far.Of(a) == rounded(s));
  // Halfway (squared distance 17 from each): the plain mean, a ln2, b ln2 / 2, d 3 ln2 / 2,
  // standardised 0, -sqrt(3/2), +sqrt(3/2): what bandwidth 0 gives anywhere.
  const TilePriorValues half = prior.For({"bf16", 1024, 1024, 1024});
  CHECK(half.Of(a) == rounded(0.0));
  CHECK(half.Of(b) == rounded(-s));
  absl::StatusOr<TilePrior> flat = BuildTilePrior(known, 1.0, ShapeBandwidth{0, 0, 0});
  REQUIRE(flat.ok());
  CHECK(flat->For({"bf16", 128, 256, 256}).Of(b) == rounded(-s));
  // f32 alone: a ln3, b ln2, d 0.
  const TilePriorValues f32 = prior.For({"f32", 8192, 4096, 4096});
  CHECK(f32.Of(d) < f32.Of(b));
  CHECK(f32.Of(b) < f32.Of(a));
  CHECK(TilePrior{}.For({"bf16", 1, 1, 1}).Of(a) == 0.0);
  // Too many problems for a manifest: refused, naming how many.
  std::vector<KnownTileProblem> many(kMaxTilePriorProblems + 1, known[0]);
  const absl::StatusOr<TilePrior> big = BuildTilePrior(many, 1.0, ShapeBandwidth{});
  REQUIRE_FALSE(big.ok());
  CHECK_THAT(std::string(big.status().message()), Catch::Contains("201") && Catch::Contains("--tile_prior_weight 0"));

  // One string per problem: a manifest is written indented.
  CHECK_THAT(prior.ToJson(), Catch::Contains(R"("k":256,"log_slowdown":"0 0.6931 1.3863")"));
  absl::StatusOr<TilePrior> back = TilePrior::FromJson(prior.ToJson(), "manifest.json: tile_prior");
  REQUIRE(back.ok());
  CHECK(back->ToJson() == prior.ToJson());
  CHECK(back->For({"bf16", 512, 512, 512}).values == prior.For({"bf16", 512, 512, 512}).values);  // exactly
  CHECK_THAT(BuildTilePrior(known, 1.0, ShapeBandwidth{})->ToJson(),
             Catch::Contains(R"("bandwidth":{"aspect":2.0,"k":0.5,"output":0.75})"));
  // One number (what manifests held before the axes had their own): along log2 (M, N, K).
  std::string older = prior.ToJson();
  const size_t from = older.find(R"("bandwidth":{)");
  REQUIRE(from != std::string::npos);
  older.replace(from, older.find('}', from) + 1 - from, R"("bandwidth":1)");
  absl::StatusOr<TilePrior> old = TilePrior::FromJson(older, "manifest.json: tile_prior");
  REQUIRE(old.ok());
  CHECK(old->bandwidth.output == Approx(std::sqrt(2.0)));
  CHECK(old->For({"bf16", 512, 512, 512}).values == prior.For({"bf16", 512, 512, 512}).values);
  // A network trained on the prior's errors says so.
  TilePrior residual = prior;
  residual.residual = true;
  CHECK_THAT(residual.ToJson(), Catch::Contains(R"("residual":true)"));
  CHECK(TilePrior::FromJson(residual.ToJson(), "m")->residual);
  CHECK_FALSE(back->residual);
  // The near end: at "near"'s shape ("far" weighs e^-34, under a tenth of the nearest, so
  // its worst does not count and its mean next to nothing), log(s - 1 + 0.1) + 0.25 log s
  // for s = 1, 2, 4, standardised.
  TilePrior top = prior;
  top.near_end = TilePrior::kNearEndDefault;
  std::vector<double> raw;
  for (double slowdown : {1.0, 2.0, 4.0}) raw.push_back(std::log(slowdown - 1 + 0.1) + 0.25 * std::log(slowdown));
  const double raw_mean = (raw[0] + raw[1] + raw[2]) / 3;
  double raw_sq = 0;
  for (double r : raw) raw_sq += (r - raw_mean) * (r - raw_mean);
  const double raw_sd = std::sqrt(raw_sq / 3);
  const TilePriorValues at_top = top.For({"bf16", 128, 256, 256});
  CHECK(at_top.Of(a) == Approx((raw[0] - raw_mean) / raw_sd).margin(1e-3));  // -1.343
  CHECK(at_top.Of(b) == Approx((raw[1] - raw_mean) / raw_sd).margin(1e-3));  // 0.288
  CHECK(at_top.Of(d) == Approx((raw[2] - raw_mean) / raw_sd).margin(1e-3));  // 1.055
  CHECK_THAT(top.ToJson(), Catch::Contains(R"("near_end":{"excess":0.1,"guard":0.25})"));
  absl::StatusOr<TilePrior> top_back = TilePrior::FromJson(top.ToJson(), "m");
  REQUIRE(top_back.ok());
  CHECK(top_back->near_end.excess == 0.1);
  CHECK(top_back->near_end.guard == 0.25);
  CHECK(top_back->For({"bf16", 128, 256, 256}).values == at_top.values);
  CHECK_FALSE(back->near_end.on());  // a manifest without the key: the mean log slowdown
  // What the network counts beside it: 1 unless said (manifests from before it was chosen).
  CHECK(back->network_share == 1.0);
  CHECK_THAT(prior.ToJson(), !Catch::Contains("network_share"));
  TilePrior shared = residual;
  shared.network_share = 0.25;
  CHECK_THAT(shared.ToJson(), Catch::Contains(R"("network_share":0.25)"));
  CHECK(TilePrior::FromJson(shared.ToJson(), "m")->network_share == 0.25);
  CHECK(shared.For({"bf16", 512, 512, 512}).network_share == 0.25);
  // A fixed table per dtype (manifests from before the measured problems were kept) still reads.
  absl::StatusOr<TilePrior> fixed =
      TilePrior::FromJson(R"({"weight": 1, "problems": 3, "values": {"bf16": {"32x32x32 w4 s2": -1, "64x64x32 w4 s2": 1}, "*": {"64x64x32 w4 s2": 2}}})",
                          "manifest.json: tile_prior");
  REQUIRE(fixed.ok());
  CHECK(fixed->For({"bf16", 1, 1, 1}).Of(a) == -1.0);
  CHECK(fixed->For({"f16", 1, 1, 1}).Of(b) == 2.0);
  CHECK(TilePrior::FromJson(fixed->ToJson(), "m")->ToJson() == fixed->ToJson());
  const std::string measured = R"(, "bandwidth": 1, "tiles": ["32x32x32 w4 s2", "64x64x32 w4 s2"], "measured": )";
  for (const auto& [json, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"weight": -1, "problems": 3, "values": {}})", "weight"},
           {R"({"weight": 1, "problems": 3})", "values"},
           {R"({"weight": 1, "problems": 3, "values": {"bf16": {"128x128": 0.5}}})", "values.bf16.128x128"},
           {R"({"weight": 1, "problems": 3, "values": {"bf16": {"32x32x32 w4 s2": "fast"}}})", "values.bf16.32x32x32 w4 s2"},
           {R"({"weight": 1, "problems": 3, "bandwidth": -2, "values": {}})", "bandwidth"},
           {R"({"weight": 1, "problems": 3, "bandwidth": {"output": 1, "k": 1}, "values": {}})", "bandwidth"},
           {R"({"weight": 1, "problems": 3, "bandwidth": {"output": 0, "k": 1, "aspect": 1}, "values": {}})", "bandwidth"},
           {R"({"weight": 1, "problems": 3, "residual": "yes", "values": {}})", "residual"},
           {R"({"weight": 1, "problems": 3, "network_share": 1.5, "values": {}})", "network_share"},
           {R"({"weight": 1, "problems": 3, "near_end": {"excess": 0, "guard": 1}, "values": {}})", "near_end"},
           {R"({"weight": 1, "problems": 3, "near_end": 0.1, "values": {}})", "near_end"},
           {R"({"weight": 1, "problems": 3, "network_share": "all", "values": {}})", "network_share"},
           {R"({"weight": 1, "problems": 1, "tiles": ["64x64x32 w4 s2", "32x32x32 w4 s2"], "measured": []})", "tiles[1]"},
           {R"({"weight": 1, "problems": 1)" + measured + R"([{"dtype": "bf16", "m": 0, "n": 1, "k": 1, "log_slowdown": "0 0"}]})",
            "measured[0].m"},
           {R"({"weight": 1, "problems": 1)" + measured + R"([{"dtype": "bf16", "m": 1, "n": 1, "k": 1, "log_slowdown": "0"}]})",
            "measured[0].log_slowdown"},
           {R"({"weight": 1, "problems": 1)" + measured + R"([{"dtype": "bf16", "m": 1, "n": 1, "k": 1, "log_slowdown": "0 -1"}]})",
            "measured[0].log_slowdown, value 2"},
           {R"({"weight": 1, "problems": 1)" + measured + R"([{"m": 1, "n": 1, "k": 1, "log_slowdown": "0 -"}]})",
            "measured[0].dtype"},
           {R"([1, 2])", "JSON object"}}) {
    const absl::StatusOr<TilePrior> bad = TilePrior::FromJson(json, "manifest.json: tile_prior");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(bad.status().message()), Catch::Contains("manifest.json: tile_prior") && Catch::Contains(key));
  }
}

TEST_CASE("A problem's measured configurations shift its other configurations' expectations by a Gaussian process, hand-computed",
          "[tile]") {
  const TritonTile a{64, 64, 32, 4, 3}, b{128, 64, 32, 4, 3}, c{64, 64, 32, 4, 4}, elsewhere{16, 16, 16, 1, 1};
  // a and b one doubling of BLOCK_M apart, c one stage from a, b and c both apart.
  CHECK(TileKernel(a, a) == Approx(1.0));
  CHECK(TileKernel(a, b) == Approx(std::exp(-0.5)));
  CHECK(TileKernel(c, b) == Approx(std::exp(-1.0)));
  CHECK(TileKernel(a, {128, 128, 32, 8, 3}) == Approx(std::exp(-1.5)));
  const std::vector<TritonTile> tiles = {a, b, c};
  const std::vector<double> expected = {0, 0, 0};
  // b ran e^0.2 slower than a where both were expected alike. K = [[2, k], [k, 2]] (noise
  // 1), k = e^-1/2; the constant is 0.1 and the dual weights -+0.1 / (2 - k); a gets
  // (1 - k) of its own, c e^-1/2 of a's and e^-1 of b's.
  const std::vector<double> f = TileCorrection(tiles, expected, {{a, 1.0}, {b, std::exp(0.2)}});
  CHECK(f[0] == Approx(-0.02823667).epsilon(1e-6));
  CHECK(f[1] == Approx(0.02823667).epsilon(1e-6));
  CHECK(f[2] == Approx(-0.01712641).epsilon(1e-6));
  // The same from runs of a twice (geometric mean), a configuration the table lacks, a
  // runtime that is not > 0, and in any unit.
  const std::vector<double> g =
      TileCorrection(tiles, expected, {{b, 7 * std::exp(0.2)}, {a, 7 * std::exp(-0.1)}, {elsewhere, 5}, {c, 0},
                                       {a, 7 * std::exp(0.1)}});
  for (size_t t = 0; t < 3; ++t) CHECK(g[t] == Approx(f[t]).epsilon(1e-9));
  CHECK(TileCorrectionMeasurements(tiles, expected, {{a, 1}, {a, 2}, {elsewhere, 5}, {c, -1}}) == 1);
  // One measurement says nothing of the others; nor does one with no expectation.
  for (double v : TileCorrection(tiles, expected, {{a, 1.0}})) CHECK(v == 0.0);
  for (double v : TileCorrection(tiles, {0, std::nan(""), 0}, {{a, 1.0}, {b, 2.0}})) CHECK(v == 0.0);
  // Shifted: each problem's table plus the shift, measured again from its fastest.
  const MeasuredSlowdowns m(tiles, {{{"bf16", 128, 128, 128}, {0, 0.1, std::nan("")}},
                                    {{"bf16", 256, 128, 128}, {0.3, 0, 0.2}}});
  const MeasuredSlowdowns s = m.Shifted({0.2, 0, -0.5});
  CHECK(s.problems()[0].log_slowdown[0] == Approx(0.1));
  CHECK(s.problems()[0].log_slowdown[1] == Approx(0.0).margin(1e-12));
  CHECK(std::isnan(s.problems()[0].log_slowdown[2]));
  CHECK(s.problems()[1].log_slowdown[0] == Approx(0.8));
  CHECK(s.problems()[1].log_slowdown[1] == Approx(0.3));
  CHECK(s.problems()[1].log_slowdown[2] == Approx(0.0).margin(1e-12));
}

TEST_CASE("Tile prior: a problem's measured configurations reorder what its prior expects of the others", "[tile]") {
  // One measured problem expects x (32x32x32) first, then y, then y's neighbour z (one
  // doubling of the warps): log slowdowns 0, 0.05, 0.1. On the problem asked about, y ran
  // 10% faster than x: the prior now expects y first, and z (like y) ahead of x's
  // expectation by less. Hand values: residuals log 100 - 0 and log 90 - 0.05, kernel
  // e^-4.5 between x and y, e^-1/2 between y and z, e^-5 between x and z; the shifted
  // table 0.0272, 0, 0.0652, standardised.
  const TritonTile x{32, 32, 32, 4, 3}, y{128, 128, 64, 4, 3}, z{128, 128, 64, 8, 3}, other{16, 16, 16, 1, 1};
  KnownTileProblem known{"known", {"bf16", 512, 512, 512}, {x, y, z}, {1.0, std::exp(0.05), std::exp(0.1)}};
  absl::StatusOr<TilePrior> prior = BuildTilePrior({known}, 1.0, ShapeBandwidth{});
  REQUIRE(prior.ok());
  const GemmProblem asked{"bf16", 1024, 512, 512};
  const TilePriorValues before = prior->For(asked);
  CHECK(before.measurements == 0);
  CHECK(before.Of(x) < before.Of(y));
  CHECK(before.Of(y) < before.Of(z));
  const TilePriorValues after = prior->For(asked, {{x, 100}, {y, 90}});
  CHECK(after.measurements == 2);
  CHECK(after.Of(x) == Approx(-0.13345722).epsilon(1e-5));
  CHECK(after.Of(y) == Approx(-1.15255064).epsilon(1e-5));
  CHECK(after.Of(z) == Approx(1.28600785).epsilon(1e-5));
  // One usable measurement (the other is a configuration no problem measured): as before.
  const TilePriorValues one = prior->For(asked, {{y, 90}, {other, 50}});
  CHECK(one.measurements == 0);
  for (const TritonTile& t : {x, y, z}) CHECK(one.Of(t) == before.Of(t));
  // A fixed table cannot follow measurements.
  TilePrior fixed;
  fixed.values[TilePrior::kAnyDtype] = {{x, -1}, {y, 1}};
  const TilePriorValues f = fixed.For(asked, {{x, 100}, {y, 90}});
  CHECK(f.measurements == 0);
  CHECK(f.Of(x) == -1);
}

TEST_CASE("Tile prior: the network's share is the one whose mean validation score over the folds is highest",
          "[tile]") {
  // Means over the two folds: 0 -> 0.80, 0.25 -> 0.86, 0.5 -> 0.85, 0.75 -> 0.83, 1 -> 0.82.
  const std::vector<std::map<double, double>> folds = {{{0, 0.9}, {0.25, 0.92}, {0.5, 0.95}, {0.75, 0.96}, {1, 0.94}},
                                                       {{0, 0.7}, {0.25, 0.8}, {0.5, 0.75}, {0.75, 0.7}, {1, 0.7}}};
  CHECK(ChooseNetworkShare(folds) == 0.25);
  CHECK(ChooseNetworkShare({folds[0]}) == 0.75);
  // Ties: the larger share, as the network was trained.
  CHECK(ChooseNetworkShare({{{0, 0.9}, {0.25, 0.9}, {0.5, 0.9}, {0.75, 0.5}, {1, 0.5}}}) == 0.5);
  // Nothing validated (a run from before, or a fold that lacks a share or scored NaN): 1.
  CHECK(ChooseNetworkShare({}) == 1.0);
  CHECK(ChooseNetworkShare({folds[0], {{0, 1.0}}}) == 1.0);
  std::map<double, double> broken = folds[1];
  broken[0.25] = std::nan("");
  CHECK(ChooseNetworkShare({folds[0], broken}) == 1.0);
}
