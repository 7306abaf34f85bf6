// A training run's directory: its files and their formats, read and written here only.
//
//   <run_dir>/run.json                  collection, data fingerprint, spec, feature stats, folds
//   <run_dir>/fold_<k>/log.jsonl        one JSON object per validation
//   <run_dir>/fold_<k>/state.json       checkpoint: step, best score, file names
//   <run_dir>/fold_<k>/ckpt_<step>.npz  weights at the checkpoint (+ .opt optimizer state)
//   <run_dir>/fold_<k>/best.npz         weights of the best validation epoch
//   <run_dir>/fold_<k>/result.json      written when the fold is complete
//
// Every file is written whole and renamed into place (WriteFileAtomic), except the log,
// which is appended to. One process per fold writes that fold's files (with ranks,
// rank 0: model/train/trainer.h); run.json is written once (atomically, the same bytes
// by every process that prepares the run) and then only read. Functions here hold no
// state: any thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "model/core/model_spec.h"
#include "model/core/preprocess.h"
#include "model/tile/tile_prior.h"
#include "model/tile/tile_space.h"
#include "model/nn/tgraph_net.h"
#include "model/store/registry.h"

namespace torch::optim {
class AdamW;
}  // namespace torch::optim

namespace tgraph {

std::string FoldDir(const std::string& run_dir, int fold);

// The run's fixed facts, as stored in run.json.
struct RunInfo {
  std::string collection;
  std::string fingerprint;
  ModelSpec spec;
  FeatureStats stats;
  int num_folds = 0;
  std::map<std::string, int> fold_of;  // graph name -> fold
  std::map<std::string, std::string> flags;
  int64_t valid_batch = 128;
  int64_t reference_configs = 256;
  int64_t reference_groups = 1;  // ReferenceGroups of the training batch
  Provenance provenance;         // what the run trains on (no fine-tunes)
  std::optional<TileSpace> tile_space;  // the collection's, when it has one
  std::optional<TilePrior> tile_prior;  // the run's problems' prior, published with the model
};
absl::StatusOr<RunInfo> ReadRunInfo(const std::string& run_dir);
absl::Status WriteRunInfo(const std::string& run_dir, const RunInfo& info);

// What a checkpoint holds besides the weights and the optimizer state.
struct FoldState {
  int64_t step = 0, best_step = -1;
  double best = -std::numeric_limits<double>::infinity();
  double seconds_before = 0;  // training time of earlier processes
  int64_t graphs_per_step = 1;  // of the steps counted (TrainOptions::graphs_per_step)
};

// Resumes from <dir>/state.json when there is one: the state, the weights and the
// optimizer's moments. No checkpoint: the initial state. DATA_LOSS for a file that
// does not parse.
absl::StatusOr<FoldState> LoadCheckpoint(const std::string& dir, RankingNet& net, torch::optim::AdamW& opt);
// New files first, then the state that names them, then the older files: a process
// killed at any point resumes from a complete checkpoint.
absl::Status SaveCheckpoint(const std::string& dir, RankingNet& net, torch::optim::AdamW& opt, const FoldState& st,
                            double seconds);

// The outcome of one fold, as result.json holds it.
struct FoldResult {
  int fold = 0;
  double valid_score = 0;   // mean Kendall tau (layout) or M_tile (tile) of the best epoch
  int64_t best_step = 0;
  double seconds = 0;       // training time of this fold (this process, resumed parts included)
  int64_t peak_rss_bytes = 0;
  bool completed = false;   // false when stopped by stop_after_steps
  // Tile runs trained against a prior: the best weights' validation score with the
  // network's scores at each share beside the prior (kNetworkShares,
  // model/tile/tile_prior.h); empty otherwise.
  std::map<double, double> share_scores;
};
absl::Status WriteFoldResult(const std::string& dir, const FoldResult& r, int64_t total_steps);
// Scores per network share as result.json and log.jsonl keep them:
// [{"network_share": S, "valid_score": V}, ...] (V null when not finite), and back
// (entries that are not of that form are skipped; a null score reads as NaN).
nlohmann::json NetworkSharesJson(const std::map<double, double>& share_scores);
std::map<double, double> NetworkSharesFromJson(const nlohmann::json& j);
// Each share's mean score over the validations of a fold's log.jsonl after step
// `after` (each step once: the last line for it). NOT_FOUND without the file, DATA_LOSS
// naming the line for one that does not parse.
absl::StatusOr<std::map<double, double>> MeanShareScores(const std::string& log_path, int64_t after);
// Completed folds of a run, best validation score first.
absl::StatusOr<std::vector<FoldResult>> ReadFoldResults(const std::string& run_dir);

// <dir>/log.jsonl, appended to (a resumed fold continues it), closed when it goes.
class FoldLog {
 public:
  static absl::StatusOr<FoldLog> Open(const std::string& path);
  FoldLog(FoldLog&& other) noexcept;
  FoldLog(const FoldLog&) = delete;
  FoldLog& operator=(const FoldLog&) = delete;
  ~FoldLog();
  void Write(const nlohmann::json& line);

 private:
  explicit FoldLog(FILE* f) : file_(f) {}
  FILE* file_;
};

}  // namespace tgraph
