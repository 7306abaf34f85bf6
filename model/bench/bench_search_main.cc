// tgraph-bench-search: a simulated autotuning farm. The generator's TPU cost model
// (model/synth/cost_model.h, with its measurement noise) plays the hardware on graphs of
// a split the model never trained on; each strategy measures up to --budget (200)
// configurations (the genetic search up to --genetic_budget), and the figures of merit
// are the best runtime found over the best known after 10, 20, 50, 100, 200, 500, ...
// measurements, and how many measurements each needed to come within --within (1%) of
// it (the best known: a long genetic search of the cost model itself, and everything any
// strategy measured).
//
//   tgraph-bench-search --registry REG --collection layout:xla:random --preset ci --seed 0 [--graphs 6]
//       [--strategies default,genetic,...] [--genetic_budget 4000]
//       [--csv CURVES.csv]   (then scripts/plot-search CURVES.csv CURVES.png)
//
// Strategies: the compiler default; random rows of the layout space; the genetic search
// that made the dataset's default collections (model/synth/search.h); tgraph-guided search
// with a frozen model (the compiler default measured first, then SearchLayouts,
// model/search/layout_search.h: rounds of --per_round proposals, the measured rows excluded
// and the fastest measured the start), and the same
// with the model fine-tuned on the measurements after each round (the learning loop of
// ReportMeasurements and tgraph-train finetune, in process). Not run unless named:
// `oracle`, the same rounds with the hardware's own runtimes as the search's fitness
// (what a perfect model would find; what it finds joins the best known, so that a run
// with it judges the others against a better best); and `noisy`, the same rounds with the
// hardware's log runtime blurred by an error of --oracle_noise (a fraction of the runtime,
// one draw per row) as the model's score, and the online correction as the loop has it:
// how good a model the loop needs.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/search/measured_correction.h"
#include "model/core/rank_metrics.h"
#include "model/core/preprocess.h"
#include "model/nn/features.h"
#include "model/search/layout_search.h"
#include "model/search/search_policy.h"
#include "model/nn/model_io.h"
#include "model/synth/cost_model.h"
#include "model/synth/generator.h"
#include "model/synth/search.h"
#include "model/tools/cli.h"
#include "model/tools/tool.h"
#include "model/train/train_data.h"
#include "model/train/train_step.h"

ABSL_FLAG(std::string, registry, "", "Model registry (the model trained on --preset/--seed data)");
ABSL_FLAG(std::string, collection, "layout:xla:random", "A layout collection");
ABSL_FLAG(int64_t, version, 0, "Model version (0 = latest)");
ABSL_FLAG(std::string, preset, "ci", "The generator preset the model's data came from");
ABSL_FLAG(uint64_t, seed, 0, "The generator seed the model's data came from");
ABSL_FLAG(std::string, split, "test", "The split whose graphs are tuned (valid or test: never trained on)");
ABSL_FLAG(int, graphs, 6, "Graphs of the split to tune (the first N)");
ABSL_FLAG(int, repeats, 1, "Runs per graph and strategy, each with another seed (noise, random choices)");
ABSL_FLAG(int64_t, per_round, 10, "tgraph-guided: configurations measured per round");
ABSL_FLAG(int64_t, evaluations, tgraph::kDefaultSearchEvaluations,
          "tgraph-guided: model evaluations per round's search (SearchConfigs' default max_evaluations)");
ABSL_FLAG(int64_t, best_known_evaluations, 4000, "The cost model's own genetic search that sets the best known");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0 = every core this process may use)");
ABSL_FLAG(bool, other_hardware, false,
          "Measure on hardware unlike the training data's: the cost model with half the memory bandwidth, twice the "
          "matrix-unit rate and twice the copy penalty (only learning from measurements can adapt to it)");
ABSL_FLAG(int64_t, finetune_steps, 10,
          "tgraph+finetune: optimisation steps per fold after each round (more forget the order the model learned "
          "offline: with 40, fewer test graphs came within 1% in 200 measurements)");
ABSL_FLAG(std::string, csv, "",
          "Also write every run's curve here: strategy,graph,repeat,measured,gap (the best true runtime after that many "
          "measurements over the best known, minus 1), for scripts/plot-search");
ABSL_FLAG(double, finetune_lr, 1e-4, "tgraph+finetune: AdamW learning rate (tgraph-train finetune's default)");
ABSL_FLAG(std::string, finetune_loss, "",
          "tgraph+finetune: the ranking loss of its steps (tgraph-train --loss: hinge, top or listwise; unset: the "
          "model's own)");
ABSL_FLAG(int64_t, budget, 200, "Measurements each strategy may spend (the table's columns: 10, 20, 50, 100, 200, 500, ...)");
ABSL_FLAG(int64_t, genetic_budget, 0,
          "Measurements the genetic search may spend (0 = --budget): how many it needs to come within 1%");
ABSL_FLAG(std::string, strategies, "default,random,genetic,tgraph,tgraph+ft",
          "The strategies to run, comma-separated; also oracle: tgraph-guided rounds with the hardware's own runtimes "
          "as fitness; noisy: the same with an error of --oracle_noise per row, and the online correction");
ABSL_FLAG(int64_t, neighbourhood, 0,
          "tgraph-guided: when > 0, each round searches only the rows one layout group away from the N fastest "
          "measured (a trust region around the incumbents); 0 = the whole space");
ABSL_FLAG(bool, neighbour_tau, false,
          "Instead of the farm: per graph, how well the model ranks the one-group neighbours of the compiler default "
          "and of the best known row, as many random rows, 64 rows 2-8 groups from the default (the search's region), "
          "and the 64 rows its first search from the default proposes (Kendall tau of its scores and the true "
          "runtimes), beside a fitness --oracle_noise off");
ABSL_FLAG(double, online_correction, tgraph::SearchOptions{}.correction_weight,
          "tgraph-guided: each round's search adds this weight times what the graph's measurements so far predict "
          "(SearchOptions::correction, model/search/measured_correction.h) to the model's scores, as the server's "
          "does with the measured rows' runtimes; 0 = off");
ABSL_FLAG(double, exploration, tgraph::SearchOptions{}.exploration,
          "--online_correction: the weight of the correction's uncertainty, subtracted from every score "
          "(SearchOptions::exploration; 0 = none)");
