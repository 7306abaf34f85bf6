#include "model/train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/nn/features.h"
#include "model/core/file_util.h"
#include "model/nn/loss.h"
#include "model/core/rank_metrics.h"
#include "model/nn/model_io.h"
#include "model/core/rng.h"
#include "model/nn/scoring.h"
#include "model/nn/tgraph_net.h"
#include "model/train/train_data.h"
#include "model/train/train_step.h"

namespace tgraph {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kRunFormat[] = "tgraph.run.v1";

double DefaultEpochs(const Collection& c) {
  if (c.kind == CollectionKind::kTile) return 17.5;
  return c.source == "nlp" ? 1000 : 750;
}


int64_t PeakRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

std::string FoldDir(const std::string& run_dir, int fold) { return absl::StrCat(run_dir, "/fold_", fold); }

// The run's fixed facts, as stored in run.json.
struct RunInfo {
  std::string collection;
  std::string fingerprint;
  ModelSpec spec;
  FeatureStats stats;
  int num_folds = 0;
  std::map<std::string, int> fold_of;  // graph name -> fold
  std::map<std::string, std::string> flags;
  int64_t valid_batch = 128;
  int64_t reference_configs = 256;
  int64_t reference_groups = 1;  // ReferenceGroups of the training batch
};

absl::StatusOr<RunInfo> ReadRunInfo(const std::string& run_dir) {
  const std::string path = run_dir + "/run.json";
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || j.value("format", "") != kRunFormat)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a tgraph run description"));
  RunInfo r;
  r.collection = j.value("collection", "");
  r.fingerprint = j.value("data_fingerprint", "");
  r.num_folds = j.value("num_folds", 0);
  r.valid_batch = j.value("valid_batch", int64_t{128});
  r.reference_configs = j.value("reference_configs", int64_t{256});
  r.reference_groups = j.value("reference_groups", int64_t{1});
  absl::StatusOr<ModelSpec> spec = ModelSpec::FromJson(j["spec"].dump(), path + ": spec");
  if (!spec.ok()) return spec.status();
  r.spec = *spec;
  absl::StatusOr<FeatureStats> stats = FeatureStats::FromJson(j["feature_stats"].dump(), path + ": feature_stats");
  if (!stats.ok()) return stats.status();
  r.stats = *stats;
  for (auto& [k, v] : j["fold_of"].items()) r.fold_of[k] = v.get<int>();
  for (auto& [k, v] : j["flags"].items()) r.flags[k] = v.get<std::string>();
  return r;
}

struct Prepared {
  RunInfo info;
  std::vector<GraphData> graphs;
  std::vector<GraphTensors> tensors;
};

absl::StatusOr<Prepared> LoadPrepared(const TrainOptions& o) {
  Prepared p;
  LoadOptions lo;
  if (o.progress)
    lo.progress = [](size_t done, size_t total, const std::string& name) {
      if (done == total || done % 50 == 0)
        std::fprintf(stderr, "loading graphs: %zu/%zu (%s)\n", done, total, name.c_str());
    };
  absl::StatusOr<std::vector<GraphData>> graphs = LoadCollectionData(o.data_root, o.collection, {"train", "valid"}, lo);
  if (!graphs.ok()) return graphs.status();
  p.graphs = std::move(*graphs);
  std::vector<const NodeGraph*> all;
  for (const GraphData& g : p.graphs) all.push_back(&g.graph);
  p.info.collection = o.collection.name();
  p.info.fingerprint = DataFingerprint(p.graphs);
  p.info.spec = o.spec;
  p.info.spec.kind = o.collection.kind;
  p.info.stats = FeatureStats::Compute(all);
  p.info.num_folds = o.num_folds;
  p.info.flags = o.flags;
  p.info.valid_batch = o.valid_batch;
  p.info.reference_configs = o.reference_configs;
  p.info.reference_groups = ReferenceGroups(
      o.reference_configs, o.batch_configs > 0 ? o.batch_configs : DefaultTrainingBatch(o.collection));
  const std::vector<int> folds = AssignFolds(p.graphs, o.num_folds, o.seed);
  for (size_t i = 0; i < p.graphs.size(); ++i) p.info.fold_of[p.graphs[i].name] = folds[i];
  for (const GraphData& g : p.graphs) p.tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, p.info.stats));
  return p;
}

