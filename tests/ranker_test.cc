// LibTorch defines glog-style CHECK macros: use Catch's prefixed names here.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <limits>

#include <torch/torch.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <numeric>
#include <set>
#include <thread>

#include "model/core/file_util.h"
#include "model/store/measurement_store.h"
#include "model/store/stored_layouts.h"
#include "model/search/measured_correction.h"
#include "model/search/search_policy.h"
#include "model/core/preprocess.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/features.h"
#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/core/opcodes.h"
#include "model/nn/model_io.h"
#include "model/nn/scoring.h"
#include "model/synth/generator.h"
#include "model/train/train_data.h"
#include "server/graph_store.h"
#include "server/model_manager.h"
#include "server/ranker.h"
#include "server/request_log.h"
#include "tests/model_fixtures.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

struct World : ModelWorld {
  World() : ModelWorld(2, {"layout:xla:random", "tile:xla"}) {}
  GraphFile File(const std::string& collection) const { return ModelWorld::File(collection, "valid"); }
};

WireGraph WireOf(const NodeGraph& graph, const std::vector<int64_t>& ids) {
  WireGraph w;
  w.graph = graph;
  w.node_config_ids = ids;
  return w;
}
WireGraph WireOf(const LayoutGraph& g) { return WireOf(g.graph, g.node_config_ids); }

// A served world for request validation: a layout model (with `folds` folds) and a tile
// model loaded, a ranker limited to 500 configurations, and a layout graph registered.
struct ServedWorld {
  World w;
  std::unique_ptr<ModelManager> mm;
  std::unique_ptr<Ranker> ranker;
  LayoutGraph g;
  std::string hash;
  explicit ServedWorld(int folds) {
    w.Publish("layout:xla:random", folds);
    w.Publish("tile:xla", 1);
    mm = std::make_unique<ModelManager>(Registry(w.registry), ModelManager::Options{2});
    mm->Poll();
    RankerOptions ro;
    ro.max_configs = 500;
    ro.max_report_rows = 600;
    ranker = std::make_unique<Ranker>(mm.get(), ro);
    g = *LoadLayoutGraph(w.File("layout:xla:random").path);
    hash = ranker->Register(WireOf(g))->graph_hash;
  }
};

RankRequest LayoutRequest(const LayoutGraph& g, const std::string& hash) {
  RankRequest q;
  q.collection = "layout:xla:random";
  q.graph_hash = hash;
  q.num_configs = g.num_configs;
  // Borrowed: g outlives the request.
  q.layout_configs = absl::string_view(reinterpret_cast<const char*>(g.config_feat.data()), g.config_feat.size());
  return q;
}

}  // namespace

CATCH_TEST_CASE("model manager: NaN weights are refused at load and a failed version is retried once its files change", "[server]") {
  World w;
  ModelManager mm(Registry(w.registry), {2});
  w.Publish("layout:xla:random", 1);
  mm.Poll();
  // A diverged run's weights: a valid checksum, one NaN. Refused; version 1 serves.
  w.Publish("layout:xla:random", 1, 16, [](RankingNet& net) {
    net.parameters().front().view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  });
  std::vector<ModelEvent> events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kFailed);
  CATCH_CHECK_THAT(events[0].message, Catch::Contains("1 non-finite values (NaN or infinity)"));
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 1);

  // Version 3's weight file is missing (moved away): failed, and not retried while
  // nothing changes; once the file is back, the next poll loads it.
  const int64_t v3 = w.Publish("layout:xla:random", 1);
  const std::string weights = Registry(w.registry).VersionDir("layout:xla:random", v3) + "/fold_0.npz";
  std::filesystem::rename(weights, weights + ".away");
  events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kFailed);
  CATCH_CHECK(mm.Poll().empty());
  std::filesystem::rename(weights + ".away", weights);
  events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kLoaded);
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == v3);
}

CATCH_TEST_CASE("model manager: versions gone from the registry without being retired keep serving", "[server]") {
  World w;
  ModelManager mm(Registry(w.registry), {2});
  w.Publish("layout:xla:random", 1);
  w.Publish("layout:xla:random", 1);
  mm.Poll();
  CATCH_REQUIRE(mm.Get("layout:xla:random", 0)->version == 2);
  // The registry is re-created with a single version 1 (other weights): not a rollback.
  std::filesystem::remove_all(w.registry);
  w.Publish("layout:xla:random", 1);
  std::vector<ModelEvent> events = mm.Poll();
  CATCH_REQUIRE(events.size() == 2u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kVanished);
  CATCH_CHECK(events[0].version == 2);
  CATCH_CHECK_THAT(events[0].message, Catch::Contains("without being retired"));
  // Version 1 on disk is now another model than the one loaded: said too.
  CATCH_CHECK(events[1].kind == ModelEvent::Kind::kCorrupted);
  CATCH_CHECK(events[1].version == 1);
  CATCH_CHECK_THAT(events[1].message, Catch::StartsWith("its files were replaced on disk by other weights"));
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 2);
  CATCH_CHECK(mm.Poll().empty());  // reported once, nothing reloaded at every poll
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 2);
}

CATCH_TEST_CASE("model manager: a loaded version corrupted on disk keeps serving its intact copy and is reported once", "[server]") {
  World w;
  ModelManager mm(Registry(w.registry), {2});
  w.Publish("layout:xla:random", 2);
  CATCH_REQUIRE(mm.Poll().size() == 1u);  // loaded
  const ModelHandle before = *mm.Get("layout:xla:random", 1);
  CATCH_CHECK(mm.Poll().empty());         // nothing changed: a stat per file, no checksum
  // A weight file is overwritten in place (a bad copy, a disk fault).
  const std::string fold = Registry(w.registry).VersionDir("layout:xla:random", 1) + "/fold_1.npz";
  std::string bytes = *ReadFile(fold);
  bytes[bytes.size() / 2] ^= 0x55;
  CATCH_REQUIRE(WriteFileAtomic(fold, bytes).ok());
  std::vector<ModelEvent> events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kCorrupted);
  CATCH_CHECK(std::string(events[0].KindName()) == "corrupted");
  CATCH_CHECK_THAT(events[0].message, Catch::StartsWith("its files changed on disk since it loaded and no longer verify ("));
  CATCH_CHECK_THAT(events[0].message, Catch::Contains("fold_1.npz"));
  CATCH_CHECK_THAT(events[0].message, Catch::EndsWith("re-publish it, or retire it to roll back"));
  CATCH_CHECK(mm.Get("layout:xla:random", 1)->model == before.model);  // still serving what it loaded
  CATCH_CHECK(mm.Poll().empty());                                       // reported once
  // Put back as it was: verified again, nothing to report.
  bytes[bytes.size() / 2] ^= 0x55;
  CATCH_REQUIRE(WriteFileAtomic(fold, bytes).ok());
  CATCH_CHECK(mm.Poll().empty());
  bytes[bytes.size() / 2] ^= 0x55;  // and a second corruption is a new report
  CATCH_REQUIRE(WriteFileAtomic(fold, bytes).ok());
  CATCH_CHECK(mm.Poll().size() == 1u);
}

CATCH_TEST_CASE("ranker: scores that overflow are an INTERNAL error, never an OK ranking", "[server]") {
  World w;
  // Finite weights that overflow float inside the network (every weight x 1e30).
  w.Publish("layout:xla:random", 1, 16, [](RankingNet& net) {
    for (torch::Tensor& p : net.parameters()) p.mul_(1e30);
  });
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  CATCH_REQUIRE(mm.AnyLoaded());
  Ranker ranker(&mm, RankerOptions{});
  LayoutGraph g = *LoadLayoutGraph(w.File("layout:xla:random").path);
  absl::StatusOr<RegisterResult> reg = ranker.Register(WireOf(g));
  CATCH_REQUIRE(reg.ok());
  absl::StatusOr<RankResult> r = ranker.Rank(LayoutRequest(g, reg->graph_hash), [] { return false; });
  CATCH_CHECK(r.status().code() == absl::StatusCode::kInternal);
  CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("non-finite score"));
}