ABSL_FLAG(bool, spread_proposals, tgraph::SearchOptions{}.spread_proposals,
          "--online_correction: choose each round's proposals one at a time, each with the uncertainty left once those "
          "before it are measured (SearchOptions::spread_proposals; --nospread_proposals for all at once)");
ABSL_FLAG(bool, adapt_correction, tgraph::SearchOptions{}.adapt_correction,
          "--online_correction: scale its weight and exploration down by how well the model already predicts the "
          "measurements (SearchOptions::adapt_correction; --noadapt_correction for the fixed weights)");
ABSL_FLAG(int64_t, max_changed_groups, 0,
          "tgraph-guided: the search's trust region, layout groups changed from the default and the measured rows it "
          "starts from (0: the server's default; -1: the whole space)");
ABSL_FLAG(int64_t, finalists, 0,
          "tgraph-guided: rows re-scored by every fold, among which the proposals are chosen (SearchOptions::finalists; 0 "
          "= its default, max(2 x per_round, 32))");
ABSL_FLAG(double, oracle_noise, 0.01,
          "noisy: the standard deviation of the error added to each row's log runtime (0.01: the fitness misjudges "
          "a row's runtime by 1% on average), one draw per row and run");
ABSL_FLAG(bool, final_tau, false,
          "After each tgraph-guided run, print (stderr) how well its fitness orders the one-group neighbours of the "
          "fastest measured row (Kendall tau: the model, the correction, their sum as the search adds them, and noisy "
          "oracles of 0.25-4%)");
ABSL_FLAG(std::string, write_picks, "",
          "Instead of the farm: write the layout:SOURCE:picks collection into this dataset (tgraph-synth's output for "
          "--preset and --seed, one of several seeds included): per graph of every split, the rows the frozen model's "
          "loop (the tgraph strategy, --budget measurements in rounds of --per_round) measured, with the runtimes as "
          "the farm measured them; a graph's picks already there are kept and the new rows added after them");
ABSL_FLAG(bool, stall_variation, true,
          "tgraph-guided: when the measurements stop improving, part of each round is random variation of the fastest "
          "measured rows, as the server's search does (model/search/search_policy.h, VariationFor); "
          "--nostall_variation for the model's proposals only");
ABSL_FLAG(double, within, 0.01, "The 'measurements to come within' table's gap to the best known (0.01 = 1%)");

namespace {

using tgraph::Fail;
using tgraph::UsageError;
namespace synth = tgraph::synth;

const char* const kStrategies[] = {"default", "random", "genetic", "tgraph", "tgraph+ft", "oracle", "noisy"};

int64_t Budget() { return std::max<int64_t>(1, absl::GetFlag(FLAGS_budget)); }
int64_t GeneticBudget() {
  return absl::GetFlag(FLAGS_genetic_budget) > 0 ? absl::GetFlag(FLAGS_genetic_budget) : Budget();
}

// The table's columns: 10, 20, 50, 100, 200, 500, 1000, ... up to the largest budget.
std::vector<int64_t> Columns() {
  std::vector<int64_t> c;
  const int64_t max = std::max(Budget(), GeneticBudget());
  for (int64_t decade = 10; decade <= max; decade *= 10)
    for (int64_t m : {1, 2, 5})
      if (decade * m <= max) c.push_back(decade * m);
  return c;
}

// One graph of the farm: the cost model that plays the hardware, and the model's view
// (its own copy of the model: fine-tuning changes it).
struct FarmGraph {
  synth::LayoutInstance inst;
  std::unique_ptr<synth::LayoutCostModel> hardware;
  tgraph::NodeGraph graph;
  tgraph::LayoutSpace space;
  tgraph::LoadedModel model;
  tgraph::GraphTensors tensors;
  std::vector<tgraph::StaticEncoding> caches;
  std::vector<tgraph::FoldModel> folds;

  // The folds' encodings of the graph, again after their weights changed.
  void Encode() {
    torch::NoGradGuard no_grad;
    caches.clear();
    folds.clear();
    for (const auto& net : model.folds) {
      net->eval();
      caches.push_back(net->Precompute(tensors));
    }
    for (size_t f = 0; f < model.folds.size(); ++f)
      folds.push_back({model.folds[f].get(), &caches[f], static_cast<int>(f)});
  }
};

// The learning loop between rounds: every fold trained on the graph's measured rows and
// their (noisy) runtimes, as tgraph-train finetune trains on a farm's measurements.
void Finetune(FarmGraph& g, const std::vector<int8_t>& measured, const std::vector<int64_t>& runtimes,
              tgraph::Rng& rng) {
  if (runtimes.size() < 4) return;
  tgraph::LayoutGraph lg;
  lg.graph = g.graph;
  lg.node_config_ids = g.inst.config_ids;
  lg.num_configs = static_cast<int64_t>(runtimes.size());
  lg.config_feat = measured;
  lg.config_runtime = runtimes;
  const tgraph::GraphData gd = tgraph::LayoutGraphData(lg, g.inst.name, "train");
  const tgraph::GraphTensors t = tgraph::MakeGraphTensors(gd.graph, gd.config_nodes, g.model.manifest.stats);
  for (const auto& net : g.model.folds) {
    net->train();
    auto opt = tgraph::MakeOptimizer(*net, absl::GetFlag(FLAGS_finetune_lr), 1e-5);
    for (int64_t s = 0; s < absl::GetFlag(FLAGS_finetune_steps); ++s)
      tgraph::TrainStep(*net, *opt, t, gd, tgraph::SampleRows(gd, 64, rng), absl::GetFlag(FLAGS_finetune_lr), 1.0,
                        tgraph::kDefaultQueryShare,
                        tgraph::ParseRankingLoss(absl::GetFlag(FLAGS_finetune_loss))
                            .value_or(tgraph::TrainedLoss(g.model.manifest.training)));
  }
  g.Encode();
}

// True (noise-free) runtimes of what a strategy measured, in order.
using Trace = std::vector<double>;

double TrueRuntime(const FarmGraph& g, const int8_t* row) { return g.hardware->Evaluate(row).total_ns; }

Trace RandomTrace(const FarmGraph& g, tgraph::Rng& rng) {
  Trace t;
  const int64_t nc = static_cast<int64_t>(g.space.nodes.size());
  std::vector<int8_t> row(static_cast<size_t>(nc * tgraph::kConfigFeatDim));
  for (int64_t k = 0; k < Budget(); ++k) {
    for (int64_t j = 0; j < nc; ++j)
      for (int gr = 0; gr < tgraph::kConfigGroups; ++gr) {
        const auto& c = g.space.nodes[j].groups[gr].candidates;
        const auto& l = c[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(c.size()) - 1))];
        std::copy(l.begin(), l.end(), row.begin() + j * tgraph::kConfigFeatDim + gr * tgraph::kLayoutSlots);
      }
    t.push_back(TrueRuntime(g, row.data()));
  }
  return t;
}

