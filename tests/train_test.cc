// LibTorch defines glog-style CHECK macros: use Catch's prefixed names here.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/rank_metrics.h"
#include "absl/strings/str_cat.h"
#include "model/hlo/tile_ingest.h"
#include "model/tile/tile_space.h"
#include "model/nn/model_io.h"
#include "model/synth/generator.h"
#include "model/train/evaluator.h"
#include "model/train/train_data.h"
#include "model/train/finetune.h"
#include "model/train/train_step.h"
#include "model/train/publish.h"
#include "model/train/trainer.h"
#include "model/store/measurement_store.h"
#include "tests/model_fixtures.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

// The ci preset's nlp collections (30 graphs, each searched at random and by the genetic
// search), generated once per test process and deleted when it exits (a static object,
// not a leaked one: ctest runs every test case in a process of its own, 14 MB each).
const std::string& NlpData() {
  static TempDir dir;
  static const bool generated = [] {
    synth::GenerateOptions o;
    o.out = dir.path();
    o.preset = "ci";
    o.seeds = {4};
    o.collections = {*ParseCollection("layout:nlp:random"), *ParseCollection("layout:nlp:default"),
                     *ParseCollection("layout:nlp:near-default"), *ParseCollection("layout:nlp:near-best")};
    if (absl::Status st = synth::Generate(o).status(); !st.ok()) {
      std::fprintf(stderr, "NlpData: tgraph-synth into %s: %s\n", dir.path().c_str(), std::string(st.message()).c_str());
      std::abort();
    }
    return true;
  }();
  (void)generated;
  return dir.path();
}

TrainOptions SmallRun(const std::string& run_dir) {
  TrainOptions o;
  o.data_root = NlpData();
  o.collection = *ParseCollection("layout:nlp:random");
  o.run_dir = run_dir;
  o.spec.hidden = 32;
  o.num_folds = 5;
  o.train_folds = 1;
  o.keep_folds = 1;
  o.epochs = 6;
  o.reference_configs = 100;
  o.progress = false;
  return o;
}

// A one-fold model of random weights (hidden 16) for `collection`, saved in `dir`: the
// evaluator's behaviour on hidden runtimes and file formats does not depend on training.
LoadedModel UntrainedModel(const std::string& collection, const std::string& dir, int64_t batch_size = 0, int tta = 0,
                           int folds = 1) {
  ModelSpec spec;
  spec.hidden = 16;
  spec.kind = ParseCollection(collection)->kind;
  Manifest m;
  m.collection = collection;
  m.spec = spec;
  if (batch_size > 0) m.batch_size = batch_size;
  if (tta > 0) m.tta = tta;
  for (int f = 0; f < folds; ++f) {
    torch::manual_seed(static_cast<uint64_t>(f) + 1);  // reproducible: LibTorch's own seed is not
    auto net = MakeRankingNet(spec);
    const std::string w = "w" + std::to_string(f) + ".npz";
    if (!SaveWeights(*net, dir + "/" + w).ok()) std::abort();
    m.folds.push_back({f, 0.5, w, ""});
  }
  return *LoadFolds(m, dir);
}

}  // namespace

CATCH_TEST_CASE("training data: dedup, pruning, compression and folds", "[train]") {
  auto data = LoadCollectionData(NlpData(), *ParseCollection("layout:nlp:random"), {"train", "valid"});
  CATCH_REQUIRE(data.ok());
  CATCH_CHECK(data->size() == 27u);  // train + valid; never test
  for (const GraphData& g : *data) {
    CATCH_CHECK(g.graph.num_nodes < g.original_nodes);  // pruned
    CATCH_CHECK(g.configs.num_configs == g.num_configs());
    CATCH_CHECK(g.split != "test");
  }
  const std::vector<int> folds = AssignFolds(*data, 5, 0);
  std::vector<int> sizes(5, 0);
  for (int f : folds) ++sizes[f];
  for (int s : sizes) CATCH_CHECK((s == 5 || s == 6));
  CATCH_CHECK(AssignFolds(*data, 5, 0) == folds);  // deterministic
  CATCH_CHECK(AssignFolds(*data, 5, 1) != folds);
  CATCH_CHECK(DataFingerprint(*data).size() == 64u);
}

CATCH_TEST_CASE("folds by size hold out every real H100 problem of one M, and by shape both dtypes of one shape",
                "[train]") {
  TempDir dir;
  hlo::TileIngestOptions o;
  const std::string tiles = std::string(TGRAPH_REAL_DATA) + "/gpu-tiles";
  o.csv = tiles + "/triton_gemm_h100.csv";
  o.hlo_dir = tiles + "/hlo";
  o.out_root = dir.path();
  CATCH_REQUIRE(hlo::IngestTileMeasurements(o).ok());
  absl::StatusOr<std::vector<GraphData>> data =
      LoadCollectionData(dir.path(), *ParseCollection("tile@h100-triton"), {"train", "valid"});
  CATCH_REQUIRE(data.ok());
  CATCH_REQUIRE(data->size() == 60u);
  // Four folds of the four values of M (128, 512, 2048, 8192): one M each.
  absl::StatusOr<std::vector<int>> by_m = AssignFolds(*data, 4, 0, FoldBy::kM);
  CATCH_REQUIRE(by_m.ok());
  std::map<int, std::set<int64_t>> ms;
  std::map<std::string, std::set<int>> shape_folds;
  for (size_t i = 0; i < data->size(); ++i) {
    const GemmProblem p = *GemmProblemOfGraph((*data)[i].graph, (*data)[i].name);
    ms[(*by_m)[i]].insert(p.m);
  }
  CATCH_CHECK(ms.size() == 4u);
  for (const auto& [fold, values] : ms) CATCH_CHECK(values.size() == 1u);
  absl::StatusOr<std::vector<int>> by_shape = AssignFolds(*data, 4, 0, FoldBy::kShape);
  CATCH_REQUIRE(by_shape.ok());
  for (size_t i = 0; i < data->size(); ++i) {
    const GemmProblem p = *GemmProblemOfGraph((*data)[i].graph, (*data)[i].name);
    shape_folds[absl::StrCat(p.m, "x", p.n, "x", p.k)].insert((*by_shape)[i]);
  }
  CATCH_CHECK(shape_folds.size() == 30u);
  for (const auto& [shape, folds] : shape_folds) CATCH_CHECK(folds.size() == 1u);
  CATCH_CHECK(*AssignFolds(*data, 4, 0, FoldBy::kGraph) == AssignFolds(*data, 4, 0));
  CATCH_CHECK(*ParseFoldBy("k") == FoldBy::kK);
  CATCH_CHECK_THAT(std::string(ParseFoldBy("dtype").status().message()),
                   Catch::Contains("--fold_by 'dtype': expected graph, m, n, k"));
  // A layout collection has no problem sizes to group.
  absl::StatusOr<std::vector<GraphData>> layout =
      LoadCollectionData(NlpData(), *ParseCollection("layout:nlp:random"), {"train"});
  CATCH_REQUIRE(layout.ok());
  const absl::Status refused = AssignFolds(*layout, 5, 0, FoldBy::kM).status();
  CATCH_CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(refused.message()), Catch::Contains("--fold_by m groups Triton matrix-product problems"));
}