CATCH_TEST_CASE("model manager loads, swaps, pins and survives a corrupt version", "[server]") {
  World w;
  ModelManager mm(Registry(w.registry), {2});
  CATCH_CHECK_FALSE(mm.AnyLoaded());
  CATCH_CHECK(mm.Get("layout:xla:random", 0).status().code() == absl::StatusCode::kNotFound);
  w.Publish("layout:xla:random", 1);
  auto events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kLoaded);
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 1);
  CATCH_CHECK(mm.Poll().empty());  // nothing new
  auto held = *mm.Get("layout:xla:random", 0);  // an in-flight request holds version 1
  w.Publish("layout:xla:random", 2);
  mm.Poll();
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 2);
  CATCH_CHECK(mm.Get("layout:xla:random", 1)->version == 1);  // pinned
  CATCH_CHECK(held.model->folds.size() == 1u);

  // Version 3 is published, then its weights get corrupted: it is reported, 2 keeps serving.
  const int64_t v3 = w.Publish("layout:xla:random", 1);
  std::ofstream(Registry(w.registry).VersionDir("layout:xla:random", v3) + "/fold_0.npz", std::ios::app) << "junk";
  events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kFailed);
  CATCH_CHECK_THAT(events[0].message, Catch::Contains("checksum mismatch"));
  CATCH_CHECK(mm.failed_loads() == 1);
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 2);
  CATCH_CHECK(mm.Poll().empty());  // a failed version is not retried every poll
  auto missing = mm.Get("layout:xla:random", 7);
  CATCH_CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK_THAT(std::string(missing.status().message()), Catch::Contains("loaded versions: 1, 2"));

  // Background polling picks up a new version by itself.
  std::atomic<int> seen{0};
  mm.StartPolling(0.05, [&](const std::vector<ModelEvent>& e) { seen += static_cast<int>(e.size()); });
  const int64_t v4 = w.Publish("layout:xla:random", 1);
  for (int i = 0; i < 200 && mm.Get("layout:xla:random", 0)->version != v4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  mm.Stop();
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == v4);
  CATCH_CHECK(seen >= 1);

  // Rollback: retiring v4 unloads it at the next poll and version 2 serves again; a
  // request that holds v4 finishes on it. Restoring v4 brings it back.
  Registry reg(w.registry);
  auto on_v4 = *mm.Get("layout:xla:random", 0);
  CATCH_REQUIRE(reg.Retire("layout:xla:random", v4, "test rollback").ok());
  events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kUnloaded);
  CATCH_CHECK(events[0].version == v4);
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == 2);
  CATCH_CHECK(mm.Get("layout:xla:random", v4).status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK(on_v4.model->folds.size() == 1u);
  CATCH_REQUIRE(reg.Restore("layout:xla:random", v4).ok());
  events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].kind == ModelEvent::Kind::kLoaded);
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == v4);
  // Retiring every version leaves the last loaded one serving.
  for (int64_t v : reg.ListVersions("layout:xla:random")) CATCH_REQUIRE(reg.Retire("layout:xla:random", v, "").ok());
  mm.Poll();
  CATCH_CHECK(mm.Loaded()["layout:xla:random"].size() == 1u);
  CATCH_CHECK(mm.AnyLoaded());
}

CATCH_TEST_CASE("model manager: corrupt newest versions leave it on the newest good ones, not on nothing", "[server]") {
  World w;
  const int64_t good1 = w.Publish("layout:xla:random", 1);
  const int64_t good2 = w.Publish("layout:xla:random", 1);
  std::vector<int64_t> corrupt;
  for (int i = 0; i < 2; ++i) {
    corrupt.push_back(w.Publish("layout:xla:random", 1));
    std::ofstream(Registry(w.registry).VersionDir("layout:xla:random", corrupt.back()) + "/fold_0.npz", std::ios::app)
        << "junk";
  }
  // A server that starts now (keep_versions 2) loads the two newest good versions.
  ModelManager mm(Registry(w.registry), {2});
  std::vector<ModelEvent> events = mm.Poll();
  CATCH_REQUIRE(events.size() == 4u);  // newest first: two failures, then two loads
  CATCH_CHECK((events[0].kind == ModelEvent::Kind::kFailed && events[0].version == corrupt[1]));
  CATCH_CHECK((events[1].kind == ModelEvent::Kind::kFailed && events[1].version == corrupt[0]));
  CATCH_CHECK((events[2].kind == ModelEvent::Kind::kLoaded && events[2].version == good2));
  CATCH_CHECK((events[3].kind == ModelEvent::Kind::kLoaded && events[3].version == good1));
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == good2);
  CATCH_CHECK(mm.Get("layout:xla:random", good1).ok());
  CATCH_CHECK(mm.Poll().empty());  // the failures are not retried while unchanged
  // A good version published over them serves at the next poll; the oldest goes.
  const int64_t good3 = w.Publish("layout:xla:random", 1);
  events = mm.Poll();
  CATCH_REQUIRE(events.size() == 1u);
  CATCH_CHECK(events[0].version == good3);
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->version == good3);
  CATCH_CHECK(mm.Get("layout:xla:random", good2).ok());
  CATCH_CHECK(mm.Get("layout:xla:random", good1).status().code() == absl::StatusCode::kNotFound);
}

CATCH_TEST_CASE("graph store: an HLO registration gives a graph first registered as arrays its exact operand ranks", "[server]") {
  // Node 2, a dot, consumes node 1 (rank 3) as operand 0 and node 0 (rank 2) as operand 1.
  NodeGraph graph;
  graph.num_nodes = 3;
  graph.node_feat.assign(3 * kNodeFeatDim, 0.0f);
  graph.node_opcode = {op::kParameter, op::kParameter, op::kDot};
  const std::vector<std::vector<float>> shapes = {{8, 16}, {8, 16, 4}, {8, 16, 4}};
  for (int64_t n = 0; n < 3; ++n)
    for (size_t d = 0; d < shapes[n].size(); ++d) graph.node_feat[n * kNodeFeatDim + kShapeDimsBegin + d] = shapes[n][d];
  graph.edge_index = {2, 0, 2, 1};
  GraphStore store(1 << 20);
  auto arrays = store.Register(WireOf(graph, {2}));
  CATCH_REQUIRE(arrays.ok());
  CATCH_CHECK_FALSE(arrays->graph->exact_operand_ranks);
  CATCH_CHECK(arrays->graph->space.nodes[0].groups[1].rank == 3);
  CATCH_CHECK(arrays->graph->space.nodes[0].groups[2].rank == 3);
  WireGraph hlo = WireOf(graph, {2});
  hlo.first_operands = {{-1, -1}, {-1, -1}, {1, 0}};
  auto refined = store.Register(hlo);
  CATCH_REQUIRE(refined.ok());
  CATCH_CHECK(refined->already_registered);
  CATCH_CHECK(refined->graph_hash == arrays->graph_hash);
  CATCH_CHECK(refined->graph->exact_operand_ranks);
  CATCH_CHECK(refined->graph->space.nodes[0].groups[1].rank == 3);
  CATCH_CHECK(refined->graph->space.nodes[0].groups[2].rank == 2);
  CATCH_CHECK(store.Get(arrays->graph_hash)->exact_operand_ranks);  // what later requests see
  // The arrays again do not undo it.
  auto again = store.Register(WireOf(graph, {2}));
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(again->graph->exact_operand_ranks);
  CATCH_CHECK(arrays->graph->space.nodes[0].groups[2].rank == 3);  // a request holding the old one keeps it
}

