// End-to-end tests of what a farm measures: models of one's own, synthetic-only models named,
// ReportMeasurements durable and refused precisely, the replay loop with fine-tuning, a full disk.
#include "tests/e2e_util.h"
#include "model/store/stored_layouts.h"

using namespace tgraph;
using namespace tgraph::e2e;

CATCH_TEST_CASE("server: a model of one's own (layout@tpu-v5e) is served, ranks and keeps its measurements apart", "[e2e]") {
  World w;
  w.Publish(1);                                          // layout:xla:random, the dataset's
  w.ModelWorld::Publish("layout@tpu-v5e", 1, 16, nullptr);  // a farm's own, by name
  const std::string store = w.dir.path() + "/store";
  ServerProcess server(w.registry, w.dir.path(), {"--measurement_store", store});
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  auto models = client.ListModels();
  CATCH_REQUIRE(models.ok());
  std::set<std::string> names;
  for (const ModelInfo& m : *models) names.insert(m.collection);
  CATCH_CHECK(names == std::set<std::string>{"layout:xla:random", "layout@tpu-v5e"});
  const LayoutGraph g = w.Graph();
  RankOptions o;
  o.collection = "layout@tpu-v5e";
  auto ranked = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), 4, o);
  CATCH_REQUIRE(ranked.ok());
  CATCH_CHECK(ranked->scores.size() == 4u);
  auto stored = client.ReportMeasurements(g.graph, g.node_config_ids, "layout@tpu-v5e", g.config_feat.data(),
                                          g.config_runtime.data(), 4, "farm-a/tpu-v5e");
  CATCH_REQUIRE(stored.ok());
  CATCH_CHECK_THAT(stored->shard, Catch::StartsWith("npz/layout/@tpu-v5e/train/"));
  o.collection = "layout@tpu-v4";  // a name nothing was published under
  auto missing = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), 4, o);
  CATCH_REQUIRE_FALSE(missing.ok());
  CATCH_CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: a model trained only on synthetic data says so in ListModels, its log and tgraph-client models", "[e2e]") {
  World w;
  w.provenance = {"synthetic", "tgraph-synth preset tiny, seed 3", 30, 900, {}};
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  auto models = client.ListModels();
  CATCH_REQUIRE(models.ok());
  CATCH_REQUIRE(models->size() == 1u);
  const ModelInfo& m = models->front();
  CATCH_CHECK(m.data == "synthetic");
  CATCH_CHECK(m.synthetic_only);
  CATCH_CHECK(m.graphs == 30);
  CATCH_CHECK(m.configurations == 900);
  CATCH_CHECK(m.provenance == "synthetic data only (tgraph-synth preset tiny, seed 3): 30 graphs, 900 configurations");
  auto [rc, out] = RunCommand(std::string(TGRAPH_CLIENT_BIN) + " models --server 127.0.0.1:" + std::to_string(server.port));
  CATCH_CHECK(rc == 0);
  CATCH_CHECK_THAT(out, Catch::Contains("  trained on synthetic data only (tgraph-synth preset tiny, seed 3): 30 graphs"));
  CATCH_CHECK_THAT(out, Catch::Contains("  WARNING: synthetic data only: rankings follow the generator's cost model"));
  CATCH_CHECK(server.Stop() == 0);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("loaded layout:xla:random version 1 in "));
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("; trained on synthetic data only (tgraph-synth preset tiny, seed 3)"));
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("WARNING tgraph-server: layout:xla:random version 1 was trained only "
                                                 "on synthetic data"));
}

namespace {

const LayoutGraph& RealUnet() {
  static const LayoutGraph* g = new LayoutGraph(
      *LoadLayoutGraph(std::string(TGRAPH_REAL_DATA) + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"));
  return *g;
}

// Reports rows [first, first + count) of the real unet_3d file with their real runtimes.
absl::StatusOr<MeasurementReceipt> ReportRealRows(RankerClient& client, int64_t first, int64_t count,
                                                  const std::string& collection = "layout:xla:default") {
  const LayoutGraph& u = RealUnet();
  return client.ReportMeasurements(u.graph, u.node_config_ids, collection, u.config(first),
                                   u.config_runtime.data() + first, count, "e2e/unet_3d");
}

// Measurements in every shard of a store's collection (repeats counted).
int64_t StoredMeasurements(const std::string& store, const Collection& c) {
  int64_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SplitDir(store, c, "train"))) {
    // Shards only: a temporary a kill left whole but never renamed was never acknowledged.
    if (entry.path().extension() != ".npz") continue;
    absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(entry.path().string());
    n += g.ok() ? g->num_configs : 0;
  }
  return n;
}

}  // namespace

