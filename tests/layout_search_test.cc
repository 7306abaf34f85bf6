// The model-guided layout search (model/search/layout_search.h) on the real unet_3d graph
// with fixed (untrained) folds: legal, distinct, never excluded rows, best first, within
// the budget, deterministic for a seed; and it finds rows the model scores better than
// the best of as many random rows of the space.
// LibTorch defines glog-style CHECK macros: use Catch's prefixed names here.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <set>

#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/core/preprocess.h"
#include "model/core/rng.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/features.h"
#include "model/search/layout_search.h"
#include "model/search/search_policy.h"
#include "model/nn/tgraph_net.h"

using namespace tgraph;

namespace {

struct SearchWorld {
  LayoutGraph g;
  PrunedGraph pruned;
  LayoutSpace space;
  GraphTensors tensors;
  std::vector<std::shared_ptr<RankingNet>> nets;
  EncodedGraph encoded;
  std::vector<FoldModel> folds;

  explicit SearchWorld(int num_folds) {
    g = *LoadLayoutGraph(std::string(TGRAPH_REAL_DATA) + "/npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz");
    space = LayoutSpaceOf(g.graph, g.node_config_ids);
    pruned = PruneGraph(g.graph, g.node_config_ids);
    tensors = MakeGraphTensors(pruned.graph, pruned.config_node_index, FeatureStats::Compute({&pruned.graph}));
    torch::manual_seed(3);
    ModelSpec spec;
    spec.hidden = 16;
    torch::NoGradGuard no_grad;
    for (int f = 0; f < num_folds; ++f) {
      nets.push_back(MakeRankingNet(spec));
      nets.back()->eval();
    }
    encoded = EncodeGraph(tensors, nets);
    folds = encoded.Folds(nets);
  }
};

SearchOptions Options(int64_t results, int64_t evaluations, int64_t population, int64_t reference, uint64_t seed) {
  SearchOptions o;
  o.results = results;
  o.evaluations = evaluations;
  o.population = population;
  o.reference = reference;
  o.seed = seed;
  return o;
}

std::set<std::string> RowsOf(const std::vector<int8_t>& rows, int64_t nc) {
  std::set<std::string> out;
  const size_t bytes = static_cast<size_t>(nc) * kConfigFeatDim;
  for (size_t at = 0; at < rows.size(); at += bytes) out.emplace(reinterpret_cast<const char*>(&rows[at]), bytes);
  return out;
}

// The folds' own scores of a search's rows against its reference: what ScoreConfigs
// gives them, the measured correction left out.
ScoreResult ModelScores(const SearchWorld& w, const SearchResult& r, const ScoringOptions& options) {
  const int64_t nc = w.g.num_config_nodes();
  const ConfigRows ref{r.reference_rows.data(), nullptr, r.reference, nc},
      got{r.rows.data(), nullptr, static_cast<int64_t>(r.score.size()), nc};
  ScoringOptions so = options;
  so.reference = &ref;
  so.reference_per_fold = false;
  return ScoreConfigs(w.folds, w.tensors, got, so);
}

// Layout groups in which row a differs from row b.
int64_t GroupsChanged(const int8_t* a, const int8_t* b, int64_t nc) {
  int64_t d = 0;
  for (int64_t k = 0; k < nc * kConfigGroups; ++k)
    d += !std::equal(a + k * kLayoutSlots, a + (k + 1) * kLayoutSlots, b + k * kLayoutSlots);
  return d;
}

// The compiler's default row and a fitness that rewards every group changed from it: the
// farther the better, where a search with the model would never go. Not copyable: the
// fitness reads dflt.
struct FartherIsBetter {
  std::vector<int8_t> dflt;
  SearchHooks hooks;
  explicit FartherIsBetter(int64_t nc) : dflt(static_cast<size_t>(nc) * kConfigFeatDim, -1) {
    hooks.fitness = [this, nc](const int8_t* x) { return -static_cast<double>(GroupsChanged(x, dflt.data(), nc)); };
  }
  FartherIsBetter(const FartherIsBetter&) = delete;
  FartherIsBetter& operator=(const FartherIsBetter&) = delete;
};

// The real file's first `count` configurations and runtimes, as if the farm had measured them.
struct Measured {
  std::vector<int8_t> rows;
  std::vector<int64_t> runtimes;
};
Measured FirstMeasured(const SearchWorld& w, int64_t count) {
  const size_t row = static_cast<size_t>(w.g.num_config_nodes()) * kConfigFeatDim;
  return {std::vector<int8_t>(w.g.config_feat.begin(), w.g.config_feat.begin() + count * row),
          std::vector<int64_t>(w.g.config_runtime.begin(), w.g.config_runtime.begin() + count)};
}

}  // namespace

