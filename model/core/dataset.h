// Collections of the TpuGraphs directory layout and lazy access to their graph files:
// <root>/npz/layout/<source>/<search>/<split>/*.npz and <root>/npz/tile/xla/<split>/*.npz.
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tgraph {

enum class CollectionKind { kLayout, kTile };

struct Collection {
  CollectionKind kind = CollectionKind::kLayout;
  std::string source;  // "xla" or "nlp"
  std::string search;  // "random" or "default"; empty for tile
  std::string name() const;  // "layout:xla:random", "tile:xla"
};

// Configurations sampled per graph and training step when not set: 64 for the default
// collections, 128 otherwise (TGraph paper 3.1).
inline int64_t DefaultTrainingBatch(const Collection& c) { return c.search == "default" ? 64 : 128; }

// The five collections of the dataset, in the order of docs/format.md.
const std::vector<Collection>& AllCollections();
// Parses "layout:xla:random" etc.; the error lists the valid names.
absl::StatusOr<Collection> ParseCollection(absl::string_view name);

inline const std::vector<std::string>& AllSplits() {
  static const std::vector<std::string> kSplits = {"train", "valid", "test"};
  return kSplits;
}

// <root>/npz/layout/xla/random/<split>
std::string SplitDir(const std::string& root, const Collection& c, absl::string_view split);

struct GraphFile {
  std::string name;  // file stem
  std::string path;
};

// The .npz files of one split, sorted by name. Nothing is loaded: callers load each
// file when they need it (LoadLayoutGraph / LoadTileGraph), so a split of any size
// can be walked. A missing split directory is NOT_FOUND with the path in the message.
absl::StatusOr<std::vector<GraphFile>> ListSplit(const std::string& root, const Collection& c,
                                                 absl::string_view split);

// The collections that have at least one split directory under root.
std::vector<Collection> FindCollections(const std::string& root);

}  // namespace tgraph
