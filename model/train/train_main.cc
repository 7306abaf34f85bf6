// tgraph-train: K-fold training of TGraph on a TpuGraphs-format collection, and
// publishing the best folds to the model registry.
//
//   tgraph-train --data ROOT --collection layout:xla:random --run_dir RUN [--registry REG]
//   tgraph-train --data ROOT --collection ... --run_dir RUN --fold 3      (one fold, e.g. one pod)
//   tgraph-train publish --run_dir RUN --registry REG [--keep_folds 4] [--require_folds 5]
//   tgraph-train retire  --registry REG --collection C --version V [--reason TEXT]
//   tgraph-train restore --registry REG --collection C --version V
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/tools/cli.h"
#include "model/nn/model_io.h"
#include "model/tools/tool.h"
#include "model/train/distributed.h"
#include "model/train/finetune.h"
#include "model/train/publish.h"
#include "model/train/trainer.h"

ABSL_FLAG(std::string, data, "", "Dataset root holding npz/layout/... and npz/tile/...");
ABSL_FLAG(std::string, collection, "",
          "layout:xla:random, layout:xla:default, layout:nlp:random, layout:nlp:default, tile:xla, or a collection "
          "of your own: tile@NAME (a GPU's tile timings, e.g. tile@h100-triton from tgraph-featurize tiles) or "
          "layout@NAME (a farm's layouts)");
ABSL_FLAG(std::string, run_dir, "", "Directory of this training run (checkpoints, logs, fold results)");
ABSL_FLAG(std::string, registry, "", "Model registry; when set, the best folds are published once all are trained");
ABSL_FLAG(int, fold, -1, "Train only this fold (0-based); -1 trains folds 0..train_folds-1 one after another");
ABSL_FLAG(std::string, profile, "paper", "paper: the paper's widths and epochs; quick: hidden 64, 20 epochs, 2 folds");
ABSL_FLAG(int, folds, tgraph::TrainOptions{}.num_folds, "K of the K-fold split by graph");
ABSL_FLAG(int, train_folds, -1, "Folds to train (default: 5 paper, 2 quick)");
ABSL_FLAG(int64_t, version, 0, "retire, restore: the model version");
ABSL_FLAG(std::string, reason, "", "retire: why (kept in the version's RETIRED marker)");
ABSL_FLAG(int, require_folds, 0, "publish: fail unless at least this many folds have finished (0 = any)");
ABSL_FLAG(int, keep_folds, -1, "Best folds to publish (default: 4 paper, 2 quick)");
ABSL_FLAG(double, tile_network_share, -1,
          "Tile collections: what the network counts beside the prior in the published model, 0..1 (-1: the kept "
          "folds' validation chooses; a share chosen on shapes unlike the training grid with tgraph-eval "
          "--tile_network_share instead)");
ABSL_FLAG(double, epochs, tgraph::TrainOptions{}.epochs, "Epochs (one step per training graph each); 0 = the profile's");
ABSL_FLAG(std::vector<std::string>, also_collections, {},
          "Other searches of --collection's graphs to train on beside it, comma-separated (layout:xla:default beside "
          "layout:xla:random): a model that ranks both random rows and the near-optimal rows a search finishes among; "
          "published as --collection");
ABSL_FLAG(int64_t, batch_configs, tgraph::TrainOptions{}.batch_configs, "Configs sampled per graph and step; 0 = 64 for default collections, 128 otherwise");
ABSL_FLAG(double, lr, tgraph::TrainOptions{}.lr, "AdamW learning rate (peak of the warm-up + cosine schedule)");
ABSL_FLAG(double, weight_decay, tgraph::TrainOptions{}.weight_decay, "AdamW weight decay of non-bias weights");
ABSL_FLAG(uint64_t, seed, tgraph::TrainOptions{}.seed, "Seed of folds, sampling and initialisation");
ABSL_FLAG(std::string, fold_by, "graph",
          "What each fold holds out: graph (each graph), or for tile@NAME collections of Triton matrix products m, n "
          "or k (every problem of one value of that size: the folds validate, and choose the network's share, on "
          "sizes they never trained on) or shape (every dtype of one M, N, K)");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0 = every core this process may use: affinity mask, cgroup CPU limit)");
