// A tile run's own step before training (Train calls it after loading the graphs): the
// collection's tile space (tile_space.json beside its splits, when there is one) and,
// with a prior weight, the measured problems' prior (model/tile/tile_prior.h) built from
// the run's train and valid graphs; with tile_prior_training, each graph gets the prior
// of the other shapes' problems to train its residual against (AttachTilePrior,
// train_data.h). On the calling thread.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "model/train/run_dir.h"
#include "model/train/train_data.h"
#include "model/train/trainer.h"

namespace tgraph {

// Sets info->tile_space and info->tile_prior for a tile collection (nothing for a layout
// one); errors: a tile_space.json that does not load, a graph that is not one matrix
// product, a prior that cannot be built.
absl::Status PrepareTileRun(const TrainOptions& o, std::vector<GraphData>* graphs, RunInfo* info);

}  // namespace tgraph
