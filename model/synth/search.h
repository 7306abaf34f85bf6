// The two configuration searches of the layout collections (docs/synthetic-data.md): `random`
// (independent random layouts, wide spread) and `default` (a genetic search from the
// all-default configuration, clustering near the best), both measuring with noise and
// both re-measuring some configurations, as the real autotuner did.
#pragma once

#include <cstdint>
#include <vector>

#include "model/core/layout_space.h"
#include "model/core/rng.h"
#include "model/synth/cost_model.h"

namespace tgraph::synth {

struct SearchResult {
  int64_t num_configs = 0;
  std::vector<int8_t> configs;    // num_configs x nc x 18
  std::vector<int64_t> runtimes;  // measured, ns
};

// A measurement: the model's runtime times (1 + 0.2% noise), rounded to ns, at least 1.
int64_t Measure(double runtime_ns, Rng& rng);

SearchResult RandomSearch(const LayoutCostModel& model, int64_t count, Rng& rng);
SearchResult GeneticSearch(const LayoutCostModel& model, int64_t count, Rng& rng);

// Where a search lives: `centre` (a row), measured, then its one-group neighbours in
// `space` (OneGroupNeighbours), each measured once. A neighbourhood larger than
// max_rows - 1 is sampled uniformly without replacement (kept in neighbour order), so a
// file stays within the preset's size; the centre is always row 0.
SearchResult NeighbourhoodSearch(const LayoutCostModel& model, const LayoutSpace& space, const int8_t* centre,
                                 int64_t max_rows, Rng& rng);

// Where a search within a region lives: `count` distinct rows, each one of `centres`
// (rows, taken in turn) with k groups changed to another of their candidates, k drawn
// uniformly from 2..max_changed (distinct groups), each measured once. The server's
// search proposes rows this far from its anchors (the default and the measured rows:
// SearchOptions::radius); one-group neighbourhoods and random rows leave that range
// unseen. Fewer rows when the space has fewer such rows to give.
SearchResult RegionSearch(const LayoutCostModel& model, const LayoutSpace& space,
                          const std::vector<const int8_t*>& centres, int max_changed, int64_t count, Rng& rng);

// The row of `s` with the lowest measured runtime (the first of equals).
int64_t BestRow(const SearchResult& s);

}  // namespace tgraph::synth
