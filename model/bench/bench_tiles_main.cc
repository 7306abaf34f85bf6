// tgraph-bench-tiles: a replay over real measured pools. Every legal configuration of
// each problem of a tile collection made from real measurements (tgraph-featurize tiles,
// e.g. tile@h100-triton) was timed on the GPU, so any strategy that picks what to
// measure next can be replayed exactly, looking the runtime up instead of running the
// kernel. The figure of merit is how many measurements each strategy makes until one
// is within --within (1%) of the fastest, per problem of --split and as the median.
//
//   tgraph-bench-tiles --data ROOT --collection tile@h100-triton --registry REG [--split test]
//
// Strategies:
//   model      the frozen model's order of the whole legal space (SearchTiles, as the
//              server's SearchConfigs proposes it);
//   model+m    rounds: the model proposes --per_round unmeasured configurations, they are
//              measured, and the prior follows their runtimes before the next round
//              (TilePrior::For with measurements: the server's SearchConfigs with
//              exclude_runtimes_ns);
//   model+ft   the same rounds, every fold also fine-tuned on the problem's measured rows
//              between them (a farm's learning loop, in process; --finetune_steps 0
//              skips it: it takes minutes);
//   nearest    the nearest measured problem's order (tile_baselines.h, from the train and
//              valid splits);
//   random     its expectation ((n + 1) / (g + 1) for g configurations within tolerance);
//   exhaustive every legal configuration, what Triton's own autotuner measures.
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/graph_io.h"
#include "model/core/rank_metrics.h"
#include "model/core/rng.h"
#include "model/tile/tile_baselines.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/features.h"
#include "model/nn/model_io.h"
#include "model/search/tile_search.h"
#include "model/tools/cli.h"
#include "model/tools/tool.h"
#include "model/train/train_data.h"
#include "model/train/train_step.h"

ABSL_FLAG(std::string, data, "", "The data root of the tile collection (tgraph-featurize tiles --out_root)");
ABSL_FLAG(std::string, collection, "tile@h100-triton", "A tile collection with a tile space");
ABSL_FLAG(std::string, registry, "", "Model registry");
ABSL_FLAG(int64_t, version, 0, "Model version (0 = latest)");
ABSL_FLAG(std::string, split, "test", "The split whose problems are replayed (never trained on: test)");
ABSL_FLAG(double, within, 0.01, "A measurement counts as found when its runtime is within this of the fastest");
ABSL_FLAG(int64_t, per_round, 1, "model+ft: configurations measured per round");
ABSL_FLAG(int64_t, finetune_steps, 40, "model+ft: optimisation steps per fold after each round (tgraph-bench-search's default; 0: no model+ft "
          "column)");
ABSL_FLAG(double, finetune_lr, 1e-4, "model+ft: AdamW learning rate (tgraph-train finetune's default)");
ABSL_FLAG(std::string, finetune_loss, "",
          "model+ft: the ranking loss of its steps (tgraph-train --loss: hinge, top or listwise; unset: the model's own)");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0 = every core this process may use)");
ABSL_FLAG(bool, tile_prior, true,
          "model and model+ft: the published model's prior of measured problems in its scores, as the server serves "
          "them (--notile_prior: the network alone)");
ABSL_FLAG(double, tile_network_share, -1,
          "model and model+ft: what the network's standardised scores count beside the prior, in 0..1, instead of the "
          "manifest's (-1), for ablations");
ABSL_FLAG(bool, tile_correction, true,
          "model+m and model+ft: the prior follows the problem's measured runtimes between rounds "
          "(model/tile/tile_correction.h; --notile_correction: the prior of other problems alone, for ablations)");
ABSL_FLAG(double, finetuned_network_share, 0.25,
          "model+ft: the network's share beside the prior once fine-tuned on the problem's own measurements, in 0..1 "
          "(the manifest's share was chosen for problems the network never saw, and it has now seen this one; 0.25: "
          "chosen over 0, 0.25, 0.5, 0.75 and 1 on the other two of the three H100 test splits for each, twice 0.25 and "
          "once 0; -1: the frozen share throughout)");