ABSL_FLAG(std::string, architecture, "tgraph", "tgraph or tpugraphs-baseline");
ABSL_FLAG(int64_t, hidden, 0, "Hidden width (0 = 256 paper, 64 quick)");
ABSL_FLAG(int64_t, blocks, tgraph::ModelSpec{}.blocks, "Graph blocks");
ABSL_FLAG(int64_t, tile_head_layers, tgraph::ModelSpec{}.tile_head_layers,
          "Tile collections: hidden layers of the head that joins the graph embedding with the config features (1..8)");
ABSL_FLAG(bool, self_attention, tgraph::ModelSpec{}.self_attention, "Channel-wise self-attention (ablation switch)");
ABSL_FLAG(bool, cross_attention, tgraph::ModelSpec{}.cross_attention, "Cross-configuration attention (ablation switch)");
ABSL_FLAG(std::string, cross_attention_form, "standardized",
          "The cross-attention softmax's input: standardized (eta standardised over the configurations, weights x C) "
          "or paper (eta / T, TGraph 2.3 as written)");
ABSL_FLAG(bool, edges, tgraph::ModelSpec{}.edges, "Message passing along graph edges (ablation switch)");
ABSL_FLAG(int64_t, reference_configs, tgraph::TrainOptions{}.reference_configs,
          "Configurations in the cross-attention reference a graph's scores are computed against, in validation and "
          "in the published model (model/nn/scoring.h)");
ABSL_FLAG(double, query_share, tgraph::TrainOptions{}.query_share,
          "Share of each step's sampled configurations scored as inference scores those outside the reference: "
          "against the others' softmax, one at a time (0: all in one softmax)");
ABSL_FLAG(std::string, loss, "",
          "The ranking loss: hinge (every ordered pair alike, the paper's), top (pairs weighted by how near the fastest "
          "their faster member is, 1 / log2(2 + its rank)) or listwise (ListNet: the softmax of the scores against a "
          "softmax of the runtimes at 5% per e, so only the nearly fastest configurations count). Unset: training uses "
          "the hinge, finetune the parent model's own loss");
ABSL_FLAG(double, tile_prior_weight, tgraph::TrainOptions{}.tile_prior_weight,
          "Collections with a tile space: the weight of the training problems' prior (each configuration's mean log "
          "slowdown over them, weighted by how near each problem's shape is, standardised) added to the published "
          "model's scores; 0 = the network alone");
ABSL_FLAG(bool, tile_prior_near_end, tgraph::TrainOptions{}.tile_prior_near_end,
          "Collections with a tile space: the prior averages each measured problem's log(s - 1 + 0.1) of a "
          "configuration's slowdown s, plus 0.25 x its worst log s over the nearest problems (the near end, where an "
          "autotuner measures); --notile_prior_near_end: the mean log slowdown");
ABSL_FLAG(bool, tile_prior_training, tgraph::TrainOptions{}.tile_prior_training,
          "Collections with a tile space: train the network on what the prior leaves (each step's loss sees the "
          "network's standardised scores plus the prior, built without the step's own shape), as the published "
          "model scores; --notile_prior_training: the network learns alone and the prior is added when published");
ABSL_FLAG(std::string, tile_prior_bandwidth, tgraph::ShapeBandwidth{}.ToString(),
          "How the tile prior weighs a measured problem by its shape: OUTPUT,K,ASPECT, Gaussian bandwidths in log2 "
          "units of the output's size M N, of K and of the aspect M / N (a problem d bandwidths away weighs "
          "exp(-d^2 / 2)); or one number B along each of log2 M, N, K; 0 = every measured problem of the dtype alike");
ABSL_FLAG(std::string, select_by, "tau",
          "Which validation graphs choose each fold's best weights: tau (all of them, their mean Kendall tau) or "
          "neighbour_tau (only the neighbourhood collections' graphs, the one-group neighbours of the compiler default "
          "and of the best row: needs --also_collections layout:SOURCE:near-default,layout:SOURCE:near-best)");
ABSL_FLAG(double, select_from, tgraph::TrainOptions{}.select_from,
          "The share of training before which validation keeps no weights: 0, the best of any step; 1, the last "
          "step's weights (the learning rate has annealed to zero; an early step can score best on a few validation "
          "graphs by chance)");
