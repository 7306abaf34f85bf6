// Model-guided search of a graph's layout space (SearchConfigs): an evolutionary search
// with the model as fitness, as TVM's MetaSchedule and Ansor run with their cost models,
// that returns the configurations worth measuring next.
//
// - Every row it evaluates is legal and a combination of the space's candidates
//   (model/core/layout_space.h), except where it keeps the start rows' own layouts, or
//   one of options.candidates when the caller restricts it to those.
// - Fitness is the first fold, scored against one reference fixed for the whole search
//   (model/nn/scoring.h, RecordReference): scores compare across generations and
//   batches. The reference is the start rows, then random rows of the space drawn with
//   the seed, up to options.reference rows.
// - The population starts from the reference, then the compiler's default and mutants
//   of it and of the start rows (the measured good ones); each generation breeds children by uniform crossover of tournament-chosen parents and
//   mutation of one to three groups to another candidate, with a share `explore` of
//   fresh random rows (epsilon-greedy exploration); parents and children compete for the
//   next population. A row already evaluated or excluded is never evaluated again.
// - The best rows by fitness are scored by every fold against the same reference (the
//   first fold's fitness reused; the scores ScoreConfigs, and RankConfigs, give them with
//   that reference, tested) and returned best first, none excluded, none repeated;
//   options.variation's random mutations of measured rows follow them.
// - With options.correction, fitness and final scores add what the graph's measured
//   runtimes predict for the row, so that the search follows the graph's own
//   measurements where the model has not learned them yet, and subtract a bonus for
//   how little they say about it (options.exploration), so that it also tries what
//   they have not pinned down; the results are then chosen one at a time, each with
//   the bonus left once those before it are measured (options.spread_proposals). Both
//   weights shrink where the fitness already predicts the measurements
//   (options.adapt_correction).
// - Deterministic for a seed (the same rows and scores on a machine), and bounded:
//   options.evaluations rows through the fitness fold (the reference and the measured
//   rows adapt_correction scores included) and options.finalists through every fold.
//
// Threads: runs on the caller's thread (its LibTorch intra-op threads run the matmuls);
// it borrows the folds, graph tensors and space for the call, and may run beside other
// searches and rankings on the same folds (model/nn/tgraph_net.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/core/layout_space.h"
#include "model/search/measured_correction.h"
#include "model/nn/scoring.h"

