#include "model/train/tile_step.h"

#include <filesystem>
#include <string>
#include <utility>

#include "model/core/dataset.h"
#include "model/tile/tile_prior.h"
#include "model/tile/tile_space.h"

namespace tgraph {
namespace {

// The run's tile problems as measured problems: each graph's problem, its rows'
// configurations and their targets (only ratios matter to a prior).
absl::StatusOr<std::vector<KnownTileProblem>> KnownProblemsOf(const std::vector<GraphData>& graphs) {
  std::vector<KnownTileProblem> known;
  for (const GraphData& g : graphs) {
    absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(g.graph, g.name);
    if (!problem.ok()) return problem.status();
    KnownTileProblem k;
    k.name = g.name;
    k.problem = *problem;
    for (int64_t c = 0; c < g.num_configs(); ++c) k.tiles.push_back(TritonTileOfRow(g.tile_feat.data() + c * kTileConfigDim));
    k.runtime = g.target;
    known.push_back(std::move(k));
  }
  return known;
}

}  // namespace

absl::Status PrepareTileRun(const TrainOptions& o, std::vector<GraphData>* graphs, RunInfo* info) {
  if (o.collection.kind != CollectionKind::kTile) return absl::OkStatus();
  const std::string dir = std::filesystem::path(SplitDir(o.data_root, o.collection, "train")).parent_path().string();
  absl::StatusOr<TileSpace> space = LoadTileSpace(dir);
  if (space.ok()) {
    info->tile_space = std::move(*space);
  } else if (!absl::IsNotFound(space.status())) {
    return space.status();
  }
  if (info->tile_space && o.tile_prior_weight > 0) {
    absl::StatusOr<std::vector<KnownTileProblem>> known = KnownProblemsOf(*graphs);
    if (!known.ok()) return known.status();
    absl::StatusOr<TilePrior> prior = BuildTilePrior(*known, o.tile_prior_weight, o.tile_prior_bandwidth);
    if (!prior.ok()) return prior.status();
    prior->residual = o.tile_prior_training;
    if (o.tile_prior_near_end) prior->near_end = TilePrior::kNearEndDefault;
    if (prior->residual)
      for (GraphData& g : *graphs) {
        absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(g.graph, g.name);
        if (!problem.ok()) return problem.status();
        AttachTilePrior(*prior, *problem, /*leave_shape_out=*/true, &g);
      }
    info->tile_prior = std::move(*prior);
  }
  return absl::OkStatus();
}

}  // namespace tgraph