Trace GeneticTrace(const FarmGraph& g, tgraph::Rng& rng) {
  const synth::SearchResult s = synth::GeneticSearch(*g.hardware, GeneticBudget(), rng);
  Trace t;
  const size_t row = g.inst.config_ids.size() * tgraph::kConfigFeatDim;
  for (int64_t i = 0; i < s.num_configs; ++i) t.push_back(TrueRuntime(g, s.configs.data() + i * row));
  return t;
}

// What a guided search's fitness is.
enum class Fitness {
  kModel,   // the model's folds (tgraph, tgraph+ft)
  kOracle,  // the hardware's own noise-free log runtime; no correction (oracle)
  kNoisy,   // that log runtime with an error of --oracle_noise per row, on the model's scale, and the correction (noisy)
};

// The standard deviation of the log runtime over random rows of the graph's space: the
// scale on which the model's scores are standardised (its reference is mostly random
// rows), so that a noisy oracle meets the correction on the same terms the model does.
double RandomRowsLogSd(const FarmGraph& g) {
  tgraph::Rng rng(0x5eed);
  const int64_t nc = static_cast<int64_t>(g.space.nodes.size());
  std::vector<int8_t> row(static_cast<size_t>(nc * tgraph::kConfigFeatDim));
  double sum = 0, sum2 = 0;
  const int n = 256;
  for (int k = 0; k < n; ++k) {
    for (int64_t j = 0; j < nc; ++j)
      for (int gr = 0; gr < tgraph::kConfigGroups; ++gr) {
        const auto& c = g.space.nodes[j].groups[gr].candidates;
        const auto& l = c[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(c.size()) - 1))];
        std::copy(l.begin(), l.end(), row.begin() + j * tgraph::kConfigFeatDim + gr * tgraph::kLayoutSlots);
      }
    const double x = std::log(g.hardware->Evaluate(row.data()).total_ns);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  return std::sqrt(std::max(1e-12, sum2 / n - mean * mean));
}

// A row's log runtime misjudged by `sigma` (one standard normal draw per row and salt,
// the same every time the row comes back), divided by `scale`.
double NoisyLogRuntime(const FarmGraph& g, const int8_t* row, double sigma, double scale, uint64_t salt) {
  const size_t bytes = g.inst.config_ids.size() * tgraph::kConfigFeatDim;
  const uint64_t h = std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(row), bytes));
  tgraph::Rng draw(h ^ (salt * 0x9e3779b97f4a7c15ULL));
  return (std::log(TrueRuntime(g, row)) + sigma * draw.Normal()) / scale;
}

// The true runtimes of `rows`, and the model's scores of them (all folds).
std::vector<double> TrueRuntimes(const FarmGraph& g, const std::vector<int8_t>& rows, size_t row) {
  std::vector<double> truth;
  for (size_t k = 0; k < rows.size() / row; ++k) truth.push_back(TrueRuntime(g, rows.data() + k * row));
  return truth;
}
std::vector<double> ModelScores(FarmGraph& g, const std::vector<int8_t>& rows, size_t row) {
  const int64_t n = static_cast<int64_t>(rows.size() / row);
  const tgraph::ConfigRows cr{rows.data(), nullptr, n, static_cast<int64_t>(g.space.nodes.size())};
  return tgraph::ScoreConfigs(g.folds, g.tensors, cr, tgraph::ScoringOptions{}).score;
}
// Kendall tau of the model's scores of `rows` and their true runtimes.
double ModelTau(FarmGraph& g, const std::vector<int8_t>& rows, size_t row) {
  return tgraph::KendallTau(ModelScores(g, rows, row), TrueRuntimes(g, rows, row));
}

// --final_tau: after a model-guided loop, how well its fitness (without the exploration
// bonus) orders the one-group neighbours of the fastest measured row, where the next
// improving moves are, beside a noisy oracle's over the same rows.
void ReportFinalTau(FarmGraph& g, const std::vector<int8_t>& measured, const std::vector<int64_t>& runtimes,
                    size_t best, double correction_weight) {
  const size_t row = g.inst.config_ids.size() * tgraph::kConfigFeatDim;
  const std::vector<int8_t> near = tgraph::OneGroupNeighbours(g.space, measured.data() + best * row);
  const std::vector<double> truth = TrueRuntimes(g, near, row);
  const std::vector<double> model = ModelScores(g, near, row);
  std::vector<double> fitness = model, correction(model.size(), 0.0);
  absl::StatusOr<tgraph::MeasuredCorrection> c =
      tgraph::MeasuredCorrection::Fit(measured, runtimes, static_cast<int64_t>(g.inst.config_ids.size()));
  for (size_t k = 0; k < truth.size(); ++k) {
    if (c.ok()) correction[k] = c->Predict(near.data() + k * row);
    fitness[k] += correction_weight * correction[k];
  }
  std::string noisy_taus;
  for (double sigma : {0.0025, 0.005, 0.01, 0.02, 0.04}) {
    std::vector<double> noisy;
    for (size_t k = 0; k < truth.size(); ++k) noisy.push_back(NoisyLogRuntime(g, near.data() + k * row, sigma, 1.0, 1));
    absl::StrAppendFormat(&noisy_taus, " %g%%: %.3f", 100 * sigma, tgraph::KendallTau(noisy, truth));
  }
  std::fprintf(stderr,
               "final tau over the %zu one-group neighbours of the fastest measured row: model %.3f, correction %.3f, "
               "fitness %.3f; noisy oracles%s\n",
               truth.size(), tgraph::KendallTau(model, truth), tgraph::KendallTau(correction, truth),
               tgraph::KendallTau(fitness, truth), noisy_taus.c_str());
}

// Rounds of proposals from the model, measured with noise by the farm; with `learn`,
// the model is fine-tuned on what was measured after each round.
// With Fitness::kOracle, the search's fitness is the hardware's own log runtime
// (noise-free) and nothing is learned: how far the search goes with a perfect model;
// with kNoisy, that runtime misjudged by --oracle_noise, and the correction learns from
// the measurements as it does beside the model: how far it goes with an imperfect one.
// What a guided run measured: the true runtimes in order, and the rows with the
// runtimes the farm measured (what it would report).
struct GuidedRun {
  Trace trace;
  std::vector<int8_t> measured;
  std::vector<int64_t> runtimes;
};