CATCH_TEST_CASE("configurations past the memory budget are read back from an unnamed spill file, row for row",
                "[train]") {
  TempDir dir;
  const Collection c = *ParseCollection("layout:nlp:random");
  auto all = LoadCollectionData(NlpData(), c, {"train", "valid"});
  CATCH_REQUIRE(all.ok());
  LoadOptions lo;
  lo.spill = *ConfigSpill::Create(dir.path());
  lo.config_memory_bytes = static_cast<int64_t>((*all)[0].configs.bytes() + (*all)[1].configs.bytes());
  auto split = LoadCollectionData(NlpData(), c, {"train", "valid"}, lo);
  CATCH_REQUIRE(split.ok());
  CATCH_REQUIRE(split->size() == all->size());
  int64_t kept = 0, spilled_bytes = 0;
  for (size_t i = 0; i < all->size(); ++i) {
    const GraphData &a = (*all)[i], &b = (*split)[i];
    CATCH_CHECK_FALSE(a.spill);
    if (b.spill) {
      CATCH_CHECK(b.configs.codes.empty());
      spilled_bytes += static_cast<int64_t>(a.configs.bytes());
    } else {
      kept += static_cast<int64_t>(b.configs.bytes());
    }
    std::vector<int64_t> rows = {b.num_configs() - 1, 0, b.num_configs() / 2, 0};
    CATCH_CHECK(a.LayoutRows(rows) == b.LayoutRows(rows));
  }
  CATCH_CHECK(kept <= lo.config_memory_bytes);
  CATCH_CHECK(spilled_bytes > 0);
  CATCH_CHECK(lo.spill->bytes() == spilled_bytes);
  CATCH_CHECK(DataFingerprint(*split) == DataFingerprint(*all));
  // The file has no name: nothing is left in the directory.
  CATCH_CHECK(std::filesystem::is_empty(dir.path()));
  // A directory that does not exist is named in the error.
  absl::StatusOr<std::shared_ptr<ConfigSpill>> missing = ConfigSpill::Create(dir.path() + "/nope");
  CATCH_REQUIRE_FALSE(missing.ok());
  CATCH_CHECK(std::string(missing.status().message()).find(dir.path() + "/nope") != std::string::npos);
}