std::string RunInfoJson(const RunInfo& r) {
  json j;
  j["format"] = kRunFormat;
  j["collection"] = r.collection;
  j["data_fingerprint"] = r.fingerprint;
  j["num_folds"] = r.num_folds;
  j["spec"] = json::parse(r.spec.ToJson());
  j["feature_stats"] = json::parse(r.stats.ToJson());
  j["fold_of"] = r.fold_of;
  j["flags"] = r.flags;
  j["valid_batch"] = r.valid_batch;
  j["reference_configs"] = r.reference_configs;
  j["reference_groups"] = r.reference_groups;
  return j.dump(1);
}

// Linear warm-up over the first fraction of steps, then one cosine cycle down to 0.
double LearningRate(const TrainOptions& o, int64_t step, int64_t total) {
  const double warm = std::max(1.0, o.warmup_fraction * static_cast<double>(total));
  if (step < warm) return o.lr * (static_cast<double>(step) + 1) / warm;
  const double t = (static_cast<double>(step) - warm) / std::max(1.0, static_cast<double>(total) - warm);
  return o.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}

// Mean validation score of one network over the given graphs.
double Validate(RankingNet& net, const Prepared& p, const std::vector<size_t>& graphs, const ScoringOptions& so) {
  net.eval();
  std::vector<double> scores;
  for (size_t i : graphs) {
    const GraphData& g = p.graphs[i];
    RowStorage storage;
    const ScoreResult r = ScoreConfigs({{&net, nullptr}}, p.tensors[i], RowsOf(g, &storage), so);
    scores.push_back(g.tile_feat.empty() ? KendallTau(r.score, g.target) : TileScore(r.score, g.target));
  }
  net.train();
  return FiniteMean(scores);
}

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(s);
  return t >= 3600 ? absl::StrFormat("%dh%02dm", t / 3600, (t / 60) % 60) : absl::StrFormat("%dm%02ds", t / 60, t % 60);
}

}  // namespace

absl::Status PrepareRun(const TrainOptions& o) {
  if (absl::Status s = o.spec.Validate(); !s.ok()) return s;
  if (o.num_folds < 2) return absl::InvalidArgumentError("--folds must be at least 2");
  if (o.train_folds < 1 || o.train_folds > o.num_folds)
    return absl::InvalidArgumentError("--train_folds must be in 1..--folds");
  std::error_code ec;
  fs::create_directories(o.run_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(o.run_dir, ": cannot create: ", ec.message()));
  absl::StatusOr<Prepared> p = LoadPrepared(o);
  if (!p.ok()) return p.status();
  const std::string path = o.run_dir + "/run.json";
  if (fs::exists(path)) {
    absl::StatusOr<RunInfo> existing = ReadRunInfo(o.run_dir);
    if (!existing.ok()) return existing.status();
    if (existing->fingerprint != p->info.fingerprint || existing->collection != p->info.collection ||
        existing->spec.ToJson() != p->info.spec.ToJson() || existing->num_folds != p->info.num_folds ||
        existing->fold_of != p->info.fold_of)
      return absl::FailedPreconditionError(absl::StrCat(
          path, " describes another run (data, collection, architecture or folds differ); use a new --run_dir"));
    return absl::OkStatus();
  }
  return WriteFileAtomic(path, RunInfoJson(p->info));
}