CATCH_TEST_CASE("search: legal, distinct rows best first within the budget, the same for a seed", "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  SearchOptions o;
  o.results = 12;
  o.evaluations = 300;
  o.population = 48;
  o.reference = 40;
  o.scoring.batch_size = 64;
  o.seed = 7;
  const SearchResult a = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(a.score.size() == 12u);
  CATCH_CHECK(a.rows.size() == static_cast<size_t>(12 * nc * kConfigFeatDim));
  CATCH_CHECK(FirstIllegalLayoutRow(w.space, a.rows.data(), 12) == "");
  CATCH_CHECK(RowsOf(a.rows, nc).size() == 12u);
  CATCH_CHECK(std::is_sorted(a.score.begin(), a.score.end()));
  CATCH_CHECK(a.evaluations <= 300);
  CATCH_CHECK(a.evaluations > 250);
  CATCH_CHECK(a.reference == 40);
  CATCH_CHECK(a.generations >= 5);
  for (double s : a.spread) CATCH_CHECK(s >= 0);
  // The scores are what the scoring function gives these rows against the search's reference.
  const ConfigRows ref{a.reference_rows.data(), nullptr, a.reference, nc}, got{a.rows.data(), nullptr, 12, nc};
  ScoringOptions so = o.scoring;
  so.reference = &ref;
  so.reference_per_fold = false;
  const ScoreResult direct = ScoreConfigs(w.folds, w.tensors, got, so);
  for (size_t i = 0; i < 12; ++i) {
    CATCH_CHECK(a.score[i] == Approx(direct.score[i]).margin(1e-9));
    CATCH_CHECK(a.spread[i] == Approx(direct.spread[i]).margin(1e-9));
  }
  const SearchResult again = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_CHECK(again.rows == a.rows);
  CATCH_CHECK(again.score == a.score);
  o.seed = 8;
  CATCH_CHECK(SearchLayouts(w.folds, w.tensors, w.space, o).rows != a.rows);
}

CATCH_TEST_CASE("search: excluded rows are never returned, and start rows seed it", "[search]") {
  SearchWorld w(1);
  const int64_t nc = w.g.num_config_nodes();
  SearchOptions o = Options(8, 200, 32, 32, 1);
  const SearchResult first = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(first.score.size() == 8u);
  // Measured: the first search's results and the file's own rows. Started from them.
  std::vector<int8_t> measured = first.rows;
  measured.insert(measured.end(), w.g.config_feat.begin(), w.g.config_feat.end());
  o.exclude = &measured;
  o.start = &first.rows;
  const SearchResult second = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(second.score.size() == 8u);
  const std::set<std::string> excluded = RowsOf(measured, nc);
  for (const std::string& r : RowsOf(second.rows, nc)) CATCH_CHECK(excluded.count(r) == 0);
  CATCH_CHECK(FirstIllegalLayoutRow(w.space, second.rows.data(), 8) == "");
}

CATCH_TEST_CASE("search: finds rows the model scores better than the best of as many random rows", "[search]") {
  SearchWorld w(1);
  const int64_t nc = w.g.num_config_nodes();
  SearchOptions o;
  o.results = 1;
  o.evaluations = 600;
  o.population = 64;
  o.reference = 64;
  o.seed = 2;
  const SearchResult s = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(s.score.size() == 1u);
  // 600 random rows of the space, scored against the same kind of reference: the search's
  // start rows are its reference, so give it one and score random rows against it.
  Rng rng(99);
  auto random_rows = [&](int64_t count) {
    std::vector<int8_t> rows;
    for (int64_t i = 0; i < count; ++i)
      for (int64_t j = 0; j < nc; ++j)
        for (int g = 0; g < kConfigGroups; ++g) {
          const std::vector<GroupLayout>& c = w.space.nodes[j].groups[g].candidates;
          const GroupLayout& l = c[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(c.size()) - 1))];
          rows.insert(rows.end(), l.begin(), l.end());
        }
    return rows;
  };
  const std::vector<int8_t> reference = random_rows(64), candidates = random_rows(600);
  o.start = &reference;
  const SearchResult guided = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(guided.score.size() == 1u);
  const ConfigRows ref{reference.data(), nullptr, 64, nc}, cand{candidates.data(), nullptr, 600, nc};
  ScoringOptions so;
  so.reference = &ref;
  so.reference_per_fold = false;
  const ScoreResult random = ScoreConfigs(w.folds, w.tensors, cand, so);
  const double best_random = *std::min_element(random.score.begin(), random.score.end());
  CATCH_CHECK(guided.score[0] < best_random);
}