GuidedRun GuidedLoop(FarmGraph& g, uint64_t seed, tgraph::Rng& rng, bool learn, Fitness fitness = Fitness::kModel) {
  GuidedRun run;
  Trace& t = run.trace;
  std::vector<int8_t>& measured = run.measured;
  std::vector<int64_t>& runtimes = run.runtimes;
  std::vector<std::pair<int64_t, size_t>> by_runtime;  // measured runtime, row index
  const size_t row = g.inst.config_ids.size() * tgraph::kConfigFeatDim;
  // The compiler's default is measured first, as XLA's autotuner and the genetic search
  // do: the start of the first round.
  const std::vector<int8_t> dflt(row, -1);
  const double scale = fitness == Fitness::kNoisy ? RandomRowsLogSd(g) : 1.0;
  std::string weights;  // the correction's weight each round used
  t.push_back(TrueRuntime(g, dflt.data()));
  runtimes.push_back(synth::Measure(t.back(), rng));
  by_runtime.emplace_back(runtimes.back(), 0);
  measured = dflt;
  for (int round = 0; static_cast<int64_t>(t.size()) < Budget(); ++round) {
    std::sort(by_runtime.begin(), by_runtime.end());
    std::vector<int8_t> start;
    for (size_t i = 0; i < by_runtime.size() && i < 16; ++i)
      start.insert(start.end(), measured.begin() + by_runtime[i].second * row,
                   measured.begin() + (by_runtime[i].second + 1) * row);
    // The server's search for this round's request (model/search/search_policy.h).
    tgraph::SearchOptions o = tgraph::SearchPolicy(
        std::min<int64_t>(absl::GetFlag(FLAGS_per_round), Budget() - static_cast<int64_t>(t.size())),
        absl::GetFlag(FLAGS_evaluations), seed * 1000 + static_cast<uint64_t>(round),
        tgraph::ModelSearchBudget(g.model.manifest), absl::GetFlag(FLAGS_max_changed_groups));
    std::vector<int8_t> near;
    for (size_t i = 0; i < by_runtime.size() && static_cast<int64_t>(i) < absl::GetFlag(FLAGS_neighbourhood); ++i) {
      const std::vector<int8_t> n = tgraph::OneGroupNeighbours(g.space, measured.data() + by_runtime[i].second * row);
      near.insert(near.end(), n.begin(), n.end());
    }
    if (!near.empty()) o.candidates = &near;
    tgraph::Variation variation;
    if (absl::GetFlag(FLAGS_stall_variation)) {
      variation = tgraph::VariationFor(o.results, measured, runtimes, static_cast<int64_t>(g.inst.config_ids.size()));
      o.variation = variation.rows;
      o.variation_parents = &variation.parents;
    }
    o.finalists = absl::GetFlag(FLAGS_finalists);
    o.start = &start;
    o.exclude = &measured;
    tgraph::SearchHooks hooks;
    if (fitness == Fitness::kOracle) hooks.fitness = [&g](const int8_t* x) { return std::log(TrueRuntime(g, x)); };
    if (fitness == Fitness::kNoisy)
      hooks.fitness = [&g, sigma = absl::GetFlag(FLAGS_oracle_noise), scale, seed](const int8_t* x) {
        return NoisyLogRuntime(g, x, sigma, scale, seed + 1);
      };
    absl::StatusOr<std::optional<tgraph::MeasuredCorrection>> correction = std::optional<tgraph::MeasuredCorrection>();
    if (fitness != Fitness::kOracle && absl::GetFlag(FLAGS_online_correction) > 0) {
      correction = tgraph::CorrectionFor(measured, runtimes, static_cast<int64_t>(g.inst.config_ids.size()));
      if (correction.ok() && *correction) {
        o.correction = &**correction;
        o.correction_weight = absl::GetFlag(FLAGS_online_correction);
        o.exploration = absl::GetFlag(FLAGS_exploration);
        o.spread_proposals = absl::GetFlag(FLAGS_spread_proposals);
        o.adapt_correction = absl::GetFlag(FLAGS_adapt_correction);
      }
    }
    const tgraph::SearchResult r = tgraph::SearchLayouts(g.folds, g.tensors, g.space, o, hooks);
    if (o.correction) absl::StrAppendFormat(&weights, " %.2g", r.correction_weight);
    if (r.score.empty()) break;
    for (size_t i = 0; i < r.score.size(); ++i) {
      const int8_t* x = r.rows.data() + i * row;
      t.push_back(TrueRuntime(g, x));
      runtimes.push_back(synth::Measure(t.back(), rng));
      by_runtime.emplace_back(runtimes.back(), measured.size() / row);
      measured.insert(measured.end(), x, x + row);
    }
    if (learn && static_cast<int64_t>(t.size()) < Budget()) Finetune(g, measured, runtimes, rng);
  }
  if (!weights.empty()) std::fprintf(stderr, "%s: the correction's weight per round:%s\n", g.inst.name.c_str(), weights.c_str());
  if (absl::GetFlag(FLAGS_final_tau) && fitness == Fitness::kModel) {
    std::sort(by_runtime.begin(), by_runtime.end());
    ReportFinalTau(g, measured, runtimes, by_runtime.front().second, absl::GetFlag(FLAGS_online_correction));
  }
  return run;
}

Trace GuidedTrace(FarmGraph& g, uint64_t seed, tgraph::Rng& rng, bool learn, Fitness fitness = Fitness::kModel) {
  return GuidedLoop(g, seed, rng, learn, fitness).trace;
}

