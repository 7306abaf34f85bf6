// The methods tgraph-eval --baselines sets beside a model, chosen by what the collection
// holds: a tile space (tgraph-featurize tiles) gives tile_baselines.h's methods over its
// Triton problems; fusion tables (tgraph-featurize fusions: XLA's Triton GEMM fusions)
// give xla_gemm_baselines.h's. Both learn from the train and valid splits, as the model
// did, and are scored on the evaluated split.
//
// Torch-free; reads the collection's files on the calling thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/tile/tile_baselines.h"

namespace tgraph {

// The baselines' reports on `split` of collection `c` under `root`. FAILED_PRECONDITION
// for a collection with neither a tile space nor fusion tables (a layout collection, or
// tiles written before either existed), naming what makes them; the errors of reading
// the files otherwise (a fusion graph no table of its folder lists: FAILED_PRECONDITION).
// `order_files`: orders made outside tgraph (tile_orders.h, e.g. scripts/nvmmh-orders),
// one method each, placed before random order; for a collection with a tile space only
// (FAILED_PRECONDITION for fusion tables), and each file must order every evaluated problem.
absl::StatusOr<std::vector<MethodReport>> BaselineReports(const std::string& root, const Collection& c,
                                                          const std::string& split,
                                                          const std::vector<std::string>& order_files = {});

}  // namespace tgraph