CATCH_TEST_CASE("search: with a fitness function in place of the model, scores are that function's and it closes in on "
                "the row the function prefers", "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  // The target: a random row of the space; the fitness counts the layout groups differing from it.
  Rng rng(5);
  std::vector<int8_t> target;
  for (int64_t j = 0; j < nc; ++j)
    for (int g = 0; g < kConfigGroups; ++g) {
      const std::vector<GroupLayout>& c = w.space.nodes[j].groups[g].candidates;
      const GroupLayout& l = c[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(c.size()) - 1))];
      target.insert(target.end(), l.begin(), l.end());
    }
  const auto differing = [&](const int8_t* row) { return static_cast<double>(GroupsChanged(row, target.data(), nc)); };
  SearchOptions o = Options(5, 1500, 64, 32, 4);
  SearchHooks hooks;
  hooks.fitness = differing;
  const SearchResult s = SearchLayouts(w.folds, w.tensors, w.space, o, hooks);
  CATCH_REQUIRE(s.score.size() == 5u);
  CATCH_CHECK(FirstIllegalLayoutRow(w.space, s.rows.data(), 5) == "");
  const double from_default = differing(std::vector<int8_t>(static_cast<size_t>(nc * kConfigFeatDim), -1).data());
  for (size_t i = 0; i < 5; ++i) {
    CATCH_CHECK(s.score[i] == differing(s.rows.data() + i * static_cast<size_t>(nc * kConfigFeatDim)));
    CATCH_CHECK(s.spread[i] == 0.0);  // no folds: nothing to disagree
  }
  CATCH_CHECK(std::is_sorted(s.score.begin(), s.score.end()));
  // Mutations of one to three groups from the default and crossovers: far closer than the default.
  CATCH_CHECK(s.score[0] < from_default / 2);
}

CATCH_TEST_CASE("search: restricted to candidates, it evaluates and returns only them, the whole pool when the budget allows",
                "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  // The file's rows are the pool; its first 20 are measured (excluded) and the start.
  const std::vector<int8_t> pool(w.g.config_feat.begin(), w.g.config_feat.end());
  const std::vector<int8_t> measured(pool.begin(), pool.begin() + 20 * row);
  const std::set<std::string> pool_rows = RowsOf(pool, nc), excluded = RowsOf(measured, nc);
  SearchOptions o;
  o.results = 10;
  o.population = 32;
  o.reference = 32;
  o.seed = 4;
  o.candidates = &pool;
  o.exclude = &measured;
  o.start = &measured;
  // A budget under the pool: only candidates, never excluded, within the budget.
  o.evaluations = 150;
  const SearchResult part = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(part.score.size() == 10u);
  for (const std::string& r : RowsOf(part.rows, nc)) {
    CATCH_CHECK(pool_rows.count(r) == 1);
    CATCH_CHECK(excluded.count(r) == 0);
  }
  CATCH_CHECK(part.evaluations <= 150);
  // A budget over the pool: every open candidate is evaluated, so the search returns
  // the 10 best of them as scoring them all against its reference ranks them.
  o.evaluations = 4 * static_cast<int64_t>(pool_rows.size());
  const SearchResult all = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(all.score.size() == 10u);
  CATCH_CHECK(all.evaluations == static_cast<int64_t>(pool_rows.size()));  // the 20 start rows are the reference's
  std::vector<int8_t> open;
  for (const std::string& r : pool_rows)
    if (!excluded.count(r)) open.insert(open.end(), r.begin(), r.end());
  const int64_t n_open = static_cast<int64_t>(open.size() / row);
  const ConfigRows ref{all.reference_rows.data(), nullptr, all.reference, nc}, cand{open.data(), nullptr, n_open, nc};
  ScoringOptions so;
  so.reference = &ref;
  so.reference_per_fold = false;
  const ScoreResult scored = ScoreConfigs(w.folds, w.tensors, cand, so);
  std::vector<double> best(scored.score.begin(), scored.score.end());
  std::sort(best.begin(), best.end());
  for (size_t i = 0; i < 10; ++i) CATCH_CHECK(all.score[i] == Approx(best[i]).margin(1e-4));
}