CATCH_TEST_CASE("ranker scores exactly as the evaluator does, and caches per-graph work", "[server]") {
  World w;
  w.Publish("layout:xla:random", 2);
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  Ranker ranker(&mm, RankerOptions{});
  const GraphFile f = w.File("layout:xla:random");
  LayoutGraph g = *LoadLayoutGraph(f.path);
  auto reg = ranker.Register(WireOf(g));
  CATCH_REQUIRE(reg.ok());
  CATCH_CHECK(reg->graph_hash == GraphContentHash(g.graph, g.node_config_ids));
  CATCH_CHECK_FALSE(reg->already_registered);
  CATCH_CHECK(reg->pruned_nodes < reg->num_nodes);
  CATCH_CHECK(ranker.Register(WireOf(g))->already_registered);

  RankRequest q = LayoutRequest(g, reg->graph_hash);
  auto first = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(first->model_version == 1);
  CATCH_CHECK_FALSE(first->timing.cache_hit);
  CATCH_CHECK(first->timing.graph_prepare_ms > 0);
  auto second = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(second.ok());
  CATCH_CHECK(second->timing.cache_hit);
  CATCH_CHECK(second->timing.graph_prepare_ms == 0);  // no pruning, no per-graph tensor work
  CATCH_CHECK(second->scores == first->scores);

  // The evaluator's path: load the file, prune, build tensors, the shared scoring function.
  auto model = LoadModel(Registry(w.registry), "layout:xla:random", 1);
  const ScoreResult eval = EvaluatorScores(*model, f);
  const int64_t num_configs = static_cast<int64_t>(eval.score.size());
  CATCH_REQUIRE(eval.score.size() == first->scores.size());
  for (size_t i = 0; i < eval.score.size(); ++i) {
    CATCH_CHECK(first->scores[i] == Approx(eval.score[i]).margin(1e-5));
    CATCH_CHECK(first->spread[i] == Approx(eval.spread[i]).margin(1e-5));
  }
  // One pass per fold: the file's 58 distinct rows (of 60) are their own reference, one
  // batch.
  CATCH_CHECK(first->timing.batches == eval.batches);
  CATCH_CHECK(num_configs == 60);
  CATCH_CHECK(first->timing.batches == 2);
  CATCH_CHECK(first->reference_configs == 58);
  // Ranking: fastest first, cut to top_k; one fold only when asked.
  q.top_k = 5;
  q.folds = {1};
  auto top = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(top.ok());
  CATCH_CHECK(top->ranking.size() == 5u);
  for (size_t i = 1; i < 5; ++i) CATCH_CHECK(top->scores[top->ranking[i - 1]] <= top->scores[top->ranking[i]]);
  CATCH_CHECK(top->spread == std::vector<float>(top->scores.size(), 0.0f));
  const RankerStats s = ranker.Stats();
  CATCH_CHECK(s.tensor_cache.hits == 2);
  CATCH_CHECK(s.tensor_cache.misses == 1);

  // --fold_inference=false (the layers as trained) ranks with the same scores.
  ModelManager unfolded(Registry(w.registry), {2, /*fold_inference=*/false});
  unfolded.Poll();
  CATCH_CHECK(mm.Get("layout:xla:random", 0)->model->folds[0]->InferenceFolding());
  CATCH_CHECK_FALSE(unfolded.Get("layout:xla:random", 0)->model->folds[0]->InferenceFolding());
  Ranker plain(&unfolded, RankerOptions{});
  CATCH_REQUIRE(plain.Register(WireOf(g)).ok());
  auto same = plain.Rank(LayoutRequest(g, reg->graph_hash), nullptr);
  CATCH_REQUIRE(same.ok());
  for (size_t i = 0; i < same->scores.size(); ++i) CATCH_CHECK(same->scores[i] == Approx(first->scores[i]).margin(1e-4));
}

CATCH_TEST_CASE("ranker validates every request field before any compute", "[server]") {
  ServedWorld sw(1);
  World& w = sw.w;
  Ranker& ranker = *sw.ranker;
  const LayoutGraph& g = sw.g;
  const std::string& hash = sw.hash;
  auto expect = [&](const RankRequest& q, absl::StatusCode code, const std::string& text) {
    auto r = ranker.Rank(q, nullptr);
    CATCH_REQUIRE_FALSE(r.ok());
    CATCH_CHECK(r.status().code() == code);
    CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains(text));
  };
  const RankRequest good = LayoutRequest(g, hash);
  RankRequest q = good;
  q.collection = "layout:xla";
  expect(q, absl::StatusCode::kInvalidArgument, "unknown collection");
  q = good;
  q.collection = "layout:nlp:random";
  expect(q, absl::StatusCode::kNotFound, "no model is loaded for collection 'layout:nlp:random'");
  q = good;
  q.model_version = 9;
  expect(q, absl::StatusCode::kNotFound, "version 9");
  q = good;
  q.graph_hash = "abc";
  expect(q, absl::StatusCode::kInvalidArgument, "64 lowercase hex");
  q = good;
  q.graph_hash = std::string(64, 'f');
  expect(q, absl::StatusCode::kNotFound, "call RegisterGraph");
  q = good;
  q.num_configs = 0;
  expect(q, absl::StatusCode::kInvalidArgument, "num_configs must be positive");
  q = good;
  q.num_configs = 501;
  expect(q, absl::StatusCode::kResourceExhausted, "limit of 500");
  q = good;
  q.layout_configs.remove_suffix(1);
  expect(q, absl::StatusCode::kInvalidArgument, "expected num_configs x nc x 18");
  q = good;
  std::string bad_value(good.layout_configs);
  bad_value[18 * 3 + 4] = 6;
  q.layout_configs = bad_value;
  expect(q, absl::StatusCode::kInvalidArgument, "layout_configs: config 0, configurable node 3, slot 4 is 6, expected -1..5");
  // A row no compiler could apply (model/core/layout_space.h): a dimension twice, in a
  // row or in the reference, and in a measurement report.
  {
    const LayoutSpace space = LayoutSpaceOf(g.graph, g.node_config_ids);
    int64_t j = 0;
    while (space.nodes[j].groups[0].rank < 2) ++j;
    std::string twice(good.layout_configs);
    const size_t at = (static_cast<size_t>(g.num_config_nodes()) + j) * kConfigFeatDim;  // config 1, node j
    twice[at] = 1;
    twice[at + 1] = 1;
    const std::string where = "config 1, configurable node " + std::to_string(j) + " (" +
                              std::string(OpcodeName(space.nodes[j].opcode)) + ", node " +
                              std::to_string(space.nodes[j].node) + "), output group [1, 1, ";
    q = good;
    q.layout_configs = twice;
    expect(q, absl::StatusCode::kInvalidArgument, "layout_configs: " + where);
    expect(q, absl::StatusCode::kInvalidArgument, "dimension 1 appears twice");
    q = good;
    q.num_reference_configs = 2;
    q.reference_layout_configs = absl::string_view(twice).substr(0, twice.size() / good.num_configs * 2);
    expect(q, absl::StatusCode::kInvalidArgument, "reference_layout_configs: " + where);
    ReportRequest report;
    report.collection = "layout:xla:random";
    report.graph_hash = hash;
    report.num_configs = 2;
    report.layout_configs = q.reference_layout_configs;
    report.runtimes_ns = {100, 200};
    auto refused = ranker.MeasurementReportFor(report);
    CATCH_REQUIRE_FALSE(refused.ok());
    CATCH_CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK_THAT(std::string(refused.status().message()), Catch::StartsWith("layout_configs: " + where));
    report.layout_configs = absl::string_view(good.layout_configs).substr(0, twice.size() / good.num_configs * 2);
    CATCH_CHECK(ranker.MeasurementReportFor(report).ok());
  }
  q = good;
  q.tile_configs = "x";
  expect(q, absl::StatusCode::kInvalidArgument, "tile_configs must be empty");
  q = good;
  q.top_k = -1;
  expect(q, absl::StatusCode::kInvalidArgument, "top_k");
  q = good;
  q.cascade = true;
  expect(q, absl::StatusCode::kInvalidArgument, "cascade needs top_k > 0");
  q = good;
  q.num_reference_configs = 1000;
  expect(q, absl::StatusCode::kInvalidArgument, "num_reference_configs must be in 0..");
  q = good;
  q.num_reference_configs = 1;
  expect(q, absl::StatusCode::kInvalidArgument, "reference_layout_configs has 0 bytes, expected num_reference_configs");
  q = good;
  q.reference_layout_configs = q.layout_configs;
  expect(q, absl::StatusCode::kInvalidArgument, "reference configurations given but num_reference_configs is 0");
  q = good;
  q.num_reference_configs = 2;
  q.reference_layout_configs = q.layout_configs.substr(0, q.layout_configs.size() / good.num_configs * 2);
  q.reference_tile_configs = "x";
  expect(q, absl::StatusCode::kInvalidArgument, "reference_tile_configs must be empty");
  q = good;
  q.folds = {0, 1};
  expect(q, absl::StatusCode::kInvalidArgument, "folds: 1 is not a fold");
  q = good;
  q.folds = {0, 0};
  expect(q, absl::StatusCode::kInvalidArgument, "listed twice");
  q = good;
  q.collection = "tile:xla";
  expect(q, absl::StatusCode::kInvalidArgument, "without node_config_ids");

  // The tile collection: its own encoding, NaN refused.
  TileGraph t = *LoadTileGraph(w.File("tile:xla").path);
  const std::string th = ranker.Register(WireOf(t.graph, {}))->graph_hash;
  RankRequest tq;
  tq.collection = "tile:xla";
  tq.graph_hash = th;
  tq.num_configs = t.num_configs;
  std::string tile_bytes(reinterpret_cast<const char*>(t.config_feat.data()), t.config_feat.size() * 4);
  tq.tile_configs = tile_bytes;
  auto tr = ranker.Rank(tq, nullptr);
  CATCH_REQUIRE(tr.ok());
  CATCH_CHECK(tr->scores.size() == static_cast<size_t>(t.num_configs));
  const float nan = std::nanf("");
  std::memcpy(&tile_bytes[4 * 30], &nan, 4);
  expect(tq, absl::StatusCode::kInvalidArgument, "tile_configs: config 1, feature 6 is nan");
  const float negative = -2;  // the loader refuses it too (model/core/config_rows.h)
  std::memcpy(&tile_bytes[4 * 30], &negative, 4);
  tq.tile_configs = tile_bytes;
  expect(tq, absl::StatusCode::kInvalidArgument,
         "tile_configs: config 1, feature 6 is -2, expected a finite non-negative number");
  tq.collection = "layout:xla:random";
  expect(tq, absl::StatusCode::kInvalidArgument, "the graph has no node_config_ids");
}

