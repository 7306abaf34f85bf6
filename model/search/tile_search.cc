#include "model/search/tile_search.h"

#include <algorithm>
#include <set>

namespace tgraph {

std::vector<TritonTile> OpenTiles(const TileSpace& space, const GemmProblem& problem,
                                  const std::vector<TritonTile>* exclude) {
  std::set<TritonTile> measured;
  if (exclude) measured.insert(exclude->begin(), exclude->end());
  std::vector<TritonTile> open;
  for (const TritonTile& t : space.Legal(problem.Variant()))
    if (!measured.count(t)) open.push_back(t);
  return open;
}

std::vector<float> TileRows(const TileSpace& space, const GemmProblem& problem, const std::vector<TritonTile>& tiles) {
  std::vector<float> rows;
  rows.reserve(tiles.size() * kTileConfigDim);
  for (const TritonTile& t : tiles) {
    const std::array<float, kTileConfigDim> row = space.Row(problem, t);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

TileSearchResult SearchTiles(const std::vector<FoldModel>& folds, const GraphTensors& tensors, const TileSpace& space,
                             const GemmProblem& problem, const TileSearchOptions& options) {
  TileSearchResult r;
  const std::vector<TritonTile> open = OpenTiles(space, problem, options.exclude);
  if (open.empty()) return r;
  const std::vector<float> rows = TileRows(space, problem, open);
  ConfigRows config;
  config.tile = rows.data();
  config.count = static_cast<int64_t>(open.size());
  const ScoreResult s = ScoreConfigs(folds, tensors, config, options.scoring);
  r.evaluations = config.count;
  r.reference = s.reference;
  if (s.cancelled) {
    r.cancelled = true;
    return r;
  }
  for (int64_t i : RankByScore(s.score, std::max<int64_t>(1, options.num_results))) {
    const size_t k = static_cast<size_t>(i);
    r.tiles.push_back(open[k]);
    r.rows.insert(r.rows.end(), rows.begin() + k * kTileConfigDim, rows.begin() + (k + 1) * kTileConfigDim);
    r.score.push_back(s.score[k]);
    r.spread.push_back(s.spread.empty() ? 0.0 : s.spread[k]);
  }
  return r;
}

}  // namespace tgraph
