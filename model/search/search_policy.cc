#include "model/search/search_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_set>

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
  o.scoring.reference_groups = FixedReferenceGroups(o.reference, budget.reference_configs, budget.reference_groups);
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

Variation VariationFor(int64_t results, const std::vector<int8_t>& measured, const std::vector<int64_t>& runtimes_ns,
                       int64_t num_config_nodes) {
  Variation v;
  const int64_t n = static_cast<int64_t>(runtimes_ns.size());
  const size_t row = static_cast<size_t>(num_config_nodes) * kConfigFeatDim;
  if (n <= kStallMeasurements || results < 2 || measured.size() != static_cast<size_t>(n) * row) return v;
  const auto recent = runtimes_ns.end() - kStallMeasurements;
  const int64_t before = *std::min_element(runtimes_ns.begin(), recent);
  const int64_t since = *std::min_element(recent, runtimes_ns.end());
  std::vector<int64_t> sorted = runtimes_ns;
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.end());
  const double spread = static_cast<double>(sorted[static_cast<size_t>(n / 2)] - before);
  const double needed = std::min(kStallImprovement * static_cast<double>(before), kStallSpreadShare * spread);
  if (static_cast<double>(since) < static_cast<double>(before) - needed) return v;
  v.rows = std::min<int64_t>(results - 1, static_cast<int64_t>(std::ceil(kStallVariationShare * static_cast<double>(results))));
  std::vector<size_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return runtimes_ns[a] < runtimes_ns[b]; });
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(i) < kVariationParents; ++i)
    v.parents.insert(v.parents.end(), measured.begin() + static_cast<std::ptrdiff_t>(order[i] * row),
                     measured.begin() + static_cast<std::ptrdiff_t>((order[i] + 1) * row));
  return v;
}

JoinedMeasurements JoinMeasured(const std::vector<int8_t>& given, const std::vector<int64_t>& given_runtimes_ns,
                                const std::vector<int8_t>& stored, const std::vector<int64_t>& stored_runtimes_ns,
                                int64_t num_config_nodes) {
  const size_t row = static_cast<size_t>(num_config_nodes) * kConfigFeatDim;
  const auto key = [&](const std::vector<int8_t>& rows, size_t i) {
    return std::string(reinterpret_cast<const char*>(rows.data() + i * row), row);
  };
  const auto append = [&](std::vector<int8_t>* to, const std::vector<int8_t>& rows, size_t i) {
    const auto first = rows.begin() + static_cast<std::ptrdiff_t>(i * row);
    to->insert(to->end(), first, first + static_cast<std::ptrdiff_t>(row));
  };
  const size_t num_given = row == 0 ? 0 : given.size() / row, num_stored = row == 0 ? 0 : stored.size() / row;
  const bool given_timed = !given_runtimes_ns.empty();
  std::unordered_set<std::string> given_rows;
  for (size_t i = 0; i < num_given; ++i) given_rows.insert(key(given, i));
  JoinedMeasurements j;
  std::unordered_set<std::string> excluded;
  for (size_t i = 0; i < num_stored; ++i) {
    const bool was_given = given_rows.count(key(stored, i)) > 0;
    if (!was_given) {
      ++j.stored;
      excluded.insert(key(stored, i));
      append(&j.exclude, stored, i);
    }
    if (was_given && given_timed) continue;  // the given runtime stands for it, below
    append(&j.measured, stored, i);
    j.runtimes_ns.push_back(stored_runtimes_ns[i]);
  }
  // The given rows as the request has them (a row measured twice counts twice, as
  // without a store), each excluded once.
  for (size_t i = 0; i < num_given; ++i) {
    if (excluded.insert(key(given, i)).second) append(&j.exclude, given, i);
    if (!given_timed) continue;
    append(&j.measured, given, i);
    j.runtimes_ns.push_back(given_runtimes_ns[i]);
  }
  std::vector<size_t> order(j.runtimes_ns.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return j.runtimes_ns[a] < j.runtimes_ns[b]; });
  std::unordered_set<std::string> started;
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(started.size()) < kJoinedStartRows; ++i)
    if (started.insert(key(j.measured, order[i])).second) append(&j.fastest, j.measured, order[i]);
  return j;
}

}  // namespace tgraph