CATCH_TEST_CASE("server: ReportMeasurements stores real runtimes durably, refuses bad ones, survives a kill",
                "[e2e][measurements]") {
  TempDir dir;
  const std::string registry = dir.path() + "/registry", store = dir.path() + "/store";
  std::filesystem::create_directories(registry);
  const Collection xla_default = *ParseCollection("layout:xla:default");
  const LayoutGraph& u = RealUnet();
  {
    // Without a store: FAILED_PRECONDITION, saying which flag.
    ServerProcess plain(registry, dir.path());
    CATCH_REQUIRE(plain.port > 0);
    RankerClient client({"127.0.0.1:" + std::to_string(plain.port)});
    absl::StatusOr<MeasurementReceipt> r = ReportRealRows(client, 0, 2);
    CATCH_REQUIRE_FALSE(r.ok());
    CATCH_CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
    CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("--measurement_store"));
  }
  ServerProcess server(registry, dir.path(), {"--measurement_store", store});
  CATCH_REQUIRE(server.port > 0);
  ClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(server.port);
  RankerClient client(o);

  // The graph is registered transparently; ten real measurements are stored.
  absl::StatusOr<MeasurementReceipt> first = ReportRealRows(client, 0, 10);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(first->stored == 10);
  CATCH_CHECK(first->registrations == 1);
  absl::StatusOr<LayoutGraph> shard = LoadLayoutGraph(store + "/" + first->shard);
  CATCH_REQUIRE(shard.ok());
  CATCH_CHECK(shard->config_runtime == std::vector<int64_t>(u.config_runtime.begin(), u.config_runtime.begin() + 10));
  CATCH_CHECK(std::equal(shard->config_feat.begin(), shard->config_feat.end(), u.config(0)));
  // The shard's graph is the server's pruned graph: the file's 62 configurable nodes.
  CATCH_CHECK(shard->num_config_nodes() == 62);
  CATCH_CHECK(shard->graph.num_nodes == 223);
  absl::StatusOr<LoadedMeasurements> m = LoadMeasurements(store, xla_default);
  CATCH_REQUIRE(m.ok());
  CATCH_REQUIRE(m->graphs.size() == 1);
  CATCH_CHECK(m->skipped.empty());
  CATCH_CHECK(m->graphs.front().name == GraphContentHash(u.graph, u.node_config_ids));
  CATCH_CHECK(m->graphs.front().num_configs == 9);  // rows 0..9 of the file hold 9 distinct configurations

  // Refusals name the row or the field; nothing is stored for them.
  {
    std::vector<int64_t> runtimes(u.config_runtime.begin(), u.config_runtime.begin() + 5);
    runtimes[3] = 0;
    absl::StatusOr<MeasurementReceipt> r =
        client.ReportMeasurements(u.graph, u.node_config_ids, "layout:xla:default", u.config(0), runtimes.data(), 5);
    CATCH_REQUIRE_FALSE(r.ok());
    CATCH_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("runtimes_ns[3]: 0"));
    absl::StatusOr<MeasurementReceipt> tile = ReportRealRows(client, 0, 1, "tile:xla");
    CATCH_REQUIRE_FALSE(tile.ok());
    CATCH_CHECK(tile.status().code() == absl::StatusCode::kInvalidArgument);
    absl::StatusOr<MeasurementReceipt> unknown = ReportRealRows(client, 0, 1, "layout:jax:random");
    CATCH_REQUIRE_FALSE(unknown.ok());
    CATCH_CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  }
  CATCH_CHECK_THAT(HttpGet(server.metrics_port, "/metrics"), Catch::Contains("tgraph_measurements_stored_total 10"));

  // Reports in a loop while the server is killed: every acknowledged report is stored.
  std::atomic<int64_t> acknowledged{0};
  std::thread reporter([&] {
    ClientOptions quick = o;
    quick.retry_budget_s = 0;
    RankerClient c(quick);
    for (int64_t row = 10; row < u.num_configs; ++row) {
      if (!ReportRealRows(c, row, 1).ok()) return;
      acknowledged = row - 9;
    }
  });
  while (acknowledged < 20) std::this_thread::sleep_for(5ms);
  kill(server.pid, SIGKILL);
  waitpid(server.pid, nullptr, 0);
  server.pid = -1;
  reporter.join();
  const int64_t acked = acknowledged;
  // Rows 0..(9 + acked) were acknowledged; a report in flight at the kill may be stored
  // too (stored, then killed before the answer), never half.
  const int64_t stored = StoredMeasurements(store, xla_default);
  CATCH_CHECK(stored >= 10 + acked);
  CATCH_CHECK(stored <= 10 + acked + 1);
  CATCH_CHECK(LoadMeasurements(store, xla_default).ok());
  // A write the kill interrupted may leave a temporary (….npz.partial…), never a
  // shard's name on a partial file: every .npz loads.
  std::string killed_writer;
  for (const auto& entry : std::filesystem::directory_iterator(SplitDir(store, xla_default, "train"))) {
    const std::string name = entry.path().filename().string();
    if (name.find(".partial") != std::string::npos) continue;
    CATCH_CHECK(entry.path().extension() == ".npz");
    CATCH_CHECK(LoadLayoutGraph(entry.path().string()).ok());
    killed_writer = name.substr(name.size() - 12, 8);  // <hash>.m<seq>.<writer>.npz
  }
  // One more, as a write cut short a moment ago would leave it: the next start removes
  // every temporary of the killed writer at once (its lock died with it), not in an hour.
  const std::string cut_short =
      SplitDir(store, xla_default, "train") + "/00ab12cd34ef5678.m1." + killed_writer + ".npz.partial";
  std::ofstream(cut_short) << "half a shard";

  // A restarted server (graphs forgotten) accepts reports again: the client re-registers.
  ServerProcess again(registry, dir.path(), {"--measurement_store", store});
  CATCH_CHECK_FALSE(std::filesystem::exists(cut_short));
  for (const auto& entry : std::filesystem::directory_iterator(SplitDir(store, xla_default, "train")))
    CATCH_CHECK(entry.path().filename().string().find(".partial") == std::string::npos);
  RankerClient after({"127.0.0.1:" + std::to_string(again.port)});
  absl::StatusOr<MeasurementReceipt> r = ReportRealRows(after, 100, 3);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->registrations == 1);
  CATCH_CHECK(StoredMeasurements(store, xla_default) == stored + 3);

  // The CLI reports a file's measured configurations; a file with hidden runtimes is refused.
  const std::string cli = std::string(TGRAPH_CLIENT_BIN) + " report --server 127.0.0.1:" + std::to_string(again.port) +
                          " --collection layout:xla:random --source cli --npz " + TGRAPH_REAL_DATA + "/npz/layout/xla/";
  auto [rc, out] = RunCommand(cli + "random/valid/unet_3d.4x4.bf16.npz --max_configs 5 2>&1");
  CATCH_CHECK(rc == 0);
  CATCH_CHECK_THAT(out, Catch::Contains("5 measurements stored as npz/layout/xla/random/train/"));
  CATCH_CHECK(StoredMeasurements(store, *ParseCollection("layout:xla:random")) == 5);
  auto [rc2, out2] = RunCommand(cli + "random/test/cd708819d3f5103afd6460b15e74eaf3.npz 2>&1");
  CATCH_CHECK(rc2 == 1);
  CATCH_CHECK_THAT(out2, Catch::Contains("config_runtime[0] is 0"));
}