ABSL_FLAG(int, valid_every, tgraph::TrainOptions{}.valid_every, "Epochs between validations and checkpoints");
ABSL_FLAG(int64_t, valid_configs, tgraph::TrainOptions{}.valid_configs,
          "Configurations per validation graph: a fixed sample of each graph's (all when it has no more; 0 = all)");
ABSL_FLAG(int64_t, config_memory_mb, tgraph::TrainOptions{}.config_memory_bytes >> 20,
          "Memory for the graphs' configurations (12 bytes per configuration and configurable node; training, and "
          "finetune's --data); the graphs past it keep theirs in an unnamed spill file in --spill_dir (finetune: "
          "--run_dir), read as steps sample them");
ABSL_FLAG(std::string, spill_dir, "", "Directory of the configuration spill file (default: --run_dir); local disk is best");
ABSL_FLAG(bool, progress, tgraph::TrainOptions{}.progress, "Progress bar on stderr");
ABSL_FLAG(int, world_size, 0,
          "Ranks of data-parallel training (c10d/Gloo); 0 = $WORLD_SIZE, else 1 (this process alone)");
ABSL_FLAG(int, rank, -1, "This process's rank, 0..world_size-1; -1 = $RANK, else 0");
ABSL_FLAG(std::string, master_addr, "", "Rank 0's address for the rendezvous; empty = $MASTER_ADDR, else 127.0.0.1");
ABSL_FLAG(int, master_port, 0, "Rank 0's rendezvous port (TCPStore); 0 = $MASTER_PORT, else 29500");
ABSL_FLAG(std::string, gloo_interface, "",
          "Network interface for Gloo's traffic (e.g. eth0); empty = $GLOO_SOCKET_IFNAME, else the address the "
          "host name resolves to");
ABSL_FLAG(int, dist_timeout_s, 1800,
          "Seconds a rank waits for the others (rendezvous, every all-reduce) before the job fails; covers the "
          "other ranks' data loading");
ABSL_FLAG(int64_t, graphs_per_step, tgraph::TrainOptions{}.graphs_per_step,
          "Graphs per optimisation step over all ranks, their losses averaged (0 = one per rank); the same value "
          "trains the same weights on any number of ranks");
ABSL_FLAG(std::string, measurements, "", "finetune: the measurement store's root (tgraph-server --measurement_store)");
ABSL_FLAG(std::string, kernel, "",
          "finetune of a tile collection: the kernel whose measurements join the prior (NAME@HASH, as the store "
          "names it; default: the store's only one)");
ABSL_FLAG(int64_t, steps, 200, "finetune: optimisation steps per fold");
ABSL_FLAG(double, finetune_lr, 1e-4,
          "finetune: AdamW learning rate, constant (a tenth of --lr's default: the parent's weights are a good start)");
ABSL_FLAG(double, holdout, 0.2, "finetune: share of each graph's measured configurations held out for validation");
ABSL_FLAG(std::string, parent, "",
          "finetune: while --collection has no version yet, start from this collection's latest version (a model of "
          "your own, --collection layout@tpu-v5e, from --parent layout:xla:random); it publishes as version 1");
ABSL_FLAG(int64_t, min_heldout_configs, 30,
          "finetune: publish only with at least this many held-out configurations over all measured graphs "
          "(fewer: nothing is trained or published, and it says so)");
ABSL_FLAG(double, base_fraction, 0.5, "finetune: share of steps on --data's train split, when --data is given");

using tgraph::Fail;
using tgraph::UsageError;

