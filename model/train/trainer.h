// The offline trainer: a run directory per training run, K-fold by graph, one fold
// per call (so a Kubernetes Indexed Job can run one fold per pod), checkpoints that
// let a killed fold resume, and a publish step that keeps the best folds.
//
//   <run_dir>/run.json                  collection, data fingerprint, spec, feature stats, folds
//   <run_dir>/fold_<k>/log.jsonl        one JSON object per epoch
//   <run_dir>/fold_<k>/state.json       checkpoint: step, best score, file names
//   <run_dir>/fold_<k>/ckpt_<step>.npz  weights at the checkpoint (+ .opt optimizer state)
//   <run_dir>/fold_<k>/best.npz         weights of the best validation epoch
//   <run_dir>/fold_<k>/result.json      written when the fold is complete
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/model_spec.h"
#include "model/core/preprocess.h"
#include "model/store/registry.h"

namespace tgraph {

struct TrainOptions {
  std::string data_root;
  Collection collection;
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
  int valid_every = 1;      // epochs between validations (and checkpoints)
  int64_t valid_batch = 128;
  // The cross-attention reference's size in validation and in the published manifest
  // (model/nn/scoring.h).
  int64_t reference_configs = 256;
  // Share of each step's sampled configurations that join the others' softmax one at a
  // time (ScoreMode::members), as inference scores configurations outside its reference.
  double query_share = 0.0;
  bool progress = true;
  int64_t stop_after_steps = 0;  // > 0: stop after this many steps in this process, as if
                                 // killed (tests, time-boxed jobs); the next call resumes
  std::map<std::string, std::string> flags;  // recorded in the manifest
};

// Loads train+valid, computes feature statistics on them (never the test split),
// assigns folds and writes run.json, or checks that an existing run.json describes
// the same data and settings (so parallel fold processes agree).
absl::Status PrepareRun(const TrainOptions& options);

struct FoldResult {
  int fold = 0;
  double valid_score = 0;   // mean Kendall tau (layout) or M_tile (tile) of the best epoch
  int64_t best_step = 0;
  double seconds = 0;       // training time of this fold (this process, resumed parts included)
  int64_t peak_rss_bytes = 0;
  bool completed = false;   // false when stopped by stop_after_steps
};

// Trains one fold (resuming from its checkpoint if there is one); PrepareRun first.
absl::StatusOr<FoldResult> TrainFold(const TrainOptions& options, int fold);

// Completed folds of a run, best validation score first.
absl::StatusOr<std::vector<FoldResult>> ReadFoldResults(const std::string& run_dir);

// Publishes the best `keep` completed folds of a run as a new version. With
// require_folds > 0, fails (FAILED_PRECONDITION, nothing published) until at least that
// many folds have completed: a publish step scheduled after parallel fold jobs. Every
// fold is loaded before anything is published (PublishLoadable); publishing the same
// run again returns the version that already holds it (*already_published).
absl::StatusOr<int64_t> PublishRun(const std::string& run_dir, const Registry& registry, int keep,
                                   int require_folds = 0, bool* already_published = nullptr);

// The manifest a run would publish, fold weights relative to the run dir
// ("fold_3/best.npz"): LoadFolds(manifest, run_dir) scores with an unpublished run.
absl::StatusOr<Manifest> RunManifest(const std::string& run_dir, int keep);

}  // namespace tgraph
