// Typed loading and saving of layout and tile graphs in the TpuGraphs .npz format
// (FORMAT.md): dtypes and shapes checked, every invariant validated, precise errors.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "model/graph.h"
#include "model/npy.h"

namespace tgraph {

// Converts a parsed archive. `what` (the path) and the key prefix every error.
absl::StatusOr<LayoutGraph> LayoutGraphFromNpz(const NpzArchive& npz, absl::string_view what);
absl::StatusOr<TileGraph> TileGraphFromNpz(const NpzArchive& npz, absl::string_view what);

// Reads, converts and validates one file. The graph's name is the file stem.
absl::StatusOr<LayoutGraph> LoadLayoutGraph(const std::string& path);
absl::StatusOr<TileGraph> LoadTileGraph(const std::string& path);

// The archive numpy.load sees: keys, dtypes and shapes of FORMAT.md
// (node_opcode uint8, ids/edges/runtimes int64, features float32).
NpzArchive LayoutGraphToNpz(const LayoutGraph& g);
NpzArchive TileGraphToNpz(const TileGraph& g);
absl::Status SaveLayoutGraph(const std::string& path, const LayoutGraph& g);
absl::Status SaveTileGraph(const std::string& path, const TileGraph& g);

// "dir/foo.npz" -> "foo".
std::string GraphNameFromPath(absl::string_view path);

}  // namespace tgraph
