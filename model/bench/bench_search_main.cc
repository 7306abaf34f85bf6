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
#include "model/bench/farm.h"
#include "model/bench/farm_report.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/search/measured_correction.h"
#include "model/core/rank_metrics.h"
#include "model/core/preprocess.h"
#include "model/nn/encoded_graph.h"
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
ABSL_FLAG(uint64_t, seed, tgraph::FarmOptions{}.seed, "The generator seed the model's data came from");
ABSL_FLAG(std::string, split, "test", "The split whose graphs are tuned (valid or test: never trained on)");
ABSL_FLAG(int, graphs, 6, "Graphs of the split to tune (the first N)");
ABSL_FLAG(int, repeats, 1, "Runs per graph and strategy, each with another seed (noise, random choices)");
ABSL_FLAG(int64_t, per_round, tgraph::FarmOptions{}.per_round, "tgraph-guided: configurations measured per round");
ABSL_FLAG(int64_t, evaluations, tgraph::FarmOptions{}.evaluations,
          "tgraph-guided: model evaluations per round's search (SearchConfigs' default max_evaluations)");
ABSL_FLAG(int64_t, best_known_evaluations, 4000, "The cost model's own genetic search that sets the best known");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0 = every core this process may use)");
ABSL_FLAG(bool, other_hardware, tgraph::FarmOptions{}.other_hardware,
          "Measure on hardware unlike the training data's: the cost model with half the memory bandwidth, twice the "
          "matrix-unit rate and twice the copy penalty (only learning from measurements can adapt to it)");
ABSL_FLAG(int64_t, finetune_steps, tgraph::FarmOptions{}.finetune_steps,
          "tgraph+finetune: optimisation steps per fold after each round (more forget the order the model learned "
          "offline: with 40, fewer test graphs came within 1% in 200 measurements)");
ABSL_FLAG(std::string, csv, "",
          "Also write every run's curve here: strategy,graph,repeat,measured,gap (the best true runtime after that many "
          "measurements over the best known, minus 1), for scripts/plot-search");
ABSL_FLAG(double, finetune_lr, tgraph::FarmOptions{}.finetune_lr, "tgraph+finetune: AdamW learning rate (tgraph-train finetune's default)");
ABSL_FLAG(std::string, finetune_loss, tgraph::FarmOptions{}.finetune_loss,
          "tgraph+finetune: the ranking loss of its steps (tgraph-train --loss: hinge, top or listwise; unset: the "
          "model's own)");
ABSL_FLAG(int64_t, budget, tgraph::FarmOptions{}.budget, "Measurements each strategy may spend (the table's columns: 10, 20, 50, 100, 200, 500, ...)");
ABSL_FLAG(int64_t, genetic_budget, tgraph::FarmOptions{}.genetic_budget,
          "Measurements the genetic search may spend (0 = --budget): how many it needs to come within 1%");
ABSL_FLAG(std::string, strategies, "default,random,genetic,tgraph,tgraph+ft",
          "The strategies to run, comma-separated; also oracle: tgraph-guided rounds with the hardware's own runtimes "
          "as fitness; noisy: the same with an error of --oracle_noise per row, and the online correction");
ABSL_FLAG(int64_t, neighbourhood, tgraph::FarmOptions{}.neighbourhood,
          "tgraph-guided: when > 0, each round searches only the rows one layout group away from the N fastest "
          "measured (a trust region around the incumbents); 0 = the whole space");
ABSL_FLAG(bool, neighbour_tau, false,
          "Instead of the farm: per graph, how well the model ranks the one-group neighbours of the compiler default "
          "and of the best known row, as many random rows, 64 rows 2-8 groups from the default (the search's region), "
          "and the 64 rows its first search from the default proposes (Kendall tau of its scores and the true "
          "runtimes), beside a fitness --oracle_noise off");
ABSL_FLAG(double, online_correction, tgraph::FarmOptions{}.online_correction,
          "tgraph-guided: each round's search adds this weight times what the graph's measurements so far predict "
          "(SearchOptions::correction, model/search/measured_correction.h) to the model's scores, as the server's "
          "does with the measured rows' runtimes; 0 = off");
ABSL_FLAG(double, exploration, tgraph::FarmOptions{}.exploration,
          "--online_correction: the weight of the correction's uncertainty, subtracted from every score "
          "(SearchOptions::exploration; 0 = none)");
ABSL_FLAG(bool, spread_proposals, tgraph::FarmOptions{}.spread_proposals,
          "--online_correction: choose each round's proposals one at a time, each with the uncertainty left once those "
          "before it are measured (SearchOptions::spread_proposals; --nospread_proposals for all at once)");
