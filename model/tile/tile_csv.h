// Real tile measurements as a Triton kernel's measured problems: a CSV of every candidate
// configuration of a Triton matrix product timed on one GPU
// (dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms; ms "refused" where the
// compiler refused the configuration; one row per problem with block_m "cublas": the
// vendor library's time) read into each problem's runtimes and the tile space the CSV
// spans (what model/hlo/tile_ingest.h joins to each problem's HLO).
//
// Torch-free; plain functions of their arguments, callable from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tile/tile_space.h"

namespace tgraph {

// One problem of the CSV: each measured configuration's runtime in ns, and the library's.
struct MeasuredProblem {
  GemmProblem problem;
  std::map<TritonTile, int64_t> runtime_ns;
  int64_t library_ns = 0;  // 0 when the CSV has no cublas row for it
  int64_t repeated = 0;    // configurations timed more than once (runtime_ns: their median)
};

struct TileMeasurements {
  TileSpace space;  // candidates: every value the CSV names; refused: per dtype
  std::vector<MeasuredProblem> problems;  // in the CSV's order of first appearance
};

// Parses the CSV. Errors (INVALID_ARGUMENT) name `what`, the line and the column: a
// header other than dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms, a value that is not a positive integer or time, a
// refused row repeated, a configuration refused for one problem of a dtype but timed for another,
// a problem that lacks a candidate (neither timed nor refused). ms becomes integer ns
// (rounded; at least 1). A configuration timed on several rows of a problem (repeated
// measurements) gets the median of its timings, so that a model learns, and an
// evaluation judges, against what the timing repeats to rather than one draw of it.
absl::StatusOr<TileMeasurements> ParseTileCsv(absl::string_view text, absl::string_view what,
                                              const std::string& gpu, int64_t sm_count);

}  // namespace tgraph
