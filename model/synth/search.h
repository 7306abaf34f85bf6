// The two configuration searches of the layout collections (docs/synthetic-data.md): `random`
// (independent random layouts, wide spread) and `default` (a genetic search from the
// all-default configuration, clustering near the best), both measuring with noise and
// both re-measuring some configurations, as the real autotuner did.
#pragma once

#include <cstdint>
#include <vector>

#include "model/synth/cost_model.h"
#include "model/core/rng.h"

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

}  // namespace tgraph::synth