namespace {

bool Quick() { return absl::GetFlag(FLAGS_profile) == "quick"; }
int KeepFolds() { return absl::GetFlag(FLAGS_keep_folds) > 0 ? absl::GetFlag(FLAGS_keep_folds) : (Quick() ? 2 : 4); }

// --loss; nullopt when it is not set (each command's default applies).
absl::StatusOr<std::optional<tgraph::RankingLoss>> LossFlag() {
  if (absl::GetFlag(FLAGS_loss).empty()) return std::optional<tgraph::RankingLoss>();
  const std::optional<tgraph::RankingLoss> loss = tgraph::ParseRankingLoss(absl::GetFlag(FLAGS_loss));
  if (!loss) return UsageError(absl::StrCat("--loss must be ", tgraph::kRankingLossNames, ", not '", absl::GetFlag(FLAGS_loss), "'"));
  return loss;
}

int Finetune() {
  tgraph::FinetuneOptions f;
  f.registry = absl::GetFlag(FLAGS_registry);
  f.collection = absl::GetFlag(FLAGS_collection);
  f.measurements = absl::GetFlag(FLAGS_measurements);
  f.base_data = absl::GetFlag(FLAGS_data);
  f.base_fraction = absl::GetFlag(FLAGS_base_fraction);
  f.work_dir = absl::GetFlag(FLAGS_run_dir);
  if (absl::GetFlag(FLAGS_config_memory_mb) < 0) return Fail(UsageError("--config_memory_mb must be >= 0"));
  f.config_memory_bytes = absl::GetFlag(FLAGS_config_memory_mb) << 20;
  f.steps = absl::GetFlag(FLAGS_steps);
  f.lr = absl::GetFlag(FLAGS_finetune_lr);
  f.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  absl::StatusOr<std::optional<tgraph::RankingLoss>> loss = LossFlag();
  if (!loss.ok()) return Fail(loss.status());
  f.loss = *loss;
  if (absl::GetFlag(FLAGS_batch_configs) > 0) f.batch_configs = absl::GetFlag(FLAGS_batch_configs);
  f.holdout = absl::GetFlag(FLAGS_holdout);
  f.min_heldout_configs = absl::GetFlag(FLAGS_min_heldout_configs);
  f.parent = absl::GetFlag(FLAGS_parent);
  f.kernel = absl::GetFlag(FLAGS_kernel);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.progress = absl::GetFlag(FLAGS_progress);
  if (f.registry.empty() || f.measurements.empty() || f.collection.empty())
    return Fail(UsageError("finetune needs --registry, --collection, --measurements and --run_dir"));
  torch::set_num_threads(tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads)));
  absl::StatusOr<tgraph::FinetuneResult> r = tgraph::Finetune(f);
  if (!r.ok()) return Fail(r.status());
  for (const std::string& s : r->skipped_shards) std::fprintf(stderr, "warning: measurement shard left out: %s\n", s.c_str());
  if (!r->skipped_shards.empty())
    std::fprintf(stderr, "warning: %zu measurement shards left out (the others were used)\n", r->skipped_shards.size());
  if (!r->trained) {  // the evidence gate
    std::printf("%s: %lld held-out configurations of %lld graphs; %s\n", f.collection.c_str(),
                static_cast<long long>(r->heldout_configs), static_cast<long long>(r->graphs), r->not_published.c_str());
    return tgraph::kExitOk;
  }
  std::printf("%s: held-out tau %.4f (%sversion %lld) -> %.4f on %lld held-out configurations of %lld graphs; %s\n",
              f.collection.c_str(), r->parent_score,
              r->parent_collection == f.collection ? "" : (r->parent_collection + " ").c_str(),
              static_cast<long long>(r->parent_version), r->child_score,
              static_cast<long long>(r->heldout_configs), static_cast<long long>(r->graphs),
              r->published_version > 0 ? absl::StrCat("published as version ", r->published_version).c_str()
                                       : r->not_published.c_str());
  return tgraph::kExitOk;
}