namespace {

// The data of a fold's process: the run's graphs as tensors built with the statistics
// run.json stores (exactly, not recomputed), and the fold's split.
struct FoldData {
  Prepared p;
  RunInfo info;
  std::vector<size_t> train, valid;  // indices into p.graphs
};

absl::StatusOr<FoldData> LoadFoldData(const TrainOptions& o, int fold) {
  if (fold < 0 || fold >= o.num_folds)
    return absl::InvalidArgumentError(absl::StrCat("fold ", fold, " is outside 0..", o.num_folds - 1));
  absl::StatusOr<Prepared> loaded = LoadPrepared(o);
  if (!loaded.ok()) return loaded.status();
  absl::StatusOr<RunInfo> info = ReadRunInfo(o.run_dir);
  if (!info.ok()) return info.status();
  FoldData d{std::move(*loaded), std::move(*info), {}, {}};
  if (d.info.fingerprint != d.p.info.fingerprint)
    return absl::FailedPreconditionError(absl::StrCat(o.run_dir, "/run.json was prepared on other data"));
  d.p.info.stats = d.info.stats;
  d.p.tensors.clear();
  for (const GraphData& g : d.p.graphs) d.p.tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, d.info.stats));
  for (size_t i = 0; i < d.p.graphs.size(); ++i)
    (d.info.fold_of.at(d.p.graphs[i].name) == fold ? d.valid : d.train).push_back(i);
  if (d.train.empty() || d.valid.empty())
    return absl::FailedPreconditionError(absl::StrCat("fold ", fold, " has ", d.train.size(), " training and ",
                                                      d.valid.size(), " validation graphs; use fewer --folds"));
  return d;
}

// How long a fold trains, in steps (one graph each).
struct FoldSchedule {
  double epochs = 0;
  int64_t steps_per_epoch = 0, total = 0, batch = 0, valid_interval = 0;
};

FoldSchedule ScheduleOf(const TrainOptions& o, size_t train_graphs) {
  FoldSchedule s;
  s.epochs = o.epochs > 0 ? o.epochs : DefaultEpochs(o.collection);
  s.steps_per_epoch = static_cast<int64_t>(train_graphs);
  s.total = std::max<int64_t>(1, std::llround(s.epochs * static_cast<double>(s.steps_per_epoch)));
  s.batch = o.batch_configs > 0 ? o.batch_configs : DefaultTrainingBatch(o.collection);
  s.valid_interval = std::max<int64_t>(1, o.valid_every * s.steps_per_epoch);
  return s;
}

// What a checkpoint holds besides the weights and the optimizer state.
struct FoldState {
  int64_t step = 0, best_step = -1;
  double best = -std::numeric_limits<double>::infinity();
  double seconds_before = 0;  // training time of earlier processes
};

// Resumes from <dir>/state.json when there is one: the state, the weights and the
// optimizer's moments. No checkpoint: the initial state.
absl::StatusOr<FoldState> LoadCheckpoint(const std::string& dir, RankingNet& net, torch::optim::AdamW& opt) {
  FoldState st;
  const std::string state_path = dir + "/state.json";
  if (!fs::exists(state_path)) return st;
  absl::StatusOr<std::string> text = ReadFile(state_path);
  if (!text.ok()) return text.status();
  json s = json::parse(*text, nullptr, false);
  if (s.is_discarded()) return absl::DataLossError(absl::StrCat(state_path, ": not valid JSON"));
  st.step = s.value("step", int64_t{0});
  st.best = s.value("best", st.best);
  st.best_step = s.value("best_step", int64_t{-1});
  st.seconds_before = s.value("seconds", 0.0);
  if (absl::Status w = LoadWeights(net, dir + "/" + s.value("weights", "")); !w.ok()) return w;
  try {
    torch::serialize::InputArchive in;
    in.load_from(dir + "/" + s.value("optimizer", ""));
    opt.load(in);
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat(dir, ": optimizer checkpoint unreadable: ", e.what_without_backtrace()));
  }
  return st;
}

// New files first, then the state that names them, then the older files: a process
// killed at any point resumes from a complete checkpoint.
absl::Status SaveCheckpoint(const std::string& dir, RankingNet& net, torch::optim::AdamW& opt, const FoldState& st,
                            double seconds) {
  const std::string weights = absl::StrCat("ckpt_", st.step, ".npz"), optim = absl::StrCat("ckpt_", st.step, ".opt");
  if (absl::Status s = SaveWeights(net, dir + "/" + weights); !s.ok()) return s;
  try {
    torch::serialize::OutputArchive out;
    opt.save(out);
    out.save_to(dir + "/" + optim);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(dir, ": cannot save optimizer state: ", e.what_without_backtrace()));
  }
  const json state = {{"step", st.step},   {"best", st.best},      {"best_step", st.best_step},
                      {"weights", weights}, {"optimizer", optim}, {"seconds", seconds}};
  if (absl::Status s = WriteFileAtomic(dir + "/state.json", state.dump()); !s.ok()) return s;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt_", 0) == 0 && name != weights && name != optim) fs::remove(e.path(), ec);
  }
  return absl::OkStatus();
}