CATCH_TEST_CASE("search: with a graph's measurements, a score is the model's plus the weighted correction minus the "
                "weighted uncertainty, and the search follows them",
                "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  // The real file's first 60 configurations and runtimes, as if the farm had measured them.
  const int64_t measured_count = 60;
  const std::vector<int8_t> measured(w.g.config_feat.begin(),
                                     w.g.config_feat.begin() + measured_count * nc * kConfigFeatDim);
  const std::vector<int64_t> runtimes(w.g.config_runtime.begin(), w.g.config_runtime.begin() + measured_count);
  auto correction = MeasuredCorrection::Fit(measured, runtimes, nc);
  CATCH_REQUIRE(correction.ok());
  SearchOptions o = Options(8, 300, 48, 40, 5);
  o.exclude = &measured;
  const SearchResult plain = SearchLayouts(w.folds, w.tensors, w.space, o);
  o.correction = &*correction;
  o.correction_weight = 3.0;
  o.adapt_correction = false;  // the weights as given (adapted: below)
  o.spread_proposals = false;  // every row's score with the same uncertainty (the spread: below)
  const SearchResult corrected = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(corrected.score.size() == 8u);
  const ScoreResult model = ModelScores(w, corrected, o.scoring);
  for (size_t i = 0; i < 8; ++i) {
    const int8_t* row = corrected.rows.data() + i * nc * kConfigFeatDim;
    const double predicted = correction->Predict(row), uncertainty = correction->Uncertainty(row);
    CATCH_CHECK(uncertainty > 0.0);
    CATCH_CHECK(uncertainty < 1.0);
    CATCH_CHECK(corrected.score[i] ==
                Approx(model.score[i] + 3.0 * predicted - o.exploration * uncertainty).margin(1e-9));
    CATCH_CHECK(corrected.spread[i] == Approx(model.spread[i]).margin(1e-9));
  }
  // Weighted heavily, the correction decides what comes back: rows it predicts faster.
  o.correction_weight = 1000.0;
  const SearchResult led = SearchLayouts(w.folds, w.tensors, w.space, o);
  auto mean_predicted = [&](const SearchResult& r) {
    double sum = 0;
    for (size_t i = 0; i < r.score.size(); ++i) sum += correction->Predict(r.rows.data() + i * nc * kConfigFeatDim);
    return sum / static_cast<double>(r.score.size());
  };
  CATCH_CHECK(mean_predicted(led) < mean_predicted(plain) - 0.1);
  const std::set<std::string> excluded = RowsOf(measured, nc);
  for (const std::string& r : RowsOf(led.rows, nc)) CATCH_CHECK(excluded.count(r) == 0);
  // Exploration weighted heavily: rows the measurements say less about than without it
  // (started from measured rows, where they say most).
  const std::vector<int8_t> start(measured.begin(), measured.begin() + 16 * nc * kConfigFeatDim);
  o.start = &start;
  auto mean_uncertainty = [&](const SearchResult& r) {
    double sum = 0;
    for (size_t i = 0; i < r.score.size(); ++i) sum += correction->Uncertainty(r.rows.data() + i * nc * kConfigFeatDim);
    return sum / static_cast<double>(r.score.size());
  };
  o.correction_weight = 3.0;
  o.exploration = 0.0;
  const SearchResult exploiting = SearchLayouts(w.folds, w.tensors, w.space, o);
  o.exploration = 1000.0;
  const SearchResult exploring = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_INFO("mean uncertainty exploring " << mean_uncertainty(exploring) << ", exploiting " << mean_uncertainty(exploiting));
  CATCH_CHECK(mean_uncertainty(exploring) > mean_uncertainty(exploiting) + 0.05);
}

