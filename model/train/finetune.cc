#include "model/train/finetune.h"

#include <set>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "model/core/dataset.h"
#include "model/core/utc_time.h"
#include "model/store/measurement_store.h"
#include "model/store/stored_layouts.h"
#include "model/core/rank_metrics.h"
#include "model/nn/model_io.h"
#include "model/nn/scoring.h"
#include "model/train/train_data.h"
#include "model/train/finetune_tiles.h"
#include "model/train/train_step.h"

namespace tgraph {
namespace fs = std::filesystem;

namespace {

struct Split {
  std::vector<GraphData> train, heldout;
  std::vector<GraphTensors> train_tensors, heldout_tensors;
  int64_t train_configs = 0, heldout_configs = 0;
};

// Each measured graph's configurations, cut into held-in and held-out by IsHeldOut.
Split SplitMeasurements(const std::vector<LayoutGraph>& graphs, const FinetuneOptions& o) {
  Split s;
  for (const LayoutGraph& g : graphs) {
    const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
    LayoutGraph parts[2] = {g, g};  // 0: train, 1: held out
    for (LayoutGraph& p : parts) {
      p.num_configs = 0;
      p.config_feat.clear();
      p.config_runtime.clear();
    }
    for (int64_t c = 0; c < g.num_configs; ++c) {
      LayoutGraph& p = parts[IsHeldOut(g.config(c), row, o.holdout, o.seed) ? 1 : 0];
      p.config_feat.insert(p.config_feat.end(), g.config(c), g.config(c) + row);
      p.config_runtime.push_back(g.config_runtime[c]);
      ++p.num_configs;
    }
    // A ranking needs two configurations.
    if (parts[0].num_configs >= 2) {
      s.train_configs += parts[0].num_configs;
      s.train.push_back(LayoutGraphData(std::move(parts[0]), g.name, "measured"));
    }
    if (parts[1].num_configs >= 2) {
      s.heldout_configs += parts[1].num_configs;
      s.heldout.push_back(LayoutGraphData(std::move(parts[1]), g.name, "heldout"));
    }
  }
  return s;
}

// Mean Kendall's tau of the folds' ensemble over the graphs.
double EnsembleTau(const std::vector<std::shared_ptr<RankingNet>>& nets, const std::vector<GraphData>& graphs,
                   const std::vector<GraphTensors>& tensors, const Manifest& m) {
  std::vector<FoldModel> folds;
  for (const auto& n : nets) folds.push_back({n.get(), nullptr});
  ScoringOptions so;
  so.batch_size = m.batch_size;
  so.reference_size = m.reference_configs;
  so.reference_groups = m.reference_groups;
  std::vector<double> taus;
  for (size_t i = 0; i < graphs.size(); ++i) {
    RowStorage storage;
    const std::vector<double> score = ScoreConfigs(folds, tensors[i], RowsOf(graphs[i], &storage), so).score;
    // A model that scores anything non-finite is broken, whatever its ranking.
    if (!std::all_of(score.begin(), score.end(), [](double v) { return std::isfinite(v); }))
      return std::nan("");
    taus.push_back(KendallTau(score, graphs[i].target));
  }
  return FiniteMean(taus);
}

// The base dataset's train split, mixed into fine-tuning steps (empty without --data).
struct BaseData {
  std::vector<GraphData> graphs;
  std::vector<GraphTensors> tensors;
};

// o.steps steps on one fold, each on a graph drawn from the measured training part or
// (with probability base_fraction) from the base data. Returns the mean loss.
double FinetuneFold(RankingNet& net, size_t f, const FinetuneOptions& o, const Split& s, const BaseData& base,
                    int64_t* base_steps) {
  torch::manual_seed(o.seed * 1000 + f);
  net.train();
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(net, o.lr, o.weight_decay);
  Rng rng(o.seed * 7919 + f);
  double loss_sum = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const bool from_base = !base.graphs.empty() && rng.Bernoulli(o.base_fraction);
    *base_steps += from_base;
    const std::vector<GraphData>& pool = from_base ? base.graphs : s.train;
    const std::vector<GraphTensors>& tensors = from_base ? base.tensors : s.train_tensors;
    const size_t gi = static_cast<size_t>(rng.Int(0, static_cast<int64_t>(pool.size()) - 1));
    const std::vector<int64_t> rows = SampleRows(pool[gi], o.batch_configs, rng);
    loss_sum += TrainStep(net, *opt, tensors[gi], pool[gi], rows, o.lr, o.clip_norm, kDefaultQueryShare,
                          o.loss.value_or(RankingLoss::kPairwiseHinge));
  }
  net.eval();
  return loss_sum / static_cast<double>(o.steps);
}

// The child's manifest says what it learned from and how it compared with its parent.
void RecordLineage(const FinetuneOptions& o, const Split& s, const BaseData& base, const FinetuneResult& r,
                   Manifest* child) {
  std::vector<GraphData> seen = s.train;
  seen.insert(seen.end(), base.graphs.begin(), base.graphs.end());
  child->data_fingerprint = DataFingerprint(seen);
  child->training["finetune_parent_version"] = absl::StrCat(r.parent_version);
  if (r.parent_collection != child->collection) child->training["finetune_parent_collection"] = r.parent_collection;
  child->training["finetune_measurements"] = o.measurements;
  child->training["finetune_base_data"] = o.base_data;
  child->training["finetune_steps"] = absl::StrCat(o.steps);
  child->training["finetune_lr"] = absl::StrCat(o.lr);
  child->training["finetune_loss"] = RankingLossName(o.loss.value_or(RankingLoss::kPairwiseHinge));
  child->training["finetune_heldout_configs"] = absl::StrCat(s.heldout_configs);
  child->training["finetune_heldout_tau_parent"] = absl::StrCat(r.parent_score);
  child->training["finetune_heldout_tau"] = absl::StrCat(r.child_score);
  // Provenance: the parent's, and this fine-tune (measured graphs are the measurement
  // store's: a graph with held-out rows only counts too).
  std::set<std::string> measured;
  for (const GraphData& g : s.train) measured.insert(g.name);
  for (const GraphData& g : s.heldout) measured.insert(g.name);
  child->provenance.finetunes.push_back({r.parent_version,
                                         r.parent_collection == child->collection ? "" : r.parent_collection,
                                         static_cast<int64_t>(measured.size()), s.train_configs + s.heldout_configs,
                                         UtcNow()});
}

}  // namespace