CATCH_TEST_CASE("ranker: a report over --max_report_rows rows or with a runtime over an hour is refused before any row "
                "is made",
                "[server]") {
  ServedWorld sw(1);
  const LayoutGraph& g = sw.g;
  const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
  ReportRequest report;
  report.collection = "layout:xla:random";
  report.graph_hash = sw.hash;
  report.num_configs = 2;
  report.layout_configs = absl::string_view(reinterpret_cast<const char*>(g.config_feat.data()), 2 * row);
  report.runtimes_ns = {100, kMaxRuntimeNs};  // an hour exactly is a runtime
  CATCH_CHECK(sw.ranker->MeasurementReportFor(report).ok());
  report.runtimes_ns = {100, std::numeric_limits<int64_t>::max()};  // 292 years
  auto refused = sw.ranker->MeasurementReportFor(report);
  CATCH_REQUIRE_FALSE(refused.ok());
  CATCH_CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(refused.status().message()),
                   Catch::StartsWith("runtimes_ns[1]: 9223372036854775807 ns is over an hour"));
  // 601 rows claimed: refused on the count, whatever the bytes (none are read).
  report.num_configs = 601;
  report.runtimes_ns.assign(601, 100);
  refused = sw.ranker->MeasurementReportFor(report);
  CATCH_REQUIRE_FALSE(refused.ok());
  CATCH_CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(refused.status().message()) ==
              "num_configs: 601 rows in one report, over this server's --max_report_rows (600): split it into reports "
              "of at most that many");
}