// retire or restore, and what servers serve afterwards: the newest listed version that
// loads (server/model_manager.h).
int RetireOrRestore(const std::string& command) {
  const std::string collection = absl::GetFlag(FLAGS_collection);
  const int64_t version = absl::GetFlag(FLAGS_version);
  if (absl::GetFlag(FLAGS_registry).empty() || collection.empty() || version < 1)
    return Fail(UsageError(absl::StrCat(command, " needs --registry, --collection and --version (>= 1)")));
  const tgraph::Registry registry(absl::GetFlag(FLAGS_registry));
  const absl::Status s = command == "retire" ? registry.Retire(collection, version, absl::GetFlag(FLAGS_reason))
                                             : registry.Restore(collection, version);
  if (!s.ok()) return Fail(s);
  std::string serving = "their last loaded version (no other version is listed)", skipped;
  const std::vector<int64_t> listed = registry.ListVersions(collection);
  for (auto v = listed.rbegin(); v != listed.rend(); ++v) {
    absl::Status loads = tgraph::LoadModel(registry, collection, *v).status();
    if (loads.ok()) {
      serving = absl::StrCat("version ", *v);
      break;
    }
    absl::StrAppend(&skipped, skipped.empty() ? "" : "; ", "version ", *v, " does not load: ", loads.message());
  }
  std::printf("%s %s version %lld; servers now serve %s%s\n", command == "retire" ? "retired" : "restored",
              collection.c_str(), static_cast<long long>(version), serving.c_str(),
              skipped.empty() ? "" : absl::StrCat(" (", skipped, ")").c_str());
  return tgraph::kExitOk;
}

// Publishes the run's best folds; `what` names them in the line printed.
int Publish(const std::string& what) {
  bool existed = false;
  absl::StatusOr<int64_t> v =
      tgraph::PublishRun(absl::GetFlag(FLAGS_run_dir), tgraph::Registry(absl::GetFlag(FLAGS_registry)), KeepFolds(),
                         absl::GetFlag(FLAGS_require_folds), &existed, absl::GetFlag(FLAGS_tile_network_share));
  if (!v.ok()) return Fail(v.status());
  std::printf("%s %s as version %lld in %s\n", existed ? "already published" : "published", what.c_str(),
              static_cast<long long>(*v), absl::GetFlag(FLAGS_registry).c_str());
  absl::StatusOr<tgraph::Manifest> m =
      tgraph::RunManifest(absl::GetFlag(FLAGS_run_dir), KeepFolds(), absl::GetFlag(FLAGS_tile_network_share));
  if (m.ok() && m->tile_prior)
    std::printf("its scores: %s\n", m->tile_prior->Summary().c_str());
  return tgraph::kExitOk;
}

// The flags a run records in its manifest (what tgraph-train was asked for).
std::map<std::string, std::string> RecordedFlags(const tgraph::TrainOptions& o, const std::string& select_by) {
  std::map<std::string, std::string> flags = {
      {"profile", absl::GetFlag(FLAGS_profile)}, {"epochs", absl::StrCat(o.epochs)},
      {"folds", absl::StrCat(o.num_folds)}, {"train_folds", absl::StrCat(o.train_folds)},
      {"keep_folds", absl::StrCat(o.keep_folds)}, {"batch_configs", absl::StrCat(o.batch_configs)},
      {"lr", absl::StrCat(o.lr)}, {"weight_decay", absl::StrCat(o.weight_decay)}, {"seed", absl::StrCat(o.seed)},
      {"query_share", absl::StrCat(o.query_share)}, {"loss", tgraph::RankingLossName(o.loss)},
      {"select_by", select_by}, {"select_from", absl::StrCat(o.select_from)}};
  if (o.collection.kind == tgraph::CollectionKind::kTile) {
    flags["tile_prior_weight"] = absl::StrCat(o.tile_prior_weight);
    flags["tile_prior_bandwidth"] = o.tile_prior_bandwidth.ToString();
    flags["tile_prior_training"] = o.tile_prior_training ? "true" : "false";
    flags["tile_prior_near_end"] = o.tile_prior_near_end ? "true" : "false";
  }
  if (o.fold_by != tgraph::FoldBy::kGraph) flags["fold_by"] = tgraph::FoldByName(o.fold_by);
  if (!o.also.empty()) flags["also_collections"] = absl::StrJoin(absl::GetFlag(FLAGS_also_collections), ",");
  return flags;
}

