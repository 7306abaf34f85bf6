#include "model/synth/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_set>

#include "model/core/graph.h"

namespace tgraph::synth {
namespace {

constexpr double kNoiseSd = 0.002;
constexpr double kRemeasureProbability = 0.03;

void SetDefault(int8_t* group) { std::fill(group, group + kLayoutSlots, -1); }

// One of the group's candidate layouts; with `other_than_current`, a different one.
// Returns false when there is no choice to make.
bool PickCandidate(const LayoutCostModel& model, int64_t j, int g, Rng& rng, int8_t* group,
                   bool other_than_current) {
  const std::vector<Layout>& c = model.Candidates(j, g);
  std::vector<const Layout*> options;
  for (const Layout& l : c)
    if (!other_than_current || !std::equal(l.begin(), l.end(), group)) options.push_back(&l);
  if (options.empty() || (other_than_current && c.size() < 2)) return false;
  const Layout& l = *options[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(options.size()) - 1))];
  std::copy(l.begin(), l.end(), group);
  return true;
}

class Recorder {
 public:
  Recorder(const LayoutCostModel& m, int64_t count) : row_(m.config_ids().size() * kConfigFeatDim) {
    result_.configs.reserve(count * row_);
    result_.runtimes.reserve(count);
  }
  int64_t Record(const int8_t* config, int64_t runtime) {
    result_.configs.insert(result_.configs.end(), config, config + row_);
    result_.runtimes.push_back(runtime);
    return result_.num_configs++;
  }
  const int8_t* Row(int64_t i) const { return result_.configs.data() + i * row_; }
  size_t row() const { return row_; }
  SearchResult Take() { return std::move(result_); }
  int64_t size() const { return result_.num_configs; }

 private:
  size_t row_;
  SearchResult result_;
};

}  // namespace

int64_t Measure(double runtime_ns, Rng& rng) {
  return std::max<int64_t>(1, std::llround(runtime_ns * (1.0 + kNoiseSd * rng.Normal())));
}

SearchResult RandomSearch(const LayoutCostModel& model, int64_t count, Rng& rng) {
  const int64_t nc = static_cast<int64_t>(model.config_ids().size());
  Recorder rec(model, count);
  std::vector<int8_t> config(rec.row());
  while (rec.size() < count) {
    if (rec.size() > 0 && rng.Bernoulli(kRemeasureProbability)) {
      const int64_t again = rng.Int(0, rec.size() - 1);
      std::copy_n(rec.Row(again), rec.row(), config.begin());
    } else {
      for (int64_t j = 0; j < nc; ++j)
        for (int g = 0; g < kConfigGroups; ++g) {
          int8_t* group = config.data() + j * kConfigFeatDim + g * kLayoutSlots;
          SetDefault(group);
          PickCandidate(model, j, g, rng, group, /*other_than_current=*/false);
        }
    }
    rec.Record(config.data(), Measure(model.Evaluate(config.data()).total_ns, rng));
  }
  return rec.Take();
}

SearchResult GeneticSearch(const LayoutCostModel& model, int64_t count, Rng& rng) {
  const int64_t nc = static_cast<int64_t>(model.config_ids().size());
  constexpr size_t kPool = 16;
  Recorder rec(model, count);
  std::vector<int8_t> config(rec.row(), -1);
  struct Member {
    int64_t row;
    int64_t runtime;
  };
  std::vector<Member> pool;
  // Generation 0: the compiler's default configuration.
  const int64_t default_runtime = Measure(model.Evaluate(config.data()).total_ns, rng);
  pool.push_back({rec.Record(config.data(), default_runtime), default_runtime});
  while (rec.size() < count) {
    if (rng.Bernoulli(kRemeasureProbability)) {
      const Member& m = rng.Pick(pool);
      std::copy_n(rec.Row(m.row), rec.row(), config.begin());
      rec.Record(config.data(), Measure(model.Evaluate(config.data()).total_ns, rng));
      continue;
    }
    // Tournament of three, then 1-3 mutations of single layout groups.
    const Member* parent = &rng.Pick(pool);
    for (int t = 0; t < 2; ++t) {
      const Member& other = rng.Pick(pool);
      if (other.runtime < parent->runtime) parent = &other;
    }
    std::copy_n(rec.Row(parent->row), rec.row(), config.begin());
    // A child must differ from its parent: re-measuring is the separate branch above.
    const int mutations = static_cast<int>(rng.Int(1, 3));
    for (int m = 0, tries = 0; tries < 64 && (m < mutations || std::equal(config.begin(), config.end(),
                                                                           rec.Row(parent->row)));
         ++tries) {
      const int64_t j = rng.Int(0, nc - 1);
      const int g = static_cast<int>(rng.Int(0, kConfigGroups - 1));
      int8_t* group = config.data() + j * kConfigFeatDim + g * kLayoutSlots;
      if (!PickCandidate(model, j, g, rng, group, /*other_than_current=*/true)) continue;
      ++m;
    }
    const int64_t runtime = Measure(model.Evaluate(config.data()).total_ns, rng);
    const int64_t row = rec.Record(config.data(), runtime);
    if (pool.size() < kPool) {
      pool.push_back({row, runtime});
    } else {
      auto worst = std::max_element(pool.begin(), pool.end(),
                                    [](const Member& a, const Member& b) { return a.runtime < b.runtime; });
      if (runtime < worst->runtime) *worst = {row, runtime};
    }
  }
  return rec.Take();
}

