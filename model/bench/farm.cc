#include "model/bench/farm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/preprocess.h"
#include "model/core/rank_metrics.h"
#include "model/nn/features.h"
#include "model/search/measured_correction.h"
#include "model/search/search_policy.h"
#include "model/synth/search.h"
#include "model/train/train_data.h"
#include "model/train/train_step.h"

namespace tgraph {

void FarmGraph::Encode() {
  for (const auto& net : model.folds) net->eval();
  encoded = EncodeGraph(tensors, model.folds);
  folds = encoded.Folds(model.folds);
}

namespace {

// The learning loop between rounds: every fold trained on the graph's measured rows and
// their (noisy) runtimes, as tgraph-train finetune trains on a farm's measurements.
void Finetune(FarmGraph& g, const std::vector<int8_t>& measured, const std::vector<int64_t>& runtimes,
              Rng& rng) {
  if (runtimes.size() < 4) return;
  const FarmOptions& fo = g.options;
  LayoutGraph lg;
  lg.graph = g.graph;
  lg.node_config_ids = g.inst.config_ids;
  lg.num_configs = static_cast<int64_t>(runtimes.size());
  lg.config_feat = measured;
  lg.config_runtime = runtimes;
  const GraphData gd = LayoutGraphData(lg, g.inst.name, "train");
  const GraphTensors t = MakeGraphTensors(gd.graph, gd.config_nodes, g.model.manifest.stats);
  for (const auto& net : g.model.folds) {
    net->train();
    auto opt = MakeOptimizer(*net, fo.finetune_lr, 1e-5);
    for (int64_t s = 0; s < fo.finetune_steps; ++s)
      TrainStep(*net, *opt, t, gd, SampleRows(gd, 64, rng), fo.finetune_lr, 1.0,
                        kDefaultQueryShare,
                        ParseRankingLoss(fo.finetune_loss)
                            .value_or(TrainedLoss(g.model.manifest.training)));
  }
  g.Encode();
}

}  // namespace

double TrueRuntime(const FarmGraph& g, const int8_t* row) { return g.hardware->Evaluate(row).total_ns; }

Trace RandomTrace(const FarmGraph& g, Rng& rng) {
  const FarmOptions& fo = g.options;
  Trace t;
  const int64_t nc = static_cast<int64_t>(g.space.nodes.size());
  std::vector<int8_t> row(static_cast<size_t>(nc * kConfigFeatDim));
  for (int64_t k = 0; k < fo.Budget(); ++k) {
    for (int64_t j = 0; j < nc; ++j)
      for (int gr = 0; gr < kConfigGroups; ++gr) {
        const auto& c = g.space.nodes[j].groups[gr].candidates;
        const auto& l = c[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(c.size()) - 1))];
        std::copy(l.begin(), l.end(), row.begin() + j * kConfigFeatDim + gr * kLayoutSlots);
      }
    t.push_back(TrueRuntime(g, row.data()));
  }
  return t;
}

Trace GeneticTrace(const FarmGraph& g, Rng& rng) {
  const FarmOptions& fo = g.options;
  const synth::SearchResult s = synth::GeneticSearch(*g.hardware, fo.GeneticBudget(), rng);
  Trace t;
  const size_t row = g.inst.config_ids.size() * kConfigFeatDim;
  for (int64_t i = 0; i < s.num_configs; ++i) t.push_back(TrueRuntime(g, s.configs.data() + i * row));
  return t;
}

namespace {

// The standard deviation of the log runtime over random rows of the graph's space: the
// scale on which the model's scores are standardised (its reference is mostly random
// rows), so that a noisy oracle meets the correction on the same terms the model does.
double RandomRowsLogSd(const FarmGraph& g) {
  Rng rng(0x5eed);
  const int64_t nc = static_cast<int64_t>(g.space.nodes.size());
  std::vector<int8_t> row(static_cast<size_t>(nc * kConfigFeatDim));
  double sum = 0, sum2 = 0;
  const int n = 256;
  for (int k = 0; k < n; ++k) {
    for (int64_t j = 0; j < nc; ++j)
      for (int gr = 0; gr < kConfigGroups; ++gr) {
        const auto& c = g.space.nodes[j].groups[gr].candidates;
        const auto& l = c[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(c.size()) - 1))];
        std::copy(l.begin(), l.end(), row.begin() + j * kConfigFeatDim + gr * kLayoutSlots);
      }
    const double x = std::log(g.hardware->Evaluate(row.data()).total_ns);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  return std::sqrt(std::max(1e-12, sum2 / n - mean * mean));
}

}  // namespace

// A row's log runtime misjudged by `sigma` (one standard normal draw per row and salt,
// the same every time the row comes back), divided by `scale`.
double NoisyLogRuntime(const FarmGraph& g, const int8_t* row, double sigma, double scale, uint64_t salt) {
  const size_t bytes = g.inst.config_ids.size() * kConfigFeatDim;
  const uint64_t h = std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(row), bytes));
  Rng draw(h ^ (salt * 0x9e3779b97f4a7c15ULL));
  return (std::log(TrueRuntime(g, row)) + sigma * draw.Normal()) / scale;
}

