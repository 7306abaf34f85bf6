// End-to-end tests of the client library and tgraph-client against a real server: transparent
// registration, eval, bench, every real TpuGraphs file.
#include "tests/e2e_util.h"

using namespace tgraph;
using namespace tgraph::e2e;

CATCH_TEST_CASE("client library: transparent registration, re-registration after a restart, statuses", "[e2e][client]") {
  World w;
  w.Publish(1);
  auto server = std::make_unique<ServerProcess>(w.registry, w.dir.path());
  CATCH_REQUIRE(server->port > 0);
  ClientOptions co;
  co.target = "127.0.0.1:" + std::to_string(server->port);
  co.timeout_s = 20;
  RankerClient client(co);
  CATCH_CHECK(*client.Health() == "SERVING");
  CATCH_CHECK(*client.Health("liveness") == "SERVING");
  CATCH_CHECK(client.Health("no.such.Service").status().code() == absl::StatusCode::kNotFound);
  LayoutGraph g = w.Graph();
  RankOptions o;
  o.collection = "layout:xla:random";
  o.top_k = 3;
  auto first = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, o);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(first->registrations == 1);  // the server did not know the graph
  CATCH_CHECK(first->order.size() == 3u);
  auto second = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, o);
  CATCH_REQUIRE(second.ok());
  CATCH_CHECK(second->registrations == 0);
  CATCH_CHECK(second->cache_hit);
  CATCH_CHECK(second->scores == first->scores);

  // A restarted server has forgotten the graph: the client registers it again by itself.
  // The request is sent while nothing listens; the server comes back 2 s later (a
  // restart takes over a second), within the client's retry budget.
  const int port = server->port;
  CATCH_CHECK(server->Stop() == 0);
  server.reset();
  std::unique_ptr<ServerProcess> again;
  std::thread restart([&] {
    std::this_thread::sleep_for(2s);
    again = std::make_unique<ServerProcess>(w.registry, w.dir.path(),
                                            std::vector<std::string>{"--address", "127.0.0.1:" + std::to_string(port)});
  });
  auto third = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, o);
  restart.join();
  CATCH_REQUIRE(again->port == port);
  CATCH_REQUIRE(third.ok());
  CATCH_CHECK(third->registrations == 1);
  CATCH_CHECK(third->scores == first->scores);

  // Other errors come back as statuses with the server's message.
  o.collection = "layout:nlp:random";
  auto missing = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, o);
  CATCH_CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK_THAT(std::string(missing.status().message()), Catch::Contains("RankConfigs: no model is loaded"));
  auto models = client.ListModels();
  CATCH_REQUIRE(models.ok());
  CATCH_REQUIRE(models->size() == 1);
  CATCH_CHECK(models->front().collection == "layout:xla:random");
  CATCH_CHECK(models->front().loaded_versions == std::vector<int64_t>{models->front().version});
  CATCH_CHECK(again->Stop() == 0);

  // Nobody listening: UNAVAILABLE once the retry budget is spent.
  co.retry_budget_s = 0.5;
  co.timeout_s = 2;
  RankerClient nobody(co);
  CATCH_CHECK(nobody.Health().status().code() == absl::StatusCode::kUnavailable);
}

CATCH_TEST_CASE("tgraph-client eval gives tgraph-eval's numbers for the same version", "[e2e][client]") {
  World w;
  w.Publish(2);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  const std::string cmd = std::string(TGRAPH_CLIENT_BIN) + " eval --server 127.0.0.1:" + std::to_string(server.port) +
                          " --collection layout:xla:random --data " + w.data + " --split train --json";
  auto [rc, out] = RunCommand(cmd);
  CATCH_REQUIRE(rc == 0);
  nlohmann::json via_server = nlohmann::json::parse(out);
  auto model = LoadModel(Registry(w.registry), "layout:xla:random", 1);
  EvalOptions eo;
  eo.scoring.batch_size = model->manifest.batch_size;
  eo.scoring.batch_softmax.tta = model->manifest.tta;
  auto local = EvaluateSplit(*model, w.data, *ParseCollection("layout:xla:random"), "train", eo);
  CATCH_REQUIRE(local.ok());
  CATCH_REQUIRE(via_server["graphs"].size() == local->graphs.size());
  for (size_t i = 0; i < local->graphs.size(); ++i) {
    const auto& g = via_server["graphs"][i];
    CATCH_CHECK(g["graph"] == local->graphs[i].name);
    CATCH_CHECK(g["pruned_nodes"] == local->graphs[i].pruned_nodes);
    // The server sends float32 scores: pairs closer than float precision may flip.
    CATCH_CHECK(g["kendall_tau"].get<double>() == Approx(local->graphs[i].tau).margin(2e-3));
    CATCH_CHECK(g["top1_error"].get<double>() == Approx(local->graphs[i].top_error[0]).margin(1e-9));
  }
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("tgraph-client bench reports percentiles, zero errors, and refuses remote targets", "[e2e][client]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  BenchOptions b;
  b.client.target = "127.0.0.1:" + std::to_string(server.port);
  b.collection = "layout:xla:random";
  b.data_root = w.data;
  b.concurrency = 3;
  b.requests = 24;
  b.configs = 40;
  auto r = RunBench(b);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->ok == 24);
  CATCH_CHECK(r->errors.empty());
  CATCH_CHECK(r->p50_ms > 0);
  CATCH_CHECK(r->p50_ms <= r->p90_ms);
  CATCH_CHECK(r->p90_ms <= r->p99_ms);
  CATCH_CHECK(r->p99_ms <= r->max_ms);
  CATCH_CHECK(r->configs_per_s == Approx(r->requests_per_s * 40));
  nlohmann::json j = nlohmann::json::parse(r->Json());
  CATCH_CHECK(j["latency_ms"]["p99"].get<double>() == Approx(r->p99_ms));
  // Paced and time-bounded: at 20 requests/s for 0.5 s, about 10 requests.
  b.requests = 0;
  b.duration_s = 0.5;
  b.rate = 20;
  auto paced = RunBench(b);
  CATCH_REQUIRE(paced.ok());
  CATCH_CHECK(paced->ok <= 11);
  CATCH_CHECK(paced->ok >= 1);
  b.client.target = "192.168.1.1:1";
  CATCH_CHECK(RunBench(b).status().code() == absl::StatusCode::kInvalidArgument);
  b.client.target = "127.0.0.1:" + std::to_string(server.port);
  b.requests = 0;
  b.duration_s = 0;
  CATCH_CHECK(RunBench(b).status().code() == absl::StatusCode::kInvalidArgument);  // would never stop
  CATCH_CHECK(server.Stop() == 0);
}

