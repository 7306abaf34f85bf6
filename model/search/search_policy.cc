#include "model/search/search_policy.h"

#include <algorithm>

namespace tgraph {

SearchBudget ModelSearchBudget(const Manifest& manifest) {
  SearchBudget b;
  b.batch_size = manifest.batch_size;
  b.max_reference = std::max(manifest.reference_configs, manifest.batch_size);
  b.reference_configs = manifest.reference_configs;
  b.reference_groups = manifest.reference_groups;
  return b;
}

SearchOptions SearchPolicy(int64_t results, int64_t evaluations, uint64_t seed, const SearchBudget& budget,
                           int64_t max_changed_groups) {
  SearchOptions o;
  o.radius = max_changed_groups == 0 ? kDefaultSearchRadius : std::max<int64_t>(0, max_changed_groups);
  o.results = results > 0 ? results : kDefaultSearchResults;
  o.evaluations = evaluations > 0 ? evaluations : kDefaultSearchEvaluations;
  // An eighth of the budget per generation: about eight generations whatever the budget.
  o.population = std::clamp<int64_t>(o.evaluations / 8, 32, 512);
  // The reference in groups the size of the model's (those of a training batch).
  o.reference = std::min<int64_t>({budget.reference_configs, budget.max_reference, kMaxSearchReference});
  o.seed = seed;
  o.scoring.batch_size = budget.batch_size;
  o.scoring.max_reference = budget.max_reference;
  o.scoring.reference_groups =
      std::max<int64_t>(1, budget.reference_groups * o.reference / std::max<int64_t>(1, budget.reference_configs));
  return o;
}

absl::StatusOr<std::optional<MeasuredCorrection>> CorrectionFor(const std::vector<int8_t>& measured,
                                                                const std::vector<int64_t>& runtimes_ns,
                                                                int64_t num_config_nodes) {
  if (static_cast<int64_t>(runtimes_ns.size()) < MeasuredCorrection::kMinMeasurements)
    return std::optional<MeasuredCorrection>();
  absl::StatusOr<MeasuredCorrection> c = MeasuredCorrection::Fit(measured, runtimes_ns, num_config_nodes);
  if (!c.ok()) return c.status();
  return std::optional<MeasuredCorrection>(std::move(*c));
}

}  // namespace tgraph