CATCH_TEST_CASE("replay: the best found per round, by hand", "[replay]") {
  // Runtimes 50, 40, 10, 30, 20 (best 10). Order 4, 0, 2, ...: after round 1 (2 per
  // round) the best is min(20, 50) = 20 -> 2.0; after round 2 min(20, 10) = 10 -> 1.0.
  const std::vector<int64_t> runtimes = {50, 40, 10, 30, 20};
  CATCH_CHECK(BestSoFar({4, 0, 2, 1, 3}, runtimes, 3, 2) == std::vector<double>{2.0, 1.0, 1.0});
  // An order shorter than the rounds keeps its last value.
  CATCH_CHECK(BestSoFar({1}, runtimes, 3, 1) == std::vector<double>{4.0, 4.0, 4.0});
  // Faster than the best found: 20 has one faster (10); then none.
  CATCH_CHECK(FasterThanBestSoFar({4, 0, 2, 1, 3}, runtimes, 3, 2) == std::vector<double>{1, 0, 0});
  CATCH_CHECK(FasterThanBestSoFar({1}, runtimes, 2, 1) == std::vector<double>{3, 3});
}

namespace {

// Replay options for the world's first train graph, once `server` serves a model.
ReplayOptions ReplayOfFirstGraph(World& w, const ServerProcess& server, int rounds, int per_round) {
  CATCH_REQUIRE(server.port > 0);
  for (int i = 0; i < 100 && HealthStatus(server.port) != grpc::health::v1::HealthCheckResponse::SERVING; ++i)
    std::this_thread::sleep_for(100ms);
  ReplayOptions o;
  o.client.target = "127.0.0.1:" + std::to_string(server.port);
  o.collection = "layout:xla:random";
  o.npz = w.File("layout:xla:random", "train", 0).path;
  o.rounds = rounds;
  o.per_round = per_round;
  return o;
}

}  // namespace