CATCH_TEST_CASE("search: spreading proposals chooses them one at a time, each scored with the uncertainty left once "
                "those before it are pending",
                "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  const Measured m = FirstMeasured(w, 60);
  const std::vector<int8_t>& measured = m.rows;
  auto correction = MeasuredCorrection::Fit(measured, m.runtimes, nc);
  CATCH_REQUIRE(correction.ok());
  const std::vector<int8_t> start(measured.begin(), measured.begin() + 16 * row);
  SearchOptions o = Options(8, 300, 48, 40, 5);
  o.exclude = &measured;
  o.start = &start;
  o.correction = &*correction;
  o.adapt_correction = false;  // the weights as given (adapted: below)
  CATCH_REQUIRE(o.spread_proposals);  // the default
  const SearchResult spread = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(spread.score.size() == 8u);
  const ScoreResult model = ModelScores(w, spread, o.scoring);
  MeasuredCorrection pending = *correction;
  const std::set<std::string> excluded = RowsOf(measured, nc);
  CATCH_CHECK(RowsOf(spread.rows, nc).size() == 8u);
  for (size_t i = 0; i < 8; ++i) {
    const int8_t* x = spread.rows.data() + i * row;
    CATCH_CHECK(excluded.count(std::string(reinterpret_cast<const char*>(x), row)) == 0);
    CATCH_CHECK(spread.score[i] == Approx(model.score[i] + o.correction_weight * correction->Predict(x) -
                                          o.exploration * pending.Uncertainty(x))
                                       .margin(1e-9));
    pending.AddPending(x);
  }
  // Each pick is the best left once those before it are pending, and pending rows only
  // lower an uncertainty: the scores come back in order.
  for (size_t i = 1; i < 8; ++i) CATCH_CHECK(spread.score[i] >= spread.score[i - 1]);
  // Past kMaxSpreadProposals picks, the rest in the order the uncertainty left after
  // those gives.
  CATCH_REQUIRE(kMaxSpreadProposals == 64);
  SearchOptions many = o;
  many.results = 70;
  many.evaluations = 400;
  const SearchResult wide = SearchLayouts(w.folds, w.tensors, w.space, many);
  CATCH_REQUIRE(wide.score.size() == 70u);
  CATCH_CHECK(RowsOf(wide.rows, nc).size() == 70u);
  const ScoreResult wide_model = ModelScores(w, wide, o.scoring);
  MeasuredCorrection wide_pending = *correction;
  for (size_t i = 0; i < 70; ++i) {
    const int8_t* x = wide.rows.data() + i * row;
    CATCH_CHECK(wide.score[i] == Approx(wide_model.score[i] + o.correction_weight * correction->Predict(x) -
                                        o.exploration * wide_pending.Uncertainty(x))
                                     .margin(1e-9));
    if (i < 64) wide_pending.AddPending(x);  // the picks spread; the rest are conditioned on all 64
    if (i > 0) CATCH_CHECK(wide.score[i] >= wide.score[i - 1]);
  }
  CATCH_CHECK(wide_pending.pending() == 64);
  // Without exploration there is nothing to spread: the same rows as without the option.
  o.exploration = 0;
  const SearchResult plain_no_exploration = [&] {
    SearchOptions p = o;
    p.spread_proposals = false;
    return SearchLayouts(w.folds, w.tensors, w.space, p);
  }();
  CATCH_CHECK(SearchLayouts(w.folds, w.tensors, w.space, o).rows == plain_no_exploration.rows);
}

CATCH_TEST_CASE("search: the correction and its exploration are scaled down by how well the fitness already predicts "
                "the measurements",
                "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  // The real file's first 60 configurations are measured; the same fit with almost no
  // ridge is a "model" that knows their runtimes (it nearly interpolates them).
  const int64_t measured_count = 60;
  const Measured m = FirstMeasured(w, measured_count);
  const std::vector<int8_t>& measured = m.rows;
  auto correction = MeasuredCorrection::Fit(measured, m.runtimes, nc);
  auto knowing = MeasuredCorrection::Fit(measured, m.runtimes, nc, 1e-3);
  CATCH_REQUIRE(correction.ok());
  CATCH_REQUIRE(knowing.ok());
  SearchOptions o = Options(8, 300, 48, 40, 5);
  o.exclude = &measured;
  o.correction = &*correction;
  o.spread_proposals = false;
  CATCH_REQUIRE(o.adapt_correction);  // the default
  CATCH_REQUIRE(o.correction_weight == 3.0);
  const auto search = [&](std::function<double(const int8_t*)> fitness) {
    SearchHooks hooks;
    hooks.fitness = std::move(fitness);
    const SearchResult r = SearchLayouts(w.folds, w.tensors, w.space, o, hooks);
    CATCH_REQUIRE(r.score.size() == 8u);
    CATCH_CHECK(r.exploration == Approx(o.exploration * r.correction_weight / 3.0));
    // Every score is the fitness plus the weights the search reports times the correction.
    for (size_t i = 0; i < 8; ++i) {
      const int8_t* x = r.rows.data() + i * row;
      CATCH_CHECK(r.score[i] == Approx(hooks.fitness(x) + r.correction_weight * correction->Predict(x) -
                                       r.exploration * correction->Uncertainty(x))
                                    .margin(1e-9));
    }
    return r;
  };
  // A fitness that predicts the measured runtimes: little of the correction is kept.
  const SearchResult followed = search([&](const int8_t* x) { return knowing->Predict(x); });
  CATCH_INFO("blend: model " << followed.blend.model_coef << ", correction " << followed.blend.correction_coef);
  CATCH_CHECK(followed.blend.rows == measured_count);
  CATCH_CHECK(followed.blend.model_coef > 0);
  CATCH_CHECK(followed.correction_weight < 0.5);
  // One that predicts them backwards, or not at all: all of it.
  const SearchResult reversed = search([&](const int8_t* x) { return -knowing->Predict(x); });
  CATCH_CHECK(reversed.blend.rows == measured_count);
  CATCH_CHECK(reversed.correction_weight == 3.0);
  CATCH_CHECK(reversed.exploration == o.exploration);
  const SearchResult blind = search([](const int8_t*) { return 0.0; });
  CATCH_CHECK(blind.correction_weight == 3.0);
  // The measured rows the blend scores count as evaluations: the budget holds.
  CATCH_CHECK(followed.evaluations <= 300);
  // Off: the weights as given.
  o.adapt_correction = false;
  const SearchResult fixed = search([&](const int8_t* x) { return knowing->Predict(x); });
  CATCH_CHECK(fixed.correction_weight == 3.0);
  CATCH_CHECK(fixed.blend.rows == 0);
}