std::vector<double> TrueRuntimes(const FarmGraph& g, const std::vector<int8_t>& rows, size_t row) {
  std::vector<double> truth;
  for (size_t k = 0; k < rows.size() / row; ++k) truth.push_back(TrueRuntime(g, rows.data() + k * row));
  return truth;
}

namespace {

// The model's scores of `rows` (all folds).
std::vector<double> ModelScores(FarmGraph& g, const std::vector<int8_t>& rows, size_t row) {
  const int64_t n = static_cast<int64_t>(rows.size() / row);
  const ConfigRows cr{rows.data(), nullptr, n, static_cast<int64_t>(g.space.nodes.size())};
  return ScoreConfigs(g.folds, g.tensors, cr, ScoringOptions{}).score;
}

}  // namespace

// Kendall tau of the model's scores of `rows` and their true runtimes.
double ModelTau(FarmGraph& g, const std::vector<int8_t>& rows, size_t row) {
  return KendallTau(ModelScores(g, rows, row), TrueRuntimes(g, rows, row));
}

namespace {

// --final_tau: after a model-guided loop, how well its fitness (without the exploration
// bonus) orders the one-group neighbours of the fastest measured row, where the next
// improving moves are, beside a noisy oracle's over the same rows.
void ReportFinalTau(FarmGraph& g, const std::vector<int8_t>& measured, const std::vector<int64_t>& runtimes,
                    size_t best, double correction_weight) {
  const size_t row = g.inst.config_ids.size() * kConfigFeatDim;
  const std::vector<int8_t> near = OneGroupNeighbours(g.space, measured.data() + best * row);
  const std::vector<double> truth = TrueRuntimes(g, near, row);
  const std::vector<double> model = ModelScores(g, near, row);
  std::vector<double> fitness = model, correction(model.size(), 0.0);
  absl::StatusOr<MeasuredCorrection> c =
      MeasuredCorrection::Fit(measured, runtimes, static_cast<int64_t>(g.inst.config_ids.size()));
  for (size_t k = 0; k < truth.size(); ++k) {
    if (c.ok()) correction[k] = c->Predict(near.data() + k * row);
    fitness[k] += correction_weight * correction[k];
  }
  std::string noisy_taus;
  for (double sigma : {0.0025, 0.005, 0.01, 0.02, 0.04}) {
    std::vector<double> noisy;
    for (size_t k = 0; k < truth.size(); ++k) noisy.push_back(NoisyLogRuntime(g, near.data() + k * row, sigma, 1.0, 1));
    absl::StrAppendFormat(&noisy_taus, " %g%%: %.3f", 100 * sigma, KendallTau(noisy, truth));
  }
  std::fprintf(stderr,
               "final tau over the %zu one-group neighbours of the fastest measured row: model %.3f, correction %.3f, "
               "fitness %.3f; noisy oracles%s\n",
               truth.size(), KendallTau(model, truth), KendallTau(correction, truth),
               KendallTau(fitness, truth), noisy_taus.c_str());
}

}  // namespace

// Rounds of proposals from the model, measured with noise by the farm; with `learn`,
// the model is fine-tuned on what was measured after each round.
// With Fitness::kOracle, the search's fitness is the hardware's own log runtime
// (noise-free) and nothing is learned: how far the search goes with a perfect model;
// with kNoisy, that runtime misjudged by --oracle_noise, and the correction learns from
// the measurements as it does beside the model: how far it goes with an imperfect one.