ABSL_FLAG(bool, adapt_correction, tgraph::FarmOptions{}.adapt_correction,
          "--online_correction: scale its weight and exploration down by how well the model already predicts the "
          "measurements (SearchOptions::adapt_correction; --noadapt_correction for the fixed weights)");
ABSL_FLAG(int64_t, max_changed_groups, tgraph::FarmOptions{}.max_changed_groups,
          "tgraph-guided: the search's trust region, layout groups changed from the default and the measured rows it "
          "starts from (0: the server's default; -1: the whole space)");
ABSL_FLAG(int64_t, finalists, tgraph::FarmOptions{}.finalists,
          "tgraph-guided: rows re-scored by every fold, among which the proposals are chosen (SearchOptions::finalists; 0 "
          "= its default, max(2 x per_round, 32))");
ABSL_FLAG(double, oracle_noise, tgraph::FarmOptions{}.oracle_noise,
          "noisy: the standard deviation of the error added to each row's log runtime (0.01: the fitness misjudges "
          "a row's runtime by 1% on average), one draw per row and run");
ABSL_FLAG(bool, final_tau, tgraph::FarmOptions{}.final_tau,
          "After each tgraph-guided run, print (stderr) how well its fitness orders the one-group neighbours of the "
          "fastest measured row (Kendall tau: the model, the correction, their sum as the search adds them, and noisy "
          "oracles of 0.25-4%)");
ABSL_FLAG(std::string, write_picks, "",
          "Instead of the farm: write the layout:SOURCE:picks collection into this dataset (tgraph-synth's output for "
          "--preset and --seed, one of several seeds included): per graph of every split, the rows the frozen model's "
          "loop (the tgraph strategy, --budget measurements in rounds of --per_round) measured, with the runtimes as "
          "the farm measured them; a graph's picks already there are kept and the new rows added after them");
ABSL_FLAG(bool, stall_variation, tgraph::FarmOptions{}.stall_variation,
          "tgraph-guided: when the measurements stop improving, part of each round is random variation of the fastest "
          "measured rows, as the server's search does (model/search/search_policy.h, VariationFor); "
          "--nostall_variation for the model's proposals only");
ABSL_FLAG(double, within, tgraph::FarmOptions{}.within, "The 'measurements to come within' table's gap to the best known (0.01 = 1%)");