absl::StatusOr<tgraph::TrainOptions> TrainOptionsFromFlags() {
  const bool quick = Quick();
  tgraph::TrainOptions o;
  o.data_root = absl::GetFlag(FLAGS_data);
  if (o.data_root.empty()) return UsageError("--data is required");
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(absl::GetFlag(FLAGS_collection));
  if (!c.ok()) return UsageError(absl::StrCat("--collection: ", c.status().message()));
  o.collection = *c;
  for (const std::string& name : absl::GetFlag(FLAGS_also_collections)) {
    absl::StatusOr<tgraph::Collection> a = tgraph::ParseCollection(name);
    if (!a.ok()) return UsageError(absl::StrCat("--also_collections: ", a.status().message()));
    o.also.push_back(*a);
  }
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  absl::StatusOr<tgraph::Architecture> arch = tgraph::ParseArchitecture(absl::GetFlag(FLAGS_architecture));
  if (!arch.ok()) return UsageError(absl::StrCat("--architecture: ", arch.status().message()));
  o.spec.architecture = *arch;
  absl::StatusOr<tgraph::CrossAttentionForm> form =
      tgraph::ParseCrossAttentionForm(absl::GetFlag(FLAGS_cross_attention_form));
  if (!form.ok()) return UsageError(absl::StrCat("--", form.status().message()));
  o.spec.cross_attention_form = *form;
  o.spec.kind = c->kind;
  o.spec.hidden = absl::GetFlag(FLAGS_hidden) > 0 ? absl::GetFlag(FLAGS_hidden) : (quick ? 64 : 256);
  o.spec.blocks = absl::GetFlag(FLAGS_blocks);
  o.spec.tile_head_layers = absl::GetFlag(FLAGS_tile_head_layers);
  o.spec.self_attention = absl::GetFlag(FLAGS_self_attention);
  o.spec.cross_attention = absl::GetFlag(FLAGS_cross_attention);
  o.spec.edges = absl::GetFlag(FLAGS_edges);
  o.num_folds = absl::GetFlag(FLAGS_folds);
  o.train_folds = absl::GetFlag(FLAGS_train_folds) > 0 ? absl::GetFlag(FLAGS_train_folds) : (quick ? 2 : 5);
  o.keep_folds = KeepFolds();
  o.epochs = absl::GetFlag(FLAGS_epochs) > 0 ? absl::GetFlag(FLAGS_epochs)
                                             : (quick ? (c->kind == tgraph::CollectionKind::kTile ? 5 : 20) : 0);
  o.batch_configs = absl::GetFlag(FLAGS_batch_configs);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<tgraph::FoldBy> fold_by = tgraph::ParseFoldBy(absl::GetFlag(FLAGS_fold_by));
  if (!fold_by.ok()) return UsageError(std::string(fold_by.status().message()));
  o.fold_by = *fold_by;
  o.reference_configs = absl::GetFlag(FLAGS_reference_configs);
  if (o.reference_configs < 1 || o.reference_configs > tgraph::kMaxBatchSize)
    return UsageError(absl::StrCat("--reference_configs must be in 1..", tgraph::kMaxBatchSize));
  o.query_share = absl::GetFlag(FLAGS_query_share);
  if (!(o.query_share >= 0 && o.query_share <= 0.9)) return UsageError("--query_share must be in 0..0.9");
  absl::StatusOr<std::optional<tgraph::RankingLoss>> loss = LossFlag();
  if (!loss.ok()) return loss.status();
  o.loss = loss->value_or(tgraph::RankingLoss::kPairwiseHinge);
  const std::string select_by = absl::GetFlag(FLAGS_select_by);
  if (select_by != "tau" && select_by != "neighbour_tau")
    return UsageError(absl::StrCat("--select_by must be tau or neighbour_tau, not '", select_by, "'"));
  o.select_by_neighbour_tau = select_by == "neighbour_tau";
  o.select_from = absl::GetFlag(FLAGS_select_from);
  if (!(o.select_from >= 0 && o.select_from <= 1)) return UsageError("--select_from must be in 0..1");
  o.tile_prior_weight = absl::GetFlag(FLAGS_tile_prior_weight);
  if (!(o.tile_prior_weight >= 0 && o.tile_prior_weight <= 100))
    return UsageError("--tile_prior_weight must be in 0..100");
  o.tile_prior_training = absl::GetFlag(FLAGS_tile_prior_training);
  o.tile_prior_near_end = absl::GetFlag(FLAGS_tile_prior_near_end);
  absl::StatusOr<tgraph::ShapeBandwidth> bandwidth =
      tgraph::ParseShapeBandwidth(absl::GetFlag(FLAGS_tile_prior_bandwidth), "--tile_prior_bandwidth");
  if (!bandwidth.ok()) return UsageError(std::string(bandwidth.status().message()));
  o.tile_prior_bandwidth = *bandwidth;
  o.valid_every = absl::GetFlag(FLAGS_valid_every);
  o.valid_configs = absl::GetFlag(FLAGS_valid_configs);
  if (o.valid_configs < 0) return UsageError("--valid_configs must be >= 0");
  if (absl::GetFlag(FLAGS_config_memory_mb) < 0) return UsageError("--config_memory_mb must be >= 0");
  o.config_memory_bytes = absl::GetFlag(FLAGS_config_memory_mb) << 20;
  o.spill_dir = absl::GetFlag(FLAGS_spill_dir);
  o.graphs_per_step = absl::GetFlag(FLAGS_graphs_per_step);
  if (o.graphs_per_step < 0) return UsageError("--graphs_per_step must be >= 0");
  o.progress = absl::GetFlag(FLAGS_progress);
  o.flags = RecordedFlags(o, select_by);
  return o;
}