// The graph and configuration rows of each step, a function of (seed, fold, step)
// alone, so that a resumed fold draws what an uninterrupted one would have drawn.
class BatchSampler {
 public:
  BatchSampler(const TrainOptions& o, int fold, const std::vector<size_t>& train, const FoldSchedule& s)
      : seed_(o.seed), fold_(static_cast<uint64_t>(fold)), train_(train), schedule_(s) {}

  // The graph (an index into the run's graphs) and rows for `step`.
  std::pair<size_t, std::vector<int64_t>> Draw(int64_t step, const std::vector<GraphData>& graphs) {
    const int64_t epoch = step / schedule_.steps_per_epoch;
    if (epoch != order_epoch_) {  // the epoch's graph order is a function of (seed, fold, epoch)
      order_ = train_;
      Rng rng(seed_ ^ (fold_ << 32) ^ static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ULL);
      rng.Shuffle(order_);
      order_epoch_ = epoch;
    }
    const size_t gi = order_[static_cast<size_t>(step % schedule_.steps_per_epoch)];
    Rng rng(seed_ * 7919 + fold_ * 104729 + static_cast<uint64_t>(step));
    return {gi, SampleRows(graphs[gi], schedule_.batch, rng)};
  }

 private:
  uint64_t seed_, fold_;
  const std::vector<size_t>& train_;
  FoldSchedule schedule_;
  std::vector<size_t> order_;
  int64_t order_epoch_ = -1;
};

// <dir>/log.jsonl, appended to (a resumed fold continues it), closed when it goes.
class FoldLog {
 public:
  static absl::StatusOr<FoldLog> Open(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "a");
    if (!f) return ErrnoStatus(errno, absl::StrCat(path, ": open"));
    return FoldLog(f);
  }
  FoldLog(FoldLog&& other) noexcept : file_(std::exchange(other.file_, nullptr)) {}
  FoldLog(const FoldLog&) = delete;
  FoldLog& operator=(const FoldLog&) = delete;
  ~FoldLog() {
    if (file_) std::fclose(file_);
  }
  void Write(const json& line) {
    std::fprintf(file_, "%s\n", line.dump().c_str());
    std::fflush(file_);
  }

 private:
  explicit FoldLog(FILE* f) : file_(f) {}
  FILE* file_;
};

// The progress line on stderr: redrawn in place on a terminal, every 10% otherwise.
class FoldProgress {
 public:
  FoldProgress(int fold, const FoldSchedule& s, int64_t start_step)
      : fold_(fold), schedule_(s), start_step_(start_step), tty_(isatty(fileno(stderr))) {}

  void Report(int64_t step, double elapsed_s, double loss, double score, double best) {
    const double frac = static_cast<double>(step) / static_cast<double>(schedule_.total);
    const double eta = elapsed_s / std::max<double>(1, static_cast<double>(step - start_step_)) *
                       static_cast<double>(schedule_.total - step);
    const int width = 24, filled = static_cast<int>(frac * width);
    const std::string bar =
        std::string(filled, '=') + (filled < width ? ">" : "") + std::string(std::max(0, width - filled - 1), ' ');
    const int pct = static_cast<int>(frac * 100);
    if (!tty_ && pct / 10 == last_report_ && step != schedule_.total) return;
    std::fprintf(stderr, "%sfold %d epoch %.1f/%.1f [%s] loss %.4f valid %.4f best %.4f ETA %s%s", tty_ ? "\r" : "",
                 fold_, static_cast<double>(step) / static_cast<double>(schedule_.steps_per_epoch), schedule_.epochs,
                 bar.c_str(), loss, score, best, Duration(eta).c_str(), tty_ && step < schedule_.total ? "" : "\n");
    std::fflush(stderr);
    last_report_ = pct / 10;
  }

 private:
  int fold_;
  FoldSchedule schedule_;
  int64_t start_step_;
  bool tty_;
  int last_report_ = -1;
};