// Graph `index` of the farm, with a fresh copy of the model (version `version`).
absl::StatusOr<std::unique_ptr<FarmGraph>> LoadFarmGraph(const tgraph::Registry& registry, int64_t version,
                                                         const tgraph::Collection& c, const synth::PresetSpec& preset,
                                                         int index) {
  auto g = std::make_unique<FarmGraph>();
  absl::StatusOr<tgraph::LoadedModel> model = tgraph::LoadModel(registry, c.name(), version);
  if (!model.ok()) return model.status();
  g->model = std::move(*model);
  g->inst = synth::MakeLayoutInstance(preset, absl::GetFlag(FLAGS_seed), c, index);
  synth::CostConstants k;
  if (absl::GetFlag(FLAGS_other_hardware)) {
    k.hbm_bytes_per_ns *= 0.5;
    k.mxu_flops_per_ns *= 2.0;
    k.copy_penalty_per_step *= 2.0;
  }
  g->hardware = std::make_unique<synth::LayoutCostModel>(g->inst.built.nodes, g->inst.config_ids, k);
  g->graph = synth::ToNodeGraph(g->inst.built.nodes);
  g->space = tgraph::LayoutSpaceOf(g->graph, g->inst.config_ids);
  const tgraph::PrunedGraph pruned = tgraph::PruneGraph(g->graph, g->inst.config_ids);
  g->tensors = tgraph::MakeGraphTensors(pruned.graph, pruned.config_node_index, g->model.manifest.stats);
  g->Encode();
  return g;
}

// Per strategy: for each column, (best true runtime found / best known - 1), one per graph
// and repeat (NaN where the strategy stopped before that many measurements); and the
// measurements it took to come within --within of the best known (infinity: never).
struct Gaps {
  std::map<std::string, std::vector<std::vector<double>>> at_column;
  std::map<std::string, std::vector<double>> to_within;
};

void AddGaps(const std::map<std::string, Trace>& traces, double best_known, Gaps* gaps) {
  const std::vector<int64_t> columns = Columns();
  for (const auto& [name, trace] : traces) {
    auto& per_column = gaps->at_column[name];
    per_column.resize(columns.size());
    for (size_t b = 0; b < columns.size(); ++b) {
      // The compiler default is one measurement: its figure holds at every budget.
      const bool reached = name == "default" || static_cast<int64_t>(trace.size()) >= columns[b];
      double best = trace.front();
      for (size_t i = 0; i < trace.size() && static_cast<int64_t>(i) < columns[b]; ++i) best = std::min(best, trace[i]);
      per_column[b].push_back(reached ? best / best_known - 1 : std::nan(""));
    }
    double needed = std::numeric_limits<double>::infinity();
    double best = trace.front();
    for (size_t i = 0; i < trace.size(); ++i) {
      best = std::min(best, trace[i]);
      if (best / best_known - 1 <= absl::GetFlag(FLAGS_within)) {
        needed = static_cast<double>(i + 1);
        break;
      }
    }
    gaps->to_within[name].push_back(needed);
  }
}