bool IsHeldOut(const int8_t* row, size_t bytes, double holdout, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ seed;  // FNV-1a
  for (size_t i = 0; i < bytes; ++i) {
    h ^= static_cast<uint8_t>(row[i]);
    h *= 1099511628211ULL;
  }
  return static_cast<double>(h % 1000000) < holdout * 1e6;
}

namespace {

// The collection to fine-tune, once the options make sense.
absl::StatusOr<Collection> CheckOptions(const FinetuneOptions& o) {
  absl::StatusOr<Collection> c = ParseCollection(o.collection);
  if (!c.ok()) return c.status();
  if (c->kind == CollectionKind::kTile) {
    if (!o.base_data.empty())
      return absl::InvalidArgumentError("--data: a tile collection's fine-tune joins the measurements to its prior "
                                        "and trains nothing on base data; leave --data out");
  } else if (!o.kernel.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--kernel names a tile kernel's measurements; ", c->name(),
                                                   " is a layout collection"));
  }
  if (o.steps < 1 || !(o.holdout > 0 && o.holdout < 1) || o.batch_configs < 2 || !(o.lr > 0))
    return absl::InvalidArgumentError("--steps >= 1, --holdout in (0, 1), --batch_configs >= 2 and --lr > 0");
  if (o.min_heldout_configs < 1) return absl::InvalidArgumentError("--min_heldout_configs must be at least 1");
  if (o.work_dir.empty()) return absl::InvalidArgumentError("finetune needs --run_dir (a work directory)");
  return c;
}

// The model to start from: the collection's latest version, or while it has none,
// --parent's (a new model of one's own started from another); which, in `result`.
absl::StatusOr<LoadedModel> ParentModel(const Registry& registry, const Collection& c, const FinetuneOptions& o,
                                        FinetuneResult* result) {
  std::string from = c.name();
  absl::StatusOr<int64_t> parent = registry.LatestVersion(from);
  if (!parent.ok() && parent.status().code() == absl::StatusCode::kNotFound && !o.parent.empty()) {
    absl::StatusOr<Collection> pc = ParseCollection(o.parent);
    if (!pc.ok()) return absl::InvalidArgumentError(absl::StrCat("--parent: ", pc.status().message()));
    if (pc->kind != c.kind)
      return absl::InvalidArgumentError(absl::StrCat("--parent ", o.parent, " is not of the kind of ", c.name()));
    from = pc->name();
    parent = registry.LatestVersion(from);
  }
  if (!parent.ok()) {
    if (o.parent.empty() && parent.status().code() == absl::StatusCode::kNotFound)
      return absl::NotFoundError(absl::StrCat(parent.status().message(), " (a new model starts from another's: --parent, "
                                                                         "e.g. --parent layout:xla:random)"));
    return parent.status();
  }
  result->parent_version = *parent;
  result->parent_collection = from;
  return LoadModel(registry, from, *parent);
}