GuidedRun GuidedLoop(FarmGraph& g, uint64_t seed, Rng& rng, bool learn, Fitness fitness) {
  const FarmOptions& fo = g.options;
  GuidedRun run;
  Trace& t = run.trace;
  std::vector<int8_t>& measured = run.measured;
  std::vector<int64_t>& runtimes = run.runtimes;
  std::vector<std::pair<int64_t, size_t>> by_runtime;  // measured runtime, row index
  const size_t row = g.inst.config_ids.size() * kConfigFeatDim;
  // The compiler's default is measured first, as XLA's autotuner and the genetic search
  // do: the start of the first round.
  const std::vector<int8_t> dflt(row, -1);
  const double scale = fitness == Fitness::kNoisy ? RandomRowsLogSd(g) : 1.0;
  std::string weights;  // the correction's weight each round used
  t.push_back(TrueRuntime(g, dflt.data()));
  runtimes.push_back(synth::Measure(t.back(), rng));
  by_runtime.emplace_back(runtimes.back(), 0);
  measured = dflt;
  for (int round = 0; static_cast<int64_t>(t.size()) < fo.Budget(); ++round) {
    std::sort(by_runtime.begin(), by_runtime.end());
    std::vector<int8_t> start;
    for (size_t i = 0; i < by_runtime.size() && i < 16; ++i)
      start.insert(start.end(), measured.begin() + by_runtime[i].second * row,
                   measured.begin() + (by_runtime[i].second + 1) * row);
    // The server's search for this round's request (model/search/search_policy.h).
    SearchOptions o = SearchPolicy(
        std::min<int64_t>(fo.per_round, fo.Budget() - static_cast<int64_t>(t.size())),
        fo.evaluations, seed * 1000 + static_cast<uint64_t>(round),
        ModelSearchBudget(g.model.manifest), fo.max_changed_groups);
    std::vector<int8_t> near;
    for (size_t i = 0; i < by_runtime.size() && static_cast<int64_t>(i) < fo.neighbourhood; ++i) {
      const std::vector<int8_t> n = OneGroupNeighbours(g.space, measured.data() + by_runtime[i].second * row);
      near.insert(near.end(), n.begin(), n.end());
    }
    if (!near.empty()) o.candidates = &near;
    Variation variation;
    if (fo.stall_variation) {
      variation = VariationFor(o.results, measured, runtimes, static_cast<int64_t>(g.inst.config_ids.size()));
      o.variation = variation.rows;
      o.variation_parents = &variation.parents;
    }
    o.finalists = fo.finalists;
    o.start = &start;
    o.exclude = &measured;
    SearchHooks hooks;
    if (fitness == Fitness::kOracle) hooks.fitness = [&g](const int8_t* x) { return std::log(TrueRuntime(g, x)); };
    if (fitness == Fitness::kNoisy)
      hooks.fitness = [&g, sigma = fo.oracle_noise, scale, seed](const int8_t* x) {
        return NoisyLogRuntime(g, x, sigma, scale, seed + 1);
      };
    absl::StatusOr<std::optional<MeasuredCorrection>> correction = std::optional<MeasuredCorrection>();
    if (fitness != Fitness::kOracle && fo.online_correction > 0) {
      correction = CorrectionFor(measured, runtimes, static_cast<int64_t>(g.inst.config_ids.size()));
      if (correction.ok() && *correction) {
        o.correction = &**correction;
        o.correction_weight = fo.online_correction;
        o.exploration = fo.exploration;
        o.spread_proposals = fo.spread_proposals;
        o.adapt_correction = fo.adapt_correction;
      }
    }
    const SearchResult r = SearchLayouts(g.folds, g.tensors, g.space, o, hooks);
    if (o.correction) absl::StrAppendFormat(&weights, " %.2g", r.correction_weight);
    if (r.score.empty()) break;
    for (size_t i = 0; i < r.score.size(); ++i) {
      const int8_t* x = r.rows.data() + i * row;
      t.push_back(TrueRuntime(g, x));
      runtimes.push_back(synth::Measure(t.back(), rng));
      by_runtime.emplace_back(runtimes.back(), measured.size() / row);
      measured.insert(measured.end(), x, x + row);
    }
    if (learn && static_cast<int64_t>(t.size()) < fo.Budget()) Finetune(g, measured, runtimes, rng);
  }
  if (!weights.empty()) std::fprintf(stderr, "%s: the correction's weight per round:%s\n", g.inst.name.c_str(), weights.c_str());
  if (fo.final_tau && fitness == Fitness::kModel) {
    std::sort(by_runtime.begin(), by_runtime.end());
    ReportFinalTau(g, measured, runtimes, by_runtime.front().second, fo.online_correction);
  }
  return run;
}

Trace GuidedTrace(FarmGraph& g, uint64_t seed, Rng& rng, bool learn, Fitness fitness) {
  return GuidedLoop(g, seed, rng, learn, fitness).trace;
}

// Graph `index` of the farm, with a fresh copy of the model (version `version`).
absl::StatusOr<std::unique_ptr<FarmGraph>> LoadFarmGraph(const Registry& registry, int64_t version,
                                                         const Collection& c, const synth::PresetSpec& preset,
                                                         int index, const FarmOptions& fo) {
  auto g = std::make_unique<FarmGraph>();
  g->options = fo;
  absl::StatusOr<LoadedModel> model = LoadModel(registry, c.name(), version);
  if (!model.ok()) return model.status();
  g->model = std::move(*model);
  g->inst = synth::MakeLayoutInstance(preset, fo.seed, c, index);
  synth::CostConstants k;
  if (fo.other_hardware) {
    k.hbm_bytes_per_ns *= 0.5;
    k.mxu_flops_per_ns *= 2.0;
    k.copy_penalty_per_step *= 2.0;
  }
  g->hardware = std::make_unique<synth::LayoutCostModel>(g->inst.built.nodes, g->inst.config_ids, k);
  g->graph = synth::ToNodeGraph(g->inst.built.nodes);
  g->space = LayoutSpaceOf(g->graph, g->inst.config_ids);
  const PrunedGraph pruned = PruneGraph(g->graph, g->inst.config_ids);
  g->tensors = MakeGraphTensors(pruned.graph, pruned.config_node_index, g->model.manifest.stats);
  g->Encode();
  return g;
}

}  // namespace tgraph
