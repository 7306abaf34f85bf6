// The offline trainer's loop: a run directory per training run (model/train/run_dir.h),
// K-fold by graph, one fold per call (so a Kubernetes Indexed Job can run one fold per
// pod), checkpoints that let a killed fold resume; model/train/publish.h keeps the best
// folds. One fold per process at a time: TrainFold sets LibTorch's seed and uses every
// intra-op thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/model_spec.h"
#include "model/core/preprocess.h"
#include "model/core/ranking_loss.h"
#include "model/train/train_data.h"
#include "model/tile/tile_baselines.h"
#include "model/store/registry.h"
#include "model/train/distributed.h"
#include "model/train/run_dir.h"

namespace tgraph {

struct TrainOptions {
  std::string data_root;
  Collection collection;  // what the model is published as, and its files
  // Other searches' files of the same graphs trained on beside `collection`'s (layout
  // only; the same source, another search: layout:xla:default beside layout:xla:random).
  // Each search teaches its own contrasts: random rows the global ones, the genetic
  // search's near-optimal rows the local ones a search needs to finish. Their graphs are
  // named NAME@SEARCH and share NAME's fold, so no fold validates on a graph it trained on.
  std::vector<Collection> also;
  std::string run_dir;
  ModelSpec spec;
  int num_folds = 20;       // K
  int train_folds = 5;      // folds 0..train_folds-1 are trained
  int keep_folds = 4;       // the best ones are published
  double epochs = 0;        // 0: the paper's (layout xla 750, nlp 1000, tile 17.5)
  int64_t batch_configs = 0;  // 0: 64 for default collections, 128 otherwise
  double lr = 1e-3;
  double weight_decay = 1e-5;
  double warmup_fraction = 0.05;
  double clip_norm = 1.0;
  uint64_t seed = 0;
  // What each fold holds out (train_data.h): graphs, or for Triton problems whole sizes
  // ("m": every problem of one M), so that a fold's validation, and the network's share
  // it chooses, are on sizes the fold never trained on.
  FoldBy fold_by = FoldBy::kGraph;
  int valid_every = 1;      // epochs between validations (and checkpoints)
  int64_t valid_batch = 128;
  // The cross-attention reference's size in validation and in the published manifest
  // (model/nn/scoring.h).
  int64_t reference_configs = 256;
  // Share of each step's sampled configurations that join the others' softmax one at a
  // time (ScoreMode::members), as inference scores configurations outside its reference.
  double query_share = 0.0;
  // What each step minimises (model/core/ranking_loss.h): the paper's hinge over all pairs, or
  // the same weighted to the fast end.
  RankingLoss loss = RankingLoss::kPairwiseHinge;
  // Which validation graphs choose a fold's best weights (each validation's score is
  // their mean Kendall tau): every validation graph, or only the neighbourhood
  // collections' (NeighbourhoodCollections(): the one-group neighbours of the compiler
  // default and of the best row), the order a search depends on near its optimum. The
  // latter needs a neighbourhood collection among `collection` and `also`.
  bool select_by_neighbour_tau = false;
  // The share of training before which no validation keeps weights: 0, any step's; 1,
  // the last step's. The learning rate anneals to zero, so the late weights are the
  // converged ones, while on a few validation graphs an early step, its weights still
  // moving fast, can score best by chance; a search guided by such weights needed more
  // measurements than by the same fold's last ones.
  double select_from = 0.0;
  // A collection with a tile space: the weight of its problems' prior in the published
  // model's scores (model/tile/tile_prior.h; built from the run's train and valid
  // problems). 0: the network alone. Training and validation never use it.
  double tile_prior_weight = 1.0;
  // How near a measured problem's shape must be to count in the prior for a problem
  // (TilePrior::bandwidth).
  ShapeBandwidth tile_prior_bandwidth;
  // Train the network on what the prior leaves: each training row's loss sees the
  // network's standardised score plus the prior's weighted value for its problem, the
  // prior built without the problems of that shape (AttachTilePrior, train_data.h), as
  // validation does; the published model scores the same sum. False: the network learns
  // the order alone and the prior is only added when published; a network that never
  // saw the prior can overrule it where both are sure, and did once on the H100 data
  // with a first pick 23x the fastest.
  bool tile_prior_training = true;
  // The prior reads each measured problem's near end (TilePrior::NearEnd at its
  // defaults); false: its mean log slowdown.
  bool tile_prior_near_end = true;
  // Memory for the graphs' configurations (base-7 compressed, 12 bytes per
  // configuration and configurable node): graphs past it keep theirs in a spill file in
  // spill_dir (empty: run_dir), read row by row as steps sample them
  // (model/train/config_spill.h).
  int64_t config_memory_bytes = int64_t{4} << 30;
  std::string spill_dir;
  // Configurations per validation graph: a fixed sample of each graph's (all when it has
  // no more), so that a validation's time and memory stay bounded on graphs with 100,000.
  int64_t valid_configs = 4096;
  // Data parallelism. Each step trains on graphs_per_step graphs (0: one per rank) of
  // the epoch's order, dealt round-robin to the collective's ranks; their losses are
  // averaged (each rank's gradients summed over the ranks) before one optimizer step.
  // Which graphs and configurations a step takes depends on (seed, fold, step,
  // graphs_per_step), never on the number of ranks: N ranks train the weights one rank
  // trains with the same graphs_per_step, and a checkpoint resumes with any number of
  // ranks (not another graphs_per_step). Every rank loads the data and reads its
  // checkpoint from the same run_dir (shared storage); rank 0 alone writes the fold's
  // files. Validation graphs are shared out across the ranks. `collective` is borrowed
  // (it outlives TrainFold); null: this process alone.
  int64_t graphs_per_step = 0;
  Collective* collective = nullptr;
  bool progress = true;
  int64_t stop_after_steps = 0;  // > 0: stop after this many steps in this process, as if
                                 // killed (tests, time-boxed jobs); the next call resumes
  std::map<std::string, std::string> flags;  // recorded in the manifest
};

// The run's graphs as one process loaded them (opaque): PrepareRun returns them so that
// the folds this process trains reuse them instead of loading the collection again.
struct RunData;

// Loads train+valid, computes feature statistics on them (never the test split),
// assigns folds and writes run.json, or checks that an existing run.json describes
// the same data and settings (so parallel fold processes agree).
absl::StatusOr<std::shared_ptr<const RunData>> PrepareRun(const TrainOptions& options);

// Trains one fold (resuming from its checkpoint if there is one); PrepareRun first.
// `data`: what PrepareRun returned for the same options (null: loaded again).
// With a collective, every rank calls it for the same fold; a rank that fails (or a
// peer that exits) makes every rank's call fail.
absl::StatusOr<FoldResult> TrainFold(const TrainOptions& options, int fold,
                                     std::shared_ptr<const RunData> data = nullptr);

}  // namespace tgraph