// The base data replayed beside the measurements (--data), its rows spilled past the
// memory budget; none without --data.
absl::StatusOr<BaseData> LoadBaseData(const FinetuneOptions& o, const Collection& c, const Manifest& pm) {
  BaseData base;
  if (o.base_data.empty()) return base;
  LoadOptions lo;
  lo.config_memory_bytes = o.config_memory_bytes;
  absl::StatusOr<std::shared_ptr<ConfigSpill>> spill = ConfigSpill::Create(o.work_dir);
  if (!spill.ok()) return spill.status();
  lo.spill = *spill;
  absl::StatusOr<std::vector<GraphData>> b = LoadCollectionData(o.base_data, c, {"train"}, lo);
  if (!b.ok()) return b.status();
  base.graphs = std::move(*b);
  for (const GraphData& g : base.graphs) base.tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, pm.stats));
  return base;
}

}  // namespace

absl::StatusOr<FinetuneResult> Finetune(const FinetuneOptions& options) {
  absl::StatusOr<Collection> c = CheckOptions(options);
  if (!c.ok()) return c.status();
  const Registry registry(options.registry);
  FinetuneResult result;
  absl::StatusOr<LoadedModel> model = ParentModel(registry, *c, options, &result);
  if (!model.ok()) return model.status();
  if (c->kind == CollectionKind::kTile) return FinetuneTilePrior(options, *c, registry, std::move(*model), result);
  const Manifest& pm = model->manifest;
  FinetuneOptions o = options;
  if (!o.loss) o.loss = TrainedLoss(pm.training);

  absl::StatusOr<LoadedMeasurements> loaded = LoadMeasurements(o.measurements, *c);
  if (!loaded.ok()) return loaded.status();
  result.skipped_shards = std::move(loaded->skipped);
  const std::vector<LayoutGraph>* measured = &loaded->graphs;
  Split s = SplitMeasurements(*measured, o);
  if (s.train.empty() || s.heldout.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        o.measurements, ": ", measured->size(), " measured graphs of ", c->name(), " give ", s.train_configs,
        " training and ", s.heldout_configs, " held-out configurations; fine-tuning needs a graph with at least 2 "
        "of each (report more measurements)"));
  result.graphs = static_cast<int64_t>(measured->size());
  result.train_configs = s.train_configs;
  result.heldout_configs = s.heldout_configs;
  if (s.heldout_configs < o.min_heldout_configs) {
    result.not_published = absl::StrCat("not published: too little evidence: ", s.heldout_configs,
                                        " held-out configurations, fewer than --min_heldout_configs (",
                                        o.min_heldout_configs, "); nothing was trained (report more measurements)");
    return result;
  }
  for (const GraphData& g : s.train) s.train_tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, pm.stats));
  for (const GraphData& g : s.heldout) s.heldout_tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, pm.stats));
  std::error_code ec;
  fs::create_directories(o.work_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(o.work_dir, ": cannot create: ", ec.message()));
  absl::StatusOr<BaseData> base_data = LoadBaseData(o, *c, pm);
  if (!base_data.ok()) return base_data.status();
  const BaseData& base = *base_data;

  result.parent_score = EnsembleTau(model->folds, s.heldout, s.heldout_tensors, pm);
  Manifest child = pm;
  child.collection = c->name();  // --parent's model, published under the collection's name
  for (size_t f = 0; f < model->folds.size(); ++f) {
    RankingNet& net = *model->folds[f];
    const double loss = FinetuneFold(net, f, o, s, base, &result.base_steps);
    const std::string path = absl::StrCat(o.work_dir, "/fold_", f, ".npz");
    if (absl::Status st = SaveWeights(net, path); !st.ok()) return st;
    child.folds[f].weights = path;
    child.folds[f].valid_tau = EnsembleTau({model->folds[f]}, s.heldout, s.heldout_tensors, pm);
    if (o.progress)
      std::fprintf(stderr, "finetune %s: fold %zu, %lld steps, mean loss %.4f, held-out tau %.4f\n", c->name().c_str(),
                   f, static_cast<long long>(o.steps), loss,
                   child.folds[f].valid_tau);
  }
  result.child_score = EnsembleTau(model->folds, s.heldout, s.heldout_tensors, pm);
  result.trained = true;
  if (o.progress)
    std::fprintf(stderr, "finetune %s: held-out tau %.4f (version %lld) -> %.4f on %lld configurations of %lld graphs\n",
                 c->name().c_str(), result.parent_score, static_cast<long long>(result.parent_version), result.child_score,
                 static_cast<long long>(s.heldout_configs), static_cast<long long>(result.graphs));
  // Not worse, and a real number: NaN weights or scores never get published.
  if (!(std::isfinite(result.child_score) && result.child_score >= result.parent_score)) {
    result.not_published = "worse than its parent on the held-out configurations: not published";
    return result;
  }
  RecordLineage(o, s, base, result, &child);
  absl::StatusOr<int64_t> v = PublishLoadable(registry, child);
  if (!v.ok()) return v.status();
  result.published_version = *v;
  return result;
}

}  // namespace tgraph
