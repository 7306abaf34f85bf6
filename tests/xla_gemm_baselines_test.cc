// The fusion table's reader and the orders of XLA GEMM fusions that need no model, on
// hand-made fusions whose scores are computed by hand below.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "model/core/file_util.h"
#include "model/tile/xla_fusion_table.h"
#include "model/tile/xla_gemm_baselines.h"

using namespace tgraph;

namespace {

XlaGemmProblem Problem(const std::string& dtype, int64_t m, int64_t n, int64_t k, bool lhs_t = false) {
  XlaGemmProblem p;
  p.lhs_dtype = p.rhs_dtype = p.out_dtype = dtype;
  p.m = m, p.n = n, p.k = k;
  p.lhs_transposed = lhs_t;
  return p;
}

XlaGemmConfig Config(int64_t block_m, int64_t stages = 1) { return XlaGemmConfig{block_m, 32, 32, 1, stages, 4, 1}; }

KnownXlaFusion Fusion(const std::string& name, const XlaGemmProblem& p, std::vector<XlaGemmConfig> configs,
                      std::vector<double> runtime) {
  return KnownXlaFusion{name, p, std::nullopt, std::move(configs), std::move(runtime)};
}

XlaFusionRecord Record() {
  XlaFusionRecord r;
  r.fusion = "gemm_fusion_dot.2", r.computation = "gemm_fusion_dot.2_computation";
  r.kind = "__triton_nested_gemm_fusion", r.dot = "dot.4";
  r.dot_node = 2, r.nodes = 3;
  r.problem = Problem("bf16", 128, 512, 100, true);
  r.problem.batch = 8;
  r.problem.out_dtype = "f32";
  r.chosen = XlaGemmConfig{64, 32, 64, 2, 3, 4, 1};
  r.measured = 30, r.failed = 1, r.fastest_ns = 1200, r.library_ns = std::nullopt;
  r.file = "jit_step.gemm_fusion_dot.2.npz";
  return r;
}

}  // namespace

TEST_CASE("fusion tables: a record written and read back is the same record", "[tile][xla]") {
  const XlaFusionRecord r = Record();
  const std::string line = XlaFusionTableLine(r);
  CHECK(line ==
        "gemm_fusion_dot.2\tgemm_fusion_dot.2_computation\t__triton_nested_gemm_fusion\tdot.4\t2\t3\t8\t128\t512\t100\t"
        "bf16\tbf16\tf32\t1\t0\t64x32x64 sk2 s3 w4 c1\t64\t32\t64\t2\t3\t4\t1\t30\t1\t1200\t\t"
        "jit_step.gemm_fusion_dot.2.npz");
  auto back = ParseXlaFusionTable(XlaFusionTableHeader() + "\n" + line + "\n", "t.tsv");
  REQUIRE(back.ok());
  REQUIRE(back->size() == 1);
  const XlaFusionRecord& b = back->at(0);
  CHECK(XlaFusionTableLine(b) == line);
  CHECK(b.problem.Name() == r.problem.Name());
  CHECK(b.chosen == r.chosen);
  CHECK(b.fastest_ns == std::optional<int64_t>(1200));
  CHECK_FALSE(b.library_ns.has_value());
}