// The ranks of data-parallel training: the environment's (torch.distributed's env://
// variables), overridden by the flags given.
absl::StatusOr<tgraph::DistributedOptions> DistributedFromFlags() {
  absl::StatusOr<tgraph::DistributedOptions> d = tgraph::DistributedOptionsFromEnv({});
  if (!d.ok()) return UsageError(d.status().message());
  if (absl::GetFlag(FLAGS_world_size) > 0) d->world_size = absl::GetFlag(FLAGS_world_size);
  if (absl::GetFlag(FLAGS_rank) >= 0) d->rank = absl::GetFlag(FLAGS_rank);
  if (!absl::GetFlag(FLAGS_master_addr).empty()) d->master_addr = absl::GetFlag(FLAGS_master_addr);
  if (absl::GetFlag(FLAGS_master_port) > 0) d->master_port = absl::GetFlag(FLAGS_master_port);
  if (!absl::GetFlag(FLAGS_gloo_interface).empty()) d->interface = absl::GetFlag(FLAGS_gloo_interface);
  if (absl::GetFlag(FLAGS_dist_timeout_s) < 1) return UsageError("--dist_timeout_s must be >= 1");
  d->timeout = std::chrono::seconds(absl::GetFlag(FLAGS_dist_timeout_s));
  if (d->world_size == 1) d->rank = 0;  // alone: a RANK left in the environment means nothing
  if (d->world_size < 1 || d->rank < 0 || d->rank >= d->world_size)
    return UsageError(absl::StrCat("--rank ", d->rank, " is outside 0..", d->world_size - 1, " (--world_size ",
                                   d->world_size, ")"));
  return *d;
}