CATCH_TEST_CASE("search: with a radius, every row it returns changes at most that many groups of the default or a "
                "start row, even where the fitness prefers rows far from both",
                "[search]") {
  SearchWorld w(1);
  const int64_t nc = w.g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  const FartherIsBetter far(nc);
  const std::vector<int8_t>& dflt = far.dflt;
  const SearchHooks& hooks = far.hooks;
  SearchOptions o = Options(5, 800, 64, 32, 3);
  const SearchResult free = SearchLayouts(w.folds, w.tensors, w.space, o, hooks);
  CATCH_REQUIRE(free.score.size() == 5u);
  CATCH_CHECK(free.score[0] < -20);  // unbounded, it goes far
  o.radius = 3;
  const SearchResult near = SearchLayouts(w.folds, w.tensors, w.space, o, hooks);
  CATCH_REQUIRE(near.score.size() == 5u);
  CATCH_CHECK(FirstIllegalLayoutRow(w.space, near.rows.data(), 5) == "");
  CATCH_CHECK(RowsOf(near.rows, nc).size() == 5u);
  // The best the region allows: exactly 3 groups changed.
  for (size_t i = 0; i < 5; ++i) {
    CATCH_CHECK(GroupsChanged(near.rows.data() + i * row, dflt.data(), nc) == 3);
    CATCH_CHECK(near.score[i] == -3.0);
  }
  // With start rows the region is around each of them too: a row 3 groups from the
  // nearest one, the default or a start row.
  std::vector<int8_t> start = near.rows;
  start.resize(2 * row);
  o.start = &start;
  o.exclude = &start;
  const SearchResult around = SearchLayouts(w.folds, w.tensors, w.space, o, hooks);
  CATCH_REQUIRE(around.score.size() == 5u);
  for (size_t i = 0; i < 5; ++i) {
    const int8_t* x = around.rows.data() + i * row;
    const int64_t nearest = std::min({GroupsChanged(x, dflt.data(), nc), GroupsChanged(x, start.data(), nc),
                                      GroupsChanged(x, start.data() + row, nc)});
    CATCH_CHECK(nearest <= 3);
    // Three groups from a start row three from the default: six at most, and the fitness
    // takes all it can.
    CATCH_CHECK(around.score[i] == -static_cast<double>(GroupsChanged(x, dflt.data(), nc)));
    CATCH_CHECK(around.score[i] == -6.0);
  }
}

CATCH_TEST_CASE("search: with a radius no candidate lies within, it still returns the rows asked for, the best outside",
                "[search]") {
  SearchWorld w(1);
  const int64_t nc = w.g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  const std::vector<int8_t> pool(w.g.config_feat.begin(), w.g.config_feat.end());
  const std::vector<int8_t> dflt(row, -1);
  int64_t nearest = 1 << 30;
  for (int64_t c = 0; c < w.g.num_configs; ++c)
    nearest = std::min(nearest, GroupsChanged(pool.data() + c * row, dflt.data(), nc));
  CATCH_REQUIRE(nearest > 2);  // the random file's rows: none within 2 groups of the default
  SearchOptions o = Options(4, 200, 32, 32, 6);
  o.candidates = &pool;
  o.radius = 2;
  const SearchResult s = SearchLayouts(w.folds, w.tensors, w.space, o);
  CATCH_REQUIRE(s.score.size() == 4u);
  CATCH_CHECK(std::is_sorted(s.score.begin(), s.score.end()));
  const std::set<std::string> pool_rows = RowsOf(pool, nc);
  for (const std::string& r : RowsOf(s.rows, nc)) CATCH_CHECK(pool_rows.count(r) == 1);
}

