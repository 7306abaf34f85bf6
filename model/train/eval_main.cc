// tgraph-eval: scores a split with a published model version or a training run,
// through the same scoring function as the server, and prints per-graph metrics.
//
//   tgraph-eval --data ROOT --collection C --split valid --registry REG [--version V]
//   tgraph-eval --data ROOT --collection C --split valid --run_dir RUN [--json]
//   tgraph-eval --data ROOT --collection C --split test --registry REG --rankings OUT.csv
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "model/tools/cli.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/tile/tile_baselines.h"
#include "model/train/eval_baselines.h"
#include "model/train/evaluator.h"
#include "model/tools/tool.h"
#include "model/train/publish.h"
#include "model/train/trainer.h"

ABSL_FLAG(std::string, data, "", "Dataset root");
ABSL_FLAG(std::string, collection, "", "Collection, e.g. layout:xla:random");
ABSL_FLAG(std::string, split, "valid", "train, valid or test");
ABSL_FLAG(std::string, registry, "", "Model registry (with --version, default latest)");
ABSL_FLAG(int64_t, version, 0, "Model version (0 = latest)");
ABSL_FLAG(std::string, run_dir, "", "Score with a training run's best folds instead of a published version");
ABSL_FLAG(int, keep_folds, 4, "With --run_dir: how many of the best folds to use");
ABSL_FLAG(bool, tile_prior, true,
          "Tile models: score with the published model's prior of measured problems, as the server does "
          "(--notile_prior: the network alone, the ablation)");
ABSL_FLAG(double, tile_network_share, -1,
          "Tile models with a prior: what the network's standardised scores count beside it, in 0..1, instead of "
          "the manifest's (-1), for ablations (0: the prior alone)");
ABSL_FLAG(bool, official_subset, false, "Layout: evaluate on the 1,000-config subset of the TpuGraphs evaluation");
ABSL_FLAG(std::string, scoring, "reference",
          "reference: every configuration against one reference set (model/nn/scoring.h); batch: the earlier scoring, "
          "each batch its own softmax with --tta permutations (for ablations)");
ABSL_FLAG(int64_t, reference, 0, "Reference configurations per graph (0 = the manifest's)");
ABSL_FLAG(bool, reference_per_fold, true,
          "Each fold chooses its own reference (another sample of the rows); false: one reference for every fold");
ABSL_FLAG(int64_t, reference_groups, 0,
          "The reference in this many groups, each its own softmax, weights averaged (0 = the manifest's)");
ABSL_FLAG(int, tta, 0, "With --scoring batch: TTA passes at most (0 = the manifest's)");
ABSL_FLAG(std::string, precision, "auto", tgraph::kPrecisionFlagHelp);
ABSL_FLAG(double, tta_agreement, 0.999, tgraph::kTtaAgreementFlagHelp);
ABSL_FLAG(int64_t, batch, 0, "Configs per batch (0 = the manifest's)");
ABSL_FLAG(int64_t, cascade, 0,
          "K > 0: score with the top-K cascade (one fold for all, every fold for the best --cascade_fraction), and "
          "report its recall of the full ensemble's top K and both times");
ABSL_FLAG(double, cascade_fraction, 0.25, "With --cascade: the fraction kept for every fold (at least 2 x K)");
ABSL_FLAG(bool, baselines, false,
          "Tile collections: also rank each problem without a model, from the train and valid splits the model learned "
          "from, and print the methods side by side. With a tile space (tgraph-featurize tiles): the nearest measured "
          "problem's order, mean slowdown, nearby problems' slowdown, a fixed default, random order; with fusion tables "
          "(tgraph-featurize fusions): the nearest fusion's order, mean slowdown, XLA's choice, random order");
ABSL_FLAG(std::vector<std::string>, baseline_orders, {},
          "With --baselines on a collection with a tile space: FILE[,FILE...], orders of each problem's "
          "configurations made outside tgraph (docs/format.md \"Orders from outside\"; scripts/nvmmh-orders writes "
          "NVIDIA's nvMatmulHeuristics'), one method each");
ABSL_FLAG(bool, json, false, "Print JSON instead of a table");
ABSL_FLAG(std::string, rankings, "",
          "Also write each graph's ranking (the file's configuration indices, predicted fastest first) to this CSV: "
          "what a test split, whose runtimes are hidden, is evaluated for");
ABSL_FLAG(std::string, scores, "",
          "Also write every configuration's ensemble score, fold spread and runtime to this CSV "
          "(collection,graph,config,score,spread,runtime; spread 0 with one fold, runtime 0 where hidden)");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0 = every core this process may use: affinity mask, cgroup CPU limit)");

using tgraph::Fail;
using tgraph::UsageError;

