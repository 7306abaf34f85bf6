#include "model/train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/rank_metrics.h"
#include "model/core/rng.h"
#include "model/tile/tile_space.h"
#include "model/nn/features.h"
#include "model/nn/loss.h"
#include "model/nn/model_io.h"
#include "model/nn/scoring.h"
#include "model/nn/tgraph_net.h"
#include "model/train/progress.h"
#include "model/train/run_dir.h"
#include "model/train/train_data.h"
#include "model/train/tile_step.h"
#include "model/train/train_step.h"

namespace tgraph {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double DefaultEpochs(const Collection& c) {
  if (c.kind == CollectionKind::kTile) return 17.5;
  return c.source == "nlp" ? 1000 : 750;
}

}  // namespace

// The run's graphs as loaded (configurations in memory or spilled) and the facts
// computed from them (run.json's, before it is written or compared).
struct RunData {
  RunInfo info;
  std::vector<GraphData> graphs;
};

namespace {

absl::StatusOr<std::shared_ptr<RunData>> LoadRunData(const TrainOptions& o) {
  auto data = std::make_shared<RunData>();
  RunData& p = *data;
  LoadOptions lo;
  if (o.progress)
    lo.progress = [](size_t done, size_t total, const std::string& name) {
      if (done == total || done % 50 == 0)
        std::fprintf(stderr, "loading graphs: %zu/%zu (%s)\n", done, total, name.c_str());
    };
  lo.config_memory_bytes = o.config_memory_bytes;
  absl::StatusOr<std::shared_ptr<ConfigSpill>> spill = ConfigSpill::Create(o.spill_dir.empty() ? o.run_dir : o.spill_dir);
  if (!spill.ok()) return spill.status();
  lo.spill = *spill;
  absl::StatusOr<std::vector<GraphData>> graphs = LoadCollectionData(o.data_root, o.collection, {"train", "valid"}, lo);
  if (!graphs.ok()) return graphs.status();
  p.graphs = std::move(*graphs);
  for (const Collection& a : o.also) {
    if (lo.config_memory_bytes >= 0) {  // one budget for every collection's configurations
      for (const GraphData& g : p.graphs)
        if (!g.spill) lo.config_memory_bytes -= static_cast<int64_t>(g.configs.bytes());
      lo.config_memory_bytes = std::max<int64_t>(0, lo.config_memory_bytes);
    }
    absl::StatusOr<std::vector<GraphData>> more = LoadCollectionData(o.data_root, a, {"train", "valid"}, lo);
    if (!more.ok()) return more.status();
    for (GraphData& g : *more) {
      g.name += "@" + a.search;
      p.graphs.push_back(std::move(g));
    }
  }
  std::sort(p.graphs.begin(), p.graphs.end(), [](const GraphData& a, const GraphData& b) { return a.name < b.name; });
  if (o.progress && o.collection.kind == CollectionKind::kLayout) {
    int64_t in_memory = 0, spilled = 0;
    for (const GraphData& g : p.graphs) (g.spill ? spilled : in_memory) += 1;
    std::fprintf(stderr, "configurations: %lld graphs' in memory, %lld graphs' (%.1f MiB) in a spill file in %s\n",
                 static_cast<long long>(in_memory), static_cast<long long>(spilled),
                 static_cast<double>((*spill)->bytes()) / (1 << 20), (*spill)->dir().c_str());
  }
  std::vector<const NodeGraph*> all;
  for (const GraphData& g : p.graphs) all.push_back(&g.graph);
  p.info.collection = o.collection.name();
  p.info.fingerprint = DataFingerprint(p.graphs);
  p.info.provenance = DataProvenance(o.data_root, p.graphs);
  if (absl::Status st = PrepareTileRun(o, &p.graphs, &p.info); !st.ok()) return st;
  p.info.spec = o.spec;
  p.info.spec.kind = o.collection.kind;
  p.info.stats = FeatureStats::Compute(all);
  p.info.num_folds = o.num_folds;
  p.info.flags = o.flags;
  p.info.valid_batch = o.valid_batch;
  p.info.reference_configs = o.reference_configs;
  p.info.reference_groups = ReferenceGroups(
      o.reference_configs, o.batch_configs > 0 ? o.batch_configs : DefaultTrainingBatch(o.collection));
  const absl::StatusOr<std::vector<int>> folds = AssignFolds(p.graphs, o.num_folds, o.seed, o.fold_by);
  if (!folds.ok()) return folds.status();
  for (size_t i = 0; i < p.graphs.size(); ++i) p.info.fold_of[p.graphs[i].name] = (*folds)[i];
  return data;
}

// Linear warm-up over the first fraction of steps, then one cosine cycle down to 0.
double LearningRate(const TrainOptions& o, int64_t step, int64_t total) {
  const double warm = std::max(1.0, o.warmup_fraction * static_cast<double>(total));
  if (step < warm) return o.lr * (static_cast<double>(step) + 1) / warm;
  const double t = (static_cast<double>(step) - warm) / std::max(1.0, static_cast<double>(total) - warm);
  return o.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}

// The configurations a validation graph is scored on: all, or a fixed sample of `limit`
// (a function of the graph's name), in row order.
std::vector<int64_t> ValidationRows(const GraphData& g, int64_t limit) {
  std::vector<int64_t> rows(static_cast<size_t>(g.num_configs()));
  std::iota(rows.begin(), rows.end(), 0);
  if (limit <= 0 || g.num_configs() <= limit) return rows;
  uint64_t h = 1469598103934665603ULL;  // FNV-1a of the name
  for (unsigned char ch : g.name) h = (h ^ ch) * 1099511628211ULL;
  Rng rng(h);
  rng.Shuffle(rows);
  rows.resize(static_cast<size_t>(limit));
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Mean validation score of one network over the given graphs, each on its rows, once for
// each of `shares`: a tile graph trained against a prior is scored as share x the
// network's standardised scores plus the prior (TilePrior::network_share), any other
// graph by the network alone whatever the share. With a collective, rank r scores the
// graphs k = r (mod ranks) and the scores are gathered (by a sum over ranks of vectors
// that are zero elsewhere: exact), so every rank returns what one rank would.
std::vector<double> Validate(RankingNet& net, const std::vector<GraphData>& all, const std::vector<GraphTensors>& tensors,
                             const std::vector<size_t>& graphs, const std::vector<std::vector<int64_t>>& rows,
                             const ScoringOptions& so, Collective* collective, const std::vector<double>& shares) {
  const size_t rank = collective ? static_cast<size_t>(collective->rank()) : 0;
  const size_t ranks = collective ? static_cast<size_t>(collective->world_size()) : 1;
  const size_t n = graphs.size();
  net.eval();
  std::vector<double> scores(n * shares.size(), 0.0);  // [share][graph]
  for (size_t k = rank; k < n; k += ranks) {
    const GraphData& g = all[graphs[k]];
    RowStorage storage;
    const ScoreResult r = ScoreConfigs({{&net, nullptr}}, tensors[graphs[k]], SelectRows(g, rows[k], &storage), so);
    std::vector<double> target;
    for (int64_t row : rows[k]) target.push_back(g.target[row]);
    for (size_t s = 0; s < shares.size(); ++s) {
      std::vector<double> score = r.score;
      if (!g.prior_offset.empty())
        for (size_t i = 0; i < rows[k].size(); ++i) score[i] = shares[s] * score[i] + g.prior_offset[rows[k][i]];
      scores[s * n + k] = g.tile_feat.empty() ? KendallTau(score, target) : TileScore(score, target);
    }
  }
  net.train();
  if (collective) {
    torch::Tensor t = torch::from_blob(scores.data(), {static_cast<int64_t>(scores.size())}, torch::kFloat64).clone();
    collective->AllReduceSum(t);
    std::copy_n(t.data_ptr<double>(), scores.size(), scores.begin());
  }
  std::vector<double> means;
  for (size_t s = 0; s < shares.size(); ++s)
    means.push_back(FiniteMean(std::vector<double>(scores.begin() + s * n, scores.begin() + (s + 1) * n)));
  return means;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const RunData>> PrepareRun(const TrainOptions& o) {
  if (absl::Status s = o.spec.Validate(); !s.ok()) return s;
  if (o.num_folds < 2) return absl::InvalidArgumentError("--folds must be at least 2");
  if (o.train_folds < 1 || o.train_folds > o.num_folds)
    return absl::InvalidArgumentError("--train_folds must be in 1..--folds");
  for (size_t i = 0; i < o.also.size(); ++i) {
    const Collection& a = o.also[i];
    const bool layout = o.collection.kind == CollectionKind::kLayout && !o.collection.named();
    if (!layout || a.kind != CollectionKind::kLayout || a.named() || a.source != o.collection.source)
      return absl::InvalidArgumentError(absl::StrCat(
          "--also_collections: ", a.name(), " is not another search of ", o.collection.name(),
          "'s graphs (expected a layout collection of the same source, e.g. layout:", o.collection.source.empty() ? "xla" : o.collection.source,
          ":default beside layout:", o.collection.source.empty() ? "xla" : o.collection.source, ":random)"));
    if (a.search == o.collection.search)
      return absl::InvalidArgumentError(absl::StrCat("--also_collections: ", a.name(), " is --collection itself"));
    for (size_t k = 0; k < i; ++k)
      if (o.also[k].search == a.search)
        return absl::InvalidArgumentError(absl::StrCat("--also_collections: ", a.name(), " is named twice"));
  }
  if (o.select_by_neighbour_tau && !IsNeighbourhood(o.collection) &&
      std::none_of(o.also.begin(), o.also.end(), [](const Collection& a) { return IsNeighbourhood(a); }))
    return absl::InvalidArgumentError(absl::StrCat(
        "--select_by neighbour_tau: no neighbourhood collection to validate on; add --also_collections layout:",
        o.collection.source.empty() ? "xla" : o.collection.source, ":near-default,layout:",
        o.collection.source.empty() ? "xla" : o.collection.source, ":near-best (tgraph-synth writes them)"));
  if (!(o.select_from >= 0 && o.select_from <= 1))
    return absl::InvalidArgumentError(absl::StrCat("--select_from must be in 0..1, not ", o.select_from));
  std::error_code ec;
  fs::create_directories(o.run_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(o.run_dir, ": cannot create: ", ec.message()));
  absl::StatusOr<std::shared_ptr<RunData>> p = LoadRunData(o);
  if (!p.ok()) return p.status();
  const std::string path = o.run_dir + "/run.json";
  if (fs::exists(path)) {
    absl::StatusOr<RunInfo> existing = ReadRunInfo(o.run_dir);
    if (!existing.ok()) return existing.status();
    if (existing->fingerprint != (*p)->info.fingerprint || existing->collection != (*p)->info.collection ||
        existing->spec.ToJson() != (*p)->info.spec.ToJson() || existing->num_folds != (*p)->info.num_folds ||
        existing->fold_of != (*p)->info.fold_of)
      return absl::FailedPreconditionError(absl::StrCat(
          path, " describes another run (data, collection, architecture or folds differ); use a new --run_dir"));
    return std::shared_ptr<const RunData>(std::move(*p));
  }
  if (absl::Status s = WriteRunInfo(o.run_dir, (*p)->info); !s.ok()) return s;
  return std::shared_ptr<const RunData>(std::move(*p));
}

namespace {

// The data of a fold's process: the run's graphs, their tensors built with the
// statistics run.json stores (exactly, not recomputed), and the fold's split.
struct FoldData {
  std::shared_ptr<const RunData> p;
  std::vector<GraphTensors> tensors;  // one per graph of p
  RunInfo info;
  std::vector<size_t> train, valid;  // indices into p->graphs
  std::vector<std::vector<int64_t>> valid_rows;  // per valid graph: its rows validated
};

// Whether a graph of the run comes from a neighbourhood collection: `collection` itself,
// or one of `also` (its graphs are named NAME@SEARCH).
bool IsNeighbourhoodGraph(const TrainOptions& o, const std::string& name) {
  const size_t at = name.rfind('@');
  if (at == std::string::npos) return IsNeighbourhood(o.collection);
  const std::string search = name.substr(at + 1);
  return std::any_of(o.also.begin(), o.also.end(),
                     [&](const Collection& a) { return a.search == search && IsNeighbourhood(a); });
}

absl::StatusOr<FoldData> LoadFoldData(const TrainOptions& o, int fold, std::shared_ptr<const RunData> loaded) {
  if (fold < 0 || fold >= o.num_folds)
    return absl::InvalidArgumentError(absl::StrCat("fold ", fold, " is outside 0..", o.num_folds - 1));
  if (!loaded) {
    absl::StatusOr<std::shared_ptr<RunData>> fresh = LoadRunData(o);
    if (!fresh.ok()) return fresh.status();
    loaded = std::move(*fresh);
  }
  absl::StatusOr<RunInfo> info = ReadRunInfo(o.run_dir);
  if (!info.ok()) return info.status();
  FoldData d;
  d.p = std::move(loaded);
  d.info = std::move(*info);
  if (d.info.fingerprint != d.p->info.fingerprint)
    return absl::FailedPreconditionError(absl::StrCat(o.run_dir, "/run.json was prepared on other data"));
  for (const GraphData& g : d.p->graphs) d.tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, d.info.stats));
  for (size_t i = 0; i < d.p->graphs.size(); ++i)
    (d.info.fold_of.at(d.p->graphs[i].name) == fold ? d.valid : d.train).push_back(i);
  if (o.select_by_neighbour_tau)  // the neighbourhoods alone choose the best weights
    d.valid.erase(std::remove_if(d.valid.begin(), d.valid.end(),
                                 [&](size_t i) { return !IsNeighbourhoodGraph(o, d.p->graphs[i].name); }),
                  d.valid.end());
  if (d.train.empty() || d.valid.empty())
    return absl::FailedPreconditionError(absl::StrCat("fold ", fold, " has ", d.train.size(), " training and ",
                                                      d.valid.size(), " validation graphs",
                                                      o.select_by_neighbour_tau ? " of a neighbourhood collection" : "",
                                                      "; use fewer --folds"));
  for (size_t i : d.valid) d.valid_rows.push_back(ValidationRows(d.p->graphs[i], o.valid_configs));
  return d;
}

// How long a fold trains, in steps (graphs_per_step graphs each; the last of an epoch
// may have fewer).
struct FoldSchedule {
  double epochs = 0;
  int64_t graphs_per_step = 1, train_graphs = 0;
  int64_t steps_per_epoch = 0, total = 0, batch = 0, valid_interval = 0;
};

int64_t GraphsPerStep(const TrainOptions& o) {
  if (o.graphs_per_step > 0) return o.graphs_per_step;
  return o.collective ? o.collective->world_size() : 1;
}

FoldSchedule ScheduleOf(const TrainOptions& o, size_t train_graphs) {
  FoldSchedule s;
  s.epochs = o.epochs > 0 ? o.epochs : DefaultEpochs(o.collection);
  s.graphs_per_step = GraphsPerStep(o);
  s.train_graphs = static_cast<int64_t>(train_graphs);
  s.steps_per_epoch = (s.train_graphs + s.graphs_per_step - 1) / s.graphs_per_step;
  s.total = std::max<int64_t>(1, std::llround(s.epochs * static_cast<double>(s.steps_per_epoch)));
  s.batch = o.batch_configs > 0 ? o.batch_configs : DefaultTrainingBatch(o.collection);
  s.valid_interval = std::max<int64_t>(1, o.valid_every * s.steps_per_epoch);
  return s;
}

// The graphs of one step that a rank trains on (indices into the run's graphs, with
// their configuration rows), and how many the step has over all ranks.
struct StepDraw {
  std::vector<std::pair<size_t, std::vector<int64_t>>> mine;
  int64_t total = 0;
};

// The graphs and configuration rows of each step, a function of (seed, fold, step,
// graphs per step) alone, so that a resumed fold draws what an uninterrupted one would
// have drawn, and N ranks draw between them what one rank draws.
class BatchSampler {
 public:
  BatchSampler(const TrainOptions& o, int fold, const std::vector<size_t>& train, const FoldSchedule& s)
      : seed_(o.seed), fold_(static_cast<uint64_t>(fold)), train_(train), schedule_(s) {}

  // Step `step`'s graphs j = rank, rank + ranks, ... of its graphs_per_step.
  StepDraw Draw(int64_t step, const std::vector<GraphData>& graphs, int rank, int ranks) {
    const int64_t epoch = step / schedule_.steps_per_epoch;
    if (epoch != order_epoch_) {  // the epoch's graph order is a function of (seed, fold, epoch)
      order_ = train_;
      Rng rng(seed_ ^ (fold_ << 32) ^ static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ULL);
      rng.Shuffle(order_);
      order_epoch_ = epoch;
    }
    const int64_t g = schedule_.graphs_per_step;
    const int64_t first = (step % schedule_.steps_per_epoch) * g;
    StepDraw d;
    d.total = std::min(g, schedule_.train_graphs - first);
    for (int64_t j = rank; j < d.total; j += ranks) {
      const size_t gi = order_[static_cast<size_t>(first + j)];
      Rng rng(seed_ * 7919 + fold_ * 104729 + static_cast<uint64_t>(step * g + j));
      d.mine.emplace_back(gi, SampleRows(graphs[gi], schedule_.batch, rng));
    }
    return d;
  }

 private:
  uint64_t seed_, fold_;
  const std::vector<size_t>& train_;
  FoldSchedule schedule_;
  std::vector<size_t> order_;
  int64_t order_epoch_ = -1;
};

// With ranks: every rank resumes at rank 0's step and from rank 0's weights, or the fold
// fails (the ranks do not share the run directory).
absl::Status AgreeOnStart(Collective& c, RankingNet& net, const FoldState& st, const std::string& dir) {
  torch::Tensor step = torch::tensor({static_cast<double>(st.step)}, torch::kFloat64);
  c.Broadcast(step);
  if (step.item<double>() != static_cast<double>(st.step))
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": rank ", c.rank(), " resumes at step ", st.step, " but rank 0 at step ",
        static_cast<int64_t>(step.item<double>()), "; every rank must see rank 0's --run_dir (shared storage)"));
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : net.parameters()) {
    torch::Tensor t = p.detach().clone();
    c.Broadcast(t);
    p.copy_(t);
  }
  return absl::OkStatus();
}

