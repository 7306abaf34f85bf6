// tgraph-synth's engine: presets, one task per graph (deterministic per seed and
// independent of thread count), the dataset's directory layout, and a summary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/synth/families.h"

namespace tgraph::synth {

struct Range {
  int64_t lo = 0, hi = 0;
};

struct FamilySpec {
  int train = 0, valid = 0, test = 0;
  Range nodes;           // target node count
  Range configs_random;  // configurations per graph, random search (and the tile collection)
  Range configs_default; // configurations per graph, genetic ("default") search
};

struct PresetSpec {
  std::string name;
  FamilySpec xla, nlp, tile;
  bool log_uniform = false;  // draw sizes log-uniformly (the real dataset is heavy-tailed)
};

// "tiny", "ci", "nlp-scale" or "full"; the error lists them.
absl::StatusOr<PresetSpec> GetPreset(const std::string& name);

struct GenerateOptions {
  std::string out;
  std::string preset = "ci";
  // One seed, or several written side by side as one dataset (more graphs for the
  // same preset): each graph as its seed's own run writes it, the file named s<SEED>_<name>.
  std::vector<uint64_t> seeds = {0};
  std::vector<Collection> collections;  // empty: all five
  int threads = 0;                      // 0: all cores
  bool hide_test_runtimes = false;      // zero test runtimes, as the public dataset does
  bool progress = false;                // a line per graph on stderr
  int max_graphs_per_split = -1;        // -1: as the preset says
};

struct SplitSummary {
  std::string collection, split;
  int graphs = 0;
  int64_t nodes_min = 0, nodes_max = 0, nodes_total = 0;
  int64_t config_nodes_total = 0;
  int64_t configs_total = 0;
  int64_t duplicate_configs = 0;  // rows that repeat an earlier row of the same graph
  double spread_sum = 0;          // sum over graphs of MedianOverBest
  int64_t bytes = 0;              // file sizes
};

struct GenerateSummary {
  std::vector<SplitSummary> splits;
  double seconds = 0;
  std::string Table() const;  // human-readable, one row per collection and split
};

absl::StatusOr<GenerateSummary> Generate(const GenerateOptions& options);

// Graph `index` of a layout collection as the generator builds it (indices run over
// the train, valid and test splits in that order), with its configurable nodes: what a
// simulated farm measures with LayoutCostModel (model/synth/cost_model.h).
struct LayoutInstance {
  std::string name;  // the file's name, without .npz
  BuiltGraph built;
  std::vector<int64_t> config_ids;
};
LayoutInstance MakeLayoutInstance(const PresetSpec& preset, uint64_t seed, const Collection& collection, int index);

// Median runtime / best runtime of one graph's configurations: how far a typical
// configuration is from the best (about 1 for the genetic search, more for random).
double MedianOverBest(std::vector<int64_t> runtimes);

}  // namespace tgraph::synth