namespace {

using tgraph::Fail;
using tgraph::UsageError;
namespace synth = tgraph::synth;
using tgraph::FarmGraph;
using tgraph::Fitness;
using tgraph::GuidedRun;
using tgraph::Trace;

// --neighbour_tau: where the model ranks well and where it does not.
int RunNeighbourTau(const tgraph::Registry& registry, int64_t version, const tgraph::Collection& c,
                    const synth::PresetSpec& preset, int first, int count, const tgraph::FarmOptions& fo) {
  std::printf("%-36s %6s %12s %12s %12s %12s %12s %12s %12s %12s\n", "graph", "rows", "near default", "near best",
              "random", absl::StrFormat("noisy %g%%", 100 * fo.oracle_noise).c_str(), "2-8 groups",
              "noisy there", "its picks", "noisy there");
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<FarmGraph>> g = LoadFarmGraph(registry, version, c, preset, first + i, fo);
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
    tgraph::Rng rng(fo.seed * 7919 + static_cast<uint64_t>(i));
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
      noisy.push_back(NoisyLogRuntime(fg, near_best.data() + k * row, fo.oracle_noise, 1.0, 1));
      truth.push_back(TrueRuntime(fg, near_best.data() + k * row));
    }
    // Where a search that optimises the model goes: the rows the server's first search
    // from the default proposes (the region and evaluations as the farm's first round,
    // kPicks of them). A model whose errors a search can exploit ranks these worse than
    // fixed rows; a per-row noise cannot be exploited, so the noisy column is the bar.
    constexpr int64_t kPicks = 64;
    tgraph::SearchOptions o =
        tgraph::SearchPolicy(kPicks, fo.evaluations, fo.seed * 1000,
                             tgraph::ModelSearchBudget(fg.model.manifest), fo.max_changed_groups);
    o.start = &dflt;
    o.exclude = &dflt;
    const tgraph::SearchResult picked = tgraph::SearchLayouts(fg.folds, fg.tensors, fg.space, o, {});
    std::vector<double> noisy_picks;
    for (size_t k = 0; k < picked.rows.size() / row; ++k)
      noisy_picks.push_back(NoisyLogRuntime(fg, picked.rows.data() + k * row, fo.oracle_noise, 1.0, 1));
    // Where the search's region is: rows 2 to kDefaultSearchRadius groups from the
    // default (the generator's region rows, around the default only).
    tgraph::Rng region_rng(fo.seed * 7919 + static_cast<uint64_t>(i) + 17);
    const std::vector<int8_t> region =
        synth::RegionSearch(*fg.hardware, fg.space, {dflt.data()}, static_cast<int>(tgraph::kDefaultSearchRadius), kPicks,
                            region_rng).configs;
    std::vector<double> noisy_region;
    for (size_t k = 0; k < region.size() / row; ++k)
      noisy_region.push_back(NoisyLogRuntime(fg, region.data() + k * row, fo.oracle_noise, 1.0, 1));
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
std::string DatasetName(const std::vector<tgraph::GraphFile>& files, const std::string& name, uint64_t seed,
                        std::string* path) {
  const std::string prefixed = absl::StrCat("s", seed, "_", name);
  for (const tgraph::GraphFile& f : files)
    if (f.name == name || f.name == prefixed) {
      *path = f.path;
      return f.name;
    }
  return "";
}

// A graph of the dataset whose picks --write_picks writes.
struct PicksTask {
  std::string split, name;
  int index;
  std::optional<tgraph::LayoutGraph> before;  // the graph's picks file as it was, when there is one
};

// --write_picks' graphs: every graph of the source's random collection at `root` must be
// one of --preset/--seed's (checked by name, node opcodes, edges and configurable nodes
// before anything is written), so that the picks are of the same graphs under the same
// names and the trainer deals the same folds. Picks already there are read, to be kept.
absl::StatusOr<std::vector<PicksTask>> PicksTasks(const std::string& root, const tgraph::Collection& c,
                                                  const synth::PresetSpec& preset, const synth::FamilySpec& fam,
                                                  const tgraph::FarmOptions& o) {
  tgraph::Collection picks = c, random = c;
  picks.search = "picks";
  random.search = "random";
  std::vector<PicksTask> tasks;
  int index = 0;
  for (const std::string& split : tgraph::AllSplits()) {
    const int n = split == "train" ? fam.train : split == "valid" ? fam.valid : fam.test;
    absl::StatusOr<std::vector<tgraph::GraphFile>> files = tgraph::ListSplit(root, random, split);
    if (!files.ok())
      return UsageError(absl::StrCat("--write_picks: ", files.status().message(),
                                     " (expected the dataset tgraph-synth wrote for --preset and --seed)"));
    size_t matched = 0;
    for (int i = 0; i < n; ++i, ++index) {
      const synth::LayoutInstance inst = synth::MakeLayoutInstance(preset, o.seed, c, index);
      std::string path;
      const std::string name = DatasetName(*files, inst.name, o.seed, &path);
      if (name.empty()) continue;  // a dataset written with --max_graphs_per_split
      absl::StatusOr<tgraph::LayoutGraph> file = tgraph::LoadLayoutGraph(path);
      if (!file.ok()) return file.status();
      const tgraph::NodeGraph graph = synth::ToNodeGraph(inst.built.nodes);
      const auto same_graph = [&](const tgraph::LayoutGraph& g) {
        return g.graph.node_opcode == graph.node_opcode && g.graph.edge_index == graph.edge_index &&
               g.node_config_ids == inst.config_ids;
      };
      if (!same_graph(*file))
        return UsageError(absl::StrCat("--write_picks: ", path, " is not graph ", index, " of preset ", preset.name,
                                       " seed ", o.seed,
                                       " (its opcodes, edges or configurable nodes differ; --preset, --seed)"));
      ++matched;
      tasks.push_back({split, name, index, std::nullopt});
      // Picks already there (another model's) are kept: the new rows join them.
      const std::string before = absl::StrCat(tgraph::SplitDir(root, picks, split), "/", name, ".npz");
      if (std::error_code ec; std::filesystem::exists(before, ec)) {
        absl::StatusOr<tgraph::LayoutGraph> old = tgraph::LoadLayoutGraph(before);
        if (!old.ok()) return old.status();
        if (!same_graph(*old))
          return UsageError(absl::StrCat("--write_picks: ", before, " is not the picks of ", path,
                                         " (its opcodes, edges or configurable nodes differ)"));
        tasks.back().before = std::move(*old);
      }
    }
    if (matched != files->size())
      return UsageError(absl::StrCat("--write_picks: ", files->size() - matched, " of the ", files->size(),
                                     " graphs in ", tgraph::SplitDir(root, random, split), " are not graphs of preset ",
                                     preset.name, " seed ", o.seed, " (--preset, --seed)"));
  }
  return tasks;
}

// The frozen model's loop on one graph, its new rows appended to the graph's picks file.
absl::Status WritePicks(const tgraph::Registry& registry, int64_t version, const tgraph::Collection& c,
                        const synth::PresetSpec& preset, const std::string& dir, PicksTask t,
                        const tgraph::FarmOptions& o) {
  absl::StatusOr<std::unique_ptr<FarmGraph>> g = LoadFarmGraph(registry, version, c, preset, t.index, o);
  if (!g.ok()) return g.status();
  tgraph::Rng rng(o.seed * 7919 + static_cast<uint64_t>(t.index) * 131 + 3);
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
  for (int64_t k = 0; k < lg.num_configs; ++k) held.emplace(reinterpret_cast<const char*>(lg.config(k)), row);
  int64_t added = 0;
  for (size_t k = 0; k < run.runtimes.size(); ++k) {
    const int8_t* x = run.measured.data() + k * row;
    if (!held.emplace(reinterpret_cast<const char*>(x), row).second) continue;
    lg.config_feat.insert(lg.config_feat.end(), x, x + row);
    lg.config_runtime.push_back(run.runtimes[k]);
    ++added;
  }
  lg.num_configs += added;
  if (absl::Status st = tgraph::SaveLayoutGraph(absl::StrCat(dir, "/", t.name, ".npz"), lg); !st.ok()) return st;
  std::fprintf(stderr, "picks %s/%s: %lld new rows (%lld in all), the fastest %.4f of the default's runtime\n",
               t.split.c_str(), t.name.c_str(), static_cast<long long>(added), static_cast<long long>(lg.num_configs),
               *std::min_element(run.trace.begin(), run.trace.end()) / run.trace.front());
  return absl::OkStatus();
}

// --write_picks: the picks collection of the dataset at --write_picks (PicksTasks says
// which graphs), every graph's loop run by WritePicks.
int RunWritePicks(const tgraph::Registry& registry, int64_t version, const tgraph::Collection& c,
                  const synth::PresetSpec& preset, const synth::FamilySpec& fam, const tgraph::FarmOptions& o) {
  const std::string root = absl::GetFlag(FLAGS_write_picks);
  tgraph::Collection picks = c;
  picks.search = "picks";
  absl::StatusOr<std::vector<PicksTask>> tasks = PicksTasks(root, c, preset, fam, o);
  if (!tasks.ok()) return Fail(tasks.status());
  for (const std::string& split : tgraph::AllSplits()) {
    const std::string dir = tgraph::SplitDir(root, picks, split);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail(absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message())));
  }
  for (PicksTask& t : *tasks) {
    const std::string dir = tgraph::SplitDir(root, picks, t.split);
    if (absl::Status s = WritePicks(registry, version, c, preset, dir, std::move(t), o); !s.ok()) return Fail(s);
  }
  std::printf("wrote %s: %zu graphs' picks (%lld measurements each)\n", tgraph::SplitDir(root, picks, "*").c_str(),
              tasks->size(), static_cast<long long>(o.Budget()));
  return tgraph::kExitOk;
}