// The end of a fold: best.npz (the last weights when no validation score was ever
// finite) and result.json.
absl::StatusOr<FoldResult> FinishFold(const std::string& dir, RankingNet& net, const FoldData& d,
                                      const ScoringOptions& so, FoldResult r, int64_t total_steps) {
  if (!fs::exists(dir + "/best.npz"))
    if (absl::Status s = SaveWeights(net, dir + "/best.npz"); !s.ok()) return s;
  if (absl::Status s = LoadWeights(net, dir + "/best.npz"); !s.ok()) return s;
  const json summary = {{"fold", r.fold},
                        {"valid_score", std::isfinite(r.valid_score) ? json(r.valid_score) : json()},
                        {"best_step", r.best_step},
                        {"steps", total_steps},
                        {"seconds", r.seconds},
                        {"peak_rss_bytes", r.peak_rss_bytes},
                        {"weights", "best.npz"}};
  if (absl::Status s = WriteFileAtomic(dir + "/result.json", summary.dump(1)); !s.ok()) return s;
  return r;
}

absl::StatusOr<FoldResult> TrainFoldSteps(const TrainOptions& o, int fold) {
  absl::StatusOr<FoldData> data = LoadFoldData(o, fold);
  if (!data.ok()) return data.status();
  const FoldData& d = *data;
  const FoldSchedule schedule = ScheduleOf(o, d.train.size());
  const std::string dir = FoldDir(o.run_dir, fold);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": create directory"));

  // The network and optimizer, from the fold's seed or its checkpoint.
  torch::manual_seed(o.seed * 1000 + static_cast<uint64_t>(fold));
  std::shared_ptr<RankingNet> net = MakeRankingNet(d.info.spec);
  net->train();
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(*net, o.lr, o.weight_decay);
  absl::StatusOr<FoldState> resumed = LoadCheckpoint(dir, *net, *opt);
  if (!resumed.ok()) return resumed.status();
  FoldState st = *resumed;
  if (o.progress && st.step > 0)
    std::fprintf(stderr, "fold %d: resuming at step %lld of %lld\n", fold, static_cast<long long>(st.step),
                 static_cast<long long>(schedule.total));

  absl::StatusOr<FoldLog> log = FoldLog::Open(dir + "/log.jsonl");
  if (!log.ok()) return log.status();
  ScoringOptions so;
  so.batch_size = o.valid_batch;
  so.reference_size = o.reference_configs;
  so.reference_groups = ReferenceGroups(o.reference_configs,
                                        o.batch_configs > 0 ? o.batch_configs : DefaultTrainingBatch(o.collection));
  BatchSampler sampler(o, fold, d.train, schedule);
  FoldProgress progress(fold, schedule, st.step);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto result = [&](bool completed) {
    FoldResult r;
    r.fold = fold;
    r.valid_score = st.best;
    r.best_step = st.best_step;
    r.seconds = st.seconds_before + elapsed();
    r.peak_rss_bytes = PeakRssBytes();
    r.completed = completed;
    return r;
  };

  const int64_t start_step = st.step;
  double loss_sum = 0;
  int64_t loss_count = 0;
  while (st.step < schedule.total) {
    if (o.stop_after_steps > 0 && st.step - start_step >= o.stop_after_steps) return result(false);
    // One step.
    const auto [gi, rows] = sampler.Draw(st.step, d.p.graphs);
    const double lr = LearningRate(o, st.step, schedule.total);
    loss_sum += TrainStep(*net, *opt, d.p.tensors[gi], d.p.graphs[gi], rows, lr, o.clip_norm, o.query_share);
    ++loss_count;
    ++st.step;
    if (st.step % schedule.valid_interval != 0 && st.step != schedule.total) continue;

    // Validation, the best weights, a checkpoint, the log and the progress line.
    const double score = Validate(*net, d.p, d.valid, so);
    if (std::isfinite(score) && score > st.best) {
      st.best = score;
      st.best_step = st.step;
      if (absl::Status s = SaveWeights(*net, dir + "/best.npz"); !s.ok()) return s;
    }
    if (absl::Status s = SaveCheckpoint(dir, *net, *opt, st, st.seconds_before + elapsed()); !s.ok()) return s;
    const double mean_loss = loss_count ? loss_sum / static_cast<double>(loss_count) : 0.0;
    log->Write({{"fold", fold},
                {"epoch", static_cast<double>(st.step) / static_cast<double>(schedule.steps_per_epoch)},
                {"step", st.step},
                {"loss", mean_loss},
                {"valid_score", std::isfinite(score) ? json(score) : json()},
                {"best", std::isfinite(st.best) ? json(st.best) : json()},
                {"lr", lr},
                {"elapsed_s", st.seconds_before + elapsed()}});
    if (o.progress) progress.Report(st.step, elapsed(), mean_loss, score, st.best);
    loss_sum = 0;
    loss_count = 0;
  }
  return FinishFold(dir, *net, d, so, result(true), schedule.total);
}

}  // namespace