CATCH_TEST_CASE("replay: random search and the frozen model on a graph with runtimes", "[e2e][replay]") {
  World w;
  w.Publish();
  ServerProcess server(w.registry, w.dir.path());
  ReplayOptions o = ReplayOfFirstGraph(w, server, 4, 3);
  absl::StatusOr<ReplayReport> r = RunReplay(o);
  CATCH_REQUIRE(r.ok());
  const LayoutGraph g = w.Graph();
  CATCH_CHECK(r->configs == g.num_configs);
  CATCH_CHECK(r->measured == std::vector<int64_t>{3, 6, 9, 12});
  CATCH_CHECK(r->model_version == 1);
  // The frozen curve is the server's ranking measured in order.
  auto stub = Stub(server.port);
  v1::RankConfigsResponse resp;
  CATCH_REQUIRE(Call(*stub, RankRequestFor(g, RegisterHash(*stub, g)), &resp).ok());
  const std::vector<int64_t> order(resp.ranking().begin(), resp.ranking().end());
  CATCH_CHECK(r->frozen_model == BestSoFar(order, g.config_runtime, 4, 3));
  CATCH_CHECK(r->frozen_model_rank == FasterThanBestSoFar(order, g.config_runtime, 4, 3));
  for (int k = 0; k < 4; ++k) {
    CATCH_CHECK(r->random_search[k] >= 1.0);
    if (k > 0) CATCH_CHECK(r->random_search[k] <= r->random_search[k - 1]);
  }
  CATCH_CHECK_THAT(r->Csv(), Catch::StartsWith("round,measured,random_search,frozen_model,random_search_rank,frozen_model_rank\n1,3,"));
  CATCH_CHECK(r->search.empty());
  // Search within the file (SearchConfigs with its rows as candidates): enough rounds to
  // measure every configuration, so it ends on the file's best; never worse over rounds.
  ReplayOptions searched = o;
  searched.search_evaluations = 64;
  searched.rounds = static_cast<int>((g.num_configs + 2) / 3) + 1;
  absl::StatusOr<ReplayReport> s = RunReplay(searched);
  CATCH_REQUIRE(s.ok());
  CATCH_REQUIRE(s->search.size() == static_cast<size_t>(searched.rounds));
  for (size_t k = 1; k < s->search.size(); ++k) CATCH_CHECK(s->search[k] <= s->search[k - 1]);
  CATCH_CHECK(s->search.back() == 1.0);
  CATCH_CHECK(s->search_rank.back() == 0.0);
  // Every round sent the runtimes measured before it, and the server followed them from
  // the fourth on (rounds of 3: none, then 3, then 6, ...).
  CATCH_REQUIRE(s->search_correction.size() >= 3);
  CATCH_CHECK(s->search_variation.size() == s->search_correction.size());
  // Variation only once more than 30 were measured, and at most 2 of a round's 3.
  for (size_t k = 0; k < s->search_variation.size(); ++k)
    CATCH_CHECK(s->search_variation[k] <= (3 * k > 30 ? 2 : 0));
  CATCH_CHECK(s->search_correction[0] == 0);
  CATCH_CHECK(s->search_correction[1] == 0);
  for (size_t k = 2; k < s->search_correction.size(); ++k)
    CATCH_CHECK(s->search_correction[k] == static_cast<int64_t>(3 * k));
  CATCH_CHECK_THAT(s->Csv(), Catch::StartsWith("round,measured,random_search,frozen_model,random_search_rank,"
                                               "frozen_model_rank,search,search_rank\n"));
  CATCH_CHECK_THAT(s->Table(), Catch::Contains("search (within the file)"));
  // A file with hidden runtimes is refused, naming it.
  o.npz = std::string(TGRAPH_REAL_DATA) + "/npz/layout/xla/random/test/cd708819d3f5103afd6460b15e74eaf3.npz";
  absl::StatusOr<ReplayReport> hidden = RunReplay(o);
  CATCH_REQUIRE_FALSE(hidden.ok());
  CATCH_CHECK_THAT(std::string(hidden.status().message()), Catch::Contains("cd708819"));
}