using tgraph::Fail;
using tgraph::UsageError;

namespace {

// One measured problem: its graph, its legal configurations and their runtimes (ns).
struct Pool {
  std::string name;
  tgraph::TileGraph graph;
  tgraph::KnownTileProblem known;
  std::map<tgraph::TritonTile, double> runtime;
  double fastest = 0;
  bool Good(const tgraph::TritonTile& t) const { return runtime.at(t) <= (1.0 + absl::GetFlag(FLAGS_within)) * fastest; }
};

// A loaded model's folds, their encodings of one graph, and its tensors.
struct Scorer {
  tgraph::LoadedModel model;
  double network_share = -1;  // >= 0: instead of the manifest's
  tgraph::GraphTensors tensors;
  tgraph::EncodedGraph encoded;
  std::vector<tgraph::FoldModel> folds;

  // The folds' encodings of the graph, again after their weights changed.
  void Encode() {
    for (const auto& net : model.folds) net->eval();
    encoded = tgraph::EncodeGraph(tensors, model.folds);
    folds = encoded.Folds(model.folds);
  }

  // own: the problem's measured configurations and runtimes, which the prior follows.
  tgraph::TileSearchResult Search(const tgraph::GemmProblem& p, const std::vector<tgraph::TritonTile>& exclude,
                                  int64_t results, const std::vector<tgraph::MeasuredTile>& own = {}) {
    tgraph::TileSearchOptions o;
    o.num_results = results;
    o.exclude = &exclude;
    o.scoring.batch_size = model.manifest.batch_size;
    o.scoring.reference_size = model.manifest.reference_configs;
    o.scoring.reference_groups = model.manifest.reference_groups;
    if (absl::GetFlag(FLAGS_tile_prior)) tgraph::UseTilePrior(model.manifest, p, &o.scoring, own);
    if (o.scoring.tile_prior && network_share >= 0) {
      auto values = std::make_shared<tgraph::TilePriorValues>(*o.scoring.tile_prior);
      values->network_share = network_share;
      o.scoring.tile_prior = std::move(values);
    }
    return tgraph::SearchTiles(folds, tensors, *model.manifest.tile_space, p, o);
  }

  // Every fold trained on the measured rows, as a farm's fine-tune would.
  tgraph::RankingLoss loss = tgraph::RankingLoss::kPairwiseHinge;

