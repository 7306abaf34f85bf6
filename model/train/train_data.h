// Training data in memory, as the TGraph paper prepares it (2.2): layout graphs
// de-duplicated, pruned and with base-7-compressed configurations; tile graphs with
// their targets config_runtime / config_runtime_normalizers. Plus K-fold assignment.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/preprocess.h"
#include "model/store/registry.h"
#include "model/train/config_spill.h"

namespace tgraph {

struct GraphData {
  std::string name;
  std::string split;                   // where it came from: train / valid / test
  NodeGraph graph;                     // pruned for layout, as loaded for tile
  std::vector<int64_t> config_nodes;   // layout: node index of each configurable node
  int64_t original_nodes = 0;
  // Layout: the configurations, base-7 compressed, in memory (configs.codes) or, when
  // `spill` is set, on disk at spill_offset (configs.codes empty; the counts still set).
  CompressedConfigs configs;
  std::shared_ptr<const ConfigSpill> spill;
  int64_t spill_offset = 0;
  std::string configs_digest;          // SHA-256 of the codes (DataFingerprint)
  // Tile:
  std::vector<float> tile_feat;        // c x 24
  // Tile graphs of a run trained on the prior's errors (TilePrior::residual): weight x
  // the prior's value of each row, what the published model adds to the network's
  // standardised scores; the training loss and validation see that sum
  // (AccumulateGradients, train_step.h). Empty: the network alone.
  std::vector<double> prior_offset;
  // Both: what the ranking should follow (runtime, or the tile ratio), one per config.
  std::vector<double> target;
  int64_t num_configs() const { return static_cast<int64_t>(target.size()); }
  // Decompresses the given rows (layout only) into count x nc x 18 int8 values, from
  // memory or the spill file. A failed read of the spill file throws std::runtime_error
  // (the trainer reports it as its fold's error).
  std::vector<int8_t> LayoutRows(const std::vector<int64_t>& rows) const;
};

struct LoadOptions {
  bool dedup = true;
  bool prune = true;
  // LoadCollectionData: configurations stay in memory until they would take more than
  // config_memory_bytes (< 0: no limit); the graphs after that go to `spill`, which
  // must then be set. The graphs' own tensors stay in memory.
  int64_t config_memory_bytes = -1;
  std::shared_ptr<ConfigSpill> spill;
  // Called after each graph with (done, total, name): progress output.
  std::function<void(size_t, size_t, const std::string&)> progress;
};

// A layout graph already in memory (e.g. merged measurements) as training data:
// de-duplicated and pruned per `options`, named `name`.
GraphData LayoutGraphData(LayoutGraph g, const std::string& name, const std::string& split,
                          const LoadOptions& options = {});

// Loads one graph file of a collection. Errors name the file.
absl::StatusOr<GraphData> LoadGraphData(const GraphFile& file, const std::string& split, CollectionKind kind,
                                        const LoadOptions& options = {});

// Loads every graph of the given splits of a collection, sorted by name.
absl::StatusOr<std::vector<GraphData>> LoadCollectionData(const std::string& root, const Collection& c,
                                                          const std::vector<std::string>& splits,
                                                          const LoadOptions& options = {});

// Sets a tile graph's prior_offset from `prior` for its problem (GemmProblemOfGraph);
// leave_shape_out: without the measured problems of its shape (a run's own graphs, whose
// runtimes built the prior, so that the network learns the errors the prior makes on
// shapes it has not seen).
void AttachTilePrior(const TilePrior& prior, const GemmProblem& problem, bool leave_shape_out, GraphData* g);

// SHA-256 over the graphs' names, content hashes, configs and targets, in name order.
std::string DataFingerprint(const std::vector<GraphData>& graphs);

// What a run trains on: synthetic when `root` holds tgraph-synth's SYNTHETIC.txt (its
// first line names the preset and seed), else real (the root as given); the graphs and
// their distinct configurations.
Provenance DataProvenance(const std::string& root, const std::vector<GraphData>& graphs);

// fold id of each graph: graphs in name order, shuffled by seed, dealt round-robin;
// NAME@SEARCH (another search's file of graph NAME, TrainOptions::also) gets NAME's fold.
std::vector<int> AssignFolds(const std::vector<GraphData>& graphs, int num_folds, uint64_t seed);

// What a fold holds out (TrainOptions::fold_by). kGraph: graphs (AssignFolds above). For a
// collection of Triton matrix-product problems, groups of problems dealt the same way:
// kM, kN, kK, every problem with one value of that size (a fold then validates, and
// chooses the network's share, on sizes no problem it trained on had); kShape, every
// problem of one (M, N, K), whatever its dtype.
enum class FoldBy { kGraph, kM, kN, kK, kShape };
// "graph", "m", "n", "k" or "shape"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<FoldBy> ParseFoldBy(absl::string_view text);
std::string FoldByName(FoldBy by);
// INVALID_ARGUMENT naming the graph when `by` groups problems and one is not a Triton
// matrix product's (GemmProblemOfGraph).
absl::StatusOr<std::vector<int>> AssignFolds(const std::vector<GraphData>& graphs, int num_folds, uint64_t seed,
                                             FoldBy by);

}  // namespace tgraph
