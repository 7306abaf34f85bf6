// The one scoring function used by the evaluator, trainer validation and server:
// configurations in batches of B through every fold, fold average, and the spread
// across folds.
//
// Scores that do not depend on what shares a batch. TGraph's cross-attention compares
// a configuration with others through a softmax over configurations; run over each batch,
// a score moved with its neighbours in the batch, which test-time augmentation (TTA:
// several permuted passes, averaged) only papered over. Here the softmax runs over a
// *reference*: a set of configurations fixed for the request. The reference is scored
// once per fold as one batch (the paper's softmax over it), recording its statistics per
// node and channel (model/nn/chunked_block.h, CrossStats); every other configuration joins the
// reference's softmax alone. A configuration's score is therefore a function of the
// graph, the model version, the reference and its own row only: the same whatever the
// order of the request's rows, the batch size and the other rows of its batch (tested),
// and one pass is all there is. Identical rows get identical scores (they are scored
// once). Training runs the reference's softmax as a batch's (model/train/train_step.h;
// --query_share also trains the path of the configurations outside it).
//
// The reference is ScoringOptions::reference when given (a search, or a client that wants
// scores comparable across requests, fixes it: every fold uses it); otherwise each fold
// k chooses its own from the request (ChooseReference with salt k, so the fold average
// is also an average over references): its distinct rows with the smallest salted row
// hashes, up to reference_size (the model manifest's; capped by max_reference, the
// activation budget). Requests whose references are the same sets get comparable scores;
// a request with no more distinct rows than reference_size is every fold's reference.
//
// The reference runs in groups (ScoringOptions::reference_groups, the manifest's: the
// size of a training batch each), each its own softmax; a configuration's attention
// weights are the mean over the groups, which gives in one pass the average over
// training-sized contexts that TTA took many passes for.
//
// Folds are averaged on a common scale: the pairwise ranking loss is shift- and
// scale-free, so each fold learns its own offset and scale, and a plain mean would follow
// the fold with the largest scale. Each fold's scores are standardised by the mean and
// std of its scores of the reference's configurations before the mean; `spread` is the
// std of the standardised fold scores.
//
// ScoringOptions::batch_softmax keeps the earlier scoring (each batch its own softmax,
// TTA permutations) for the ablation tables.
//
// Threads: the scoring functions hold no state of their own; several may run at once,
// on the same folds too (model/nn/tgraph_net.h), each on the thread that calls it
// (whose LibTorch intra-op threads run the matmuls). They borrow the folds, the graph
// tensors and the rows for the call; ScoringOptions::cancelled is polled on the
// calling thread between batches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/core/rank_metrics.h"  // RankByScore
#include "model/tile/tile_prior.h"
#include "model/nn/tgraph_net.h"

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
// embedding indices (model/core/config_rows.h), tile rows copied.
ConfigBatch GatherConfigs(const ConfigRows& rows, const std::vector<int64_t>& idx, size_t begin, size_t end);

// The earlier scoring, kept for ablations: each batch is its own softmax, with up to
// `tta` random permutations when the configurations exceed one batch.
struct BatchSoftmaxAblation {
  bool on = false;
  int tta = 10;
  // A fold stops its permutation passes once the ranking after p passes agrees with the
  // ranking after p - 1 to this Kendall tau (checked from p = 2 on); 0 runs all `tta`.
  double tta_agreement = 0.999;
  // One fold: the fold's mean scores after each pass it ran, appended in order (what
  // PassesForAgreement reads).
  std::vector<std::vector<double>>* pass_means = nullptr;
  uint64_t seed = 0;   // permutations are a function of the seed
};

struct ScoringOptions {
  int64_t batch_size = 128;
  // The reference's size when chosen from the request (the manifest's
  // inference.reference_configs). It runs as one batch, which may be larger than
  // batch_size; max_reference (> 0) caps it (the activation budget's batch).
  int64_t reference_size = 256;
  int64_t max_reference = 0;
  // A fixed reference (rows of the same graph and kind), used by every fold; null: each
  // fold chooses its own from `choose_from` (default: the scored rows).
  const ConfigRows* reference = nullptr;
  const ConfigRows* choose_from = nullptr;
  // Without a fixed reference: fold k chooses its own (ChooseReference with salt k), so
  // that the fold average is also an average over references; false: salt 0 for all.
  bool reference_per_fold = true;
  // The reference in this many groups, each its own softmax, weights averaged (ScoreMode;
  // the manifest's reference_groups).
  int64_t reference_groups = 1;
  // The earlier scoring, for ablations only (tgraph-eval --scoring batch,
  // tgraph-bench-model): never set by a request.
  BatchSoftmaxAblation batch_softmax;
  // Polled before every batch; when it returns true the scoring stops early (a
  // cancelled or expired RPC stops consuming compute).
  std::function<bool()> cancelled;
  // Tile rows: a published model's prior for the request's problem (TilePrior::For,
  // model/tile/tile_prior.h): each row's score is network_share x the folds' mean plus
  // weight x its value. Only a function of the row, so scores stay independent of what shares the
  // request. Null: the network alone (training, validation, layout rows). Shared, so
  // that copies of the options stay cheap.
  std::shared_ptr<const TilePriorValues> tile_prior;
};