// Every strategy of `wanted` on graph `first + i`, repeat `rep` (the random streams
// seeded by i and rep): their traces judged against
// the best known (a long genetic search of the cost model, and whatever any strategy
// found), added to `gaps` and, with `csv`, written as curves.
absl::Status RunStrategies(const tgraph::Registry& registry, int64_t version, const tgraph::Collection& c,
                           const synth::PresetSpec& preset, int first, int i, int rep,
                           const std::vector<std::string>& wanted, const tgraph::FarmOptions& o, tgraph::Gaps* gaps,
                           std::FILE* csv) {
  const auto run = [&](const char* name) { return std::find(wanted.begin(), wanted.end(), name) != wanted.end(); };
  absl::StatusOr<std::unique_ptr<FarmGraph>> g = LoadFarmGraph(registry, version, c, preset, first + i, o);
  if (!g.ok()) return g.status();
  tgraph::Rng rng(o.seed * 7919 + static_cast<uint64_t>(i) * 131 + static_cast<uint64_t>(rep));
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
  AddGaps(traces, best_known, o, gaps);
  if (csv) tgraph::WriteCurves(traces, (*g)->inst.name, rep, best_known, csv);
  std::fprintf(stderr, "graph %s (%zu configurable nodes), repeat %d done\n", (*g)->inst.name.c_str(),
               (*g)->inst.config_ids.size(), rep);
  return absl::OkStatus();
}