// Trains the folds (one with --fold, else 0..train_folds-1), then publishes them when
// --registry is set and every fold was trained here (rank 0 only, once every rank
// finished).
int Train() {
  absl::StatusOr<tgraph::TrainOptions> o = TrainOptionsFromFlags();
  if (!o.ok()) return Fail(o.status());
  absl::StatusOr<tgraph::DistributedOptions> dist = DistributedFromFlags();
  if (!dist.ok()) return Fail(dist.status());
  torch::set_num_threads(tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads)));
  std::fprintf(stderr, "tgraph-train: %s, %s hidden %lld, torch threads %d, OMP_WAIT_POLICY %s%s\n",
               o->collection.name().c_str(), tgraph::ArchitectureName(o->spec.architecture),
               static_cast<long long>(o->spec.hidden), torch::get_num_threads(), tgraph::OpenMpWaitPolicy().c_str(),
               dist->world_size > 1 ? absl::StrCat(", rank ", dist->rank, " of ", dist->world_size).c_str() : "");
  if (dist->rank > 0) o->progress = false;
  // Every rank prepares (loads the data, checks or writes run.json: written atomically,
  // the same by every rank) before the rendezvous, so that loading runs in parallel.
  absl::StatusOr<std::shared_ptr<const tgraph::RunData>> data = tgraph::PrepareRun(*o);
  if (!data.ok()) return Fail(data.status());
  std::unique_ptr<tgraph::Collective> collective;
  if (dist->world_size > 1) {
    absl::StatusOr<std::unique_ptr<tgraph::Collective>> c = tgraph::ConnectGloo(*dist);
    if (!c.ok()) return Fail(c.status());
    collective = std::move(*c);
    o->collective = collective.get();
  }
  std::vector<int> folds;
  if (absl::GetFlag(FLAGS_fold) >= 0) folds = {absl::GetFlag(FLAGS_fold)};
  else for (int k = 0; k < o->train_folds; ++k) folds.push_back(k);
  for (int k : folds) {
    absl::StatusOr<tgraph::FoldResult> r = tgraph::TrainFold(*o, k, *data);
    if (!r.ok()) return Fail(r.status());
    if (dist->rank > 0) {
      std::printf("fold %d: done (rank %d of %d; rank 0 writes the fold's files)\n", r->fold, dist->rank,
                  dist->world_size);
      continue;
    }
    std::printf("fold %d: best validation %s %.4f at step %lld, %.1f s, peak RSS %.0f MiB\n", r->fold,
                o->collection.kind == tgraph::CollectionKind::kTile ? "M_tile" : "tau", r->valid_score,
                static_cast<long long>(r->best_step), r->seconds, static_cast<double>(r->peak_rss_bytes) / (1 << 20));
    if (!r->share_scores.empty()) {
      std::string shares;
      for (const auto& [share, score] : r->share_scores) absl::StrAppend(&shares, shares.empty() ? "" : ", ", share, ": ", absl::StrFormat("%.4f", score));
      std::printf("fold %d: validation with the network's scores at each share beside the prior: %s\n", r->fold, shares.c_str());
    }
  }
  if (absl::GetFlag(FLAGS_registry).empty() || absl::GetFlag(FLAGS_fold) >= 0 || dist->rank > 0)
    return tgraph::kExitOk;
  return Publish(o->collection.name());
}

}  // namespace

int main(int argc, char** argv) {
  tgraph::ReexecWithPassiveOpenMpWait(argv);  // see model/tools/cli.h
  const std::vector<char*> args = tgraph::ParseToolCommandLine(
      argc, argv,
      "K-fold training of TGraph and publishing to the model registry.\n"
      "  tgraph-train --data ROOT --collection C --run_dir RUN [--registry REG] [--fold K] [--profile quick]\n"
      "               [--world_size N --rank R --master_addr HOST --master_port P]   (data-parallel, c10d/Gloo)\n"
      "  tgraph-train publish --run_dir RUN --registry REG [--keep_folds N] [--require_folds N] [--tile_network_share S]\n"
      "  tgraph-train finetune --registry REG --collection C --measurements STORE --run_dir WORK [--data BASE]\n"
      "                        [--steps 200] [--finetune_lr 1e-4] [--holdout 0.2] [--min_heldout_configs 30]\n"
      "                        [--parent layout:xla:random]   (a new model of your own: --collection layout@NAME)\n"
      "  tgraph-train finetune --registry REG --collection tile@NAME --measurements STORE --run_dir WORK\n"
      "                        [--kernel NAME@HASH]   (a tile model's prior joined by a kernel's measurements)\n"
      "  tgraph-train retire  --registry REG --collection C --version V [--reason TEXT]   (rollback)\n"
      "  tgraph-train restore --registry REG --collection C --version V");
  if (!Quick() && absl::GetFlag(FLAGS_profile) != "paper") return Fail(UsageError("--profile must be paper or quick"));
  const std::string command = args.size() > 1 ? args[1] : "";
  if (args.size() > 2 || (!command.empty() && command != "publish" && command != "retire" && command != "restore" &&
                           command != "finetune"))
    return Fail(UsageError(absl::StrCat("unknown command '", args.back(),
                                        "'; expected publish, retire, restore or finetune (or none, to train)")));
  if (command == "finetune") return Finetune();
  if (command == "retire" || command == "restore") return RetireOrRestore(command);
  if (absl::GetFlag(FLAGS_run_dir).empty()) return Fail(UsageError("--run_dir is required"));
  if (command == "publish") {
    if (absl::GetFlag(FLAGS_registry).empty()) return Fail(UsageError("publish needs --registry"));
    return Publish(absl::GetFlag(FLAGS_run_dir));
  }
  return Train();
}