absl::StatusOr<FoldResult> TrainFold(const TrainOptions& o, int fold) {
  // LibTorch reports errors (a shape mismatch, an allocation that fails) by throwing:
  // they end here as a status naming the fold, never as a crashed process.
  try {
    return TrainFoldSteps(o, fold);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(o.run_dir, ": fold ", fold, ": LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(o.run_dir, ": fold ", fold, ": ", e.what()));
  }
}

absl::StatusOr<std::vector<FoldResult>> ReadFoldResults(const std::string& run_dir) {
  std::vector<FoldResult> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string path = e.path().string() + "/result.json";
    if (e.path().filename().string().rfind("fold_", 0) != 0 || !fs::exists(path)) continue;
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": not valid JSON"));
    FoldResult r;
    r.fold = j.value("fold", -1);
    r.valid_score = j["valid_score"].is_number() ? j["valid_score"].get<double>() : -1e300;
    r.best_step = j.value("best_step", int64_t{-1});
    r.seconds = j.value("seconds", 0.0);
    r.peak_rss_bytes = j.value("peak_rss_bytes", int64_t{0});
    out.push_back(r);
  }
  if (ec) return absl::NotFoundError(absl::StrCat(run_dir, ": cannot list: ", ec.message()));
  std::sort(out.begin(), out.end(), [](const FoldResult& a, const FoldResult& b) {
    return a.valid_score != b.valid_score ? a.valid_score > b.valid_score : a.fold < b.fold;
  });
  return out;
}

absl::StatusOr<Manifest> RunManifest(const std::string& run_dir, int keep) {
  absl::StatusOr<RunInfo> info = ReadRunInfo(run_dir);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::vector<FoldResult>> results = ReadFoldResults(run_dir);
  if (!results.ok()) return results.status();
  if (results->empty()) return absl::FailedPreconditionError(absl::StrCat(run_dir, ": no fold has finished training"));
  Manifest m;
  m.collection = info->collection;
  m.spec = info->spec;
  m.stats = info->stats;
  m.data_fingerprint = info->fingerprint;
  m.training = info->flags;
  m.batch_size = info->valid_batch;
  m.reference_configs = info->reference_configs;
  m.reference_groups = info->reference_groups;
  for (const FoldResult& r : *results) {
    if (static_cast<int>(m.folds.size()) >= keep) break;
    m.folds.push_back({r.fold, r.valid_score, absl::StrCat("fold_", r.fold, "/best.npz"), ""});
  }
  return m;
}

absl::StatusOr<int64_t> PublishRun(const std::string& run_dir, const Registry& registry, int keep,
                                   int require_folds, bool* already_published) {
  if (require_folds > 0) {
    absl::StatusOr<std::vector<FoldResult>> done = ReadFoldResults(run_dir);
    if (!done.ok()) return done.status();
    if (static_cast<int>(done->size()) < require_folds) {
      std::vector<int> folds;
      for (const FoldResult& r : *done) folds.push_back(r.fold);
      std::sort(folds.begin(), folds.end());
      return absl::FailedPreconditionError(absl::StrCat(run_dir, ": ", done->size(), " of the ", require_folds,
                                                        " required folds have finished training (done: ",
                                                        folds.empty() ? "none" : absl::StrJoin(folds, ", "),
                                                        "); nothing was published"));
    }
  }
  absl::StatusOr<Manifest> m = RunManifest(run_dir, keep);
  if (!m.ok()) return m.status();
  for (FoldEntry& f : m->folds) f.weights = absl::StrCat(run_dir, "/", f.weights);  // the source files
  return PublishLoadable(registry, *m, already_published);
}

}  // namespace tgraph