CATCH_TEST_CASE("search: with variation, the last rows are random changes of one to three groups of a parent, after "
                "the model's picks, where the fitness would never choose them",
                "[search]") {
  SearchWorld w(2);
  const int64_t nc = w.g.num_config_nodes();
  const FartherIsBetter far(nc);
  SearchOptions o = Options(6, 400, 48, 32, 5);
  o.exclude = &far.dflt;  // the parent was measured
  o.variation = 2;
  o.variation_parents = &far.dflt;
  const SearchResult r = SearchLayouts(w.folds, w.tensors, w.space, o, far.hooks);
  CATCH_REQUIRE(r.score.size() == 6u);
  CATCH_CHECK(r.variation == 2);
  CATCH_CHECK(r.evaluations <= 400);
  CATCH_CHECK(FirstIllegalLayoutRow(w.space, r.rows.data(), 6) == "");
  CATCH_CHECK(RowsOf(r.rows, nc).size() == 6u);
  CATCH_CHECK(std::is_sorted(r.score.begin(), r.score.begin() + 4));
  for (size_t i = 0; i < 6; ++i) {
    const int64_t changed = GroupsChanged(r.rows.data() + i * far.dflt.size(), far.dflt.data(), nc);
    CATCH_CHECK(r.score[i] == -static_cast<double>(changed));  // scored as the others are
    if (i < 4) CATCH_CHECK(changed > 20);                        // the fitness's picks
    else CATCH_CHECK((changed >= 1 && changed <= 3));            // the parent's variation
  }
  // At most results - 1 rows of variation; none without parents.
  o.variation = 10;
  const SearchResult most = SearchLayouts(w.folds, w.tensors, w.space, o, far.hooks);
  CATCH_REQUIRE(most.score.size() == 6u);
  CATCH_CHECK(most.variation == 5);
  CATCH_CHECK(GroupsChanged(most.rows.data(), far.dflt.data(), nc) > 20);
  const std::vector<int8_t> none;
  o.variation_parents = &none;
  const SearchResult without = SearchLayouts(w.folds, w.tensors, w.space, o, far.hooks);
  CATCH_CHECK(without.variation == 0);
  CATCH_CHECK(without.score.size() == 6u);
}

CATCH_TEST_CASE("search policy: a loop has stalled when its last 30 measurements beat the best before them by less "
                "than 0.2% (or a twentieth of the measurements' spread where less) and then half the results are "
                "variation of the 4 fastest measured rows",
                "[search]") {
  const int64_t nc = 2;
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  // 31 measurements, row i all i's values (distinguishable), runtime 1000 first, then slower.
  std::vector<int8_t> measured;
  std::vector<int64_t> runtimes;
  for (int i = 0; i < 31; ++i) {
    measured.insert(measured.end(), row, static_cast<int8_t>(i));
    runtimes.push_back(i == 0 ? 1000 : 1100 + i);
  }
  runtimes[7] = 1001;  // second fastest
  runtimes[20] = 1002;
  runtimes[3] = 1002;  // ties to the earlier: row 3 before row 20
  Variation v = VariationFor(10, measured, runtimes, nc);
  CATCH_CHECK(v.rows == 5);
  CATCH_REQUIRE(v.parents.size() == 4 * row);
  const int8_t expected[] = {0, 7, 3, 20};
  for (size_t p = 0; p < 4; ++p) CATCH_CHECK(v.parents[p * row] == expected[p]);
  // Rounded up, at most results - 1: 3 of 5, 1 of 2, none of 1.
  CATCH_CHECK(VariationFor(5, measured, runtimes, nc).rows == 3);
  CATCH_CHECK(VariationFor(2, measured, runtimes, nc).rows == 1);
  CATCH_CHECK(VariationFor(1, measured, runtimes, nc).rows == 0);
  // 0.1% better than the best before: still stalled; 0.3% better: improving.
  runtimes[30] = 999;
  CATCH_CHECK(VariationFor(10, measured, runtimes, nc).rows == 5);
  runtimes[30] = 997;
  CATCH_CHECK(VariationFor(10, measured, runtimes, nc).rows == 0);
  // Runtimes all within 0.004% (1,000,000 ns, then 1,000,011-1,000,039 and the last; the
  // median 1,000,024): 0.2% would be 2,000 ns, a twentieth of the spread is 1.2 ns. The
  // last 1 ns better than the first: stalled; 2 ns better: improving.
  std::vector<int64_t> close(31);
  for (int i = 0; i < 31; ++i) close[i] = i == 0 ? 1000000 : 1000010 + i;
  close[30] = 999999;
  CATCH_CHECK(VariationFor(10, measured, close, nc).rows == 5);
  close[30] = 999998;
  CATCH_CHECK(VariationFor(10, measured, close, nc).rows == 0);
  // 30 measurements are too few to tell.
  runtimes.pop_back();
  measured.resize(30 * row);
  CATCH_CHECK(VariationFor(10, measured, runtimes, nc).rows == 0);
  CATCH_CHECK(VariationFor(10, measured, runtimes, nc).parents.empty());
}

