// Typed loading and saving of layout and tile graphs in the TpuGraphs .npz format
// (docs/format.md): dtypes and shapes checked, every invariant validated, precise errors.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "model/core/graph.h"
#include "model/core/npy.h"

namespace tgraph {

// Converts a parsed archive. `what` (the path) and the key prefix every error.
// allow_no_configs: see ValidateLayoutGraph (graph-only files).
absl::StatusOr<LayoutGraph> LayoutGraphFromNpz(const NpzArchive& npz, absl::string_view what,
                                               bool allow_no_configs = false);
absl::StatusOr<TileGraph> TileGraphFromNpz(const NpzArchive& npz, absl::string_view what);

// Reads, converts and validates one file. The graph's name is the file stem.
absl::StatusOr<LayoutGraph> LoadLayoutGraph(const std::string& path, bool allow_no_configs = false);
absl::StatusOr<TileGraph> LoadTileGraph(const std::string& path);

// The archive numpy.load sees: keys, dtypes, shapes and orders of the real files
// (docs/format.md): node_opcode uint8, ids/edges/runtimes int64, features float32,
// node_splits (1, k); layout edge_index in Fortran order, tile edge_index in C order.
NpzArchive LayoutGraphToNpz(const LayoutGraph& g);
// The same from the parts of a layout graph (what the measurement store writes without
// assembling a LayoutGraph copy of a report), node_config_feat as float32 (the
// dataset's dtype) or int8 (measurement shards: a quarter of the memory and disk; the
// loaders read both).
NpzArchive LayoutToNpz(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids, int64_t num_configs,
                       const std::vector<int8_t>& config_feat, const std::vector<int64_t>& config_runtime,
                       const std::vector<int64_t>& node_splits, DType config_dtype);
NpzArchive TileGraphToNpz(const TileGraph& g);
absl::Status SaveLayoutGraph(const std::string& path, const LayoutGraph& g, bool allow_no_configs = false);
absl::Status SaveTileGraph(const std::string& path, const TileGraph& g);

// Layout configuration rows for a graph with nc configurable nodes, from a .npy array
// or an .npz (key node_config_feat, or its only array): shape (c, nc, 18), or (nc, 18)
// for one row; any float or signed dtype; every value an integer in -1..5. Errors name
// the file and what was expected.
// With `only_row` >= 0, only that row is converted and checked (a bad row elsewhere is
// not its caller's concern): `values` holds it alone (empty when the file has no such
// row; `count` says how many it has).
struct LayoutConfigRows {
  int64_t count = 0;
  std::vector<int8_t> values;  // count x nc x 18, or the one row asked for
};
absl::StatusOr<LayoutConfigRows> LoadLayoutConfigRows(const std::string& path, int64_t nc, int64_t only_row = -1);

// Measured runtimes in nanoseconds, one per configuration row, from an .npy of shape (c,)
// (any integer or float dtype) or a text file of numbers separated by spaces, commas or
// newlines ('#' starts a comment). Every value an integer > 0 (a float such as 1.5e6 is
// taken when it is whole). Errors name the file, the runtime's index and its value.
absl::StatusOr<std::vector<int64_t>> LoadRuntimes(const std::string& path);

// "dir/foo.npz" -> "foo".
std::string GraphNameFromPath(absl::string_view path);

}  // namespace tgraph