// One fold's network and, optionally, its cached StaticEncoding of this graph.
struct FoldModel {
  RankingNet* net = nullptr;
  const StaticEncoding* cache = nullptr;
  // The fold's index in its model: its reference's salt (ScoringOptions::reference_per_fold),
  // so that a fold meets the same reference alone and in any ensemble. -1: its position
  // in the list scored.
  int index = -1;
};

struct ScoreResult {
  std::vector<double> score;   // mean of the folds' standardised scores (plus a tile prior); lower = predicted faster
  std::vector<double> spread;  // population std of the standardised fold scores (0 with one fold)
  int64_t batches = 0;         // forward passes run, over all folds
  int64_t evaluated = 0;       // configurations those forward passes ran, over all folds
  int64_t passes = 0;          // permutation passes run, over all folds
  int64_t rescored = 0;        // ScoreCascade: configurations scored by every fold
  int64_t reference = 0;       // configurations in the reference (0 with batch_softmax)
  bool cancelled = false;      // stopped early by ScoringOptions::cancelled; scores incomplete
};

// How many of `scores` are not finite: a model that overflowed inside the network for a
// graph (weights are checked finite at load), which must never be answered as OK.
int64_t CountNonFinite(const std::vector<double>& scores);

// The groups a fixed reference of `rows` configurations runs in, so that each is about
// the size of the model's (reference_configs / reference_groups, a training batch): a
// search's 128-row reference of a model of 2 groups of 128 is one group, and RankConfigs
// given that reference scores it the same way.
int64_t FixedReferenceGroups(int64_t rows, int64_t reference_configs, int64_t reference_groups);

// v = (v - mean) / std over its entries (population std); all entries 0 when they are
// equal.
void StandardizeInPlace(std::vector<double>& v);

// How `count` configurations are cut into batches of at most `batch_size`:
// ceil(count / batch_size) batches of near-equal size (sizes differ by at most one), so
// that no batch is a lone remainder (a softmax over one configuration). Returns the
// batch boundaries 0 = b_0 < b_1 < ... < b_k = count.
std::vector<int64_t> BatchBounds(int64_t count, int64_t batch_size);

// A 64-bit FNV-1a hash of row i's bytes: fixed by this definition, so the reference a
// request chooses is the same on every build and machine.
// With a salt, the FNV-1a hash of the salt's 8 bytes (little-endian) and then the row's.
uint64_t RowHash(const ConfigRows& rows, int64_t i, uint64_t salt = 0);

// The reference chosen from `rows`: the indices of its distinct rows with the `size`
// smallest (RowHash, bytes), in that order (all distinct rows when there are fewer).
// With a salt, the smallest salted hashes (another, independent sample of the rows).
std::vector<int64_t> ChooseReference(const ConfigRows& rows, int64_t size, uint64_t salt = 0);

// A reference recorded once and reused by many calls (a search's fitness): one fold's
// statistics of it and its scores, with their mean and std (the fold's common scale).
// Holds the fold (and its encoding of the graph) for ScoreAgainstRecorded.
struct RecordedReference {
  FoldModel fold;
  std::shared_ptr<const StaticEncoding> own_cache;  // when the fold had none
  CrossReference stats;
  std::vector<double> scores;  // the reference's own, raw
  double mean = 0, sd = 0;
  int64_t count = 0;
};

// Fold f's reference `reference`, scored as one batch in o.reference_groups groups, as
// ScoreConfigs scores a fixed reference.
RecordedReference RecordReference(const FoldModel& f, const GraphTensors& graph, const ConfigRows& reference,
                                  const ScoringOptions& o);

// Rows idx of `rows`, each joining the recorded reference's softmax alone, in batches of
// o.batch_size: standardised on the reference's scale (raw: as the network scores them).
// What ScoreConfigs gives a row outside a fixed reference, for one fold. Empty when
// o.cancelled says stop; *batches (optional) counts the forward passes.
std::vector<double> ScoreAgainstRecorded(const FoldModel& f, const GraphTensors& graph, const ConfigRows& rows,
                                         const std::vector<int64_t>& idx, const RecordedReference& rec,
                                         const ScoringOptions& o, int64_t* batches = nullptr, bool raw = false);

// Runs without autograd.
ScoreResult ScoreConfigs(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& options);


// The top-k cascade, for requests that want only the best few: every configuration is
// scored by the first fold; the best max(ceil(fraction x count), 2 x top_k) are scored
// again by every fold, against the same references (chosen from all the rows); the
// first fold's scores of those come from the first stage. Those get the full ensemble's scores (and spread); the others
// keep the first fold's, shifted so that each ranks after every re-scored one (spread
// 0). With one fold, top_k <= 0, or everything kept, it is ScoreConfigs.
ScoreResult ScoreCascade(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& options, int64_t top_k, double fraction = 0.25);

// The smallest p whose mean scores after p passes rank the configurations like those
// after all N passes (pass_means[N-1]) to Kendall tau >= agreement; N for none earlier,
// 0 for no passes.
int PassesForAgreement(const std::vector<std::vector<double>>& pass_means, double agreement);

}  // namespace tgraph
