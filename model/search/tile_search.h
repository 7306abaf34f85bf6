// The search of a tile kernel's configuration space (model/tile/tile_space.h): every legal
// configuration of the graph's problem that was not measured yet, scored by every fold
// against one reference (model/nn/scoring.h), the best first. A Triton matrix product
// has a few hundred legal configurations, so the whole space is scored: exhaustive in
// the model, not in measurements. The server's SearchConfigs and tgraph-bench-tiles'
// replay both call it.
//
// Threads: a call reads the folds' networks and the graph's tensors and writes only its
// result; the caller serialises calls on one network (the server's worker pool does).
#pragma once

#include <cstdint>
#include <vector>

#include "model/tile/tile_space.h"
#include "model/nn/scoring.h"

namespace tgraph {

struct TileSearchOptions {
  int64_t num_results = 10;                // best first; fewer when fewer are left
  const std::vector<TritonTile>* exclude = nullptr;  // measured already: never proposed
  ScoringOptions scoring;                  // batch, reference size, cancellation
};

struct TileSearchResult {
  std::vector<TritonTile> tiles;   // best first
  std::vector<float> rows;         // their config_feat rows, tiles.size() x 24
  std::vector<double> score, spread;
  int64_t evaluations = 0;         // configurations scored (the legal, unexcluded space)
  int64_t reference = 0;
  bool cancelled = false;
};

// The legal configurations of `problem` in `space` less `exclude`, as rows, in
// candidate order.
std::vector<TritonTile> OpenTiles(const TileSpace& space, const GemmProblem& problem,
                                  const std::vector<TritonTile>* exclude);
std::vector<float> TileRows(const TileSpace& space, const GemmProblem& problem, const std::vector<TritonTile>& tiles);

TileSearchResult SearchTiles(const std::vector<FoldModel>& folds, const GraphTensors& tensors, const TileSpace& space,
                             const GemmProblem& problem, const TileSearchOptions& options);

}  // namespace tgraph