CATCH_TEST_CASE("replay with updates: measurements reported, fine-tuned versions published, served and used",
                "[e2e][replay][measurements]") {
  World w;
  w.Publish();
  const std::string store = w.dir.path() + "/store";
  ServerProcess server(w.registry, w.dir.path(), {"--measurement_store", store});
  ReplayOptions o = ReplayOfFirstGraph(w, server, 4, 8);
  o.finetune_command = std::string(TGRAPH_TRAIN_BIN) + " finetune --registry " + w.registry +
                       " --collection layout:xla:random --measurements " + store + " --run_dir " + w.dir.path() +
                       "/ft --steps 30 --finetune_lr 0.001 --holdout 0.3 --threads 1 --progress=false"
                       " --min_heldout_configs 1";  // the loop is tested here, not the evidence gate
  absl::StatusOr<ReplayReport> r = RunReplay(o);
  CATCH_REQUIRE(r.ok());
  CATCH_INFO(r->Table());
  CATCH_REQUIRE(r->updated_model.size() == 4);
  CATCH_CHECK(r->updated_versions.front() == 1);
  // Every round's measurements were reported: 4 x 8 rows in the store.
  CATCH_CHECK(StoredMeasurements(store, *ParseCollection("layout:xla:random")) == 32);
  // Fine-tunes ran; a published one is listed in the registry with its parent.
  const Registry reg(w.registry);
  // A fine-tune ran after rounds 1-3. Whether one publishes depends on a few held-out
  // configurations of a tiny graph (tests/train_test.cc checks the gate itself); the
  // loop must follow what each decided: the version that chooses a round is the last
  // one published before it, and the registry holds exactly those.
  CATCH_REQUIRE(r->finetune_published.size() == 3);
  CATCH_REQUIRE(r->finetune_outcomes.size() + r->warnings.size() == 3);
  for (const std::string& line : r->finetune_outcomes)
    CATCH_CHECK((line.find("published as version") != std::string::npos ||
                 line.find("not published") != std::string::npos));
  int64_t expected = 1, published = 0;
  for (size_t k = 0; k < 3; ++k) {
    if (r->finetune_published[k] > 0) {
      expected = r->finetune_published[k];
      ++published;
    }
    CATCH_CHECK(r->updated_versions[k + 1] == expected);
  }
  CATCH_CHECK(*reg.LatestVersion("layout:xla:random") == 1 + published);
  if (published > 0) {
    absl::StatusOr<Manifest> m = reg.ReadVersion("layout:xla:random", expected);
    CATCH_REQUIRE(m.ok());
    CATCH_CHECK(m->training.count("finetune_parent_version") == 1);
  }
  // A rounds' curve never gets worse, and the first round is the frozen model's.
  CATCH_CHECK(r->updated_model.front() == r->frozen_model.front());
  for (size_t k = 1; k < 4; ++k) CATCH_CHECK(r->updated_model[k] <= r->updated_model[k - 1]);
  CATCH_CHECK_THAT(r->Csv(), Catch::Contains(",updated_model,updated_model_rank,updated_version\n"));
}

CATCH_TEST_CASE("server: a full disk answers RESOURCE_EXHAUSTED to ReportMeasurements, stores nothing, counts it",
                "[e2e][measurements]") {
  TempDir dir;
  const std::string registry = dir.path() + "/registry", store = dir.path() + "/store";
  std::filesystem::create_directories(registry);
  // 4 KiB per file: the port file fits, a shard of the unet graph (about 11 KiB) does
  // not (the log's later lines may be cut; the test does not read them).
  ServerProcess server(registry, dir.path(), {"--measurement_store", store}, 4 * 1024);
  CATCH_REQUIRE(server.port > 0);
  RankerClient client({"127.0.0.1:" + std::to_string(server.port)});
  absl::StatusOr<MeasurementReceipt> r = ReportRealRows(client, 0, 5);
  CATCH_REQUIRE_FALSE(r.ok());
  CATCH_CHECK(r.status().code() == absl::StatusCode::kResourceExhausted);
  // The client is told what happened, not where the server keeps its files.
  CATCH_CHECK_THAT(std::string(r.status().message()), Catch::Contains("its disk is full; nothing was stored"));
  CATCH_CHECK(std::string(r.status().message()).find(dir.path()) == std::string::npos);
  CATCH_CHECK_THAT(HttpGet(server.metrics_port, "/metrics"),
                   Catch::Contains("tgraph_measurement_store_errors_total{code=\"RESOURCE_EXHAUSTED\"} 1"));
  CATCH_CHECK(StoredMeasurements(store, *ParseCollection("layout:xla:default")) == 0);
  // The server keeps serving.
  CATCH_CHECK(HealthStatus(server.port, "liveness") == grpc::health::v1::HealthCheckResponse::SERVING);
}
