// Real tile measurements -> a tile collection of one's own (tile@NAME, docs/format.md
// "Triton tile values"): a CSV of every candidate configuration of a Triton matrix
// product timed on one GPU (model/tile/tile_csv.h reads it), and each problem's HLO text
// (gemm_<dtype>_<M>x<N>x<K>.hlo), become one tile .npz per problem and the
// collection's tile_space.json.
//
// Torch-free; plain functions of their arguments, callable from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tile/tile_csv.h"
#include "model/tile/tile_space.h"

namespace tgraph::hlo {

struct TileIngestOptions {
  std::string csv;       // the measurements
  std::string hlo_dir;   // gemm_<dtype>_<M>x<N>x<K>.hlo per problem; empty: GemmHloText
  std::string out_root;  // the data root: writes <out_root>/npz/tile/@<name>/{train,valid,test}
  std::string name = "h100-triton";
  // The GPU the measurements were taken on, as the CUDA runtime names it: a row of the
  // GPU table (model/tile/gpu_table.h), which gives its SMs and occupancy limits.
  std::string gpu = "NVIDIA H100 80GB HBM3";
  // The rows' feature set (TileSpace::feature_set): 2, the GPU's occupancy and waves
  // beside the block sizes; 1, without them (older collections, for comparison).
  int feature_set = 2;
  // What the test split holds:
  //   "shape":   test_shapes shapes (M, N, K), every dtype of each, so that no test
  //              problem's shape was trained on in any dtype (the default);
  //   a dtype:   every problem of that dtype ("f32": trained on bf16 only, tested on f32);
  //   "largest": the test_shapes shapes of the most multiply-adds (M*N*K), every dtype.
  // The other problems' shapes are shuffled by the seed (for "shape", all shapes are);
  // valid_shapes of them are valid, the rest train. Splits are always by shape within a
  // dtype: one problem is never in two splits.
  std::string hold_out = "shape";
  // Problems measured apart (new shapes, the same kernel on the same GPU) as the test
  // split: when set, the test split is every problem of this CSV, with its HLO in
  // test_hlo_dir (hlo_dir when empty), and every problem of `csv` trains (valid_shapes of
  // its shapes validate); hold_out must stay "shape" and test_shapes is not used. The
  // file must name the same candidates, measure only dtypes `csv` measured, refuse what
  // `csv` refuses for each, and share no problem (dtype, M, N, K) with it.
  std::string test_csv;
  std::string test_hlo_dir;
  uint64_t split_seed = 0;
  int64_t test_shapes = 6;
  int64_t valid_shapes = 6;
};

struct TileIngestSummary {
  std::string collection_dir;                  // <out_root>/npz/tile/@<name>
  std::map<std::string, int64_t> problems;     // per split
  std::map<std::string, int64_t> configs;      // measured configurations per split
  std::map<std::string, int64_t> refused;      // refused candidates per dtype
  std::vector<std::string> lines;              // "test: gemm_bf16_128x256x256 (259 configurations)"
};

// Reads the CSV and the HLO, checks that each module computes its problem (one dot,
// C[M, N] = A[M, K] B[K, N] of the dtype), and writes the collection (an existing
// collection directory is refused rather than mixed with). Each problem's file holds its
// measured configurations in candidate order, runtimes in ns, and as normalizer the
// library's time (the fastest measured configuration's when the CSV has none).
absl::StatusOr<TileIngestSummary> IngestTileMeasurements(const TileIngestOptions& o);

// gemm_<dtype>_<M>x<N>x<K>: the file stem of a problem's HLO and of its .npz.
std::string ProblemStem(const GemmProblem& p);

// The HLO text of C[M, N] = A[M, K] B[K, N] as JAX writes jnp.dot's (jax.jit(jnp.dot)
// lowered, as_text(dialect="hlo")), byte for byte the files the real tile sets carry: what
// a problem's graph is when no HLO folder is given.
std::string GemmHloText(const GemmProblem& p);

}  // namespace tgraph::hlo