// Appends every strategy's curve of one graph and repeat to `csv` (the --csv format).
void WriteCurves(const std::map<std::string, Trace>& traces, const std::string& graph, int repeat, double best_known,
                 std::FILE* csv) {
  for (const auto& [name, trace] : traces) {
    double best = trace.front();
    for (size_t i = 0; i < trace.size(); ++i) {
      best = std::min(best, trace[i]);
      std::fprintf(csv, "%s,%s,%d,%zu,%.6g\n", name.c_str(), graph.c_str(), repeat, i + 1, best / best_known - 1);
    }
  }
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string Measurements(double n) { return std::isinf(n) ? "never" : absl::StrCat(static_cast<int64_t>(n)); }

// The farm's figure of merit: each other strategy's measurements to within --within on
// the median graph over the genetic search's (a model-guided loop earns its keep below a
// tenth). A side that never came within on the median graph is bounded by its budget:
// a strategy that never did needs more than --budget (">", and the line says which budget
// would settle whether it reaches a third); a genetic search that never did needs more
// than --genetic_budget, so the ratio is at most ("<") what the budget gives. Only when
// neither came within is there no figure; where the compiler default itself is within,
// the line says the graph had nothing to find.
void PrintRatiosToGenetic(const Gaps& gaps) {
  const auto genetic = gaps.to_within.find("genetic");
  if (genetic == gaps.to_within.end()) return;
  const double g = Quantile(genetic->second, 0.5);
  const bool genetic_never = std::isinf(g);
  const double within = 100 * absl::GetFlag(FLAGS_within);
  for (const char* name : kStrategies) {
    const auto it = gaps.to_within.find(name);
    if (it == gaps.to_within.end() || it == genetic || std::string(name) == "default") continue;
    const double n = Quantile(it->second, 0.5);
    const bool never = std::isinf(n);
    if (never && genetic_never) {
      std::printf("ratio to the genetic search, median graph: %-9s never / never (neither within %g%% on the median "
                  "graph: raise --budget and --genetic_budget)\n",
                  name, within);
      continue;
    }
    const double bounded = never ? static_cast<double>(Budget()) : n;
    const double g_bounded = genetic_never ? static_cast<double>(GeneticBudget()) : g;
    std::string hint;
    if (!genetic_never && g <= 1) {
      // Every strategy but random measures the default first: the figure says nothing.
      hint = absl::StrFormat(
          " (the compiler default, the genetic search's first measurement, is within %g%% on the median graph: "
          "nothing to find)",
          within);
    } else if (never) {
      hint = absl::StrFormat(" (never within %g%% in --budget %d; a third of the genetic search's is %d)", within,
                             Budget(), static_cast<int64_t>(std::ceil(g / 3)));
    } else if (genetic_never) {
      hint = absl::StrFormat(" (the genetic search never within %g%% in --genetic_budget %d)", within, GeneticBudget());
    }
    std::printf("ratio to the genetic search, median graph: %-9s %s%s / %s%s = %s%.3f%s\n", name, never ? ">" : "",
                Measurements(bounded).c_str(), genetic_never ? ">" : "", Measurements(g_bounded).c_str(),
                never ? ">" : genetic_never ? "<" : "", bounded / g_bounded, hint.c_str());
  }
}

void PrintGaps(const Gaps& gaps) {
  std::printf("best runtime found over the best known, minus 1 (%%): median [min, max] over graphs and repeats\n");
  std::printf("%-10s", "strategy");
  for (int64_t b : Columns()) std::printf(" %20s", absl::StrCat(b, " measured").c_str());
  std::printf(" %26s\n", absl::StrFormat("measured to within %g%%", 100 * absl::GetFlag(FLAGS_within)).c_str());
  for (const char* name : kStrategies) {
    const auto it = gaps.at_column.find(name);
    if (it == gaps.at_column.end()) continue;
    std::printf("%-10s", name);
    for (const std::vector<double>& v : it->second) {
      if (std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) {
        std::printf(" %20s", "-");
        continue;
      }
      std::printf(" %20s", absl::StrFormat("%.2f [%.2f, %.2f]", 100 * Quantile(v, 0.5), 100 * Quantile(v, 0),
                                           100 * Quantile(v, 1)).c_str());
    }
    const std::vector<double>& n = gaps.to_within.at(name);
    std::printf(" %26s\n", absl::StrFormat("%s [%s, %s]", Measurements(Quantile(n, 0.5)), Measurements(Quantile(n, 0)),
                                           Measurements(Quantile(n, 1))).c_str());
  }
  PrintRatiosToGenetic(gaps);
}

// --neighbour_tau: where the model ranks well and where it does not.
int RunNeighbourTau(const tgraph::Registry& registry, int64_t version, const tgraph::Collection& c,
                    const synth::PresetSpec& preset, int first, int count) {
  std::printf("%-36s %6s %12s %12s %12s %12s %12s %12s %12s %12s\n", "graph", "rows", "near default", "near best",
              "random", absl::StrFormat("noisy %g%%", 100 * absl::GetFlag(FLAGS_oracle_noise)).c_str(), "2-8 groups",
              "noisy there", "its picks", "noisy there");
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<FarmGraph>> g = LoadFarmGraph(registry, version, c, preset, first + i);
    if (!g.ok()) return Fail(g.status());
    FarmGraph& fg = **g;
    const size_t row = fg.inst.config_ids.size() * tgraph::kConfigFeatDim;
    tgraph::Rng long_rng(12345 + static_cast<uint64_t>(i));
    const synth::SearchResult known = synth::GeneticSearch(*fg.hardware, absl::GetFlag(FLAGS_best_known_evaluations), long_rng);
    size_t best = 0;
    for (int64_t k = 1; k < known.num_configs; ++k)
      if (TrueRuntime(fg, known.configs.data() + k * row) < TrueRuntime(fg, known.configs.data() + best * row)) best = k;
    const std::vector<int8_t> dflt(row, -1);
    const std::vector<int8_t> near_default = tgraph::OneGroupNeighbours(fg.space, dflt.data());
    const std::vector<int8_t> near_best = tgraph::OneGroupNeighbours(fg.space, known.configs.data() + best * row);
    tgraph::Rng rng(absl::GetFlag(FLAGS_seed) * 7919 + static_cast<uint64_t>(i));
    std::vector<int8_t> random;
    for (size_t k = 0; k < near_default.size() / row; ++k) {
      for (size_t j = 0; j < fg.space.nodes.size(); ++j)
        for (int gr = 0; gr < tgraph::kConfigGroups; ++gr) {
          const auto& cands = fg.space.nodes[j].groups[gr].candidates;
          const auto& l = cands[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(cands.size()) - 1))];
          random.insert(random.end(), l.begin(), l.end());
        }
    }
    // The noisy oracle's tau over the same rows near the best known: what the model's
    // "near best" column would be if its error were --oracle_noise per row.
    std::vector<double> noisy, truth;
    for (size_t k = 0; k < near_best.size() / row; ++k) {
      noisy.push_back(NoisyLogRuntime(fg, near_best.data() + k * row, absl::GetFlag(FLAGS_oracle_noise), 1.0, 1));
      truth.push_back(TrueRuntime(fg, near_best.data() + k * row));
    }
    // Where a search that optimises the model goes: the rows the server's first search
    // from the default proposes (the region and evaluations as the farm's first round,
    // kPicks of them). A model whose errors a search can exploit ranks these worse than
    // fixed rows; a per-row noise cannot be exploited, so the noisy column is the bar.
    constexpr int64_t kPicks = 64;
    tgraph::SearchOptions o =
        tgraph::SearchPolicy(kPicks, absl::GetFlag(FLAGS_evaluations), absl::GetFlag(FLAGS_seed) * 1000,
                             tgraph::ModelSearchBudget(fg.model.manifest), absl::GetFlag(FLAGS_max_changed_groups));
    o.start = &dflt;
    o.exclude = &dflt;
    const tgraph::SearchResult picked = tgraph::SearchLayouts(fg.folds, fg.tensors, fg.space, o, {});
    std::vector<double> noisy_picks;
    for (size_t k = 0; k < picked.rows.size() / row; ++k)
      noisy_picks.push_back(NoisyLogRuntime(fg, picked.rows.data() + k * row, absl::GetFlag(FLAGS_oracle_noise), 1.0, 1));
    // Where the search's region is: rows 2 to kDefaultSearchRadius groups from the
    // default (the generator's region rows, around the default only).
    tgraph::Rng region_rng(absl::GetFlag(FLAGS_seed) * 7919 + static_cast<uint64_t>(i) + 17);
    const std::vector<int8_t> region =
        synth::RegionSearch(*fg.hardware, fg.space, {dflt.data()}, static_cast<int>(tgraph::kDefaultSearchRadius), kPicks,
                            region_rng).configs;
    std::vector<double> noisy_region;
    for (size_t k = 0; k < region.size() / row; ++k)
      noisy_region.push_back(NoisyLogRuntime(fg, region.data() + k * row, absl::GetFlag(FLAGS_oracle_noise), 1.0, 1));
    std::printf("%-36s %6zu %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f\n", fg.inst.name.c_str(),
                near_default.size() / row, ModelTau(fg, near_default, row), ModelTau(fg, near_best, row),
                ModelTau(fg, random, row), tgraph::KendallTau(noisy, truth), ModelTau(fg, region, row),
                tgraph::KendallTau(noisy_region, TrueRuntimes(fg, region, row)), ModelTau(fg, picked.rows, row),
                tgraph::KendallTau(noisy_picks, TrueRuntimes(fg, picked.rows, row)));
  }
  return tgraph::kExitOk;
}

// The dataset's file name of generator graph `name`: the name itself, or s<SEED>_<name>
// in a dataset of several seeds; empty when neither is among `files`.
std::string DatasetName(const std::vector<tgraph::GraphFile>& files, const std::string& name, std::string* path) {
  const std::string prefixed = absl::StrCat("s", absl::GetFlag(FLAGS_seed), "_", name);
  for (const tgraph::GraphFile& f : files)
    if (f.name == name || f.name == prefixed) {
      *path = f.path;
      return f.name;
    }
  return "";
}