  void Finetune(const Pool& pool, const std::vector<tgraph::TritonTile>& measured, tgraph::Rng& rng) {
    if (measured.size() < 2) return;
    tgraph::GraphData gd;
    gd.name = pool.name;
    gd.split = "train";
    gd.graph = pool.graph.graph;
    gd.tile_feat = tgraph::TileRows(*model.manifest.tile_space, pool.known.problem, measured);
    for (const tgraph::TritonTile& t : measured) gd.target.push_back(pool.runtime.at(t));
    // A network trained on the prior's errors is fine-tuned the same way.
    if (model.manifest.tile_prior && model.manifest.tile_prior->residual && absl::GetFlag(FLAGS_tile_prior))
      tgraph::AttachTilePrior(*model.manifest.tile_prior, pool.known.problem, /*leave_shape_out=*/false, &gd);
    for (const auto& net : model.folds) {
      net->train();
      auto opt = tgraph::MakeOptimizer(*net, absl::GetFlag(FLAGS_finetune_lr), 1e-5);
      for (int64_t s = 0; s < absl::GetFlag(FLAGS_finetune_steps); ++s)
        tgraph::TrainStep(*net, *opt, tensors, gd, tgraph::SampleRows(gd, gd.num_configs(), rng),
                          absl::GetFlag(FLAGS_finetune_lr), 1.0, tgraph::kDefaultQueryShare, loss);
    }
    if (absl::GetFlag(FLAGS_finetuned_network_share) >= 0) network_share = absl::GetFlag(FLAGS_finetuned_network_share);
    Encode();
  }
};

absl::StatusOr<Scorer> LoadScorer(const tgraph::TileGraph& g) {
  absl::StatusOr<tgraph::LoadedModel> m = tgraph::LoadModelOrLatest(
      tgraph::Registry(absl::GetFlag(FLAGS_registry)), absl::GetFlag(FLAGS_collection), absl::GetFlag(FLAGS_version));
  if (!m.ok()) return m.status();
  if (!m->manifest.tile_space)
    return absl::FailedPreconditionError(absl::StrCat(absl::GetFlag(FLAGS_collection),
                                                      ": the model has no tile space (trained on data that "
                                                      "tgraph-featurize tiles did not make): nothing to replay"));
  Scorer s;
  s.model = std::move(*m);
  s.network_share = absl::GetFlag(FLAGS_tile_network_share);
  s.loss = tgraph::ParseRankingLoss(absl::GetFlag(FLAGS_finetune_loss)).value_or(tgraph::TrainedLoss(s.model.manifest.training));
  s.tensors = tgraph::MakeGraphTensors(g.graph, {}, s.model.manifest.stats);
  s.Encode();
  return s;
}

// Measurements until one is good, in `order` (all of the pool when none is).
double UntilGood(const Pool& pool, const std::vector<tgraph::TritonTile>& order) {
  for (size_t i = 0; i < order.size(); ++i)
    if (pool.Good(order[i])) return static_cast<double>(i + 1);
  return static_cast<double>(order.size());
}

// Rounds of proposals, each measured and learned from, until one is good: the prior
// follows the measured runtimes (unless --notile_correction), and with `finetune` every
// fold is also fine-tuned on the measured rows between rounds.
double Loop(const Pool& pool, bool finetune, tgraph::Rng& rng) {
  absl::StatusOr<Scorer> s = LoadScorer(pool.graph);  // a fresh copy of the frozen model
  if (!s.ok()) return std::nan("");
  std::vector<tgraph::TritonTile> measured;
  std::vector<tgraph::MeasuredTile> own;
  while (measured.size() < pool.runtime.size()) {
    const tgraph::TileSearchResult r = s->Search(pool.known.problem, measured, absl::GetFlag(FLAGS_per_round), own);
    if (r.tiles.empty()) break;
    for (const tgraph::TritonTile& t : r.tiles) {
      measured.push_back(t);
      if (pool.Good(t)) return static_cast<double>(measured.size());
      if (absl::GetFlag(FLAGS_tile_correction)) own.push_back({t, pool.runtime.at(t)});
    }
    if (finetune) s->Finetune(pool, measured, rng);
  }
  return static_cast<double>(measured.size());
}

// The flags Replay checks before it loads anything.
absl::Status CheckFlags() {
  if (absl::GetFlag(FLAGS_data).empty() || absl::GetFlag(FLAGS_registry).empty())
    return UsageError("give --data ROOT (tgraph-featurize tiles --out_root) and --registry REG");
  for (const auto& [flag, value] : {std::pair{"--tile_network_share", absl::GetFlag(FLAGS_tile_network_share)},
                                    std::pair{"--finetuned_network_share", absl::GetFlag(FLAGS_finetuned_network_share)}})
    if (value != -1 && !(value >= 0 && value <= 1))
      return UsageError(absl::StrCat(flag, " must be in 0..1 (or -1: ",
                                     flag == std::string("--tile_network_share") ? "the manifest's" : "as frozen", ")"));
  if (absl::GetFlag(FLAGS_finetune_steps) < 0 || absl::GetFlag(FLAGS_per_round) < 1)
    return UsageError("--finetune_steps must be >= 0 and --per_round >= 1");
  if (!absl::GetFlag(FLAGS_finetune_loss).empty() && !tgraph::ParseRankingLoss(absl::GetFlag(FLAGS_finetune_loss)))
    return UsageError(absl::StrCat("--finetune_loss must be ", tgraph::kRankingLossNames, ", not '",
                                   absl::GetFlag(FLAGS_finetune_loss), "'"));
  return absl::OkStatus();
}

// The baselines from the collection's train and valid problems (what a model trained on).
absl::StatusOr<tgraph::TileBaselines> TrainingBaselines(const tgraph::Collection& c) {
  std::vector<tgraph::KnownTileProblem> known;
  for (const std::string split : {"train", "valid"}) {
    absl::StatusOr<std::vector<tgraph::GraphFile>> files = tgraph::ListSplit(absl::GetFlag(FLAGS_data), c, split);
    if (!files.ok()) return files.status();
    for (const tgraph::GraphFile& f : *files) {
      absl::StatusOr<tgraph::TileGraph> g = tgraph::LoadTileGraph(f.path);
      if (!g.ok()) return g.status();
      absl::StatusOr<tgraph::KnownTileProblem> k = tgraph::KnownProblemOf(*g, f.path);
      if (!k.ok()) return k.status();
      known.push_back(std::move(*k));
    }
  }
  return tgraph::TileBaselines(std::move(known));
}

// A measured problem's pool: its graph, configurations and runtimes.
absl::StatusOr<Pool> LoadPool(const tgraph::GraphFile& f) {
  Pool pool;
  pool.name = f.name;
  absl::StatusOr<tgraph::TileGraph> g = tgraph::LoadTileGraph(f.path);
  if (!g.ok()) return g.status();
  pool.graph = std::move(*g);
  absl::StatusOr<tgraph::KnownTileProblem> k = tgraph::KnownProblemOf(pool.graph, f.path);
  if (!k.ok()) return k.status();
  pool.known = std::move(*k);
  for (size_t i = 0; i < pool.graph.config_runtime.size(); ++i)
    pool.runtime[pool.known.tiles[i]] = static_cast<double>(pool.graph.config_runtime[i]);
  pool.fastest = static_cast<double>(*std::min_element(pool.graph.config_runtime.begin(), pool.graph.config_runtime.end()));
  return pool;
}

constexpr int kColumns = 7;
const char* const kColumnNames[kColumns] = {"model", "model+m", "model+ft", "nearest", "random", "exhaust", "top-1 (x)"};
using Row = std::array<double, kColumns>;

// A row of the table: measurements as whole numbers (means and random's expectation
// with a decimal), the first pick's slowdown with three; "-" for a column not run.
void PrintRow(const std::string& label, const Row& v, bool whole) {
  std::printf("%-28s", label.c_str());
  for (int i = 0; i < kColumns; ++i) {
    if (std::isnan(v[i]))
      std::printf(" %9s", "-");
    else if (i == kColumns - 1)
      std::printf(" %9.3f", v[i]);
    else
      std::printf(whole && i != 4 ? " %9.0f" : " %9.1f", v[i]);
  }
  std::printf("\n");
}

// One problem's row: every strategy's measurements until one within --within.
// *loss: the frozen model's fine-tuning loss (for the footer).
absl::StatusOr<Row> ReplayPool(const Pool& pool, const std::string& path, const tgraph::TileBaselines& baselines,
                               bool finetune, tgraph::Rng& rng, std::string* loss) {
  absl::StatusOr<Scorer> frozen = LoadScorer(pool.graph);
  if (!frozen.ok()) return frozen.status();
  *loss = tgraph::RankingLossName(frozen->loss);
  const tgraph::TileSearchResult all = frozen->Search(pool.known.problem, {}, static_cast<int64_t>(pool.runtime.size()));
  for (const tgraph::TritonTile& t : all.tiles)
    if (!pool.runtime.count(t))
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": the model's space proposes ", t.Name(), ", which this problem did not measure"));
  const std::vector<double> nearest_scores =
      baselines.Scores(tgraph::TileBaseline::kNearestProblem, pool.known.problem, pool.known.tiles);
  std::vector<tgraph::TritonTile> nearest;
  for (int64_t i : tgraph::RankByScore(nearest_scores)) nearest.push_back(pool.known.tiles[static_cast<size_t>(i)]);
  const std::vector<double> ns(pool.graph.config_runtime.begin(), pool.graph.config_runtime.end());
  return Row{UntilGood(pool, all.tiles),
             Loop(pool, /*finetune=*/false, rng),
             finetune ? Loop(pool, /*finetune=*/true, rng) : std::nan(""),
             UntilGood(pool, nearest),
             tgraph::ExpectedRandomMeasurementsToWithin(ns, absl::GetFlag(FLAGS_within)),
             static_cast<double>(ns.size()),
             pool.runtime.at(all.tiles[0]) / pool.fastest};
}