namespace {

std::vector<std::pair<std::string, std::string>> RealFiles() {  // (collection, path)
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kReal + "/npz")) {
    if (!e.is_regular_file() || e.path().extension() != ".npz") continue;
    const std::string rel = std::filesystem::relative(e.path(), kReal + "/npz").string();
    // layout/<source>/<search>/<split>/f.npz or tile/xla/<split>/f.npz
    std::vector<std::string> parts;
    for (const auto& p : std::filesystem::path(rel)) parts.push_back(p.string());
    out.emplace_back(parts[0] == "tile" ? "tile:xla" : "layout:" + parts[1] + ":" + parts[2], e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

CATCH_TEST_CASE("server: every real TpuGraphs file registers and ranks through tgraph-client", "[e2e][real]") {
  ModelWorld w(5, {"layout:xla:random", "tile:xla"});
  w.Publish("layout:xla:random", 1);
  w.Publish("tile:xla", 1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  const auto files = RealFiles();
  CATCH_REQUIRE(files.size() == 14u);
  for (const auto& [collection, path] : files) {
    CATCH_INFO(path);
    // Any layout model ranks any layout graph: the one published here is xla:random's.
    const std::string model = collection == "tile:xla" ? "tile:xla" : "layout:xla:random";
    auto [rc, out] = RunCommand(std::string(TGRAPH_CLIENT_BIN) + " rank --server 127.0.0.1:" + std::to_string(server.port) +
                         " --collection " + model + " --npz " + path + " --top_k 5 2>&1");
    CATCH_CHECK(rc == 0);
    CATCH_CHECK_THAT(out, Catch::Contains("configurations ranked by " + model + " version 1"));
    CATCH_CHECK_THAT(out, Catch::Contains("\n     1 "));  // ranked rows (2 for the smallest file)
  }
  // The server ranks the real unet_3d file exactly as the evaluator does.
  auto model = LoadModel(Registry(w.registry), "layout:xla:random", 1);
  CATCH_REQUIRE(model.ok());
  const GraphFile f{"unet_3d.4x4.bf16", kReal + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"};
  const ScoreResult local = EvaluatorScores(*model, f);
  RankerClient client(server.Client());
  LayoutGraph g = *LoadLayoutGraph(f.path);
  RankOptions o;
  o.collection = "layout:xla:random";
  auto r = client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, o);
  CATCH_REQUIRE(r.ok());
  CATCH_REQUIRE(r->scores.size() == local.score.size());
  for (size_t i = 0; i < local.score.size(); ++i) CATCH_CHECK(r->scores[i] == Approx(local.score[i]).epsilon(1e-5));
  CATCH_CHECK(server.Stop() == 0);
  if (!CpuHasBf16()) return;
  // A bf16 server (the default on this CPU) serves the same model: close to the fp32
  // evaluator's ranking even with these untrained weights, whose configurations differ
  // by little more than bf16 rounding (measured 0.979-0.993 across random weights;
  // trained models: tests/train_test.cc requires 0.99).
  ServerProcess bf16(w.registry, w.dir.path(), {"--precision", "auto"});
  CATCH_REQUIRE(bf16.port > 0);
  CATCH_CHECK_THAT(bf16.Log(), Catch::Contains("precision=bf16 (auto; the CPU has avx512_bf16)"));
  RankerClient bf16_client(bf16.Client());
  auto rb = bf16_client.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, o);
  CATCH_REQUIRE(rb.ok());
  const double tau = KendallTau(std::vector<double>(rb->scores.begin(), rb->scores.end()), local.score);
  CATCH_INFO("tau " << tau);
  CATCH_CHECK(tau >= 0.95);
  CATCH_CHECK(bf16.Stop() == 0);
}
