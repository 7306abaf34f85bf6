#include "model/train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/features.h"
#include "model/file_util.h"
#include "model/loss.h"
#include "model/metrics.h"
#include "model/model_io.h"
#include "model/rng.h"
#include "model/scoring.h"
#include "model/tgraph_net.h"
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

int64_t DefaultBatch(const Collection& c) { return c.search == "default" ? 64 : 128; }

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
  int valid_tta = 10;
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
  r.valid_tta = j.value("valid_tta", 10);
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
  p.info.valid_tta = o.valid_tta;
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
  j["valid_tta"] = r.valid_tta;
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
    std::vector<int8_t> storage;
    const ScoreResult r = ScoreConfigs({{&net, nullptr}}, p.tensors[i], RowsOf(g, &storage), so);
    scores.push_back(g.tile_feat.empty() ? KendallTau(r.score, g.target) : TileScore(r.score, g.target));
  }
  net.train();
  return FiniteMean(scores);
}

// The TTA passes one network needs on the validation graphs (FoldResult::tta_passes).
int MeasureTtaPasses(RankingNet& net, const Prepared& p, const std::vector<size_t>& graphs, ScoringOptions so) {
  net.eval();
  so.tta_agreement = 0;  // every pass, to compare each count with all of them
  int needed = 0;
  for (size_t i : graphs) {
    const GraphData& g = p.graphs[i];
    if (g.num_configs() <= so.batch_size) continue;  // one batch: TTA changes nothing
    std::vector<int8_t> storage;
    std::vector<std::vector<double>> means;
    so.pass_means = &means;
    ScoreConfigs({{&net, nullptr}}, p.tensors[i], RowsOf(g, &storage), so);
    needed = std::max(needed, PassesForAgreement(means, 0.999));
  }
  net.train();
  return needed;
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

absl::StatusOr<FoldResult> TrainFold(const TrainOptions& o, int fold) {
  if (fold < 0 || fold >= o.num_folds)
    return absl::InvalidArgumentError(absl::StrCat("fold ", fold, " is outside 0..", o.num_folds - 1));
  absl::StatusOr<Prepared> loaded = LoadPrepared(o);
  if (!loaded.ok()) return loaded.status();
  Prepared& p = *loaded;
  absl::StatusOr<RunInfo> info = ReadRunInfo(o.run_dir);
  if (!info.ok()) return info.status();
  if (info->fingerprint != p.info.fingerprint)
    return absl::FailedPreconditionError(absl::StrCat(o.run_dir, "/run.json was prepared on other data"));
  p.info.stats = info->stats;  // exactly the stored statistics
  p.tensors.clear();
  for (const GraphData& g : p.graphs) p.tensors.push_back(MakeGraphTensors(g.graph, g.config_nodes, p.info.stats));

  std::vector<size_t> train, valid;
  for (size_t i = 0; i < p.graphs.size(); ++i) (info->fold_of.at(p.graphs[i].name) == fold ? valid : train).push_back(i);
  if (train.empty() || valid.empty())
    return absl::FailedPreconditionError(absl::StrCat("fold ", fold, " has ", train.size(), " training and ",
                                                      valid.size(), " validation graphs; use fewer --folds"));

  const std::string dir = FoldDir(o.run_dir, fold);
  std::error_code ec;
  fs::create_directories(dir, ec);
  const double epochs = o.epochs > 0 ? o.epochs : DefaultEpochs(o.collection);
  const int64_t steps_per_epoch = static_cast<int64_t>(train.size());
  const int64_t total = std::max<int64_t>(1, std::llround(epochs * static_cast<double>(steps_per_epoch)));
  const int64_t batch = o.batch_configs > 0 ? o.batch_configs : DefaultBatch(o.collection);
  const int64_t valid_interval = std::max<int64_t>(1, o.valid_every * steps_per_epoch);

  torch::manual_seed(o.seed * 1000 + static_cast<uint64_t>(fold));
  std::shared_ptr<RankingNet> net = MakeRankingNet(info->spec);
  net->train();
  std::unique_ptr<torch::optim::AdamW> optimizer = MakeOptimizer(*net, o.lr, o.weight_decay);
  torch::optim::AdamW& opt = *optimizer;

  // Resume from the last checkpoint, if any.
  int64_t step = 0, best_step = -1;
  double best = -std::numeric_limits<double>::infinity(), seconds_before = 0;
  const std::string state_path = dir + "/state.json";
  if (fs::exists(state_path)) {
    absl::StatusOr<std::string> text = ReadFile(state_path);
    if (!text.ok()) return text.status();
    json s = json::parse(*text, nullptr, false);
    if (s.is_discarded()) return absl::DataLossError(absl::StrCat(state_path, ": not valid JSON"));
    step = s.value("step", int64_t{0});
    best = s.value("best", best);
    best_step = s.value("best_step", int64_t{-1});
    seconds_before = s.value("seconds", 0.0);
    if (absl::Status st = LoadWeights(*net, dir + "/" + s.value("weights", "")); !st.ok()) return st;
    try {
      torch::serialize::InputArchive in;
      in.load_from(dir + "/" + s.value("optimizer", ""));
      opt.load(in);
    } catch (const c10::Error& e) {
      return absl::DataLossError(absl::StrCat(dir, ": optimizer checkpoint unreadable: ", e.what_without_backtrace()));
    }
    if (o.progress) std::fprintf(stderr, "fold %d: resuming at step %lld of %lld\n", fold, static_cast<long long>(step), static_cast<long long>(total));
  }

  ScoringOptions so;
  so.batch_size = o.valid_batch;
  so.tta = o.valid_tta;
  FILE* log = std::fopen((dir + "/log.jsonl").c_str(), "a");
  if (!log) return absl::InternalError(absl::StrCat(dir, "/log.jsonl: cannot open"));
  const bool tty = isatty(fileno(stderr));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const int64_t start_step = step;
  double loss_sum = 0;
  int64_t loss_count = 0;
  int last_report = -1;

  auto result = [&](bool completed) {
    FoldResult r;
    r.fold = fold;
    r.valid_score = best;
    r.best_step = best_step;
    r.seconds = seconds_before + elapsed();
    r.peak_rss_bytes = PeakRssBytes();
    r.completed = completed;
    return r;
  };
  std::vector<size_t> order;
  int64_t order_epoch = -1;
  while (step < total) {
    if (o.stop_after_steps > 0 && step - start_step >= o.stop_after_steps) {
      std::fclose(log);
      return result(false);
    }
    const int64_t epoch = step / steps_per_epoch;
    if (epoch != order_epoch) {  // the epoch's graph order is a function of (seed, fold, epoch)
      order = train;
      Rng rng(o.seed ^ (static_cast<uint64_t>(fold) << 32) ^ static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ULL);
      rng.Shuffle(order);
      order_epoch = epoch;
    }
    const size_t gi = order[static_cast<size_t>(step % steps_per_epoch)];
    const GraphData& g = p.graphs[gi];
    Rng rng(o.seed * 7919 + static_cast<uint64_t>(fold) * 104729 + static_cast<uint64_t>(step));
    const std::vector<int64_t> rows = SampleRows(g, batch, rng);
    const double lr = LearningRate(o, step, total);
    loss_sum += TrainStep(*net, opt, p.tensors[gi], g, rows, lr, o.clip_norm);
    ++loss_count;
    ++step;

    if (step % valid_interval == 0 || step == total) {
      const double score = Validate(*net, p, valid, so);
      if (std::isfinite(score) && score > best) {
        best = score;
        best_step = step;
        if (absl::Status s = SaveWeights(*net, dir + "/best.npz"); !s.ok()) return s;
      }
      // Checkpoint: new files first, then the state that names them, then cleanup.
      const std::string weights = absl::StrCat("ckpt_", step, ".npz"), optim = absl::StrCat("ckpt_", step, ".opt");
      if (absl::Status s = SaveWeights(*net, dir + "/" + weights); !s.ok()) return s;
      try {
        torch::serialize::OutputArchive out;
        opt.save(out);
        out.save_to(dir + "/" + optim);
      } catch (const c10::Error& e) {
        return absl::InternalError(absl::StrCat(dir, ": cannot save optimizer state: ", e.what_without_backtrace()));
      }
      json state = {{"step", step}, {"best", best}, {"best_step", best_step}, {"weights", weights},
                    {"optimizer", optim}, {"seconds", seconds_before + elapsed()}};
      if (absl::Status s = WriteFileAtomic(state_path, state.dump()); !s.ok()) return s;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("ckpt_", 0) == 0 && name != weights && name != optim) fs::remove(e.path(), ec);
      }
      const double mean_loss = loss_count ? loss_sum / static_cast<double>(loss_count) : 0.0;
      json line = {{"fold", fold}, {"epoch", static_cast<double>(step) / static_cast<double>(steps_per_epoch)},
                   {"step", step}, {"loss", mean_loss}, {"valid_score", std::isfinite(score) ? json(score) : json()},
                   {"best", std::isfinite(best) ? json(best) : json()}, {"lr", lr}, {"elapsed_s", seconds_before + elapsed()}};
      std::fprintf(log, "%s\n", line.dump().c_str());
      std::fflush(log);
      if (o.progress) {
        const double frac = static_cast<double>(step) / static_cast<double>(total);
        const double eta = elapsed() / std::max<double>(1, static_cast<double>(step - start_step)) *
                           static_cast<double>(total - step);
        const int width = 24, filled = static_cast<int>(frac * width);
        const std::string bar = std::string(filled, '=') + (filled < width ? ">" : "") +
                                std::string(std::max(0, width - filled - 1), ' ');
        const int pct = static_cast<int>(frac * 100);
        if (tty || pct / 10 != last_report || step == total) {
          std::fprintf(stderr, "%sfold %d epoch %.1f/%.1f [%s] loss %.4f valid %.4f best %.4f ETA %s%s", tty ? "\r" : "",
                       fold, static_cast<double>(step) / static_cast<double>(steps_per_epoch), epochs, bar.c_str(),
                       mean_loss, score, best, Duration(eta).c_str(), tty && step < total ? "" : "\n");
          std::fflush(stderr);
          last_report = pct / 10;
        }
      }
      loss_sum = 0;
      loss_count = 0;
    }
  }
  std::fclose(log);
  FoldResult r = result(true);
  if (!fs::exists(dir + "/best.npz")) {  // no finite validation score ever: keep the last weights
    if (absl::Status s = SaveWeights(*net, dir + "/best.npz"); !s.ok()) return s;
  }
  // How many TTA passes the published weights need (the manifest's tta).
  if (absl::Status s = LoadWeights(*net, dir + "/best.npz"); !s.ok()) return s;
  r.tta_passes = MeasureTtaPasses(*net, p, valid, so);
  json summary = {{"fold", fold}, {"valid_score", std::isfinite(best) ? json(best) : json()}, {"best_step", best_step},
                 {"steps", total}, {"seconds", r.seconds}, {"peak_rss_bytes", r.peak_rss_bytes},
                 {"tta_passes", r.tta_passes}, {"weights", "best.npz"}};
  if (absl::Status s = WriteFileAtomic(dir + "/result.json", summary.dump(1)); !s.ok()) return s;
  return r;
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
    r.tta_passes = j.value("tta_passes", 0);
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
  m.tta = info->valid_tta;
  int measured = 0;
  bool all_measured = true;
  for (const FoldResult& r : *results) {
    if (static_cast<int>(m.folds.size()) >= keep) break;
    m.folds.push_back({r.fold, r.valid_score, absl::StrCat("fold_", r.fold, "/best.npz"), ""});
    measured = std::max(measured, r.tta_passes);
    all_measured &= r.tta_passes > 0;
  }
  if (all_measured && measured > 0) m.tta = std::min(measured, info->valid_tta);
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