CATCH_TEST_CASE("search policy: the store's rows join the request's, every row excluded once, the stored rows' "
                "runtimes first and the given ones as given, a stored row given with a runtime counted as given, and "
                "the fastest start the search",
                "[search]") {
  const int64_t nc = 1;
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  // Row v: all values v. Stored rows 1, 2, 3 (ns 300, 100, 200); given rows 3, 4, 4 (ns 150, 50, 60).
  const auto rows = [&](std::initializer_list<int> values) {
    std::vector<int8_t> r;
    for (int v : values) r.insert(r.end(), row, static_cast<int8_t>(v));
    return r;
  };
  const std::vector<int8_t> stored = rows({1, 2, 3}), given = rows({3, 4, 4});
  const std::vector<int64_t> stored_ns = {300, 100, 200}, given_ns = {150, 50, 60};
  const auto values = [&](const std::vector<int8_t>& r) {
    std::vector<int> v;
    for (size_t i = 0; i < r.size() / row; ++i) v.push_back(r[i * row]);
    return v;
  };

  const JoinedMeasurements timed = JoinMeasured(given, given_ns, stored, stored_ns, nc);
  CATCH_CHECK(values(timed.exclude) == std::vector<int>{1, 2, 3, 4});
  // Row 3 at the given 150 only; row 4 measured twice counts twice.
  CATCH_CHECK(values(timed.measured) == std::vector<int>{1, 2, 3, 4, 4});
  CATCH_CHECK(timed.runtimes_ns == std::vector<int64_t>{300, 100, 150, 50, 60});
  CATCH_CHECK(timed.stored == 2);  // rows 1 and 2
  CATCH_CHECK(values(timed.fastest) == std::vector<int>{4, 2, 3, 1});

  // Given rows without runtimes are excluded only; the stored keep theirs.
  const JoinedMeasurements untimed = JoinMeasured(given, {}, stored, stored_ns, nc);
  CATCH_CHECK(values(untimed.exclude) == std::vector<int>{1, 2, 3, 4});
  CATCH_CHECK(values(untimed.measured) == std::vector<int>{1, 2, 3});
  CATCH_CHECK(untimed.runtimes_ns == std::vector<int64_t>{300, 100, 200});
  CATCH_CHECK(values(untimed.fastest) == std::vector<int>{2, 3, 1});

  // Nothing stored, or only rows the request gives with runtimes: its measurements as
  // they were (a repeat among its rows excluded once).
  for (const JoinedMeasurements& alone :
       {JoinMeasured(given, given_ns, {}, {}, nc), JoinMeasured(given, given_ns, rows({4, 3}), {1, 2}, nc)}) {
    CATCH_CHECK(values(alone.exclude) == std::vector<int>{3, 4});
    CATCH_CHECK(values(alone.measured) == std::vector<int>{3, 4, 4});
    CATCH_CHECK(alone.runtimes_ns == std::vector<int64_t>{150, 50, 60});
    CATCH_CHECK(alone.stored == 0);
  }

  // At most kJoinedStartRows start the search, the fastest; ties to the earlier.
  std::vector<int8_t> many;  // 20 distinct rows, row v's first two values v % 6 - 1 and v / 6 - 1
  std::vector<int64_t> many_ns;
  for (int v = 0; v < 20; ++v) {
    std::vector<int8_t> r(row, 0);
    r[0] = static_cast<int8_t>(v % 6 - 1);
    r[1] = static_cast<int8_t>(v / 6 - 1);
    many.insert(many.end(), r.begin(), r.end());
    many_ns.push_back(1000 - v);  // row 19 the fastest
  }
  const std::vector<int8_t> distinct = rows({-1, 0, 1, 2, 3, 4});
  const JoinedMeasurements capped = JoinMeasured({}, {}, distinct, {5, 5, 4, 9, 9, 1}, nc);
  CATCH_CHECK(values(capped.fastest) == std::vector<int>{4, 1, -1, 0, 2, 3});
  const JoinedMeasurements sixteen = JoinMeasured({}, {}, many, many_ns, nc);
  CATCH_REQUIRE(static_cast<int64_t>(sixteen.fastest.size() / row) == kJoinedStartRows);
  CATCH_CHECK(std::equal(sixteen.fastest.begin(), sixteen.fastest.begin() + static_cast<std::ptrdiff_t>(row),
                         many.begin() + static_cast<std::ptrdiff_t>(19 * row)));
  CATCH_CHECK(std::equal(sixteen.fastest.end() - static_cast<std::ptrdiff_t>(row), sixteen.fastest.end(),
                         many.begin() + static_cast<std::ptrdiff_t>(4 * row)));
}