TEST_CASE("fusion tables: a bad header, field count or value is refused naming the line and the column",
          "[tile][xla]") {
  const std::string header = XlaFusionTableHeader() + "\n";
  const std::string line = XlaFusionTableLine(Record());
  const auto error = [](const std::string& text) {
    auto r = ParseXlaFusionTable(text, "t.tsv");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  CHECK_THAT(error("fusion\tkind\n"), Catch::StartsWith("t.tsv:1: the header is not a fusion table's"));
  CHECK_THAT(error(header + "a\tb\n"), Catch::StartsWith("t.tsv:2: has 2 fields, expected 28"));
  std::string bad = line;
  bad.replace(bad.find("\t128\t"), 5, "\t-4\t");
  CHECK_THAT(error(header + line + "\n" + bad + "\n"), Catch::StartsWith("t.tsv:3: m: '-4' is not an integer of at least 1"));
  bad = line;
  bad.replace(bad.find("\t1\t0\t"), 5, "\t1\t2\t");
  CHECK_THAT(error(header + bad), Catch::StartsWith("t.tsv:2: rhs_transposed: '2' is not 0 or 1"));
  bad = line;
  bad.replace(bad.find("sk2"), 3, "sk1");
  CHECK_THAT(error(header + bad),
             Catch::StartsWith("t.tsv:2: chosen: '64x32x64 sk1 s3 w4 c1' is not the configuration of the block columns"));
  bad = line;
  bad.replace(bad.find(".npz"), 4, ".csv");
  CHECK_THAT(error(header + bad), Catch::Contains("file: 'jit_step.gemm_fusion_dot.2.csv' is not an .npz file name"));
}

TEST_CASE("fusion tables: a folder's tables are read together, by graph file, and a file listed twice is refused",
          "[tile][xla]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tgraph_fusion_tables_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto none = ReadXlaFusionTables(dir.string());
  REQUIRE(none.ok());
  CHECK(none->empty());
  XlaFusionRecord a = Record(), b = Record();
  b.file = "other.gemm_fusion_dot.2.npz";
  REQUIRE(WriteFileAtomic((dir / "jit_step.fusions.tsv").string(), XlaFusionTableHeader() + "\n" + XlaFusionTableLine(a) + "\n").ok());
  REQUIRE(WriteFileAtomic((dir / "other.fusions.tsv").string(), XlaFusionTableHeader() + "\n" + XlaFusionTableLine(b) + "\n").ok());
  REQUIRE(WriteFileAtomic((dir / "notes.tsv").string(), "not a table\n").ok());  // not a fusion table's name
  auto both = ReadXlaFusionTables(dir.string());
  REQUIRE(both.ok());
  REQUIRE(both->size() == 2);
  CHECK(both->at("other.gemm_fusion_dot.2.npz").fusion == "gemm_fusion_dot.2");
  REQUIRE(WriteFileAtomic((dir / "fusions.tsv").string(), XlaFusionTableHeader() + "\n" + XlaFusionTableLine(a) + "\n").ok());
  auto twice = ReadXlaFusionTables(dir.string());
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(std::string(twice.status().message()),
             Catch::Contains("jit_step.gemm_fusion_dot.2.npz is listed by two fusion tables' lines"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("XLA GEMM baselines: nearest fusion, mean slowdown and XLA's choice, hand-computed", "[tile][xla]") {
  const XlaGemmConfig c1 = Config(16), c2 = Config(32), c3 = Config(64), c4 = Config(128);
  // f32 fusions: a (128^3, nearest to p: distance 1 in log2 M) and b (1024^3, distance 8);
  // a bf16 one and one whose times are not known (left out).
  const XlaGemmBaselines base({Fusion("a", Problem("f32", 128, 128, 128), {c1, c2, c3}, {10, 20, 30}),
                               Fusion("b", Problem("f32", 1024, 1024, 1024), {c1, c2, c3}, {80, 20, 10}),
                               Fusion("c", Problem("bf16", 128, 128, 128), {c1, c2}, {5, 50}),
                               Fusion("hidden", Problem("f32", 256, 128, 128), {c4}, {0})});
  CHECK(base.size() == 3);
  KnownXlaFusion p = Fusion("p", Problem("f32", 256, 128, 128), {c3, c1, c2, c4}, {1, 2, 3, 4});
  p.chosen = c2;
  REQUIRE(base.Nearest(p.problem) != nullptr);
  CHECK(base.Nearest(p.problem)->name == "a");
  constexpr double kLast = std::numeric_limits<double>::max();
  CHECK(base.Scores(XlaGemmBaseline::kNearestProblem, p) == std::vector<double>{30, 10, 20, kLast});
  // Mean log slowdown over a and b: c1 (log 1 + log 8) / 2, c2 (log 2 + log 2) / 2, c3 (log 3 + log 1) / 2.
  const std::vector<double> mean = base.Scores(XlaGemmBaseline::kMeanSlowdown, p);
  CHECK(mean[0] == Approx(std::log(3.0) / 2));
  CHECK(mean[1] == Approx(std::log(8.0) / 2));
  CHECK(mean[2] == Approx(std::log(2.0)));
  CHECK(mean[3] == kLast);
  std::vector<double> choice = mean;
  choice[2] = -1;
  CHECK(base.Scores(XlaGemmBaseline::kXlaChoice, p) == choice);
  // A bf16 fusion learns from the bf16 one only; a transposed f32 one from every f32 one.
  const KnownXlaFusion q = Fusion("q", Problem("bf16", 4096, 4096, 4096), {c2, c1}, {1, 1});
  CHECK(base.Scores(XlaGemmBaseline::kNearestProblem, q) == std::vector<double>{50, 5});
  CHECK(base.Nearest(Problem("f32", 2048, 1024, 1024, true))->name == "b");
  CHECK(XlaGemmKinship(Problem("f32", 1, 1, 1), Problem("f32", 9, 9, 9)) == 2);
  CHECK(XlaGemmKinship(Problem("f32", 1, 1, 1, true), Problem("f32", 1, 1, 1)) == 1);
  CHECK(XlaGemmKinship(Problem("bf16", 1, 1, 1), Problem("f32", 1, 1, 1)) == 0);
}

TEST_CASE("XLA GEMM baselines: the reports score the measured fusions and say where XLA's choice was measured",
          "[tile][xla]") {
  const XlaGemmConfig c1 = Config(16), c2 = Config(32), c3 = Config(64);
  const XlaGemmBaselines base({Fusion("a", Problem("f32", 128, 128, 128), {c1, c2, c3}, {10, 20, 30})});
  KnownXlaFusion p = Fusion("p", Problem("f32", 128, 128, 128), {c1, c2, c3}, {4, 2, 1});
  p.chosen = c2;
  KnownXlaFusion unmeasured = Fusion("u", Problem("f32", 128, 128, 128), {c1}, {0});
  unmeasured.chosen = c1;
  const std::vector<MethodReport> r = XlaGemmBaselineReports(base, {p, unmeasured}, "tile@x", "test");
  REQUIRE(r.size() == 4);
  CHECK(r[0].method == "nearest problem");
  CHECK(r[1].method == "mean slowdown");
  CHECK(r[2].method == "XLA's choice (measured in 1 of 1), then mean slowdown");
  CHECK(r[3].method == "random order (expected)");
  for (const MethodReport& m : r) REQUIRE(m.report.graphs.size() == 1);
  // Nearest (a's order c1, c2, c3) picks c1 first: 4 / 1 - 1; XLA's choice c2: 2 / 1 - 1.
  CHECK(r[0].report.graphs[0].top_error[0] == Approx(3.0));
  CHECK(r[0].report.graphs[0].to_within == 3);
  CHECK(r[2].report.graphs[0].top_error[0] == Approx(1.0));
  CHECK(r[2].report.graphs[0].to_within == 3);  // c2, then c1 (mean 0), then c3
  // Random order: the expected best of one pick is (4 + 2 + 1) / 3 over 1.
  CHECK(r[3].report.graphs[0].top_error[0] == Approx(7.0 / 3 - 1));
  // Each table's method column is as wide as the longest name: every line of a table the
  // same length. The medians' table, then the worst problem's.
  const std::vector<std::string> lines = absl::StrSplit(TileComparisonTable(r), '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 10);
  for (size_t i = 0; i < 5; ++i) CHECK(lines[i].size() == lines[0].size());
  for (size_t i = 5; i < 10; ++i) CHECK(lines[i].size() == lines[5].size());
  CHECK_THAT(lines[5], Catch::StartsWith("method (the worst problem)"));
}
