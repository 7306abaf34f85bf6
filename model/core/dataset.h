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

// A model's collection: one of the dataset's five ("layout:xla:random", "tile:xla"),
// or a name of the user's own ("layout@tpu-v5e", "tile@gpu-a100": the kind, then a
// free name), for a farm that tunes for its own hardware rather than for a dataset's
// search strategy. A named collection's data (its TpuGraphs-format files, its
// measurements) lives under npz/<kind>/@<name>/<split>; it trains as an xla:random
// collection does (batch, epochs).
struct Collection {
  CollectionKind kind = CollectionKind::kLayout;
  std::string source;  // "xla" or "nlp"; empty when named
  std::string search;  // "random", "default", "near-default", "near-best", "region" or "picks"; empty for tile and when named
  std::string model;   // the free name of a named collection ("tpu-v5e"), else empty
  bool named() const { return !model.empty(); }
  std::string name() const;  // "layout:xla:random", "tile:xla", "layout@tpu-v5e"
};

// Configurations sampled per graph and training step when not set: 64 for the default
// collections, 128 otherwise (TGraph paper 3.1).
inline int64_t DefaultTrainingBatch(const Collection& c) { return c.search == "default" ? 64 : 128; }

// The five collections of the dataset, in the order of docs/format.md.
const std::vector<Collection>& AllCollections();
// Collections only tgraph-synth writes, beside the dataset's, same graphs as a source's
// random and default ones (docs/synthetic-data.md): "layout:<source>:near-default" (the
// compiler default's one-group neighbourhood) and "layout:<source>:near-best" (that of
// the genetic search's best row), where a search spends its measurements.
const std::vector<Collection>& NeighbourhoodCollections();
// Whether `c` is one of NeighbourhoodCollections(): every file one row's neighbourhood.
bool IsNeighbourhood(const Collection& c);
// "layout:<source>:picks": per graph, the rows a trained model's search chose and a
// (simulated) farm measured, round after round from the compiler default, with the
// runtimes as measured; same graphs and names as the source's other collections.
// tgraph-bench-search --write_picks writes them (docs/synthetic-data.md), never
// tgraph-synth: they need a model. Where a search that optimises a model goes is where
// the model is wrong, so a model trained on them learns the rows its search would pick.
const std::vector<Collection>& PicksCollections();
bool IsPicks(const Collection& c);
// "layout:<source>:region": per graph, rows 2 to kDefaultSearchRadius layout groups away
// from the compiler default and from the genetic search's best row (in turn), where the
// server's search proposes within its trust region; tgraph-synth writes them.
const std::vector<Collection>& RegionCollections();
// Parses "layout:xla:random" etc. (the neighbourhood and picks collections too) and "layout@NAME" / "tile@NAME" (NAME: 1-64 of
// a-z, 0-9, '.', '_' and '-', starting with a letter or digit); the error lists the
// valid names.
absl::StatusOr<Collection> ParseCollection(absl::string_view name);

inline const std::vector<std::string>& AllSplits() {
  static const std::vector<std::string> kSplits = {"train", "valid", "test"};
  return kSplits;
}

// <root>/npz/layout/xla/random/<split>; <root>/npz/layout/@NAME/<split> when named
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