// Validation scores as the published model will: against a reference of the run's
// size, in groups of a training batch.
ScoringOptions ValidationScoring(const TrainOptions& o) {
  ScoringOptions so;
  so.batch_size = o.valid_batch;
  so.reference_size = o.reference_configs;
  so.reference_groups = ReferenceGroups(o.reference_configs,
                                        o.batch_configs > 0 ? o.batch_configs : DefaultTrainingBatch(o.collection));
  return so;
}

// The network shares a fold validates: every one of kNetworkShares when the run trains
// against a tile prior, else the network alone. Validation's score is share 1's.
std::vector<double> ValidatedShares(const FoldData& d) {
  if (d.info.tile_prior && d.info.tile_prior->residual)
    return std::vector<double>(std::begin(kNetworkShares), std::end(kNetworkShares));
  return {1.0};
}

// The end of a fold: best.npz (the last weights when no validation score was ever
// finite), the mean validation score of each network share over the second half of the
// training (from log.jsonl) and result.json. The mean, not the best weights' score: those
// were chosen as the maximum of share 1's noisy scores over every validation, which the
// prior alone (share 0, the same at every step) never is, so comparing them would favour
// the network by the noise of a fold's few validation problems; the mean over the weights the
// choice draws from is what a chosen checkpoint adds on problems it was not chosen on.
absl::StatusOr<FoldResult> FinishFold(const std::string& dir, RankingNet& net, const FoldData& d, FoldResult r,
                                      int64_t total_steps) {
  if (!fs::exists(dir + "/best.npz"))
    if (absl::Status s = SaveWeights(net, dir + "/best.npz"); !s.ok()) return s;
  if (absl::Status s = LoadWeights(net, dir + "/best.npz"); !s.ok()) return s;
  if (ValidatedShares(d).size() > 1) {
    absl::StatusOr<std::map<double, double>> shares = MeanShareScores(dir + "/log.jsonl", total_steps / 2);
    if (!shares.ok()) return shares.status();
    r.share_scores = std::move(*shares);
  }
  if (absl::Status s = WriteFoldResult(dir, r, total_steps); !s.ok()) return s;
  return r;
}