CATCH_TEST_CASE("a full queue answers RESOURCE_EXHAUSTED, and cancelled requests stop", "[server]") {
  World w;
  w.Publish("layout:xla:random", 1);
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  RankerOptions ro;
  ro.workers = 1;
  ro.queue_size = 1;
  Ranker ranker(&mm, ro);
  LayoutGraph g = *LoadLayoutGraph(w.File("layout:xla:random").path);
  const RankRequest q = LayoutRequest(g, ranker.Register(WireOf(g))->graph_hash);

  // The single worker is held inside a request's cancellation poll.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> in_worker{false};
  auto blocking = [&] {
    in_worker = true;
    released.wait();
    return false;
  };
  auto a = std::async(std::launch::async, [&] { return ranker.Rank(q, blocking); });
  while (!in_worker) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto b = std::async(std::launch::async, [&] { return ranker.Rank(q, nullptr); });  // waits in the queue
  while (ranker.Stats().queued < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto c = ranker.Rank(q, nullptr);  // the queue is full
  CATCH_REQUIRE_FALSE(c.ok());
  CATCH_CHECK(c.status().code() == absl::StatusCode::kResourceExhausted);
  release.set_value();
  CATCH_CHECK(a.get().ok());
  CATCH_CHECK(b.get().ok());
  CATCH_CHECK(ranker.Stats().rejected_queue_full == 1);

  auto cancelled = ranker.Rank(q, [] { return true; });
  CATCH_CHECK(cancelled.status().code() == absl::StatusCode::kCancelled);
  CATCH_CHECK(ranker.Stats().cancelled == 1);
}

CATCH_TEST_CASE("worker pool: lanes are served in turn, each refuses only its own overflow, and a queued job can be "
                "withdrawn unrun",
                "[server]") {
  WorkerPool pool(1, LaneCapacities{2, 2, 3});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> holding{false};
  std::mutex order_mu;
  std::vector<std::string> order;
  const auto record = [&](const std::string& name) {
    return [&, name] {
      std::lock_guard<std::mutex> lock(order_mu);
      order.push_back(name);
    };
  };
  CATCH_REQUIRE(pool.TrySubmit(Lane::kSearch, [&] {
    holding = true;
    released.wait();
  }) > 0);
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Two searches queued before two ranks (and tile searches): the worker takes the lanes in
  // turn, starting after the lane it served last (search), so the first rank runs second,
  // after one tile search, not fourth.
  CATCH_REQUIRE(pool.TrySubmit(Lane::kSearch, record("s1")) > 0);
  CATCH_REQUIRE(pool.TrySubmit(Lane::kSearch, record("s2")) > 0);
  CATCH_CHECK(pool.TrySubmit(Lane::kSearch, record("s3")) == 0);  // the search lane is full
  const uint64_t r1 = pool.TrySubmit(Lane::kRank, record("r1"));
  CATCH_REQUIRE(r1 > 0);  // ranks still have room
  const uint64_t withdrawn = pool.TrySubmit(Lane::kRank, record("never"));
  CATCH_REQUIRE(withdrawn > 0);
  CATCH_CHECK(pool.TrySubmit(Lane::kRank, record("r3")) == 0);
  CATCH_CHECK(pool.queued() == 4);
  CATCH_CHECK(pool.TryWithdraw(withdrawn));
  CATCH_CHECK_FALSE(pool.TryWithdraw(withdrawn));  // once
  CATCH_CHECK(pool.queued(Lane::kRank) == 1);
  CATCH_CHECK(pool.withdrawn(Lane::kRank) == 1);
  CATCH_REQUIRE(pool.TrySubmit(Lane::kRank, record("r2")) > 0);  // its slot is free again
  // Tile searches have a lane and a bound of their own: three wait though the others are full.
  for (const char* t : {"t1", "t2", "t3"}) CATCH_REQUIRE(pool.TrySubmit(Lane::kTile, record(t)) > 0);
  CATCH_CHECK(pool.TrySubmit(Lane::kTile, record("t4")) == 0);
  CATCH_CHECK(pool.queued(Lane::kTile) == 3);
  release.set_value();
  while (pool.queued() > 0 || pool.running() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // In turn from the lane after the one served last (search): tile, rank, search, ...
  CATCH_CHECK(order == std::vector<std::string>{"t1", "r1", "s1", "t2", "r2", "s2", "t3"});
  CATCH_CHECK_FALSE(pool.TryWithdraw(r1));  // it ran
}

CATCH_TEST_CASE("ranker: requests that expire while queued leave the queue at once, while the worker is still busy",
                "[server]") {
  World w;
  w.Publish("layout:xla:random", 1);
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  RankerOptions ro;
  ro.workers = 1;
  ro.queue_size = 4;
  Ranker ranker(&mm, ro);
  LayoutGraph g = *LoadLayoutGraph(w.File("layout:xla:random").path);
  const RankRequest q = LayoutRequest(g, ranker.Register(WireOf(g))->graph_hash);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> in_worker{false};
  // The worker is held by a rank whose cancellation poll blocks (on the worker: the
  // caller's own polls of it return at once).
  const std::thread::id caller_of_a_unset{};
  std::atomic<std::thread::id> caller_of_a{caller_of_a_unset};
  auto blocking = [&] {
    if (std::this_thread::get_id() == caller_of_a.load()) return false;
    in_worker = true;
    released.wait();
    return false;
  };
  auto a = std::async(std::launch::async, [&] {
    caller_of_a = std::this_thread::get_id();
    return ranker.Rank(q, blocking);
  });
  while (!in_worker) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Three ranks queue; their deadline passes (the flag) while the worker is busy: each
  // leaves the queue within the poll, not when the worker frees.
  std::atomic<bool> expired{false};
  std::vector<std::future<absl::StatusOr<RankResult>>> waiting;
  for (int i = 0; i < 3; ++i)
    waiting.push_back(std::async(std::launch::async, [&] { return ranker.Rank(q, [&] { return expired.load(); }); }));
  while (ranker.Stats().queued_ranks < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  expired = true;
  for (auto& f : waiting) {
    const absl::StatusOr<RankResult> r = f.get();  // returns while the worker is still held
    CATCH_CHECK(r.status().code() == absl::StatusCode::kCancelled);
    CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("it left the queue"));
  }
  CATCH_CHECK(ranker.Stats().queued == 0);
  CATCH_CHECK(ranker.Stats().withdrawn_ranks == 3);
  CATCH_CHECK(ranker.Stats().running == 1);
  release.set_value();
  CATCH_CHECK(a.get().ok());
  CATCH_CHECK(ranker.Rank(q, nullptr).ok());  // the queue took the next one
}

CATCH_TEST_CASE("a request's activations stay under the budget: smaller batches, or RESOURCE_EXHAUSTED", "[server]") {
  World w;
  w.Publish("layout:xla:random", 1);
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  const GraphFile f = w.File("layout:xla:random");
  LayoutGraph g = *LoadLayoutGraph(f.path);
  auto model = LoadModel(Registry(w.registry), "layout:xla:random", 1);
  const ModelSpec& spec = model->manifest.spec;  // hidden 16, fp32
  RankerOptions unbounded;
  Ranker plain(&mm, unbounded);
  const int64_t pruned = plain.Register(WireOf(g))->pruned_nodes;
  const int64_t per_config = ActivationBytesPerConfig(spec, pruned);
  CATCH_CHECK(per_config == 16 * pruned * 16);  // 16 bytes per node x config x hidden element, either precision

  // Room for 5 configurations beside the reference's statistics (2 blocks x groups x
  // a, b, lse x N x H / 2 floats): a reference of 5 and batches of at most 5 instead of
  // the model's 256 and 16, exactly as the shared scoring function computes with those.
  const int64_t groups = model->manifest.reference_groups;
  const int64_t stats = ReferenceStatsBytes(spec, pruned, groups);
  CATCH_CHECK(stats == 2 * groups * 3 * pruned * 8 * 4);
  RankerOptions five;
  five.activation_bytes = stats + 5 * per_config + per_config / 2;
  Ranker ranker(&mm, five);
  auto reg = ranker.Register(WireOf(g));
  CATCH_REQUIRE(reg.ok());
  auto r = ranker.Rank(LayoutRequest(g, reg->graph_hash), nullptr);
  CATCH_REQUIRE(r.ok());
  const ScoreResult reference = EvaluatorScores(*model, f, /*batch_size=*/5);
  CATCH_CHECK(r->timing.batches == reference.batches);
  CATCH_CHECK(r->reference_configs == 5);
  CATCH_CHECK(r->timing.batches == 1 + (58 - 5 + 4) / 5);  // the reference, then the other 53 distinct rows
  for (size_t i = 0; i < reference.score.size(); ++i) CATCH_CHECK(r->scores[i] == Approx(reference.score[i]).margin(1e-5));

  // Not even one configuration fits: refused before any compute, with the numbers.
  RankerOptions tiny;
  tiny.activation_bytes = per_config - 1;
  Ranker refusing(&mm, tiny);
  CATCH_REQUIRE(refusing.Register(WireOf(g)).ok());
  auto refused = refusing.Rank(LayoutRequest(g, reg->graph_hash), nullptr);
  CATCH_CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
  CATCH_CHECK_THAT(std::string(refused.status().message()),
                   Catch::Contains("the graph has " + std::to_string(pruned) + " nodes after pruning"));
  CATCH_CHECK_THAT(std::string(refused.status().message()), Catch::Contains("(--activation_bytes)"));
}

CATCH_TEST_CASE("prepared tensors of unloaded versions are dropped", "[server]") {
  World w;
  w.Publish("layout:xla:random", 1);
  ModelManager mm(Registry(w.registry), {1});  // keep only the newest version
  mm.Poll();
  Ranker ranker(&mm, RankerOptions{});
  LayoutGraph g = *LoadLayoutGraph(w.File("layout:xla:random").path);
  auto reg = ranker.Register(WireOf(g));
  CATCH_REQUIRE(ranker.Rank(LayoutRequest(g, reg->graph_hash), nullptr).ok());
  CATCH_CHECK(ranker.Stats().tensor_cache.entries == 1);
  CATCH_CHECK(ranker.PurgeUnloaded() == 0);  // version 1 is still loaded
  w.Publish("layout:xla:random", 1);
  mm.Poll();  // version 2 loads, version 1 is unloaded
  CATCH_CHECK(ranker.PurgeUnloaded() == 1);
  CATCH_CHECK(ranker.Stats().tensor_cache.entries == 0);
  CATCH_CHECK(ranker.Stats().tensor_cache.bytes == 0);
  auto r = ranker.Rank(LayoutRequest(g, reg->graph_hash), nullptr);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->model_version == 2);
  CATCH_CHECK(ranker.Stats().tensor_cache.entries == 1);
}

CATCH_TEST_CASE("ranker: a cascade request re-scores the best fraction with every fold", "[server]") {
  World w;
  w.Publish("layout:xla:random", 2);
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  RankerOptions o;
  o.cascade_fraction = 0.25;
  Ranker ranker(&mm, o);
  LayoutGraph g = *LoadLayoutGraph(w.File("layout:xla:random").path);
  auto reg = ranker.Register(WireOf(g));
  RankRequest q = LayoutRequest(g, reg->graph_hash);
  q.top_k = 3;
  auto plain = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(plain.ok());
  CATCH_CHECK(plain->timing.rescored == g.num_configs);
  q.cascade = true;
  auto r = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(r.ok());
  const int64_t keep = std::max<int64_t>((g.num_configs + 3) / 4, 6);
  CATCH_CHECK(r->timing.rescored == keep);
  CATCH_CHECK(r->scores.size() == static_cast<size_t>(g.num_configs));  // scores stay complete
  CATCH_CHECK(r->ranking.size() == 3u);
  // Its cost against the full ensemble's is checked where it is computed (net_test.cc).
}

CATCH_TEST_CASE("ranker: reversed rows, or a part of them against the same reference, keep every score", "[server]") {
  World w;
  w.Publish("layout:xla:random", 2);
  ModelManager mm(Registry(w.registry), {2});
  mm.Poll();
  Ranker ranker(&mm, RankerOptions{});
  LayoutGraph g = *LoadLayoutGraph(w.File("layout:xla:random").path);
  const std::string hash = ranker.Register(WireOf(g))->graph_hash;
  const int64_t c = g.num_configs;
  const size_t row = g.config_feat.size() / static_cast<size_t>(c);
  const std::string rows(reinterpret_cast<const char*>(g.config_feat.data()), g.config_feat.size());
  RankRequest q = LayoutRequest(g, hash);
  auto forward = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(forward.ok());
  // The file repeats two of its 60 rows: its 58 distinct rows are their own reference.
  CATCH_CHECK(forward->reference_configs ==
              static_cast<int64_t>(ChooseReference(ConfigRows{g.config_feat.data(), nullptr, c, static_cast<int64_t>(row / 18)}, 256).size()));
  CATCH_CHECK(forward->reference_configs < c);
  // Reversed: every configuration keeps its score to the last bit (the same rows make the
  // same batches whatever their order), so the ranking is the same one.
  std::string reversed;
  for (int64_t i = c - 1; i >= 0; --i) reversed += rows.substr(static_cast<size_t>(i) * row, row);
  q.layout_configs = reversed;
  auto backward = ranker.Rank(q, nullptr);
  CATCH_REQUIRE(backward.ok());
  std::vector<double> a, b;
  for (int64_t i = 0; i < c; ++i) {
    CATCH_CHECK(backward->scores[c - 1 - i] == forward->scores[i]);
    a.push_back(forward->scores[i]);
    b.push_back(backward->scores[c - 1 - i]);
  }
  CATCH_CHECK(RankByScore(a) == RankByScore(b));  // (Kendall's tau counts the file's repeated rows as ties)
  // A reference the client fixes (its first 10 rows): the whole request and a part of it
  // score their common rows alike.
  const std::string reference = rows.substr(0, 10 * row);
  RankRequest whole = LayoutRequest(g, hash);
  whole.num_reference_configs = 10;
  whole.reference_layout_configs = reference;
  auto all = ranker.Rank(whole, nullptr);
  CATCH_REQUIRE(all.ok());
  CATCH_CHECK(all->reference_configs == 10);
  RankRequest part = whole;
  const std::string tail = rows.substr(5 * row);
  part.num_configs = c - 5;
  part.layout_configs = tail;
  auto some = ranker.Rank(part, nullptr);
  CATCH_REQUIRE(some.ok());
  for (int64_t i = 0; i < c - 5; ++i) CATCH_CHECK(some->scores[i] == Approx(all->scores[5 + i]).margin(1e-5));
}

CATCH_TEST_CASE("ranker: SearchConfigs runs the search policy's options, as tgraph-bench-search's farm does: the same "
                "proposals and scores, with and without the variation of a stalled loop",
                "[server][search]") {
  ServedWorld sw(2);
  const LayoutGraph& g = sw.g;
  const std::vector<int8_t> measured(g.config_feat.begin(), g.config_feat.end());
  const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
  const std::vector<int8_t> start(measured.begin(), measured.begin() + 3 * row);
  CATCH_REQUIRE(g.num_configs > kStallMeasurements);

  // The farm's path (model/bench/bench_search_main.cc): the model loaded, the graph pruned
  // and encoded, the options from the same policy with the model's own budget.
  auto model = LoadModel(Registry(sw.w.registry), "layout:xla:random", 1);
  CATCH_REQUIRE(model.ok());
  const PrunedGraph pruned = PruneGraph(g.graph, g.node_config_ids);
  const GraphTensors tensors = MakeGraphTensors(pruned.graph, pruned.config_node_index, model->manifest.stats);
  const EncodedGraph encoded = EncodeGraph(tensors, model->folds);
  const std::vector<FoldModel> folds = encoded.Folds(model->folds);

  // Measured in the file's order: the runtimes still improving (the last row the fastest
  // by far), or stalled (the first row the fastest by far).
  const int64_t fastest = *std::min_element(g.config_runtime.begin(), g.config_runtime.end());
  std::vector<int64_t> improving = g.config_runtime, stalled = g.config_runtime;
  improving.back() = fastest / 2;
  stalled.front() = fastest / 2;
  for (const auto& [runtimes, variation_rows] : {std::pair{improving, int64_t{0}}, std::pair{stalled, int64_t{3}}}) {
    CATCH_INFO("expected variation " << variation_rows);
    SearchRequest q;
    q.collection = "layout:xla:random";
    q.graph_hash = sw.hash;
    q.num_results = 5;
    q.max_evaluations = 300;
    q.num_exclude = g.num_configs;
    q.exclude_layout_configs = absl::string_view(reinterpret_cast<const char*>(measured.data()), measured.size());
    q.exclude_runtimes_ns = runtimes;  // the correction too
    q.num_start = 3;
    q.start_layout_configs = absl::string_view(reinterpret_cast<const char*>(start.data()), start.size());
    q.seed = 7;
    auto served = sw.ranker->Search(q, nullptr);
    CATCH_REQUIRE(served.ok());
    CATCH_CHECK(served->correction_measurements == g.num_configs);
    // Half of 5, rounded up, when stalled.
    CATCH_CHECK(served->variation == variation_rows);

    SearchOptions o = SearchPolicy(q.num_results, q.max_evaluations, q.seed, ModelSearchBudget(model->manifest));
    o.start = &start;
    o.exclude = &measured;
    auto correction = CorrectionFor(measured, runtimes, g.num_config_nodes());
    CATCH_REQUIRE(correction.ok());
    CATCH_REQUIRE(correction->has_value());
    o.correction = &**correction;
    const Variation variation = VariationFor(o.results, measured, runtimes, g.num_config_nodes());
    o.variation = variation.rows;
    o.variation_parents = &variation.parents;
    const SearchResult farm = SearchLayouts(folds, tensors, LayoutSpaceOf(g.graph, g.node_config_ids), o);
    CATCH_CHECK(farm.rows == served->rows);
    CATCH_CHECK(farm.variation == served->variation);
    CATCH_REQUIRE(farm.score.size() == served->scores.size());
    CATCH_CHECK(farm.score.size() == 5u);
    for (size_t i = 0; i < farm.score.size(); ++i) CATCH_CHECK(served->scores[i] == Approx(farm.score[i]).margin(1e-5));
    CATCH_CHECK(farm.evaluations == served->evaluations);
    CATCH_CHECK(farm.reference == served->reference_configs);
    CATCH_CHECK(farm.correction_weight == Approx(served->correction_weight));
  }
  // The defaults are the policy's: 0 asks for them.
  const SearchOptions defaults = SearchPolicy(0, 0, 0, ModelSearchBudget(model->manifest));
  CATCH_CHECK(defaults.results == kDefaultSearchResults);
  CATCH_CHECK(defaults.evaluations == kDefaultSearchEvaluations);
  CATCH_CHECK(defaults.reference == std::min<int64_t>(kMaxSearchReference, model->manifest.reference_configs));
}

CATCH_TEST_CASE("ranker: a search that joins the store's measurements of its graph proposes what those rows and "
                "runtimes given in the request would: none of them again, corrected by them, started from the fastest",
                "[server][search]") {
  ServedWorld sw(2);
  const LayoutGraph& g = sw.g;
  const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
  // The file's first 40 distinct rows (a random file repeats some).
  std::vector<int64_t> distinct;
  std::set<std::string> seen;
  for (int64_t i = 0; i < g.num_configs && distinct.size() < 40; ++i)
    if (seen.insert(std::string(reinterpret_cast<const char*>(g.config(i)), row)).second) distinct.push_back(i);
  const int64_t k = static_cast<int64_t>(distinct.size()), quarter = k / 4, half = k / 2;
  CATCH_REQUIRE(k >= 8);
  const auto at = [&](int64_t i) { return g.config(distinct[static_cast<size_t>(i)]); };
  const auto ns = [&](int64_t i) { return g.config_runtime[static_cast<size_t>(distinct[static_cast<size_t>(i)])]; };
  TempDir dir;
  MeasurementStore store(dir.path());
  const Collection c = *ParseCollection("layout:xla:random");
  // Two reports: rows [0, half) at their runtimes t, then rows [quarter, k) at 2t. Stored,
  // rows [quarter, half) were measured t and 2t: the upper median, 2t.
  const auto report = [&](int64_t first, int64_t end, int64_t scale) {
    MeasurementReport r;
    r.collection = c;
    r.graph_hash = sw.hash;
    r.graph = g.graph;
    r.node_config_ids = g.node_config_ids;
    r.num_configs = end - first;
    for (int64_t i = first; i < end; ++i) {
      r.config_feat.insert(r.config_feat.end(), at(i), at(i) + row);
      r.runtime_ns.push_back(scale * ns(i));
    }
    return r;
  };
  CATCH_REQUIRE(store.Append(report(0, half, 1)).ok());
  CATCH_REQUIRE(store.Append(report(quarter, k, 2)).ok());

  SearchRequest joined;
  joined.collection = c.name();
  joined.graph_hash = sw.hash;
  joined.num_results = 5;
  joined.max_evaluations = 300;
  joined.seed = 3;
  joined.include_stored = true;
  joined.stored_measurements = [&](const std::string& hash, int64_t max_rows, const std::function<bool()>& stop) {
    return LoadGraphMeasurements(dir.path(), c, hash, max_rows, stop);
  };
  auto served = sw.ranker->Search(joined, nullptr);
  CATCH_REQUIRE(served.ok());
  CATCH_CHECK(served->stored_measurements == k);
  CATCH_CHECK(served->correction_measurements == k);
  CATCH_CHECK(served->start_configs == kJoinedStartRows);

  // The same rows given: in the order first reported, at the stored runtimes, the 16
  // fastest as start rows.
  std::vector<int8_t> measured;
  std::vector<int64_t> runtimes;
  for (int64_t i = 0; i < k; ++i) {
    measured.insert(measured.end(), at(i), at(i) + row);
    runtimes.push_back((i < quarter ? 1 : 2) * ns(i));
  }
  std::vector<int64_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return runtimes[a] < runtimes[b]; });
  std::vector<int8_t> start;
  for (size_t i = 0; i < static_cast<size_t>(kJoinedStartRows); ++i)
    start.insert(start.end(), at(order[i]), at(order[i]) + row);
  SearchRequest given = joined;
  given.include_stored = false;
  given.stored_measurements = nullptr;
  given.num_exclude = k;
  given.exclude_layout_configs = absl::string_view(reinterpret_cast<const char*>(measured.data()), measured.size());
  given.exclude_runtimes_ns = runtimes;
  given.num_start = kJoinedStartRows;
  given.start_layout_configs = absl::string_view(reinterpret_cast<const char*>(start.data()), start.size());
  auto explicit_rows = sw.ranker->Search(given, nullptr);
  CATCH_REQUIRE(explicit_rows.ok());
  CATCH_CHECK(explicit_rows->stored_measurements == 0);
  CATCH_CHECK(explicit_rows->start_configs == kJoinedStartRows);
  CATCH_CHECK(served->rows == explicit_rows->rows);
  CATCH_CHECK(served->scores == explicit_rows->scores);
  CATCH_CHECK(served->correction_weight == explicit_rows->correction_weight);
  std::set<std::string> excluded;
  for (size_t at = 0; at < measured.size(); at += row)
    excluded.insert(std::string(reinterpret_cast<const char*>(measured.data() + at), row));
  for (size_t at = 0; at < served->rows.size(); at += row)
    CATCH_CHECK(excluded.count(std::string(reinterpret_cast<const char*>(served->rows.data() + at), row)) == 0);

  // Rows the request gives count once: the first quarter given (without runtimes) leaves
  // the rest as the store's own, and the stored runtimes still correct all k.
  SearchRequest some = joined;
  some.num_exclude = quarter;
  some.exclude_layout_configs = given.exclude_layout_configs.substr(0, static_cast<size_t>(quarter) * row);
  auto both = sw.ranker->Search(some, nullptr);
  CATCH_REQUIRE(both.ok());
  CATCH_CHECK(both->stored_measurements == k - quarter);
  CATCH_CHECK(both->correction_measurements == k);
  // A store that cannot be listed is UNAVAILABLE to the client, without the server's path.
  TempDir broken;
  std::filesystem::create_directories(broken.path() + "/npz/layout/xla/random");
  std::ofstream(broken.path() + "/npz/layout/xla/random/train") << "not a directory";
  SearchRequest unreadable = joined;
  unreadable.stored_measurements = [&](const std::string& hash, int64_t max_rows, const std::function<bool()>& stop) {
    return LoadGraphMeasurements(broken.path(), c, hash, max_rows, stop);
  };
  auto refused_read = sw.ranker->Search(unreadable, nullptr);
  CATCH_REQUIRE_FALSE(refused_read.ok());
  CATCH_CHECK(refused_read.status().code() == absl::StatusCode::kUnavailable);
  CATCH_CHECK_THAT(std::string(refused_read.status().message()),
                   Catch::StartsWith("the measurement store could not be read"));
  CATCH_CHECK(std::string(refused_read.status().message()).find(broken.path()) == std::string::npos);
  // A request that gives all the store holds, with runtimes, runs as without the store.
  SearchRequest everything = given;
  everything.num_start = 0;
  everything.start_layout_configs = {};
  SearchRequest everything_joined = everything;
  everything_joined.include_stored = true;
  everything_joined.stored_measurements = joined.stored_measurements;
  auto plain = sw.ranker->Search(everything, nullptr), same = sw.ranker->Search(everything_joined, nullptr);
  CATCH_REQUIRE(plain.ok());
  CATCH_REQUIRE(same.ok());
  CATCH_CHECK(same->stored_measurements == 0);
  CATCH_CHECK(same->start_configs == 0);  // nothing joined: no start rows taken from the store
  CATCH_CHECK(same->rows == plain->rows);
  CATCH_CHECK(same->scores == plain->scores);
  // A server without a store joins nothing; a tile search joins its kernel's instead.
  SearchRequest no_store = joined;
  no_store.stored_measurements = nullptr;
  auto alone = sw.ranker->Search(no_store, nullptr);
  CATCH_REQUIRE(alone.ok());
  CATCH_CHECK(alone->stored_measurements == 0);
  CATCH_CHECK(alone->correction_measurements == 0);
  SearchRequest tile = joined;
  tile.collection = "tile:xla";
  tile.max_evaluations = 0;
  auto refused = sw.ranker->Search(tile, nullptr);
  CATCH_REQUIRE_FALSE(refused.ok());
  CATCH_CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK_THAT(std::string(refused.status().message()),
                   Catch::StartsWith("include_stored_measurements is for layout searches"));
}

