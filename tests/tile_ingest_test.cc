// Tile measurements ingested without an HLO folder: each problem's module is written as
// JAX writes jnp.dot's, checked byte for byte against the real sets' JAX-written files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/hlo/tile_ingest.h"
#include "tests/test_util.h"

using namespace tgraph;
namespace fs = std::filesystem;

namespace {

const std::string kReal = std::string(TGRAPH_REAL_DATA);

// gemm_<dtype>_<M>x<N>x<K>.hlo -> its problem.
GemmProblem ProblemOfStem(const std::string& stem) {
  const std::vector<std::string> parts = absl::StrSplit(stem, '_');
  REQUIRE(parts.size() == 3);
  const std::vector<std::string> dims = absl::StrSplit(parts[2], 'x');
  REQUIRE(dims.size() == 3);
  GemmProblem p{parts[1], 0, 0, 0};
  REQUIRE((absl::SimpleAtoi(dims[0], &p.m) && absl::SimpleAtoi(dims[1], &p.n) && absl::SimpleAtoi(dims[2], &p.k)));
  return p;
}

}  // namespace

TEST_CASE("the HLO written for a problem is byte for byte what JAX wrote for every real tile problem", "[tile][real]") {
  int files = 0;
  for (const char* set : {"/gpu-tiles/hlo", "/gpu-tiles-h200/hlo"}) {
    for (const fs::directory_entry& e : fs::directory_iterator(kReal + set)) {
      const std::string stem = e.path().stem().string();
      const GemmProblem p = ProblemOfStem(stem);
      CHECK(hlo::ProblemStem(p) == stem);
      absl::StatusOr<std::string> real = ReadFile(e.path().string());
      REQUIRE(real.ok());
      INFO(e.path().string());
      CHECK(hlo::GemmHloText(p) == *real);
      ++files;
    }
  }
  CHECK(files == 72 + 216);
}

TEST_CASE("tile measurements ingested without an HLO folder are the collection ingested with the real one",
          "[tile][real]") {
  TempDir with, without;
  hlo::TileIngestOptions o;
  o.csv = kReal + "/gpu-tiles/triton_gemm_h100.csv";
  o.hlo_dir = kReal + "/gpu-tiles/hlo";
  o.out_root = with.path();
  REQUIRE(hlo::IngestTileMeasurements(o).ok());
  o.hlo_dir.clear();
  o.out_root = without.path();
  absl::StatusOr<hlo::TileIngestSummary> written = hlo::IngestTileMeasurements(o);
  INFO(written.status().message());
  REQUIRE(written.ok());
  const Collection c = *ParseCollection("tile@h100-triton");
  int compared = 0;
  for (const char* split : {"train", "valid", "test"}) {
    absl::StatusOr<std::vector<GraphFile>> a = ListSplit(with.path(), c, split);
    absl::StatusOr<std::vector<GraphFile>> b = ListSplit(without.path(), c, split);
    REQUIRE((a.ok() && b.ok()));
    REQUIRE(a->size() == b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      absl::StatusOr<std::string> x = ReadFile((*a)[i].path), y = ReadFile((*b)[i].path);
      REQUIRE((x.ok() && y.ok()));
      CHECK(*x == *y);
      ++compared;
    }
  }
  CHECK(compared == 72);
}

TEST_CASE("tile measurements can all go to training: test_shapes 0 holds none out, a negative count is refused",
          "[tile][real]") {
  TempDir held, none;
  hlo::TileIngestOptions o;
  o.csv = kReal + "/gpu-tiles/triton_gemm_h100.csv";
  o.out_root = held.path();
  absl::StatusOr<hlo::TileIngestSummary> six = hlo::IngestTileMeasurements(o);
  REQUIRE(six.ok());
  o.out_root = none.path();
  o.test_shapes = 0;
  absl::StatusOr<hlo::TileIngestSummary> all = hlo::IngestTileMeasurements(o);
  INFO(all.status().message());
  REQUIRE(all.ok());
  // The 72 real problems (36 shapes, two dtypes): 12 held out by default, none now.
  CHECK(six->problems["test"] == 12);
  CHECK(all->problems.count("test") == 0);
  CHECK(all->problems["train"] + all->problems["valid"] == 72);
  CHECK(all->problems["valid"] == six->problems["valid"]);
  o.test_shapes = -1;
  o.out_root = none.path() + "/again";
  absl::StatusOr<hlo::TileIngestSummary> negative = hlo::IngestTileMeasurements(o);
  CHECK(negative.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(negative.status().message()), Catch::Contains("test_shapes and valid_shapes must be at least 0"));
}