// A fold's network, optimizer and state, from its seed or its checkpoint, agreed on by
// every rank; the log that rank 0 writes.
struct FoldStart {
  std::shared_ptr<RankingNet> net;
  std::unique_ptr<torch::optim::AdamW> opt;
  FoldState st;
  std::optional<FoldLog> log;
};

absl::StatusOr<FoldStart> StartFold(const TrainOptions& o, int fold, const FoldData& d, const FoldSchedule& schedule,
                                    const std::string& dir, bool writer) {
  FoldStart f;
  torch::manual_seed(o.seed * 1000 + static_cast<uint64_t>(fold));
  f.net = MakeRankingNet(d.info.spec);
  f.net->train();
  f.opt = MakeOptimizer(*f.net, o.lr, o.weight_decay);
  absl::StatusOr<FoldState> resumed = LoadCheckpoint(dir, *f.net, *f.opt);
  if (!resumed.ok()) return resumed.status();
  f.st = *resumed;
  if (f.st.step > 0 && f.st.graphs_per_step != schedule.graphs_per_step)
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": the checkpoint was trained with --graphs_per_step ", f.st.graphs_per_step, ", not ",
        schedule.graphs_per_step, "; resume with the same (on any number of ranks) or use a new --run_dir"));
  f.st.graphs_per_step = schedule.graphs_per_step;
  if (o.collective)
    if (absl::Status s = AgreeOnStart(*o.collective, *f.net, f.st, dir); !s.ok()) return s;
  if (o.progress && writer && f.st.step > 0)
    std::fprintf(stderr, "fold %d: resuming at step %lld of %lld\n", fold, static_cast<long long>(f.st.step),
                 static_cast<long long>(schedule.total));
  if (writer) {
    absl::StatusOr<FoldLog> opened = FoldLog::Open(dir + "/log.jsonl");
    if (!opened.ok()) return opened.status();
    f.log.emplace(std::move(*opened));
  }
  return f;
}