// --write_picks: the picks collection of the dataset at `root`. Every graph of the
// source's random collection must be one of --preset/--seed's (checked by name, node
// opcodes, edges and configurable nodes before anything is written), so that the picks
// are of the same graphs under the same names and the trainer deals the same folds.
int RunWritePicks(const tgraph::Registry& registry, int64_t version, const tgraph::Collection& c,
                  const synth::PresetSpec& preset, const synth::FamilySpec& fam) {
  const std::string root = absl::GetFlag(FLAGS_write_picks);
  tgraph::Collection picks = c, random = c;
  picks.search = "picks";
  random.search = "random";
  struct Task {
    std::string split, name;
    int index;
    std::optional<tgraph::LayoutGraph> before;  // the graph's picks file as it was, when there is one
  };
  std::vector<Task> tasks;
  int index = 0;
  for (const std::string& split : tgraph::AllSplits()) {
    const int n = split == "train" ? fam.train : split == "valid" ? fam.valid : fam.test;
    absl::StatusOr<std::vector<tgraph::GraphFile>> files = tgraph::ListSplit(root, random, split);
    if (!files.ok())
      return Fail(UsageError(absl::StrCat("--write_picks: ", files.status().message(),
                                          " (expected the dataset tgraph-synth wrote for --preset and --seed)")));
    size_t matched = 0;
    for (int i = 0; i < n; ++i, ++index) {
      const synth::LayoutInstance inst = synth::MakeLayoutInstance(preset, absl::GetFlag(FLAGS_seed), c, index);
      std::string path;
      const std::string name = DatasetName(*files, inst.name, &path);
      if (name.empty()) continue;  // a dataset written with --max_graphs_per_split
      absl::StatusOr<tgraph::LayoutGraph> file = tgraph::LoadLayoutGraph(path);
      if (!file.ok()) return Fail(file.status());
      const tgraph::NodeGraph graph = synth::ToNodeGraph(inst.built.nodes);
      const auto same_graph = [&](const tgraph::LayoutGraph& g) {
        return g.graph.node_opcode == graph.node_opcode && g.graph.edge_index == graph.edge_index &&
               g.node_config_ids == inst.config_ids;
      };
      if (!same_graph(*file))
        return Fail(UsageError(absl::StrCat("--write_picks: ", path, " is not graph ", index, " of preset ",
                                            preset.name, " seed ", absl::GetFlag(FLAGS_seed),
                                            " (its opcodes, edges or configurable nodes differ; --preset, --seed)")));
      ++matched;
      tasks.push_back({split, name, index, std::nullopt});
      // Picks already there (another model's) are kept: the new rows join them.
      const std::string before = absl::StrCat(tgraph::SplitDir(root, picks, split), "/", name, ".npz");
      if (std::error_code ec; std::filesystem::exists(before, ec)) {
        absl::StatusOr<tgraph::LayoutGraph> old = tgraph::LoadLayoutGraph(before);
        if (!old.ok()) return Fail(old.status());
        if (!same_graph(*old))
          return Fail(UsageError(absl::StrCat("--write_picks: ", before, " is not the picks of ", path,
                                              " (its opcodes, edges or configurable nodes differ)")));
        tasks.back().before = std::move(*old);
      }
    }
    if (matched != files->size())
      return Fail(UsageError(absl::StrCat("--write_picks: ", files->size() - matched, " of the ", files->size(),
                                          " graphs in ", tgraph::SplitDir(root, random, split),
                                          " are not graphs of preset ", preset.name, " seed ",
                                          absl::GetFlag(FLAGS_seed), " (--preset, --seed)")));
  }
  for (const std::string& split : tgraph::AllSplits()) {
    const std::string dir = tgraph::SplitDir(root, picks, split);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail(absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message())));
  }
  for (const Task& t : tasks) {
    absl::StatusOr<std::unique_ptr<FarmGraph>> g = LoadFarmGraph(registry, version, c, preset, t.index);
    if (!g.ok()) return Fail(g.status());
    tgraph::Rng rng(absl::GetFlag(FLAGS_seed) * 7919 + static_cast<uint64_t>(t.index) * 131 + 3);
    GuidedRun run = GuidedLoop(**g, 0, rng, /*learn=*/false);
    tgraph::LayoutGraph lg;
    if (t.before) {
      lg = std::move(*t.before);
    } else {
      lg.name = t.name;
      lg.graph = (*g)->graph;
      lg.node_config_ids = (*g)->inst.config_ids;
      lg.node_splits = {0, lg.graph.num_nodes};
    }
    // The loop's rows the file does not hold yet, in the order measured.
    const size_t row = lg.node_config_ids.size() * tgraph::kConfigFeatDim;
    std::unordered_set<std::string> held;
    for (int64_t k = 0; k < lg.num_configs; ++k)
      held.emplace(reinterpret_cast<const char*>(lg.config(k)), row);
    int64_t added = 0;
    for (size_t k = 0; k < run.runtimes.size(); ++k) {
      const int8_t* x = run.measured.data() + k * row;
      if (!held.emplace(reinterpret_cast<const char*>(x), row).second) continue;
      lg.config_feat.insert(lg.config_feat.end(), x, x + row);
      lg.config_runtime.push_back(run.runtimes[k]);
      ++added;
    }
    lg.num_configs += added;
    const std::string path = absl::StrCat(tgraph::SplitDir(root, picks, t.split), "/", t.name, ".npz");
    if (absl::Status st = tgraph::SaveLayoutGraph(path, lg); !st.ok()) return Fail(st);
    std::fprintf(stderr, "picks %s/%s: %lld new rows (%lld in all), the fastest %.4f of the default's runtime\n",
                 t.split.c_str(), t.name.c_str(), static_cast<long long>(added), static_cast<long long>(lg.num_configs),
                 *std::min_element(run.trace.begin(), run.trace.end()) / run.trace.front());
  }
  std::printf("wrote %s: %zu graphs' picks (%lld measurements each)\n", tgraph::SplitDir(root, picks, "*").c_str(),
              tasks.size(), static_cast<long long>(Budget()));
  return tgraph::kExitOk;
}

