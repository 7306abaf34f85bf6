// The simulated autotuning farm of tgraph-bench-search: the generator's TPU cost model
// (model/synth/cost_model.h, with its measurement noise) plays the hardware on a graph a
// model never trained on, and each strategy measures configurations until its budget:
// random rows, the genetic search that made the dataset, and the model-guided loop as
// the server and a farm run it (rounds of SearchConfigs proposals by the one search
// policy, model/search/search_policy.h, measured, excluded and started from; with
// learning, the folds fine-tuned on the measurements between rounds as tgraph-train
// finetune would). What the strategies found is judged in farm_report.h.
//
// Threads: a FarmGraph is one run's (fine-tuning changes its model); the functions run
// on the calling thread, the model's matmuls on LibTorch's intra-op threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/graph.h"
#include "model/core/layout_space.h"
#include "model/core/rng.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/model_io.h"
#include "model/search/layout_search.h"
#include "model/search/search_policy.h"
#include "model/store/registry.h"
#include "model/synth/cost_model.h"
#include "model/synth/generator.h"

namespace tgraph {

// The strategies the farm runs, in the table's order.
inline constexpr const char* kFarmStrategies[] = {"default", "random", "genetic", "tgraph", "tgraph+ft", "oracle", "noisy"};

// How the farm measures and how the guided loop searches (tgraph-bench-search's flags,
// whose defaults these are).
struct FarmOptions {
  uint64_t seed = 0;             // the generator seed of the model's data
  bool other_hardware = false;   // half the bandwidth, twice the matrix rate and copy penalty
  int64_t budget = 200;          // measurements each strategy may spend
  int64_t genetic_budget = 0;    // the genetic search's (0: budget)
  double within = 0.01;          // the gap to the best known that counts as found
  // The guided loop's rounds and each round's search.
  int64_t per_round = 10;
  int64_t evaluations = kDefaultSearchEvaluations;
  int64_t max_changed_groups = 0;  // 0: the server's default; -1: the whole space
  int64_t neighbourhood = 0;       // > 0: only rows one group from the N fastest measured
  int64_t finalists = 0;           // SearchOptions::finalists (0: its default)
  bool stall_variation = true;     // VariationFor, as the server's search
  double online_correction = SearchOptions{}.correction_weight;  // 0: no measured correction
  double exploration = SearchOptions{}.exploration;
  bool spread_proposals = SearchOptions{}.spread_proposals;
  bool adapt_correction = SearchOptions{}.adapt_correction;
  double oracle_noise = 0.01;  // the noisy strategy's error of each row's log runtime
  bool final_tau = false;      // after each guided run, print how its fitness orders the best row's neighbours
  // The learning loop's fine-tuning between rounds.
  int64_t finetune_steps = 10;
  double finetune_lr = 1e-4;
  std::string finetune_loss;  // tgraph-train --loss; empty: the model's own

  int64_t Budget() const { return budget > 0 ? budget : 1; }
  int64_t GeneticBudget() const { return genetic_budget > 0 ? genetic_budget : Budget(); }
};

// One graph of the farm: the cost model that plays the hardware, and the model's view
// (its own copy of the model: fine-tuning changes it).
struct FarmGraph {
  FarmOptions options;
  synth::LayoutInstance inst;
  std::unique_ptr<synth::LayoutCostModel> hardware;
  NodeGraph graph;
  LayoutSpace space;
  LoadedModel model;
  GraphTensors tensors;
  EncodedGraph encoded;
  std::vector<FoldModel> folds;

  // The folds' encodings of the graph, again after their weights changed.
  void Encode();
};


// True (noise-free) runtimes of what a strategy measured, in order.
using Trace = std::vector<double>;

// What a guided search's fitness is.
enum class Fitness {
  kModel,   // the model's folds (tgraph, tgraph+ft)
  kOracle,  // the hardware's own noise-free log runtime; no correction (oracle)
  kNoisy,   // that log runtime with an error of --oracle_noise per row, on the model's scale, and the correction (noisy)
};


// What a guided run measured: the true runtimes in order, and the rows with the
// runtimes the farm measured (what it would report).
struct GuidedRun {
  Trace trace;
  std::vector<int8_t> measured;
  std::vector<int64_t> runtimes;
};

// Graph `index` of the preset's layout family for collection `c`, with a fresh copy of
// the model (version `version`) and the farm's options.
absl::StatusOr<std::unique_ptr<FarmGraph>> LoadFarmGraph(const Registry& registry, int64_t version,
                                                         const Collection& c, const synth::PresetSpec& preset,
                                                         int index, const FarmOptions& o);

// The hardware's noise-free runtime of a row; of each row of `rows` (`row` bytes each).
double TrueRuntime(const FarmGraph& g, const int8_t* row);
std::vector<double> TrueRuntimes(const FarmGraph& g, const std::vector<int8_t>& rows, size_t row);
// A row's log runtime misjudged by `sigma` (one standard normal draw per row and salt,
// the same every time the row comes back), divided by `scale`.
double NoisyLogRuntime(const FarmGraph& g, const int8_t* row, double sigma, double scale, uint64_t salt);
// Kendall tau of the model's scores of `rows` and their true runtimes.
double ModelTau(FarmGraph& g, const std::vector<int8_t>& rows, size_t row);

// The strategies: budget random rows; the genetic search of genetic_budget; the guided
// loop (with `learn`, fine-tuned between rounds; Fitness::kOracle and kNoisy replace the
// model's scores by the hardware's own, exact or blurred).
Trace RandomTrace(const FarmGraph& g, Rng& rng);
Trace GeneticTrace(const FarmGraph& g, Rng& rng);
GuidedRun GuidedLoop(FarmGraph& g, uint64_t seed, Rng& rng, bool learn, Fitness fitness = Fitness::kModel);
Trace GuidedTrace(FarmGraph& g, uint64_t seed, Rng& rng, bool learn, Fitness fitness = Fitness::kModel);

}  // namespace tgraph