// Since the last validation: the loss, and where the time went (log.jsonl).
struct Interval {
  double loss_sum = 0, step_seconds = 0, allreduce_seconds = 0;
  int64_t steps = 0;
};

using StepClock = std::chrono::steady_clock;
double SecondsSince(StepClock::time_point t) { return std::chrono::duration<double>(StepClock::now() - t).count(); }

// One step: this rank's graphs of the draw, the gradients summed over the ranks, one
// update at `lr`; its loss and time added to `since`.
void TrainStep(const TrainOptions& o, const FoldData& d, const StepDraw& draw, double lr, RankingNet& net,
               torch::optim::AdamW& opt, Interval* since) {
  const auto step_start = StepClock::now();
  const double weight = 1.0 / static_cast<double>(draw.total);
  opt.zero_grad();
  double loss = 0;
  for (const auto& [gi, rows] : draw.mine)
    loss += AccumulateGradients(net, d.tensors[gi], d.p->graphs[gi], rows, weight, o.query_share, o.loss);
  if (o.collective) {
    const auto t = StepClock::now();
    loss = SumGradients(net, *o.collective, loss);
    since->allreduce_seconds += SecondsSince(t);
  }
  ApplyGradients(net, opt, lr, o.clip_norm);
  since->loss_sum += loss * weight;
  since->step_seconds += SecondsSince(step_start);
  ++since->steps;
}

