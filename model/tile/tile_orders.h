// Orders of a kernel's configurations made outside tgraph, as a baseline of tgraph-eval
// --baselines: another tool's ranking per problem (NVIDIA's nvMatmulHeuristics through
// scripts/nvmmh-orders, or any autotuner's list), scored like the built-in baselines on
// the evaluated split's measured runtimes.
//
// The file (tab-separated, UTF-8):
//   # method: NAME            the first line: the method's name in the table
//   # any other comment
//   PROBLEM<TAB>CONFIGURATION one line per configuration, best first within its problem;
//                             PROBLEM the tile file's stem (gemm_bf16_128x256x256),
//                             CONFIGURATION as TritonTile::Name ("128x128x64 w4 s3")
// A problem's configurations the file does not list come after the listed ones, in the
// collection's row order; listed ones the problem did not measure are passed over.
//
// Torch-free; plain functions of their arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tile/tile_baselines.h"

namespace tgraph {

struct ExternalTileOrders {
  std::string method;
  std::map<std::string, std::vector<TritonTile>> orders;  // problem -> configurations, best first
};

// Errors (INVALID_ARGUMENT) name `what`, the line and what was expected: a missing or
// empty "# method:" line, a line without two fields, a configuration that does not parse,
// a configuration listed twice for one problem.
absl::StatusOr<ExternalTileOrders> ParseTileOrders(absl::string_view text, absl::string_view what);

// Reads and parses the file at `path`.
absl::StatusOr<ExternalTileOrders> ReadTileOrders(const std::string& path);

// The method's scores of a problem's rows (lower = measured first): a listed
// configuration's position, an unlisted one after every listed one.
std::vector<double> ExternalOrderScores(const std::vector<TritonTile>& listed, const std::vector<TritonTile>& tiles);

// The method's report over `problems`. FAILED_PRECONDITION naming the problem (and
// `what`) when the orders have none for one of them.
absl::StatusOr<MethodReport> ExternalOrderReport(const ExternalTileOrders& orders,
                                                 const std::vector<KnownTileProblem>& problems,
                                                 const std::string& collection, const std::string& split,
                                                 absl::string_view what);

}  // namespace tgraph