// What the loop columns ran with.
void PrintFooter(bool finetune, const std::string& finetune_loss) {
  std::printf("model+m: rounds of %lld configuration(s), the prior following the measured runtimes (%s)\n",
              static_cast<long long>(absl::GetFlag(FLAGS_per_round)),
              !absl::GetFlag(FLAGS_tile_prior)        ? "no prior: --notile_prior"
              : absl::GetFlag(FLAGS_tile_correction) ? "SearchConfigs with exclude_runtimes_ns"
                                                     : "off: --notile_correction");
  if (!finetune) return;
  std::printf("model+ft: the same, every fold fine-tuned between rounds: %lld steps per fold at lr %g (%s loss)",
              static_cast<long long>(absl::GetFlag(FLAGS_finetune_steps)), absl::GetFlag(FLAGS_finetune_lr),
              finetune_loss.c_str());
  if (absl::GetFlag(FLAGS_finetuned_network_share) >= 0 && absl::GetFlag(FLAGS_tile_prior))
    std::printf(", then the network at share %g beside the prior", absl::GetFlag(FLAGS_finetuned_network_share));
  std::printf("\n");
}

int Replay() {
  torch::set_num_threads(tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads)));
  if (absl::Status s = CheckFlags(); !s.ok()) return Fail(s);
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(absl::GetFlag(FLAGS_collection));
  if (!c.ok()) return Fail(UsageError(absl::StrCat("--collection: ", c.status().message())));
  absl::StatusOr<tgraph::TileBaselines> baselines = TrainingBaselines(*c);
  if (!baselines.ok()) return Fail(baselines.status());
  absl::StatusOr<std::vector<tgraph::GraphFile>> files =
      tgraph::ListSplit(absl::GetFlag(FLAGS_data), *c, absl::GetFlag(FLAGS_split));
  if (!files.ok()) return Fail(files.status());
  std::printf("replay over %zu measured problems of %s %s: measurements until one within %.3g%% of the fastest\n",
              files->size(), c->name().c_str(), absl::GetFlag(FLAGS_split).c_str(), 100 * absl::GetFlag(FLAGS_within));
  std::printf("%-28s", "problem");
  for (const char* n : kColumnNames) std::printf(" %9s", n);
  std::printf("\n");
  const bool finetune = absl::GetFlag(FLAGS_finetune_steps) > 0;
  std::map<std::string, std::vector<double>> column;
  std::string finetune_loss = absl::GetFlag(FLAGS_finetune_loss);
  tgraph::Rng rng(0);
  for (const tgraph::GraphFile& f : *files) {
    absl::StatusOr<Pool> pool = LoadPool(f);
    if (!pool.ok()) return Fail(pool.status());
    absl::StatusOr<Row> row = ReplayPool(*pool, f.path, *baselines, finetune, rng, &finetune_loss);
    if (!row.ok()) return Fail(row.status());
    for (int i = 0; i < kColumns; ++i) column[kColumnNames[i]].push_back((*row)[i]);
    PrintRow(f.name, *row, /*whole=*/true);
    std::fflush(stdout);  // a line per problem as it is done: the fine-tuning rounds take minutes
  }
  Row median, mean;
  for (int i = 0; i < kColumns; ++i) {
    median[i] = tgraph::FiniteMedian(column[kColumnNames[i]]);
    mean[i] = tgraph::FiniteMean(column[kColumnNames[i]]);
  }
  PrintRow("median", median, /*whole=*/false);
  PrintRow("mean", mean, /*whole=*/false);
  PrintFooter(finetune, finetune_loss);
  return tgraph::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return tgraph::RunTorchTool(argc, argv,
                              "Replay search strategies over real measured tile pools (measurements until one within "
                              "1% of the fastest).\n"
                              "  tgraph-bench-tiles --data ROOT --collection tile@h100-triton --registry REG [--split test]",
                              Replay);
}