// After a validation, on rank 0: the best weights, a checkpoint and the log's line.
absl::Status RecordValidation(const std::string& dir, int fold, const FoldSchedule& schedule, FoldStart& f,
                              bool better, const std::map<double, double>& share_scores, double lr,
                              const Interval& done, double valid_seconds, double elapsed, int world) {
  const double score = share_scores.rbegin()->second;  // share 1: the network as trained
  if (better)
    if (absl::Status s = SaveWeights(*f.net, dir + "/best.npz"); !s.ok()) return s;
  if (absl::Status s = SaveCheckpoint(dir, *f.net, *f.opt, f.st, elapsed); !s.ok()) return s;
  const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(1, done.steps));
  json line = {{"fold", fold},
               {"epoch", static_cast<double>(f.st.step) / static_cast<double>(schedule.steps_per_epoch)},
               {"step", f.st.step},
               {"loss", done.loss_sum * per_step},
               {"valid_score", std::isfinite(score) ? json(score) : json()},
               {"best", std::isfinite(f.st.best) ? json(f.st.best) : json()},
               {"lr", lr},
               {"elapsed_s", elapsed},
               {"step_s", done.step_seconds * per_step},
               {"allreduce_s", done.allreduce_seconds * per_step},
               {"valid_s", valid_seconds},
               {"ranks", world}};
  if (share_scores.size() > 1) line["network_shares"] = NetworkSharesJson(share_scores);
  f.log->Write(line);
  return absl::OkStatus();
}