int RunFarm() {
  torch::set_num_threads(tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads)));
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(absl::GetFlag(FLAGS_collection));
  if (!c.ok() || c->kind != tgraph::CollectionKind::kLayout)
    return Fail(UsageError("--collection must be a layout collection"));
  absl::StatusOr<synth::PresetSpec> preset = synth::GetPreset(absl::GetFlag(FLAGS_preset));
  if (!preset.ok()) return Fail(UsageError(preset.status().message()));
  const std::string split = absl::GetFlag(FLAGS_split);
  if (split != "valid" && split != "test") return Fail(UsageError("--split must be valid or test"));
  const std::vector<std::string> wanted = absl::StrSplit(absl::GetFlag(FLAGS_strategies), ',', absl::SkipEmpty());
  for (const std::string& w : wanted)
    if (std::find(std::begin(kStrategies), std::end(kStrategies), w) == std::end(kStrategies))
      return Fail(UsageError(absl::StrCat("--strategies: unknown strategy '", w,
                                          "' (expected default, random, genetic, tgraph, tgraph+ft, oracle, noisy)")));
  if (!absl::GetFlag(FLAGS_finetune_loss).empty() && !tgraph::ParseRankingLoss(absl::GetFlag(FLAGS_finetune_loss)))
    return Fail(UsageError(absl::StrCat("--finetune_loss must be ", tgraph::kRankingLossNames, ", not '", absl::GetFlag(FLAGS_finetune_loss), "'")));
  if (absl::GetFlag(FLAGS_registry).empty()) return Fail(UsageError("--registry is required"));
  const tgraph::Registry registry(absl::GetFlag(FLAGS_registry));
  int64_t version = 0;
  absl::StatusOr<tgraph::LoadedModel> model =
      tgraph::LoadModelOrLatest(registry, c->name(), absl::GetFlag(FLAGS_version), &version);
  if (!model.ok()) return Fail(model.status());
  const synth::FamilySpec& fam = c->source == "xla" ? preset->xla : preset->nlp;
  const int first = fam.train + (split == "test" ? fam.valid : 0);
  const int count = std::min(absl::GetFlag(FLAGS_graphs), split == "test" ? fam.test : fam.valid);
  if (absl::GetFlag(FLAGS_neighbour_tau)) return RunNeighbourTau(registry, version, *c, *preset, first, count);
  if (!absl::GetFlag(FLAGS_write_picks).empty()) return RunWritePicks(registry, version, *c, *preset, fam);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(nullptr, &std::fclose);
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    csv.reset(std::fopen(path.c_str(), "w"));
    if (!csv) return Fail(UsageError(absl::StrCat("--csv: cannot write ", path)));
    std::fprintf(csv.get(), "strategy,graph,repeat,measured,gap\n");
  }
  const auto run = [&](const char* name) { return std::find(wanted.begin(), wanted.end(), name) != wanted.end(); };
  Gaps gaps;
  for (int i = 0; i < count; ++i) {
    for (int rep = 0; rep < std::max(1, absl::GetFlag(FLAGS_repeats)); ++rep) {
      absl::StatusOr<std::unique_ptr<FarmGraph>> g = LoadFarmGraph(registry, version, *c, *preset, first + i);
      if (!g.ok()) return Fail(g.status());
      tgraph::Rng rng(absl::GetFlag(FLAGS_seed) * 7919 + static_cast<uint64_t>(i) * 131 + static_cast<uint64_t>(rep));
      std::map<std::string, Trace> traces;
      const std::vector<int8_t> dflt((*g)->inst.config_ids.size() * tgraph::kConfigFeatDim, -1);
      // Each strategy draws from the same generator in this order whether or not the ones
      // before it ran, so that a subset reproduces the full run's figures.
      traces["default"] = {TrueRuntime(**g, dflt.data())};
      tgraph::Rng random_rng = rng.Fork(1), genetic_rng = rng.Fork(2), frozen_rng = rng.Fork(3), ft_rng = rng.Fork(4),
                  oracle_rng = rng.Fork(5), noisy_rng = rng.Fork(6);
      if (run("random")) traces["random"] = RandomTrace(**g, random_rng);
      if (run("genetic")) traces["genetic"] = GeneticTrace(**g, genetic_rng);
      if (run("tgraph")) traces["tgraph"] = GuidedTrace(**g, static_cast<uint64_t>(rep), frozen_rng, /*learn=*/false);
      if (run("oracle"))
        traces["oracle"] = GuidedTrace(**g, static_cast<uint64_t>(rep), oracle_rng, false, Fitness::kOracle);
      if (run("noisy"))
        traces["noisy"] = GuidedTrace(**g, static_cast<uint64_t>(rep), noisy_rng, false, Fitness::kNoisy);
      if (run("tgraph+ft"))  // last: it changes the model
        traces["tgraph+ft"] = GuidedTrace(**g, static_cast<uint64_t>(rep), ft_rng, /*learn=*/true);
      tgraph::Rng long_rng(12345 + static_cast<uint64_t>(i));
      const synth::SearchResult known =
          synth::GeneticSearch(*(*g)->hardware, absl::GetFlag(FLAGS_best_known_evaluations), long_rng);
      const size_t row = (*g)->inst.config_ids.size() * tgraph::kConfigFeatDim;
      double best_known = traces["default"][0];
      for (int64_t k = 0; k < known.num_configs; ++k)
        best_known = std::min(best_known, TrueRuntime(**g, known.configs.data() + k * row));
      for (const auto& [name, t] : traces) best_known = std::min(best_known, *std::min_element(t.begin(), t.end()));
      AddGaps(traces, best_known, &gaps);
      if (csv) WriteCurves(traces, (*g)->inst.name, rep, best_known, csv.get());
      std::fprintf(stderr, "graph %s (%zu configurable nodes), repeat %d done\n", (*g)->inst.name.c_str(),
                   (*g)->inst.config_ids.size(), rep);
    }
  }
  std::printf("farm (%s): %s, %s split of preset %s seed %llu, %d graphs x %d repeats; model %s version %lld (%zu folds)\n",
              absl::GetFlag(FLAGS_other_hardware) ? "other hardware" : "the training data's hardware", c->name().c_str(),
              split.c_str(), preset->name.c_str(),
              static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)), count, std::max(1, absl::GetFlag(FLAGS_repeats)),
              c->name().c_str(), static_cast<long long>(version), model->folds.size());
  PrintGaps(gaps);
  if (csv && std::fclose(csv.release()) != 0)
    return Fail(absl::InternalError(absl::StrCat("--csv: writing ", absl::GetFlag(FLAGS_csv), " failed")));
  return tgraph::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return tgraph::RunTorchTool(argc, argv,
                              "A simulated autotuning farm: search strategies against the generator's cost model.\n"
                              "  tgraph-bench-search --registry REG --collection layout:xla:random --preset ci --seed 0",
                              RunFarm);
}
