// The table tgraph-featurize fusions writes beside a module's fusion graphs
// (<prefix>fusions.tsv, docs/format.md "XLA's Triton GEMM fusions"): a line per fusion
// with its problem, the configuration XLA chose and what its log measured. One place for
// its columns, so that the writer (model/hlo/gemm_fusions.cc) and its readers (the
// evaluator's baselines) cannot drift apart.
//
// Torch-free; values and pure functions, any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tile/xla_gemm.h"

namespace tgraph {

// One line of the table.
struct XlaFusionRecord {
  std::string fusion, computation, kind, dot;  // names in the module
  int64_t dot_node = -1;                       // the dot's node in the graph
  int64_t nodes = 0;
  XlaGemmProblem problem;
  XlaGemmConfig chosen;  // what XLA's compiler chose (its autotuner's pick, or its heuristic's)
  int64_t measured = 0, failed = 0;     // Triton candidates the log timed, and those that failed
  std::optional<int64_t> fastest_ns;    // the fastest measured Triton candidate's time
  std::optional<int64_t> library_ns;    // the fastest library (cuBLAS) candidate's time
  std::string file;                     // the graph's file name, in the table's folder
};

// The header line (tab-separated column names, no newline).
std::string XlaFusionTableHeader();
// One record as a line (no newline).
std::string XlaFusionTableLine(const XlaFusionRecord& r);

// A table's records (lines starting with '#' are comments: the fusions the writer could
// not read). INVALID_ARGUMENT naming `what`, the line and the column for a header
// that is not XlaFusionTableHeader(), a line with another number of fields, or a value
// that is not what its column holds.
absl::StatusOr<std::vector<XlaFusionRecord>> ParseXlaFusionTable(const std::string& text, absl::string_view what);

// Whether a file name is a fusion table's: "fusions.tsv" or "<prefix>.fusions.tsv".
bool IsXlaFusionTableName(absl::string_view file_name);

// Every fusion table in `dir` (not below it), their records by `file`. An empty map when
// there is none; INVALID_ARGUMENT for a table that does not parse or two records of one
// file; INTERNAL when the folder cannot be listed.
absl::StatusOr<std::map<std::string, XlaFusionRecord>> ReadXlaFusionTables(const std::string& dir);

}  // namespace tgraph