absl::StatusOr<FoldResult> TrainFoldSteps(const TrainOptions& o, int fold, std::shared_ptr<const RunData> loaded) {
  absl::StatusOr<FoldData> data = LoadFoldData(o, fold, std::move(loaded));
  if (!data.ok()) return data.status();
  const FoldData& d = *data;
  const FoldSchedule schedule = ScheduleOf(o, d.train.size());
  const std::string dir = FoldDir(o.run_dir, fold);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": create directory"));
  const int rank = o.collective ? o.collective->rank() : 0, world = o.collective ? o.collective->world_size() : 1;
  const bool writer = rank == 0;  // rank 0 alone writes the fold's files and progress
  absl::StatusOr<FoldStart> started = StartFold(o, fold, d, schedule, dir, writer);
  if (!started.ok()) return started.status();
  FoldStart& f = *started;
  FoldState& st = f.st;

  const ScoringOptions so = ValidationScoring(o);
  const std::vector<double> shares = ValidatedShares(d);
  BatchSampler sampler(o, fold, d.train, schedule);
  FoldProgress progress(fold, schedule.total, schedule.steps_per_epoch, schedule.epochs, st.step);
  const auto start = StepClock::now();
  auto result = [&](bool completed) {
    FoldResult r;
    r.fold = fold;
    r.valid_score = st.best;
    r.best_step = st.best_step;
    r.seconds = st.seconds_before + SecondsSince(start);
    r.peak_rss_bytes = PeakRssBytes();
    r.completed = completed;
    return r;
  };
  const int64_t start_step = st.step;
  Interval since;
  while (st.step < schedule.total) {
    if (o.stop_after_steps > 0 && st.step - start_step >= o.stop_after_steps) return result(false);
    const double lr = LearningRate(o, st.step, schedule.total);
    TrainStep(o, d, sampler.Draw(st.step, d.p->graphs, rank, world), lr, *f.net, *f.opt, &since);
    ++st.step;
    if (st.step % schedule.valid_interval != 0 && st.step != schedule.total) continue;

    // Validation, then the best weights, a checkpoint, the log and the progress line.
    const auto valid_start = StepClock::now();
    const std::vector<double> share_scores =
        Validate(*f.net, d.p->graphs, d.tensors, d.valid, d.valid_rows, so, o.collective, shares);
    const double score = share_scores.back();  // share 1: the network as trained
    const double valid_seconds = SecondsSince(valid_start);
    const bool eligible = static_cast<double>(st.step) >= o.select_from * static_cast<double>(schedule.total);
    const bool better = eligible && std::isfinite(score) && score > st.best;
    if (better) {
      st.best = score;
      st.best_step = st.step;
    }
    const Interval done = std::exchange(since, Interval{});
    if (!writer) continue;
    const double elapsed = st.seconds_before + SecondsSince(start);
    std::map<double, double> by_share;
    for (size_t k = 0; k < shares.size(); ++k) by_share[shares[k]] = share_scores[k];
    if (absl::Status s =
            RecordValidation(dir, fold, schedule, f, better, by_share, lr, done, valid_seconds, elapsed, world);
        !s.ok())
      return s;
    if (o.progress)
      progress.Report(st.step, SecondsSince(start), done.loss_sum / static_cast<double>(std::max<int64_t>(1, done.steps)),
                      score, st.best);
  }
  if (!writer) return result(true);
  return FinishFold(dir, *f.net, d, result(true), schedule.total);
}

}  // namespace

absl::StatusOr<FoldResult> TrainFold(const TrainOptions& o, int fold, std::shared_ptr<const RunData> data) {
  // LibTorch reports errors (a shape mismatch, an allocation that fails) by throwing:
  // they end here as a status naming the fold, never as a crashed process.
  try {
    return TrainFoldSteps(o, fold, std::move(data));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(o.run_dir, ": fold ", fold, ": LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(o.run_dir, ": fold ", fold, ": ", e.what()));
  }
}

}  // namespace tgraph