CATCH_TEST_CASE("a run with every configuration spilled to disk trains to the same weights as one in memory",
                "[train]") {
  TempDir dir;
  TrainOptions a = SmallRun(dir.path() + "/a");
  a.epochs = 1;
  TrainOptions b = a;
  b.run_dir = dir.path() + "/b";
  b.config_memory_bytes = 0;
  torch::set_num_threads(1);  // bitwise-reproducible arithmetic for the comparison
  CATCH_REQUIRE(PrepareRun(a).ok());
  CATCH_REQUIRE(TrainFold(a, 0).ok());
  CATCH_REQUIRE(PrepareRun(b).ok());
  CATCH_REQUIRE(TrainFold(b, 0).ok());
  CATCH_CHECK(*ReadFile(a.run_dir + "/fold_0/best.npz") == *ReadFile(b.run_dir + "/fold_0/best.npz"));
  torch::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

CATCH_TEST_CASE("a short training run ranks far better than a random ranker", "[train]") {
  TempDir dir;
  TrainOptions o = SmallRun(dir.path() + "/run");
  CATCH_REQUIRE(PrepareRun(o).ok());
  absl::StatusOr<FoldResult> r = TrainFold(o, 0);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->completed);
  // A random ranker on the same validation graphs scores tau about 0.
  auto m = RunManifest(o.run_dir, 1);
  CATCH_REQUIRE(m.ok());
  {  // Its provenance: the synthetic data it trained on, said in one line, kept in the manifest.
    auto all = LoadCollectionData(NlpData(), o.collection, {"train", "valid"});
    CATCH_REQUIRE(all.ok());
    int64_t configs = 0;
    for (const GraphData& g : *all) configs += g.num_configs();
    CATCH_CHECK(m->provenance.data == "synthetic");
    CATCH_CHECK_THAT(m->provenance.dataset,
                     Catch::StartsWith("Synthetic TpuGraphs-format data generated by tgraph-synth (preset ci, seed"));
    CATCH_CHECK(m->provenance.graphs == static_cast<int64_t>(all->size()));
    CATCH_CHECK(m->provenance.configurations == configs);
    CATCH_CHECK(m->provenance.SyntheticOnly());
    CATCH_CHECK_THAT(m->provenance.Summary(), Catch::StartsWith("synthetic data only (Synthetic TpuGraphs-format"));
    Manifest published = *m;  // as the registry writes it: a version, weight files by name
    published.version = 1;
    for (FoldEntry& f : published.folds) f.weights = "fold_" + std::to_string(f.fold) + ".npz";
    auto back = Manifest::FromJson(published.ToJson(), "manifest");
    CATCH_REQUIRE(back.ok());
    CATCH_CHECK(back->provenance.Summary() == m->provenance.Summary());
    CATCH_CHECK(DataProvenance(TGRAPH_REAL_DATA, *all).data == "real");  // no SYNTHETIC.txt there
    CATCH_CHECK(DataProvenance(TGRAPH_REAL_DATA, *all).dataset == TGRAPH_REAL_DATA);
  }
  auto model = LoadFolds(*m, o.run_dir);
  CATCH_REQUIRE(model.ok());
  std::mt19937 gen(1);
  std::vector<double> random_taus;
  auto data = LoadCollectionData(NlpData(), o.collection, {"train", "valid"});
  const std::vector<int> folds = AssignFolds(*data, 5, 0);
  for (size_t i = 0; i < data->size(); ++i) {
    if (folds[i] != 0) continue;
    std::vector<double> s((*data)[i].target.size());
    for (double& v : s) v = std::uniform_real_distribution<double>()(gen);
    random_taus.push_back(KendallTau(s, (*data)[i].target));
  }
  const double random_tau = FiniteMean(random_taus);
  CATCH_INFO("trained tau " << r->valid_score << ", random ranker tau " << random_tau);
  CATCH_CHECK(std::abs(random_tau) < 0.1);
  CATCH_CHECK(r->valid_score > 0.2);
  CATCH_CHECK(r->valid_score > random_tau + 0.15);
  // The log has one line per epoch, the result is recorded.
  std::ifstream log(o.run_dir + "/fold_0/log.jsonl");
  int lines = 0;
  for (std::string line; std::getline(log, line);) ++lines;
  CATCH_CHECK(lines == 6);
  CATCH_CHECK(std::filesystem::exists(o.run_dir + "/fold_0/result.json"));
  // The reference size the run validated with is the manifest's.
  CATCH_CHECK(m->reference_configs == 100);

  // bf16 inference ranks as fp32 does with this trained model: per graph, Kendall tau
  // between the two precisions' scores >= 0.99, on the validation graphs and a real file.
  if (!CpuHasBf16()) return;
  std::vector<GraphFile> files = *ListSplit(NlpData(), o.collection, "valid");
  files.push_back({"unet_3d", std::string(TGRAPH_REAL_DATA) + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"});
  for (const GraphFile& f : files) {
    CATCH_INFO(f.name);
    for (const auto& net : model->folds) net->SetInferencePrecision(Precision::kFloat32);
    const ScoreResult fp32 = EvaluatorScores(*model, f);
    for (const auto& net : model->folds) net->SetInferencePrecision(Precision::kBFloat16);
    const ScoreResult bf16 = EvaluatorScores(*model, f);
    const double tau = KendallTau(bf16.score, fp32.score);
    CATCH_INFO("bf16 vs fp32 tau " << tau);
    CATCH_CHECK(tau >= 0.99);
  }
}

CATCH_TEST_CASE("a killed fold resumes from its checkpoint and ends where an uninterrupted one does", "[train]") {
  TempDir dir;
  TrainOptions a = SmallRun(dir.path() + "/a");
  a.epochs = 2;
  TrainOptions b = a;
  b.run_dir = dir.path() + "/b";
  torch::set_num_threads(1);  // bitwise-reproducible arithmetic for the comparison
  CATCH_REQUIRE(PrepareRun(a).ok());
  CATCH_REQUIRE(TrainFold(a, 0).ok());
  CATCH_REQUIRE(PrepareRun(b).ok());
  b.stop_after_steps = 30;  // killed in the second epoch, after the first checkpoint
  absl::StatusOr<FoldResult> stopped = TrainFold(b, 0);
  CATCH_REQUIRE(stopped.ok());
  CATCH_CHECK_FALSE(stopped->completed);
  CATCH_CHECK_FALSE(std::filesystem::exists(b.run_dir + "/fold_0/result.json"));
  b.stop_after_steps = 0;
  absl::StatusOr<FoldResult> resumed = TrainFold(b, 0);
  CATCH_REQUIRE(resumed.ok());
  CATCH_CHECK(resumed->completed);
  auto ra = ReadFoldResults(a.run_dir), rb = ReadFoldResults(b.run_dir);
  CATCH_REQUIRE(ra.ok());
  CATCH_REQUIRE(rb.ok());
  CATCH_CHECK((*rb)[0].valid_score == Approx((*ra)[0].valid_score).margin(1e-6));
  CATCH_CHECK(*ReadFile(a.run_dir + "/fold_0/best.npz") == *ReadFile(b.run_dir + "/fold_0/best.npz"));
  torch::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

CATCH_TEST_CASE("runs refuse mismatched settings, and publish keeps the best folds", "[train]") {
  TempDir dir;
  TrainOptions o = SmallRun(dir.path() + "/run");
  o.epochs = 1;
  o.train_folds = 2;
  CATCH_REQUIRE(PrepareRun(o).ok());
  CATCH_REQUIRE(PrepareRun(o).ok());  // the same run again (e.g. a second fold process): fine
  TrainOptions other = o;
  other.spec.hidden = 48;
  absl::Status s = PrepareRun(other).status();
  CATCH_CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(s.message()), Catch::Contains("describes another run"));
  CATCH_CHECK(TrainFold(o, 7).status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_REQUIRE(TrainFold(o, 0).ok());
  Registry reg(dir.path() + "/registry");
  // A publish step that needs both folds refuses while one is still training.
  auto early = PublishRun(o.run_dir, reg, 1, /*require_folds=*/2);
  CATCH_CHECK(early.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(early.status().message()), Catch::Contains("1 of the 2 required folds"));
  CATCH_CHECK(reg.ListVersions("layout:nlp:random").empty());
  CATCH_REQUIRE(TrainFold(o, 1).ok());
  auto results = ReadFoldResults(o.run_dir);
  CATCH_REQUIRE(results->size() == 2u);
  CATCH_CHECK((*results)[0].valid_score >= (*results)[1].valid_score);
  // Publish loads what it publishes: a truncated weight file (its checksum would be
  // computed over the corrupt bytes) is refused and nothing is published.
  const std::string best = o.run_dir + "/fold_" + std::to_string((*results)[0].fold) + "/best.npz";
  const std::string intact = *ReadFile(best);
  CATCH_REQUIRE(WriteFileAtomic(best, intact.substr(0, intact.size() / 2)).ok());
  auto truncated = PublishRun(o.run_dir, reg, 1, /*require_folds=*/2);
  CATCH_CHECK_THAT(std::string(truncated.status().message()), Catch::Contains("not published"));
  CATCH_CHECK(reg.ListVersions("layout:nlp:random").empty());
  CATCH_REQUIRE(WriteFileAtomic(best, intact).ok());
  bool existed = true;
  auto v = PublishRun(o.run_dir, reg, 1, /*require_folds=*/2, &existed);
  CATCH_REQUIRE(v.ok());
  CATCH_CHECK_FALSE(existed);
  // A retried publish step: the same version, not a duplicate.
  CATCH_CHECK(*PublishRun(o.run_dir, reg, 1, /*require_folds=*/2, &existed) == *v);
  CATCH_CHECK(existed);
  CATCH_CHECK(reg.ListVersions("layout:nlp:random").size() == 1u);
  auto m = reg.ReadVersion("layout:nlp:random", *v);
  CATCH_REQUIRE(m.ok());
  CATCH_REQUIRE(m->folds.size() == 1u);
  CATCH_CHECK(m->folds[0].fold == (*results)[0].fold);
  CATCH_CHECK(m->folds[0].valid_tau == Approx((*results)[0].valid_score));
  CATCH_CHECK(m->spec.hidden == 32);
  CATCH_CHECK(m->data_fingerprint.size() == 64u);

  // The evaluator scores a split with the published version.
  auto model = LoadModel(reg, "layout:nlp:random", *v);
  CATCH_REQUIRE(model.ok());
  EvalOptions eo;
  eo.scoring.batch_softmax.tta = 1;
  auto report = EvaluateSplit(*model, NlpData(), *ParseCollection("layout:nlp:random"), "valid", eo);
  CATCH_REQUIRE(report.ok());
  CATCH_CHECK(report->graphs.size() == 3u);
  CATCH_CHECK(std::isfinite(report->mean.tau));
  CATCH_CHECK_THAT(report->Table(), Catch::Contains("mean"));
  CATCH_CHECK_THAT(report->Json(), Catch::Contains("\"kendall_tau\""));
  eo.official_subset = true;  // configs <= 1000 here: the subset is every config
  auto subset = EvaluateSplit(*model, NlpData(), *ParseCollection("layout:nlp:random"), "valid", eo);
  CATCH_REQUIRE(subset.ok());
  for (size_t i = 0; i < subset->graphs.size(); ++i) CATCH_CHECK(subset->graphs[i].configs == report->graphs[i].configs);
  auto wrong = EvaluateSplit(*model, NlpData(), *ParseCollection("tile:xla"), "valid", eo);
  CATCH_CHECK_FALSE(wrong.ok());
}

CATCH_TEST_CASE("a run trains on another search's files of its graphs, each in the fold of the graph it searched",
                "[train]") {
  TempDir dir;
  TrainOptions o = SmallRun(dir.path() + "/run");
  o.also = {*ParseCollection("layout:nlp:default")};
  o.epochs = 1;
  o.stop_after_steps = 3;
  CATCH_REQUIRE(PrepareRun(o).ok());
  auto info = ReadRunInfo(o.run_dir);
  CATCH_REQUIRE(info.ok());
  int64_t searched_twice = 0;
  for (const auto& [name, fold] : info->fold_of) {
    if (name.find('@') != std::string::npos) continue;
    CATCH_INFO(name);
    CATCH_REQUIRE(info->fold_of.count(name + "@default") == 1);
    CATCH_CHECK(info->fold_of.at(name + "@default") == fold);
    ++searched_twice;
  }
  CATCH_CHECK(searched_twice == 27);
  CATCH_CHECK(info->fold_of.size() == 54u);
  CATCH_CHECK(info->provenance.graphs == 54);
  // The base graphs' folds are those of a run on the collection alone.
  TempDir alone_dir;
  const TrainOptions alone = SmallRun(alone_dir.path() + "/run");
  CATCH_REQUIRE(PrepareRun(alone).ok());
  const auto alone_info = ReadRunInfo(alone.run_dir);
  CATCH_REQUIRE(alone_info.ok());
  CATCH_CHECK(alone_info->fold_of.size() == 27u);
  for (const auto& [name, fold] : alone_info->fold_of) CATCH_CHECK(info->fold_of.at(name) == fold);
  CATCH_CHECK(TrainFold(o, 0).ok());

  auto refused = [&](const char* also) {
    TrainOptions bad = SmallRun(dir.path() + "/bad");
    bad.also = {*ParseCollection(also)};
    return PrepareRun(bad).status();
  };
  CATCH_CHECK(refused("layout:xla:default").code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(refused("layout:xla:default").message()),
                   Catch::Contains("is not another search of layout:nlp:random's graphs"));
  CATCH_CHECK_THAT(std::string(refused("layout:nlp:random").message()), Catch::Contains("is --collection itself"));
  CATCH_CHECK(refused("tile:xla").code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("selecting by the neighbour tau validates on the neighbourhoods alone and trains the same weights",
                "[train]") {
  TempDir dir;
  auto run = [&](const std::string& name, bool by_neighbours) {
    TrainOptions o = SmallRun(dir.path() + "/" + name);
    o.also = {*ParseCollection("layout:nlp:near-default"), *ParseCollection("layout:nlp:near-best")};
    o.epochs = 2;
    o.select_by_neighbour_tau = by_neighbours;
    if (!PrepareRun(o).ok()) return absl::StatusOr<FoldResult>(absl::InternalError("prepare"));
    return TrainFold(o, 0);
  };
  auto all = run("all", false);
  auto near = run("near", true);
  CATCH_REQUIRE(all.ok());
  CATCH_REQUIRE(near.ok());
  CATCH_CHECK(std::isfinite(near->valid_score));
  CATCH_CHECK(near->valid_score != all->valid_score);
  // Selection changes what is scored, never what is trained: the same losses, step by step.
  auto losses = [&](const std::string& name) {
    std::vector<std::string> out;
    std::ifstream log(dir.path() + "/" + name + "/fold_0/log.jsonl");
    for (std::string line; std::getline(log, line);) out.push_back(nlohmann::json::parse(line)["loss"].dump());
    return out;
  };
  CATCH_CHECK(losses("all").size() == 2u);
  CATCH_CHECK(losses("all") == losses("near"));

  TrainOptions without = SmallRun(dir.path() + "/without");
  without.also = {*ParseCollection("layout:nlp:default")};
  without.select_by_neighbour_tau = true;
  const absl::Status refused = PrepareRun(without).status();
  CATCH_CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(refused.message()), Catch::Contains("--also_collections layout:nlp:near-default"));
}

CATCH_TEST_CASE("validation keeps no weights before --select_from, and 1 keeps the last step's", "[train]") {
  TempDir dir;
  auto run = [&](const std::string& name, double select_from) {
    TrainOptions o = SmallRun(dir.path() + "/" + name);
    o.epochs = 4;
    o.lr = 0.01;  // here the first validation scores best, later ones less (0.64, then 0.57-0.61)
    o.select_from = select_from;
    if (!PrepareRun(o).ok()) return absl::StatusOr<FoldResult>(absl::InternalError("prepare"));
    return TrainFold(o, 0);
  };
  // Each validation's step and score, from the fold's log.
  auto validations = [&](const std::string& name) {
    std::vector<std::pair<int64_t, double>> out;
    std::ifstream log(dir.path() + "/" + name + "/fold_0/log.jsonl");
    for (std::string line; std::getline(log, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      out.emplace_back(j["step"].get<int64_t>(), j["valid_score"].get<double>());
    }
    return out;
  };
  torch::set_num_threads(1);  // bitwise-reproducible arithmetic for the comparison
  auto any = run("any", 0.0);
  auto half = run("half", 0.5);
  auto last = run("last", 1.0);
  CATCH_REQUIRE(any.ok());
  CATCH_REQUIRE(half.ok());
  CATCH_REQUIRE(last.ok());
  const auto v = validations("any");
  CATCH_REQUIRE(v.size() == 4u);
  CATCH_CHECK(validations("half") == v);  // the same training, step for step
  CATCH_CHECK(validations("last") == v);
  const int64_t total = v.back().first;
  auto best_from = [&](int64_t first_step) {
    std::pair<int64_t, double> best{-1, -INFINITY};
    for (const auto& [step, score] : v)
      if (step >= first_step && score > best.second) best = {step, score};
    return best;
  };
  CATCH_REQUIRE(best_from(0).first < (total + 1) / 2);  // else the three runs could not differ
  CATCH_CHECK(any->best_step == best_from(0).first);
  CATCH_CHECK(any->valid_score == best_from(0).second);
  CATCH_CHECK(half->best_step == best_from((total + 1) / 2).first);
  CATCH_CHECK(half->valid_score == best_from((total + 1) / 2).second);
  CATCH_CHECK(last->best_step == total);
  CATCH_CHECK(last->valid_score == v.back().second);

  TrainOptions wrong = SmallRun(dir.path() + "/wrong");
  wrong.select_from = 1.5;
  const absl::Status refused = PrepareRun(wrong).status();
  CATCH_CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(refused.message()), Catch::Contains("--select_from must be in 0..1"));
}

CATCH_TEST_CASE("the evaluator reports no metric for hidden (all-zero) runtimes", "[train]") {
  TempDir dir;
  synth::GenerateOptions g;
  g.out = dir.path() + "/data";
  g.preset = "tiny";
  g.hide_test_runtimes = true;
  g.collections = {*ParseCollection("layout:xla:random")};
  CATCH_REQUIRE(synth::Generate(g).ok());
  const LoadedModel model = UntrainedModel("layout:xla:random", dir.path());
  EvalOptions eo;
  auto test = EvaluateSplit(model, g.out, *ParseCollection("layout:xla:random"), "test", eo);
  CATCH_REQUIRE(test.ok());
  CATCH_REQUIRE(test->graphs.size() == 1u);
  CATCH_CHECK(std::isnan(test->graphs[0].tau));
  CATCH_CHECK(std::isnan(test->graphs[0].top_error[0]));
  CATCH_CHECK(std::isnan(test->mean.tau));
  CATCH_CHECK_THAT(test->Json(), Catch::Contains("\"kendall_tau\": null"));
  auto valid = EvaluateSplit(model, g.out, *ParseCollection("layout:xla:random"), "valid", eo);
  CATCH_CHECK(std::isfinite(valid->graphs[0].tau));  // runtimes kept there
}

CATCH_TEST_CASE("real TpuGraphs files: the training data loader reads them all", "[train][real]") {
  const std::string real = TGRAPH_REAL_DATA;
  // (collection, splits, graphs, configs after de-duplication; numpy: np.unique over rows)
  struct Want { const char* collection; std::vector<std::string> splits; size_t graphs; std::vector<int64_t> configs; };
  const std::vector<Want> wants = {
      {"layout:xla:default", {"valid", "test"}, 2, {994, 1469}},  // sorted by name: cd708819..., unet_3d
      {"layout:xla:random", {"valid", "test"}, 2, {1000, 442}},
      {"layout:nlp:default", {"test"}, 1, {988}},
      {"layout:nlp:random", {"test"}, 1, {999}},
      {"tile:xla", {"train", "valid", "test"}, 8, {}},
  };
  for (const Want& w : wants) {
    CATCH_INFO(w.collection);
    auto data = LoadCollectionData(real, *ParseCollection(w.collection), w.splits);
    CATCH_REQUIRE(data.ok());
    CATCH_REQUIRE(data->size() == w.graphs);
    for (size_t i = 0; i < w.configs.size(); ++i) CATCH_CHECK((*data)[i].num_configs() == w.configs[i]);
    for (const GraphData& g : *data) {
      CATCH_CHECK(g.graph.num_nodes <= g.original_nodes);
      for (int64_t id : g.config_nodes) CATCH_CHECK((id >= 0 && id < g.graph.num_nodes));
    }
  }
  // The big graph (21,918 nodes, 848 configurable) prunes to the configurable nodes and
  // their neighbours.
  auto nlp = LoadCollectionData(real, *ParseCollection("layout:nlp:default"), {"test"});
  CATCH_CHECK((*nlp)[0].original_nodes == 21918);
  CATCH_CHECK((*nlp)[0].config_nodes.size() == 848u);
  CATCH_CHECK((*nlp)[0].graph.num_nodes < 21918);
}

CATCH_TEST_CASE("tgraph-eval's evaluator on every real file: rankings, and metrics only where runtimes are known", "[train][real]") {
  const std::string real = TGRAPH_REAL_DATA;
  TempDir dir;
  int evaluated = 0;
  for (const char* collection : {"layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random",
                                 "tile:xla"}) {
    const LoadedModel model = UntrainedModel(collection, dir.path(), /*batch_size=*/128, /*tta=*/2);
    EvalOptions eo;
    eo.scoring.batch_size = model.manifest.batch_size;
    eo.scoring.batch_softmax.tta = model.manifest.tta;
    for (const char* split : {"train", "valid", "test"}) {
      CATCH_INFO(collection << " " << split);
      auto files = ListSplit(real, *ParseCollection(collection), split);
      if (!files.ok() || files->empty()) continue;  // the real samples have no such split
      auto report = EvaluateSplit(model, real, *ParseCollection(collection), split, eo);
      CATCH_REQUIRE(report.ok());
      for (const GraphEval& e : report->graphs) {
        ++evaluated;
        // Hidden runtimes (the test split): no metric; known runtimes: metrics.
        CATCH_CHECK(std::isnan(e.tau) == (std::string(split) == "test"));
        // A ranking of every configuration of the file, each once.
        std::vector<int64_t> sorted = e.ranking;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int64_t> all(static_cast<size_t>(e.configs));
        std::iota(all.begin(), all.end(), 0);
        CATCH_CHECK(sorted == all);
      }
      const std::string csv = report->RankingsCsv();
      CATCH_CHECK(csv.rfind("collection,graph,ranking\n", 0) == 0);
      CATCH_CHECK(std::count(csv.begin(), csv.end(), '\n') == static_cast<long>(report->graphs.size()) + 1);
      CATCH_CHECK_THAT(csv, Catch::Contains(std::string(collection) + "," + report->graphs[0].name + ","));
      // Every configuration's score, spread and runtime, one line each; sorted by score
      // (ties by line) the lines give the ranking.
      const std::vector<std::string> lines = absl::StrSplit(report->ScoresCsv(), '\n', absl::SkipEmpty());
      CATCH_REQUIRE(lines.front() == "collection,graph,config,score,spread,runtime");
      size_t line = 1;
      for (const GraphEval& e : report->graphs) {
        std::vector<std::pair<double, int64_t>> by_score;
        for (int64_t i = 0; i < e.configs; ++i, ++line) {
          CATCH_REQUIRE(line < lines.size());
          const std::vector<std::string> f = absl::StrSplit(lines[line], ',');
          CATCH_REQUIRE(f.size() == 6u);
          CATCH_CHECK(f[0] == collection);
          CATCH_CHECK(f[1] == e.name);
          CATCH_CHECK(f[2] == std::to_string(i));
          CATCH_CHECK(std::stod(f[4]) >= 0);
          CATCH_CHECK((std::stod(f[5]) == 0) == (std::string(split) == "test"));
          by_score.push_back({std::stod(f[3]), i});
        }
        std::stable_sort(by_score.begin(), by_score.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        std::vector<int64_t> ranking;
        for (const auto& p : by_score) ranking.push_back(p.second);
        CATCH_CHECK(ranking == e.ranking);
      }
      CATCH_CHECK(line == lines.size());
    }
  }
  CATCH_CHECK(evaluated == 14);
}

CATCH_TEST_CASE("tgraph-eval's cascade report: recall of the full ensemble's top k, both times", "[train]") {
  TempDir dir;
  const LoadedModel model = UntrainedModel("layout:nlp:random", dir.path(), 64, 2, /*folds=*/2);
  EvalOptions eo;
  eo.scoring.batch_size = 64;
  eo.scoring.batch_softmax.tta = 2;
  eo.cascade_top_k = 5;
  eo.cascade_fraction = 0.25;
  auto r = EvaluateSplit(model, NlpData(), *ParseCollection("layout:nlp:random"), "valid", eo);
  CATCH_REQUIRE(r.ok());
  for (const GraphEval& e : r->graphs) CATCH_CHECK((e.cascade_recall >= 0.0 && e.cascade_recall <= 1.0));
  CATCH_CHECK(std::isfinite(r->mean.cascade_recall));
  CATCH_CHECK(r->cascade_seconds > 0);
  CATCH_CHECK(r->full_seconds > 0);
  CATCH_CHECK_THAT(r->Json(), Catch::Contains("\"cascade_recall\""));
  // Keeping everything is the full ensemble: recall 1.
  eo.cascade_fraction = 1.0;
  auto all = EvaluateSplit(model, NlpData(), *ParseCollection("layout:nlp:random"), "valid", eo);
  CATCH_REQUIRE(all.ok());
  for (const GraphEval& e : all->graphs) CATCH_CHECK(e.cascade_recall == 1.0);
  // Without a cascade there is no recall to report.
  eo.cascade_top_k = 0;
  auto none = EvaluateSplit(model, NlpData(), *ParseCollection("layout:nlp:random"), "valid", eo);
  CATCH_CHECK(std::isnan(none->graphs[0].cascade_recall));
}

namespace {

// A measurement store holding every configuration of the world's train graphs, as a
// farm would have reported them.
// Reports the world's train graphs of `collection` (their runtimes as measurements) for
// `report_as` (default: the same collection).
void ReportWorldGraphs(const ModelWorld& w, const std::string& collection, const std::string& store_root,
                       const std::string& report_as = "") {
  MeasurementStore store(store_root);
  const absl::StatusOr<std::vector<GraphFile>> files = ListSplit(w.data, *ParseCollection(collection), "train");
  CATCH_REQUIRE(files.ok());
  for (const GraphFile& f : *files) {
    LayoutGraph g = *LoadLayoutGraph(f.path);
    MeasurementReport r;
    r.collection = *ParseCollection(report_as.empty() ? collection : report_as);
    r.graph_hash = GraphContentHash(g.graph, g.node_config_ids);
    r.graph = g.graph;
    r.node_config_ids = g.node_config_ids;
    r.num_configs = g.num_configs;
    r.config_feat = g.config_feat;
    r.runtime_ns = g.config_runtime;
    CATCH_REQUIRE(store.Append(r).ok());
  }
}

}  // namespace

CATCH_TEST_CASE("held-out measurements are chosen by their values: stable, and the asked share", "[finetune]") {
  std::mt19937 gen(3);
  std::vector<int8_t> row(5 * kConfigFeatDim);
  int held = 0;
  constexpr int kRows = 20000;
  for (int i = 0; i < kRows; ++i) {
    for (int8_t& v : row) v = static_cast<int8_t>(static_cast<int>(gen() % 7) - 1);
    const bool h = IsHeldOut(row.data(), row.size(), 0.2, 11);
    CATCH_CHECK(h == IsHeldOut(row.data(), row.size(), 0.2, 11));  // the same row, the same side
    held += h;
  }
  CATCH_CHECK(std::abs(held / static_cast<double>(kRows) - 0.2) < 0.01);
}

CATCH_TEST_CASE("a model of one's own starts from another collection's model and learns its farm's measurements",
                "[finetune][train]") {
  torch::set_num_threads(1);
  ModelWorld w(5, {"layout:xla:random"});
  w.training = {{"loss", "top"}};  // trained with the top-weighted hinge: fine-tuned with it too
  const int64_t base = w.Publish("layout:xla:random", 2, 16, nullptr, /*seed=*/2);
  const std::string store = w.dir.path() + "/measurements";
  // The farm's measurements, reported for its own model's name.
  ReportWorldGraphs(w, "layout:xla:random", store, "layout@tpu-v5e");
  CATCH_CHECK(std::filesystem::is_directory(store + "/npz/layout/@tpu-v5e/train"));
  FinetuneOptions o;
  o.registry = w.registry;
  o.collection = "layout@tpu-v5e";
  o.measurements = store;
  o.work_dir = w.dir.path() + "/ft";
  o.steps = 120;
  o.lr = 1e-3;
  o.holdout = 0.3;
  o.progress = false;
  // Without --parent, a name with no model says how to start one.
  absl::StatusOr<FinetuneResult> none = Finetune(o);
  CATCH_REQUIRE_FALSE(none.ok());
  CATCH_CHECK(none.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK_THAT(std::string(none.status().message()), Catch::Contains("--parent, e.g. --parent layout:xla:random"));
  FinetuneOptions tile = o;
  tile.parent = "tile:xla";
  CATCH_CHECK_THAT(std::string(Finetune(tile).status().message()), Catch::Contains("is not of the kind of layout@tpu-v5e"));

  o.parent = "layout:xla:random";
  absl::StatusOr<FinetuneResult> r = Finetune(o);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->parent_collection == "layout:xla:random");
  CATCH_CHECK(r->parent_version == base);
  CATCH_INFO("held-out tau " << r->parent_score << " -> " << r->child_score);
  CATCH_REQUIRE(r->published_version == 1);  // the name's first version
  const Registry reg(w.registry);
  CATCH_CHECK(reg.LatestVersion("layout:xla:random").value() == base);  // the parent is untouched
  absl::StatusOr<Manifest> m = reg.ReadVersion("layout@tpu-v5e", 1);
  CATCH_REQUIRE(m.ok());
  CATCH_CHECK(m->collection == "layout@tpu-v5e");
  CATCH_CHECK(m->training.at("finetune_parent_collection") == "layout:xla:random");
  CATCH_CHECK(m->training.at("loss") == "top");
  CATCH_CHECK(m->training.at("finetune_loss") == "top");
  CATCH_REQUIRE(m->provenance.finetunes.size() == 1u);
  CATCH_CHECK(m->provenance.finetunes[0].parent_collection == "layout:xla:random");
  CATCH_CHECK_THAT(m->provenance.Summary(), Catch::EndsWith("(last from layout:xla:random v1)"));
  CATCH_CHECK(LoadModel(reg, "layout@tpu-v5e", 1).ok());
  // Next rounds continue from the name's own latest version; --parent no longer matters.
  o.work_dir = w.dir.path() + "/ft2";
  absl::StatusOr<FinetuneResult> again = Finetune(o);
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(again->parent_collection == "layout@tpu-v5e");
  CATCH_CHECK(again->parent_version == 1);
}

CATCH_TEST_CASE("finetune learns from measurements, publishes only when not worse, and records its parent",
          "[finetune][train]") {
  torch::set_num_threads(1);
  ModelWorld w(5, {"layout:xla:random"});
  // Random weights from a fixed seed. Over seeds 1..16 the fine-tune gained 0.21 to
  // 0.57 of held-out tau; seed 2 gains 0.35, far from the bound below on any CPU.
  const int64_t v1 = w.Publish("layout:xla:random", 2, 16, nullptr, /*seed=*/2);
  const std::string store = w.dir.path() + "/measurements";
  FinetuneOptions o;
  o.registry = w.registry;
  o.collection = "layout:xla:random";
  o.measurements = store;
  o.work_dir = w.dir.path() + "/finetune1";
  o.steps = 120;
  o.lr = 1e-3;
  o.holdout = 0.3;
  o.progress = false;

  // Nothing measured yet: a precise refusal.
  absl::StatusOr<FinetuneResult> empty = Finetune(o);
  CATCH_REQUIRE_FALSE(empty.ok());
  CATCH_CHECK(empty.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK_THAT(std::string(empty.status().message()), Catch::Contains(store));

  ReportWorldGraphs(w, "layout:xla:random", store);
  {  // One corrupt shard beside the good ones: left out and listed, not a failed run.
    std::ofstream bad(store + "/npz/layout/xla/random/train/0123abcd.m1.deadbeef.npz");
    bad << "truncated";
  }
  {  // Too little evidence for the gate: nothing trained, nothing published, and why.
    FinetuneOptions gated = o;
    gated.min_heldout_configs = 100000;
    absl::StatusOr<FinetuneResult> g = Finetune(gated);
    CATCH_REQUIRE(g.ok());
    CATCH_CHECK_FALSE(g->trained);
    CATCH_CHECK(g->published_version == 0);
    CATCH_CHECK(g->not_published == absl::StrCat("not published: too little evidence: ", g->heldout_configs,
                                                 " held-out configurations, fewer than --min_heldout_configs (100000); "
                                                 "nothing was trained (report more measurements)"));
    CATCH_CHECK(Registry(w.registry).LatestVersion("layout:xla:random").value() == v1);
  }
  absl::StatusOr<FinetuneResult> r = Finetune(o);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->trained);
  CATCH_CHECK(r->heldout_configs >= o.min_heldout_configs);  // the default gate lets these through
  CATCH_REQUIRE(r->skipped_shards.size() == 1u);
  CATCH_CHECK_THAT(r->skipped_shards[0], Catch::Contains("0123abcd.m1.deadbeef.npz: "));
  CATCH_INFO("held-out tau " << r->parent_score << " -> " << r->child_score);
  CATCH_CHECK(r->parent_version == v1);
  CATCH_CHECK(r->graphs == 4);
  CATCH_CHECK(r->heldout_configs > 0);
  CATCH_CHECK(r->train_configs > 2 * r->heldout_configs);  // 30% held out
  CATCH_CHECK(r->child_score > r->parent_score + 0.2);      // random weights learn the measured graphs
  CATCH_REQUIRE(r->published_version == v1 + 1);
  const Registry reg(w.registry);
  absl::StatusOr<Manifest> m = reg.ReadVersion("layout:xla:random", r->published_version);
  CATCH_REQUIRE(m.ok());
  CATCH_CHECK(m->training.at("finetune_parent_version") == std::to_string(v1));
  CATCH_CHECK(m->training.at("finetune_measurements") == store);
  CATCH_CHECK(m->training.at("finetune_loss") == "hinge");  // a parent that does not say: the hinge
  CATCH_CHECK(m->folds.size() == 2);
  // Its provenance: the parent's (unknown here: a hand-made manifest) and this fine-tune.
  CATCH_REQUIRE(m->provenance.finetunes.size() == 1u);
  CATCH_CHECK(m->provenance.finetunes[0].parent_version == v1);
  CATCH_CHECK(m->provenance.finetunes[0].graphs == 4);
  CATCH_CHECK(m->provenance.finetunes[0].measurements == r->train_configs + r->heldout_configs);
  CATCH_CHECK_FALSE(m->provenance.SyntheticOnly());
  CATCH_CHECK(LoadModel(reg, "layout:xla:random", r->published_version).ok());

  // A fine-tune that makes things worse (a rate that wrecks the weights) is not
  // published: the registry keeps serving its parent.
  FinetuneOptions bad = o;
  bad.work_dir = w.dir.path() + "/finetune2";
  bad.lr = 50.0;
  bad.steps = 40;
  absl::StatusOr<FinetuneResult> worse = Finetune(bad);
  CATCH_REQUIRE(worse.ok());
  CATCH_INFO("wrecked: " << worse->parent_score << " -> " << worse->child_score);
  CATCH_CHECK(worse->parent_version == v1 + 1);
  CATCH_CHECK(worse->published_version == 0);
  CATCH_CHECK(*reg.LatestVersion("layout:xla:random") == v1 + 1);

  // Mixed with base training data: half the steps on the world's own train split.
  FinetuneOptions mixed = o;
  mixed.work_dir = w.dir.path() + "/finetune3";
  mixed.base_data = w.data;
  mixed.config_memory_bytes = 0;  // every base graph's configurations read from the spill file
  mixed.steps = 40;
  absl::StatusOr<FinetuneResult> m3 = Finetune(mixed);
  CATCH_REQUIRE(m3.ok());
  CATCH_CHECK(std::isfinite(m3->child_score));
  // 2 folds x 40 steps, half of them on base graphs (binomial: 80 +- 2 sd is 31..49).
  CATCH_CHECK(m3->base_steps >= 25);
  CATCH_CHECK(m3->base_steps <= 55);
  // Published exactly when not worse, with the base recorded.
  CATCH_CHECK((m3->published_version > 0) == (m3->child_score >= m3->parent_score));
  if (m3->published_version > 0) {
    absl::StatusOr<Manifest> mm = reg.ReadVersion("layout:xla:random", m3->published_version);
    CATCH_REQUIRE(mm.ok());
    CATCH_CHECK(mm->training.at("finetune_base_data") == w.data);
    CATCH_CHECK(mm->training.at("finetune_parent_version") == std::to_string(v1 + 1));
  }

  // A tile collection's fine-tune joins its kernels' measurements to its prior
  // (tests/finetune_tiles_test.cc); this store has a layout collection's only.
  FinetuneOptions tile = o;
  tile.collection = "tile:xla";
  tile.base_data = "";
  absl::StatusOr<FinetuneResult> t = Finetune(tile);
  CATCH_REQUIRE_FALSE(t.ok());
  CATCH_CHECK(t.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK(std::string(t.status().message()).find("tile:xla") != std::string::npos);
}

CATCH_TEST_CASE("a training step scores a quarter of its configurations against the others' softmax", "[train]") {
  CATCH_CHECK(ReferenceMembers(64, 0.25) == 48);
  CATCH_CHECK(ReferenceMembers(128, 0.25) == 96);
  CATCH_CHECK(ReferenceMembers(64, 0.0) == 64);   // the batch's own softmax
  CATCH_CHECK(ReferenceMembers(3, 0.25) == 2);    // round(0.75) = 1 scored outside
  CATCH_CHECK(ReferenceMembers(1, 0.25) == 1);    // a reference needs one configuration
  CATCH_CHECK(ReferenceMembers(2, 0.9) == 1);
}

CATCH_TEST_CASE("a tile run's manifest counts the network at the share its kept folds validate best", "[train]") {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  RunInfo info;
  info.collection = "tile@h100-triton";
  info.fingerprint = "f";
  info.spec.kind = CollectionKind::kTile;
  info.num_folds = 2;
  TilePrior prior;
  prior.residual = true;
  prior.values["*"][kFixedDefaultTile] = 0;
  info.tile_prior = prior;
  for (int fold : {0, 1}) std::filesystem::create_directories(FoldDir(run, fold));
  CATCH_REQUIRE(WriteRunInfo(run, info).ok());
  // Fold 1 validates best (0.95), so it comes first; kept alone it prefers share 0.5,
  // with fold 0 the means are 0 -> 0.84, 0.25 -> 0.86, 0.5 -> 0.85, 0.75 -> 0.8, 1 -> 0.75.
  FoldResult a, b;
  a.fold = 0;
  a.valid_score = 0.8;
  a.share_scores = {{0, 0.8}, {0.25, 0.82}, {0.5, 0.75}, {0.75, 0.7}, {1, 0.8}};
  b.fold = 1;
  b.valid_score = 0.95;
  b.share_scores = {{0, 0.88}, {0.25, 0.9}, {0.5, 0.95}, {0.75, 0.9}, {1, 0.7}};
  CATCH_REQUIRE(WriteFoldResult(FoldDir(run, 0), a, 10).ok());
  CATCH_REQUIRE(WriteFoldResult(FoldDir(run, 1), b, 10).ok());
  absl::StatusOr<std::vector<FoldResult>> back = ReadFoldResults(run);
  CATCH_REQUIRE(back.ok());
  CATCH_REQUIRE(back->size() == 2u);
  CATCH_CHECK((*back)[0].share_scores == b.share_scores);
  CATCH_CHECK((*back)[1].share_scores == a.share_scores);
  CATCH_CHECK(RunManifest(run, 1)->tile_prior->network_share == 0.5);
  CATCH_CHECK(RunManifest(run, 2)->tile_prior->network_share == 0.25);
  // A share given (chosen on other shapes) replaces the folds' choice, and says so.
  absl::StatusOr<Manifest> given = RunManifest(run, 2, 0.75);
  CATCH_REQUIRE(given.ok());
  CATCH_CHECK(given->tile_prior->network_share == 0.75);
  CATCH_CHECK(given->training.at("tile_network_share") == "0.75");
  CATCH_CHECK(RunManifest(run, 2, 1.5).status().code() == absl::StatusCode::kInvalidArgument);
  // A prior added only when published (the network learned alone) keeps its full share.
  info.tile_prior->residual = false;
  CATCH_REQUIRE(WriteRunInfo(run, info).ok());
  CATCH_CHECK(RunManifest(run, 2)->tile_prior->network_share == 1.0);
  CATCH_CHECK(RunManifest(run, 2, 0.25).status().code() == absl::StatusCode::kFailedPrecondition);
}

CATCH_TEST_CASE("a fold's score per network share is its mean over the validations after a step, each step once",
                "[train]") {
  TempDir dir;
  const std::string log = dir.path() + "/log.jsonl";
  const auto line = [](int64_t step, double at0, double at1) {
    return nlohmann::json({{"step", step},
                           {"valid_score", at1},
                           {"network_shares", NetworkSharesJson({{0.0, at0}, {1.0, at1}})}})
               .dump() +
           "\n";
  };
  // Step 10 is before the second half; step 20 was validated twice (a resumed fold), the
  // last line counts; a line without shares (a layout run's) is skipped.
  CATCH_REQUIRE(WriteFileAtomic(log, line(10, 0.1, 0.1) + line(20, 0.5, 0.2) + line(20, 0.6, 0.3) +
                                         R"({"step": 25, "valid_score": 0.9})" "\n" + line(30, 0.8, 0.9))
                    .ok());
  absl::StatusOr<std::map<double, double>> mean = MeanShareScores(log, 10);
  CATCH_REQUIRE(mean.ok());
  CATCH_CHECK(mean->at(0.0) == Approx(0.7));  // (0.6 + 0.8) / 2
  CATCH_CHECK(mean->at(1.0) == Approx(0.6));  // (0.3 + 0.9) / 2
  CATCH_CHECK(MeanShareScores(log, 30)->empty());
  CATCH_REQUIRE(WriteFileAtomic(log, line(10, 0.1, 0.1) + "{\"step\": 2\n").ok());
  absl::StatusOr<std::map<double, double>> broken = MeanShareScores(log, 0);
  CATCH_CHECK(broken.status().code() == absl::StatusCode::kDataLoss);
  CATCH_CHECK_THAT(std::string(broken.status().message()), Catch::Contains("log.jsonl: line 2"));
  CATCH_CHECK(MeanShareScores(dir.path() + "/none.jsonl", 0).status().code() == absl::StatusCode::kNotFound);
}