CATCH_TEST_CASE("ranker: a search proposes legal, distinct rows never measured, the same for a seed, and its fields are "
                "validated like a ranking's",
                "[server][search]") {
  ServedWorld sw(2);
  Ranker& ranker = *sw.ranker;
  const LayoutGraph& g = sw.g;
  const std::string& hash = sw.hash;
  const std::string measured(reinterpret_cast<const char*>(g.config_feat.data()), g.config_feat.size());
  SearchRequest q;
  q.collection = "layout:xla:random";
  q.graph_hash = hash;
  q.num_results = 6;
  q.max_evaluations = 200;
  q.num_exclude = g.num_configs;
  q.exclude_layout_configs = measured;
  q.num_start = 3;
  q.start_layout_configs = absl::string_view(measured).substr(0, measured.size() / g.num_configs * 3);
  q.seed = 4;
  auto r = ranker.Search(q, nullptr);
  CATCH_REQUIRE(r.ok());
  const int64_t nc = g.num_config_nodes();
  CATCH_REQUIRE(r->scores.size() == 6u);
  CATCH_CHECK(r->rows.size() == static_cast<size_t>(6 * nc * kConfigFeatDim));
  CATCH_CHECK(r->evaluations <= 200);
  CATCH_CHECK(r->model_version == 1);
  CATCH_CHECK(std::is_sorted(r->scores.begin(), r->scores.end()));
  CATCH_CHECK(FirstIllegalLayoutRow(LayoutSpaceOf(g.graph, g.node_config_ids), r->rows.data(), 6) == "");
  std::set<std::string> rows, excluded;
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  for (size_t at = 0; at < measured.size(); at += row) excluded.insert(measured.substr(at, row));
  for (size_t at = 0; at < r->rows.size(); at += row) {
    const std::string x(reinterpret_cast<const char*>(r->rows.data() + at), row);
    CATCH_CHECK(excluded.count(x) == 0);
    rows.insert(x);
  }
  CATCH_CHECK(rows.size() == 6u);
  // The trust region: by default every proposal changes at most 8 groups of the default
  // or of a start row; the answer says so. -1 lifts it.
  CATCH_CHECK(r->max_changed_groups == kDefaultSearchRadius);
  const std::vector<int8_t> dflt(row, -1);
  const auto changed = [&](const int8_t* a, const char* b) {
    int64_t d = 0;
    for (size_t k = 0; k < row; k += kLayoutSlots) d += std::memcmp(a + k, b + k, kLayoutSlots) != 0;
    return d;
  };
  for (size_t at = 0; at < r->rows.size(); at += row) {
    int64_t nearest = changed(r->rows.data() + at, reinterpret_cast<const char*>(dflt.data()));
    for (int64_t s = 0; s < q.num_start; ++s)
      nearest = std::min(nearest, changed(r->rows.data() + at, q.start_layout_configs.data() + s * row));
    CATCH_CHECK(nearest <= kDefaultSearchRadius);
  }
  SearchRequest anywhere = q;
  anywhere.max_changed_groups = -1;
  auto free = ranker.Search(anywhere, nullptr);
  CATCH_REQUIRE(free.ok());
  CATCH_CHECK(free->max_changed_groups == 0);
  CATCH_CHECK(free->rows != r->rows);
  auto again = ranker.Search(q, nullptr);
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(again->rows == r->rows);
  CATCH_CHECK(again->scores == r->scores);
  // The proposals ranked against the search's reference would need the reference; ranked
  // on their own they are still legal rows the ranker accepts.
  RankRequest rank;
  rank.collection = q.collection;
  rank.graph_hash = hash;
  rank.num_configs = 6;
  rank.layout_configs = absl::string_view(reinterpret_cast<const char*>(r->rows.data()), r->rows.size());
  CATCH_CHECK(ranker.Rank(rank, nullptr).ok());

  auto expect = [&](const SearchRequest& bad, absl::StatusCode code, const std::string& text) {
    auto s = ranker.Search(bad, nullptr);
    CATCH_REQUIRE_FALSE(s.ok());
    CATCH_CHECK(s.status().code() == code);
    CATCH_CHECK_THAT(std::string(s.status().message()), Catch::Contains(text));
  };
  SearchRequest b = q;
  b.collection = "tile:xla";
  // A tile search takes none of a layout search's fields.
  expect(b, absl::StatusCode::kInvalidArgument, "max_evaluations is for layout searches");
  b = q;
  b.collection = "tile:xla";
  b.max_evaluations = 0;
  b.num_start = 0;
  b.max_changed_groups = 4;
  expect(b, absl::StatusCode::kInvalidArgument, "max_changed_groups is for layout searches");
  b = q;
  b.max_changed_groups = -2;
  expect(b, absl::StatusCode::kInvalidArgument, "max_changed_groups must be -1 (the whole space), 0 (the server's default, 8)");
  b = q;
  b.num_results = 1001;
  expect(b, absl::StatusCode::kInvalidArgument, "num_results must be in 0..1000");
  b = q;
  b.max_evaluations = 501;
  expect(b, absl::StatusCode::kInvalidArgument, "max_evaluations must be in 0..500");
  b = q;
  b.num_exclude = 2;
  expect(b, absl::StatusCode::kInvalidArgument, "exclude_layout_configs has");
  b = q;
  std::string twice(q.start_layout_configs);
  twice[0] = 0;
  twice[1] = 0;
  b.start_layout_configs = twice;
  expect(b, absl::StatusCode::kInvalidArgument, "start_layout_configs: config 0, configurable node 0");
  b = q;
  b.graph_hash = std::string(64, 'e');
  expect(b, absl::StatusCode::kNotFound, "call RegisterGraph");
  b = q;
  b.num_candidates = 1;
  b.candidate_layout_configs = absl::string_view(twice).substr(0, row);  // a view of twice, not of a temporary
  expect(b, absl::StatusCode::kInvalidArgument, "candidate_layout_configs: config 0, configurable node 0");
  b.num_candidates = 2;
  expect(b, absl::StatusCode::kInvalidArgument, "candidate_layout_configs has");
  b = q;
  b.exclude_runtimes_ns.assign(g.config_runtime.begin(), g.config_runtime.begin() + 3);
  expect(b, absl::StatusCode::kInvalidArgument,
         "exclude_runtimes_ns has 3 values for num_exclude " + std::to_string(g.num_configs));
  b.exclude_runtimes_ns.assign(g.config_runtime.begin(), g.config_runtime.end());
  b.exclude_runtimes_ns[5] = 0;
  expect(b, absl::StatusCode::kInvalidArgument, "exclude_runtimes_ns[5] is 0, expected > 0");

  // With the measured rows' runtimes: the scores are corrected by what they say (the
  // same search otherwise), and the response says with how many.
  CATCH_CHECK(r->correction_measurements == 0);
  CATCH_CHECK(r->correction_weight == 0.0);
  SearchRequest measured_q = q;
  measured_q.exclude_runtimes_ns.assign(g.config_runtime.begin(), g.config_runtime.end());
  auto corrected = ranker.Search(measured_q, nullptr);
  CATCH_REQUIRE(corrected.ok());
  CATCH_CHECK(corrected->correction_measurements ==
              std::min<int64_t>(g.num_configs, MeasuredCorrection::kMaxMeasurements));
  // Its weight beside the model's scores: the search's (at most 3; less where the model
  // already predicts the runtimes, model/search/layout_search.h).
  CATCH_CHECK(corrected->correction_weight >= 0.0);
  CATCH_CHECK(corrected->correction_weight <= 3.0);
  CATCH_REQUIRE(corrected->scores.size() == 6u);
  CATCH_CHECK(std::is_sorted(corrected->scores.begin(), corrected->scores.end()));
  CATCH_CHECK(corrected->scores != r->scores);
  for (size_t at = 0; at < corrected->rows.size(); at += row)
    CATCH_CHECK(excluded.count(std::string(reinterpret_cast<const char*>(corrected->rows.data() + at), row)) == 0);

  // Restricted to candidates (the file's rows, the first 10 measured): only candidates
  // come back, none measured.
  SearchRequest pool = q;
  pool.num_candidates = g.num_configs;
  pool.candidate_layout_configs = measured;
  pool.num_exclude = 10;
  pool.exclude_layout_configs = absl::string_view(measured).substr(0, 10 * row);
  auto p = ranker.Search(pool, nullptr);
  CATCH_REQUIRE(p.ok());
  CATCH_REQUIRE(p->scores.size() == 6u);
  std::set<std::string> candidates;
  for (size_t at = 10 * row; at < measured.size(); at += row) candidates.insert(measured.substr(at, row));
  for (size_t at = 0; at < p->rows.size(); at += row)
    CATCH_CHECK(candidates.count(std::string(reinterpret_cast<const char*>(p->rows.data() + at), row)) == 1);
  // Every candidate excluded: nothing left to propose, an empty answer (not INTERNAL),
  // with start rows (evaluated, never proposed: not candidates) or without.
  SearchRequest none = pool;
  none.num_candidates = 1;
  none.candidate_layout_configs = absl::string_view(measured).substr(0, row);
  none.num_exclude = 1;
  none.exclude_layout_configs = none.candidate_layout_configs;
  auto empty = ranker.Search(none, nullptr);
  CATCH_REQUIRE(empty.ok());
  CATCH_CHECK(empty->scores.empty());
  CATCH_CHECK(empty->rows.empty());
  none.num_start = 0;
  none.start_layout_configs = {};
  empty = ranker.Search(none, nullptr);
  CATCH_REQUIRE(empty.ok());
  CATCH_CHECK(empty->scores.empty());
  b = q;
  b.collection = "layout:nlp:random";
  expect(b, absl::StatusCode::kNotFound, "no model is loaded");
}

CATCH_TEST_CASE("request log: a search's line says the evaluations it spent, not the maximum it was allowed", "[server]") {
  v1::SearchConfigsRequest q;
  q.set_graph_hash(std::string(64, 'a'));
  q.set_max_evaluations(0);  // the policy's default budget
  v1::SearchConfigsResponse r;
  r.set_evaluations(2048);
  r.set_model_version(3);
  CATCH_CHECK_THAT(RequestLog::Line("SearchConfigs", 0, 12.5, FieldsOf(q, r)),
                   Catch::EndsWith(" graph=aaaaaaaaaaaa evaluations=2048 model_version=3"));
  // A call that failed before answering has spent nothing worth a field.
  CATCH_CHECK(RequestLog::Line("SearchConfigs", 3, 0.1, FieldsOf(q, v1::SearchConfigsResponse())).find("evaluations=") ==
              std::string::npos);
}