namespace tgraph {

struct SearchOptions {
  int64_t results = 10;          // rows returned
  int64_t evaluations = 2048;    // rows through the fitness fold, the reference (and adapt_correction's) included
  int64_t population = 128;
  int64_t reference = 128;       // the fixed reference's rows (capped by the budget's batch)
  int64_t finalists = 0;         // rows re-scored by every fold; 0: max(2 x results, 32)
  double explore = 0.05;         // share of each generation that is fresh random rows
  uint64_t seed = 0;
  const std::vector<int8_t>* start = nullptr;    // rows (count x nc x 18) to start from
  const std::vector<int8_t>* exclude = nullptr;  // rows never to return (already measured)
  // When set, the only rows it may evaluate and return (e.g. a file's measured pool, so
  // that real runtimes judge the search): the reference's random rows and every bred
  // child become the candidate nearest to it (fewest differing values) among a random
  // sample of kCandidateSample not yet evaluated; the search ends when none is left.
  const std::vector<int8_t>* candidates = nullptr;
  ScoringOptions scoring;        // batch size, reference groups, cancellation
  // When set (borrowed for the call), what the graph's measurements say: every row's
  // standardised score, fitness and final, gets correction_weight times the
  // correction's prediction added (model/search/measured_correction.h).
  const MeasuredCorrection* correction = nullptr;
  double correction_weight = 3.0;
  // With a correction, every score also gets this weight times the correction's
  // Uncertainty subtracted: among rows it predicts alike, the search prefers those the
  // measurements say least about, so that it also tries what they have not pinned down.
  double exploration = 10.0;
  // With a correction and exploration: the results are chosen one at a time among the
  // finalists, each scored with the uncertainty left once those before it are measured
  // (MeasuredCorrection::AddPending; the mean is unchanged), so that a round's
  // proposals explore different unknowns rather than all the same one (GP-BUCB). Their
  // scores are those they were chosen with: in order, each no better than the one
  // before.
  bool spread_proposals = true;
  // With a correction: correction_weight and exploration are scaled down by how well the
  // model already predicts the graph's measurements (BlendCorrection,
  // model/search/measured_correction.h: the model's fitness scores of the correction's
  // fitted rows, at most kMaxBlendRows of the fastest, against the correction's
  // leave-one-out predictions; they count as evaluations). A model that ranks the
  // measurements well is followed, since a correction fitted to few rows would only add
  // noise to it; one that does not gets the full correction.
  bool adapt_correction = true;
  // When positive, a trust region: every row the search breeds, and every row it
  // returns, differs from the nearest anchor (the compiler's default and the start rows)
  // in at most this many layout groups; a child farther away has groups put back to that
  // anchor's, chosen at random, until it is within. The model is trusted only where it
  // has seen rows like these: the measured rows' neighbourhood, as the autotuner's own
  // mutations of 1-3 groups explore it. The random reference is scored, never bred from
  // nor returned; rows beyond the radius are returned only when fewer than `results`
  // lie within. 0: the whole space.
  int64_t radius = 0;
  // The last `variation` of the results are not the model's choice but the genetic
  // search's variation: each a random change of one to three groups of one of
  // variation_parents (rows, count x nc x 18; borrowed), never evaluated, excluded or
  // returned before (with candidates: the nearest open one), scored by every fold as the
  // others are and returned after them in the order drawn. A loop whose measurements have
  // stopped improving is stuck where the model is sure and wrong; the model cannot
  // propose its way out, random variation can (search_policy.h says when). At most
  // results - 1; their fitness evaluations are taken from `evaluations`. No parents: none.
  int64_t variation = 0;
  const std::vector<int8_t>* variation_parents = nullptr;
};

// What benchmarks replace in a search, never set by a request: a fitness of their own.
struct SearchHooks {
  // When set, the fitness and the final scores are this function of a row (nc x 18
  // values) instead of the model's (tgraph-bench-search's `oracle` runs the search with
  // the simulated hardware's own runtimes: what a perfect model would find). Called on
  // the search's thread; no fold is run, the correction is still added.
  std::function<double(const int8_t*)> fitness;
};

inline constexpr int64_t kCandidateSample = 64;
// spread_proposals chooses at most this many results one at a time; any further ones
// follow in the order the uncertainty left after those gives. Bounds its cost: each
// finalist's state is n + kMaxSpreadProposals doubles (n <= 512 fitted measurements), and
// a pick costs a group comparison and a dot product per finalist.
inline constexpr int64_t kMaxSpreadProposals = 64;
// adapt_correction scores at most this many measured rows (the fastest fitted).
inline constexpr int64_t kMaxBlendRows = 256;

struct SearchResult {
  std::vector<int8_t> rows;      // results x nc x 18, best first
  std::vector<double> score, spread;
  int64_t evaluations = 0;       // rows through the fitness fold
  int64_t generations = 0;
  int64_t reference = 0;         // rows in the fixed reference
  std::vector<int8_t> reference_rows;  // reference x nc x 18: ScoreConfigs with it gives `score`
  bool cancelled = false;
  // The correction's weight and exploration the search used (options' own unless
  // adapt_correction scaled them), and the blend behind them.
  double correction_weight = 0, exploration = 0;
  CorrectionBlend blend;
  int64_t variation = 0;         // the last rows that are variation (options.variation, or fewer when none was left)
};

SearchResult SearchLayouts(const std::vector<FoldModel>& folds, const GraphTensors& graph, const LayoutSpace& space,
                           const SearchOptions& options, const SearchHooks& hooks = {});

}  // namespace tgraph