namespace {

// The model scored with: a training run's best folds or a published version; `source`
// names it for the report.
absl::StatusOr<tgraph::LoadedModel> LoadEvalModel(const tgraph::Collection& c, std::string* source) {
  if (!absl::GetFlag(FLAGS_run_dir).empty()) {
    absl::StatusOr<tgraph::Manifest> m = tgraph::RunManifest(absl::GetFlag(FLAGS_run_dir), absl::GetFlag(FLAGS_keep_folds));
    if (!m.ok()) return m.status();
    *source = "run " + absl::GetFlag(FLAGS_run_dir);
    return tgraph::LoadFolds(*m, absl::GetFlag(FLAGS_run_dir));
  }
  if (absl::GetFlag(FLAGS_registry).empty()) return UsageError("give --registry (and optionally --version) or --run_dir");
  int64_t version = 0;
  absl::StatusOr<tgraph::LoadedModel> model = tgraph::LoadModelOrLatest(
      tgraph::Registry(absl::GetFlag(FLAGS_registry)), c.name(), absl::GetFlag(FLAGS_version), &version);
  *source = absl::GetFlag(FLAGS_registry) + " version " + std::to_string(version);
  return model;
}

// The flags' scoring, the manifest's where a flag is 0.
absl::StatusOr<tgraph::EvalOptions> EvalOptionsFromFlags(const tgraph::Manifest& m) {
  tgraph::EvalOptions o;
  o.official_subset = absl::GetFlag(FLAGS_official_subset);
  o.tile_prior = absl::GetFlag(FLAGS_tile_prior);
  o.tile_network_share = absl::GetFlag(FLAGS_tile_network_share);
  o.scoring.batch_size = absl::GetFlag(FLAGS_batch) > 0 ? absl::GetFlag(FLAGS_batch) : m.batch_size;
  const std::string scoring = absl::GetFlag(FLAGS_scoring);
  if (scoring != "reference" && scoring != "batch")
    return UsageError(absl::StrCat("--scoring must be reference or batch, got '", scoring, "'"));
  o.scoring.batch_softmax.on = scoring == "batch";
  o.scoring.reference_per_fold = absl::GetFlag(FLAGS_reference_per_fold);
  o.scoring.reference_groups =
      absl::GetFlag(FLAGS_reference_groups) > 0 ? absl::GetFlag(FLAGS_reference_groups) : m.reference_groups;
  o.scoring.reference_size = absl::GetFlag(FLAGS_reference) > 0 ? absl::GetFlag(FLAGS_reference) : m.reference_configs;
  o.scoring.batch_softmax.tta = absl::GetFlag(FLAGS_tta) > 0 ? absl::GetFlag(FLAGS_tta) : m.tta;
  o.scoring.batch_softmax.tta_agreement = absl::GetFlag(FLAGS_tta_agreement);
  o.cascade_top_k = absl::GetFlag(FLAGS_cascade);
  o.cascade_fraction = absl::GetFlag(FLAGS_cascade_fraction);
  o.progress = !absl::GetFlag(FLAGS_json);
  return o;
}

// "<heading> (<folds> folds, batch B, <scoring>, <precision>)", the table, and the spread,
// cascade and TTA lines that apply.
void PrintTable(const tgraph::EvalReport& r, const tgraph::EvalOptions& o, const std::string& heading, size_t folds,
                tgraph::Precision precision) {
  const std::string how =
      o.scoring.batch_softmax.on
          ? absl::StrCat("batch softmax, TTA at most ", o.scoring.batch_softmax.tta, ", agreement ", o.scoring.batch_softmax.tta_agreement)
          : absl::StrCat("reference of ", o.scoring.reference_size, " configurations in ", o.scoring.reference_groups,
                         " groups", o.scoring.reference_per_fold ? ", per fold" : "");
  std::printf("%s (%zu folds, batch %lld, %s, %s)\n%s", heading.c_str(), folds,
              static_cast<long long>(o.scoring.batch_size), how.c_str(), tgraph::PrecisionName(precision),
              r.Table().c_str());
  if (std::isfinite(r.mean.spread_error[0]))
    std::printf("fold spread: mean rank error (share of the configurations) by spread quartile, lowest spread "
                "first: %.3f %.3f %.3f %.3f\n",
                r.mean.spread_error[0], r.mean.spread_error[1], r.mean.spread_error[2], r.mean.spread_error[3]);
  if (o.cascade_top_k > 0)
    std::printf("cascade (top %lld, fraction %g): recall of the full ensemble's top %lld %.3f on average; scoring "
                "%.1f s with the cascade, %.1f s with every fold for every configuration\n",
                static_cast<long long>(o.cascade_top_k), o.cascade_fraction, static_cast<long long>(o.cascade_top_k),
                r.mean.cascade_recall, r.cascade_seconds, r.full_seconds);
  if (o.scoring.batch_softmax.on) {
    int64_t passes = 0;
    for (const tgraph::GraphEval& e : r.graphs) passes += e.passes;
    std::printf("TTA passes per fold and graph: %.2f on average\n",
                r.graphs.empty() ? 0.0 : static_cast<double>(passes) / static_cast<double>(r.graphs.size() * folds));
  }
}

int Evaluate() {
  torch::set_num_threads(tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads)));
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(absl::GetFlag(FLAGS_collection));
  if (!c.ok()) return Fail(UsageError(absl::StrCat("--collection: ", c.status().message())));
  if (absl::GetFlag(FLAGS_data).empty()) return Fail(UsageError("--data is required"));
  absl::StatusOr<tgraph::Precision> precision = tgraph::ResolvePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) return Fail(UsageError(absl::StrCat("--precision: ", precision.status().message())));
  if (const double share = absl::GetFlag(FLAGS_tile_network_share); share != -1 && !(share >= 0 && share <= 1))
    return Fail(UsageError("--tile_network_share must be in 0..1 (or -1: the manifest's)"));
  // The baselines first: a collection without them is refused before the model's long evaluation.
  absl::StatusOr<std::vector<tgraph::MethodReport>> baselines = std::vector<tgraph::MethodReport>{};
  if (!absl::GetFlag(FLAGS_baseline_orders).empty() && !absl::GetFlag(FLAGS_baselines))
    return Fail(UsageError("--baseline_orders needs --baselines"));
  if (absl::GetFlag(FLAGS_baselines)) {
    if (c->kind != tgraph::CollectionKind::kTile)
      return Fail(UsageError("--baselines: only tile collections have them (tgraph-featurize tiles or "
                             "tgraph-featurize fusions makes one)"));
    baselines = tgraph::BaselineReports(absl::GetFlag(FLAGS_data), *c, absl::GetFlag(FLAGS_split),
                                        absl::GetFlag(FLAGS_baseline_orders));
    if (!baselines.ok()) return Fail(baselines.status());
  }
  std::string source;
  absl::StatusOr<tgraph::LoadedModel> model = LoadEvalModel(*c, &source);
  if (!model.ok()) return Fail(model.status());
  for (const auto& net : model->folds) net->SetInferencePrecision(*precision);
  absl::StatusOr<tgraph::EvalOptions> o = EvalOptionsFromFlags(model->manifest);
  if (!o.ok()) return Fail(o.status());
  absl::StatusOr<tgraph::EvalReport> r =
      tgraph::EvaluateSplit(*model, absl::GetFlag(FLAGS_data), *c, absl::GetFlag(FLAGS_split), *o);
  if (!r.ok()) return Fail(r.status());
  if (!absl::GetFlag(FLAGS_rankings).empty())
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_rankings), r->RankingsCsv()); !s.ok()) return Fail(s);
  if (!absl::GetFlag(FLAGS_scores).empty())
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_scores), r->ScoresCsv()); !s.ok()) return Fail(s);
  std::vector<tgraph::MethodReport> methods;
  if (absl::GetFlag(FLAGS_baselines)) {
    methods.push_back({absl::StrCat("model (", source, ", ", model->folds.size(), " folds",
                                                  o->tile_prior && model->manifest.tile_prior
                                                      ? absl::StrCat(", prior of ", model->manifest.tile_prior->problems,
                                                                     " problems (bandwidth ",
                                                                     model->manifest.tile_prior->bandwidth.ToString(), ") x ",
                                                                     model->manifest.tile_prior->weight, ", network x ",
                                                                     o->tile_network_share >= 0
                                                                         ? o->tile_network_share
                                                                         : model->manifest.tile_prior->network_share)
                                                      : std::string(),
                                                  ")"), *r});
    for (tgraph::MethodReport& m : *baselines) methods.push_back(std::move(m));
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", methods.empty() ? r->Json().c_str() : tgraph::MethodsJson(methods).c_str());
    return tgraph::kExitOk;
  }
  PrintTable(*r, *o, absl::StrCat(c->name(), " ", absl::GetFlag(FLAGS_split), " with ", source), model->folds.size(),
             *precision);
  if (!methods.empty())
    std::printf("\n%s %s: %zu problems; best of the top K over the fastest, measurements until one within 1%% of the "
                "fastest; baselines from the train and valid splits\n%s",
                c->name().c_str(), absl::GetFlag(FLAGS_split).c_str(), r->graphs.size(),
                tgraph::TileComparisonTable(methods).c_str());
  return tgraph::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return tgraph::RunTorchTool(
      argc, argv,
      "Evaluate a model on a split.\n"
      "  tgraph-eval --data ROOT --collection C --split valid (--registry REG [--version V] | --run_dir RUN)",
      Evaluate);
}
