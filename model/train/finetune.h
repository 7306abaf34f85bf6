// Fine-tuning on the farm's measurements (a tile collection's: finetune_tiles.h):
// warm-starts every fold of a layout collection's latest published version, trains a
// bounded number of steps on the measured configurations of the measurement store (mixed with base training data when
// given), and publishes a new version only if it ranks the held-out measured
// configurations at least as well as its parent. The manifest records the parent and
// the data it saw.
//
// Held-out configurations are chosen by a hash of their layout values, so a
// configuration stays on the same side in every round: what validates a fine-tune is
// never trained on by a later one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/ranking_loss.h"

namespace tgraph {

struct FinetuneOptions {
  std::string registry;
  std::string collection;      // a layout or tile collection with a published version, or to start from `parent`
  // A tile collection's: which kernel's measurements (TileKernelId::Key, "name@hash",
  // on the model's GPU; "name@hash/GPU" the same); "" when the store holds one kernel's
  // only on that GPU (finetune_tiles.h).
  std::string kernel;
  // While `collection` has no version yet: the collection whose latest version it
  // starts from (a farm's own model, "layout@tpu-v5e", from "layout:xla:random"); it
  // publishes as the collection's version 1. Ignored once the collection has one.
  std::string parent;
  std::string measurements;    // the measurement store's root
  std::string base_data;       // optional: a dataset root whose train split is mixed in
  double base_fraction = 0.5;  // share of steps on base graphs when base_data is set
  std::string work_dir;        // the fine-tuned fold weights are written here, then published
  // The base data's configurations in memory up to this many bytes, the rest in a spill
  // file in work_dir (model/train/config_spill.h), as the trainer keeps them.
  int64_t config_memory_bytes = int64_t{4} << 30;
  int64_t steps = 200;         // per fold
  double lr = 1e-4;            // constant; the parent's weights are a good start
  double weight_decay = 1e-5;
  double clip_norm = 1.0;
  // model/core/ranking_loss.h; unset: the parent's own (TrainedLoss of its manifest).
  std::optional<RankingLoss> loss;
  int64_t batch_configs = 64;
  double holdout = 0.2;        // share of each graph's measured configurations held out
  // The evidence the publish gate needs: fewer held-out configurations (over all
  // measured graphs) and nothing is trained or published (a tau on a handful of rows
  // moves by +-0.2 by chance).
  int64_t min_heldout_configs = 30;
  uint64_t seed = 0;
  bool progress = true;
};

struct FinetuneResult {
  int64_t parent_version = 0;
  std::string parent_collection;  // the collection's own name, or --parent's
  int64_t published_version = 0;  // 0 when nothing was published: not_published says why
  std::string not_published;      // "" when published
  bool trained = false;           // false when the evidence gate stopped it first
  // Mean over measured graphs of Kendall's tau of the folds' ensemble on the held-out
  // configurations, before and after.
  double parent_score = 0, child_score = 0;
  int64_t graphs = 0, train_configs = 0, heldout_configs = 0;
  int64_t base_steps = 0;  // steps on base_data graphs, over all folds
  // Tile: measured problems of a dtype or kernel variant the model's tile space refuses
  // (it would never serve them), left out of the judging and of the prior; their variants.
  int64_t unserved = 0;
  std::vector<std::string> unserved_variants;
  std::vector<std::string> skipped_shards;  // measurement shards left out: "PATH: why"
};

// Whether a configuration row (nc x 18 values) is held out: a hash of its bytes and
// the seed, below `holdout` of the hash range.
bool IsHeldOut(const int8_t* row, size_t bytes, double holdout, uint64_t seed);

absl::StatusOr<FinetuneResult> Finetune(const FinetuneOptions& options);

}  // namespace tgraph