SearchResult NeighbourhoodSearch(const LayoutCostModel& model, const LayoutSpace& space, const int8_t* centre,
                                 int64_t max_rows, Rng& rng) {
  const size_t row = model.config_ids().size() * kConfigFeatDim;
  const std::vector<int8_t> near = OneGroupNeighbours(space, centre);
  const int64_t available = static_cast<int64_t>(near.size() / std::max<size_t>(row, 1));
  std::vector<int64_t> keep(static_cast<size_t>(available));
  std::iota(keep.begin(), keep.end(), 0);
  if (available > max_rows - 1) {
    rng.Shuffle(keep);
    keep.resize(static_cast<size_t>(std::max<int64_t>(0, max_rows - 1)));
    std::sort(keep.begin(), keep.end());
  }
  Recorder rec(model, static_cast<int64_t>(keep.size()) + 1);
  rec.Record(centre, Measure(model.Evaluate(centre).total_ns, rng));
  for (int64_t k : keep) {
    const int8_t* r = near.data() + static_cast<size_t>(k) * row;
    rec.Record(r, Measure(model.Evaluate(r).total_ns, rng));
  }
  return rec.Take();
}

SearchResult RegionSearch(const LayoutCostModel& model, const LayoutSpace& space,
                          const std::vector<const int8_t*>& centres, int max_changed, int64_t count, Rng& rng) {
  const size_t row = model.config_ids().size() * kConfigFeatDim;
  // The groups with a choice: (node, group) pairs whose candidates are more than one.
  std::vector<std::pair<size_t, int>> free;
  for (size_t j = 0; j < space.nodes.size(); ++j)
    for (int g = 0; g < kConfigGroups; ++g)
      if (space.nodes[j].groups[g].candidates.size() > 1) free.emplace_back(j, g);
  Recorder rec(model, count);
  if (free.size() < 2 || centres.empty() || max_changed < 2) return rec.Take();
  std::unordered_set<std::string> seen;
  std::vector<int8_t> x(row);
  for (int64_t tries = 0; rec.size() < count && tries < 20 * count; ++tries) {
    const int8_t* centre = centres[static_cast<size_t>(tries) % centres.size()];
    std::copy(centre, centre + row, x.begin());
    const int64_t k = rng.Int(2, std::min<int64_t>(max_changed, static_cast<int64_t>(free.size())));
    std::vector<std::pair<size_t, int>> pick = free;
    rng.Shuffle(pick);
    for (int64_t m = 0; m < k; ++m) {
      const auto [j, g] = pick[static_cast<size_t>(m)];
      const auto& cands = space.nodes[j].groups[g].candidates;
      int8_t* at = x.data() + j * kConfigFeatDim + static_cast<size_t>(g) * kLayoutSlots;
      // Another candidate than the centre's own value (a centre may hold a layout that is
      // none of them: then any).
      std::vector<size_t> others;
      for (size_t c = 0; c < cands.size(); ++c)
        if (!std::equal(cands[c].begin(), cands[c].end(), at)) others.push_back(c);
      const auto& l = cands[others[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(others.size()) - 1))]];
      std::copy(l.begin(), l.end(), at);
    }
    if (!seen.emplace(reinterpret_cast<const char*>(x.data()), row).second) continue;
    rec.Record(x.data(), Measure(model.Evaluate(x.data()).total_ns, rng));
  }
  return rec.Take();
}

int64_t BestRow(const SearchResult& s) {
  return s.runtimes.empty() ? -1 : std::min_element(s.runtimes.begin(), s.runtimes.end()) - s.runtimes.begin();
}

}  // namespace tgraph::synth
