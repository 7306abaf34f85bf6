// The one scoring function used by the evaluator, trainer validation and server:
// configurations in batches of B through every fold, test-time augmentation with N
// random permutations when they exceed one batch (skipped when they fit: the network
// is equivariant over configurations), fold average, and the spread across folds.
//
// Folds are averaged on a common scale: the pairwise ranking loss is shift- and
// scale-free, so each fold learns its own offset and scale, and a plain mean would follow
// the fold with the largest scale. Each fold's scores are standardised over the
// request's configurations (mean 0, std 1) before the mean; `spread` is the std of the
// standardised fold scores. Scores are therefore comparable within one result only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/metrics.h"  // RankByScore
#include "model/tgraph_net.h"

namespace tgraph {

// Configurations as stored: layout rows (int8, count x nc x 18) or tile rows
// (float, count x 24). Exactly one pointer is set.
struct ConfigRows {
  const int8_t* layout = nullptr;
  const float* tile = nullptr;
  int64_t count = 0;
  int64_t num_config_nodes = 0;
};

// Rows idx[begin..end) of `rows` as a network input: layout values shifted to
// embedding indices (model/config_rows.h), tile rows copied.
ConfigBatch GatherConfigs(const ConfigRows& rows, const std::vector<int64_t>& idx, size_t begin, size_t end);

struct ScoringOptions {
  int64_t batch_size = 128;
  int tta = 10;        // at most this many permutations when count > batch_size
  // A fold stops its permutation passes once the ranking after p passes agrees with
  // the ranking after p - 1 to this Kendall tau (checked from p = 2 on); 0 runs all
  // `tta` passes. On trained models extra passes changed nothing measurable, so most
  // requests stop after 2 (docs/results.md).
  double tta_agreement = 0.999;
  // When set (one fold): the fold's mean scores after each pass it ran, appended in order
  // (what PassesForAgreement reads).
  std::vector<std::vector<double>>* pass_means = nullptr;
  uint64_t seed = 0;   // permutations are a function of the seed: same input, same scores
  // Polled before every batch; when it returns true the scoring stops early (a
  // cancelled or expired RPC stops consuming compute).
  std::function<bool()> cancelled;
};

// One fold's network and, optionally, its cached StaticEncoding of this graph.
struct FoldModel {
  RankingNet* net = nullptr;
  const StaticEncoding* cache = nullptr;
};

struct ScoreResult {
  std::vector<double> score;   // mean of the folds' standardised scores; lower = predicted faster
  std::vector<double> spread;  // population std of the standardised fold scores (0 with one fold)
  int64_t batches = 0;         // forward passes run, over all folds
  int64_t passes = 0;          // permutation passes run, over all folds
  int64_t rescored = 0;        // ScoreCascade: configurations scored by every fold
  bool cancelled = false;      // stopped early by ScoringOptions::cancelled; scores incomplete
};

// v = (v - mean) / std over its entries (population std); all entries 0 when they are
// equal.
void StandardizeInPlace(std::vector<double>& v);

// How `count` configurations are cut into batches of at most `batch_size`:
// ceil(count / batch_size) batches of near-equal size (sizes differ by at most one), so
// that no batch is a lone remainder (a softmax over one configuration). Returns the
// batch boundaries 0 = b_0 < b_1 < ... < b_k = count.
std::vector<int64_t> BatchBounds(int64_t count, int64_t batch_size);

// Runs without autograd. Scores of one fold are averaged over the TTA passes it ran.
ScoreResult ScoreConfigs(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& options);


// The top-k cascade, for requests that want only the best few: every configuration is
// scored by the first fold; the best max(ceil(fraction x count), 2 x top_k) are scored
// again by every fold. Those get the full ensemble's scores (and spread); the others
// keep the first fold's, shifted so that each ranks after every re-scored one (spread
// 0). With one fold, top_k <= 0, or everything kept, it is ScoreConfigs.
ScoreResult ScoreCascade(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& options, int64_t top_k, double fraction = 0.25);

// The smallest p whose mean scores after p passes rank the configurations like those
// after all N passes (pass_means[N-1]) to Kendall tau >= agreement; N for none earlier,
// 0 for no passes.
int PassesForAgreement(const std::vector<std::vector<double>>& pass_means, double agreement);

}  // namespace tgraph