tgraph::FarmOptions FarmOptionsFromFlags() {
  tgraph::FarmOptions o;
  o.seed = absl::GetFlag(FLAGS_seed);
  o.per_round = absl::GetFlag(FLAGS_per_round);
  o.evaluations = absl::GetFlag(FLAGS_evaluations);
  o.other_hardware = absl::GetFlag(FLAGS_other_hardware);
  o.finetune_steps = absl::GetFlag(FLAGS_finetune_steps);
  o.finetune_lr = absl::GetFlag(FLAGS_finetune_lr);
  o.finetune_loss = absl::GetFlag(FLAGS_finetune_loss);
  o.budget = absl::GetFlag(FLAGS_budget);
  o.genetic_budget = absl::GetFlag(FLAGS_genetic_budget);
  o.neighbourhood = absl::GetFlag(FLAGS_neighbourhood);
  o.online_correction = absl::GetFlag(FLAGS_online_correction);
  o.exploration = absl::GetFlag(FLAGS_exploration);
  o.spread_proposals = absl::GetFlag(FLAGS_spread_proposals);
  o.adapt_correction = absl::GetFlag(FLAGS_adapt_correction);
  o.max_changed_groups = absl::GetFlag(FLAGS_max_changed_groups);
  o.finalists = absl::GetFlag(FLAGS_finalists);
  o.oracle_noise = absl::GetFlag(FLAGS_oracle_noise);
  o.final_tau = absl::GetFlag(FLAGS_final_tau);
  o.stall_variation = absl::GetFlag(FLAGS_stall_variation);
  o.within = absl::GetFlag(FLAGS_within);
  return o;
}

int RunFarm() {
  const tgraph::FarmOptions o = FarmOptionsFromFlags();
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
    if (std::find(std::begin(tgraph::kFarmStrategies), std::end(tgraph::kFarmStrategies), w) == std::end(tgraph::kFarmStrategies))
      return Fail(UsageError(absl::StrCat("--strategies: unknown strategy '", w,
                                          "' (expected default, random, genetic, tgraph, tgraph+ft, oracle, noisy)")));
  if (!o.finetune_loss.empty() && !tgraph::ParseRankingLoss(o.finetune_loss))
    return Fail(UsageError(absl::StrCat("--finetune_loss must be ", tgraph::kRankingLossNames, ", not '", o.finetune_loss, "'")));
  if (absl::GetFlag(FLAGS_registry).empty()) return Fail(UsageError("--registry is required"));
  const tgraph::Registry registry(absl::GetFlag(FLAGS_registry));
  int64_t version = 0;
  absl::StatusOr<tgraph::LoadedModel> model =
      tgraph::LoadModelOrLatest(registry, c->name(), absl::GetFlag(FLAGS_version), &version);
  if (!model.ok()) return Fail(model.status());
  const synth::FamilySpec& fam = c->source == "xla" ? preset->xla : preset->nlp;
  const int first = fam.train + (split == "test" ? fam.valid : 0);
  const int count = std::min(absl::GetFlag(FLAGS_graphs), split == "test" ? fam.test : fam.valid);
  if (absl::GetFlag(FLAGS_neighbour_tau)) return RunNeighbourTau(registry, version, *c, *preset, first, count, o);
  if (!absl::GetFlag(FLAGS_write_picks).empty()) return RunWritePicks(registry, version, *c, *preset, fam, o);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(nullptr, &std::fclose);
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    csv.reset(std::fopen(path.c_str(), "w"));
    if (!csv) return Fail(UsageError(absl::StrCat("--csv: cannot write ", path)));
    std::fprintf(csv.get(), "strategy,graph,repeat,measured,gap\n");
  }
  tgraph::Gaps gaps;
  for (int i = 0; i < count; ++i) {
    for (int rep = 0; rep < std::max(1, absl::GetFlag(FLAGS_repeats)); ++rep) {
      if (absl::Status s = RunStrategies(registry, version, *c, *preset, first, i, rep, wanted, o, &gaps, csv.get());
          !s.ok())
        return Fail(s);
    }
  }
  std::printf("farm (%s): %s, %s split of preset %s seed %llu, %d graphs x %d repeats; model %s version %lld (%zu folds)\n",
              o.other_hardware ? "other hardware" : "the training data's hardware", c->name().c_str(),
              split.c_str(), preset->name.c_str(),
              static_cast<unsigned long long>(o.seed), count, std::max(1, absl::GetFlag(FLAGS_repeats)),
              c->name().c_str(), static_cast<long long>(version), model->folds.size());
  PrintGaps(gaps, o);
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
