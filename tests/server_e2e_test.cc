// End-to-end tests of tgraph-server over loopback: health, registration and ranking,
// hot swaps, bad messages, metrics scrapes, startup and shutdown, a large graph under
// deadlines and the in-flight memory budget.
#include "tests/e2e_util.h"

using namespace tgraph;
using namespace tgraph::e2e;

CATCH_TEST_CASE("server: health, register, rank like the evaluator, errors, metrics, SIGTERM", "[e2e]") {
  World w;
  unsetenv("OMP_WAIT_POLICY");  // the server sets PASSIVE itself (re-exec, model/tools/cli.h)
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("OMP_WAIT_POLICY=PASSIVE"));
  {  // re-executed under its own name, which ps, top and pkill show (not "exe")
    std::ifstream comm("/proc/" + std::to_string(server.pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    CATCH_CHECK(name == "tgraph-server");
  }
  {  // A second server on the same port refuses to start (no silent SO_REUSEPORT sharing).
    const std::string dir = w.dir.path() + "/second";
    std::filesystem::create_directories(dir);
    const std::string address = "127.0.0.1:" + std::to_string(server.port);
    ServerProcess second(w.registry, dir, {"--address", address}, 0, /*wait_for_port=*/false);
    const int status = second.ExitStatus();
    CATCH_INFO(second.Log());
    CATCH_CHECK(status > 0);
    CATCH_CHECK_THAT(second.Log(), Catch::Contains("cannot listen on " + address));
  }
  {  // A --measurement_store that is a regular file stops it at startup (it would fail every report).
    const std::string dir = w.dir.path() + "/file_store";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/store") << "not a directory";
    ServerProcess refused(w.registry, dir, {"--measurement_store", dir + "/store"}, 0, /*wait_for_port=*/false);
    const int status = refused.ExitStatus();
    CATCH_INFO(refused.Log());
    CATCH_CHECK(status == 2);
    CATCH_CHECK_THAT(refused.Log(), Catch::Contains("--measurement_store: " + dir + "/store is not a directory"));
  }
  // No model yet: NOT_SERVING; then a model is published and picked up.
  CATCH_CHECK(HealthStatus(server.port) == grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  CATCH_CHECK(HealthStatus(server.port, "") == grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // Liveness does not depend on a model: a pod without one must not be restarted.
  CATCH_CHECK(HealthStatus(server.port, "liveness") == grpc::health::v1::HealthCheckResponse::SERVING);
  w.Publish();
  for (int i = 0; i < 100 && HealthStatus(server.port) != grpc::health::v1::HealthCheckResponse::SERVING; ++i)
    std::this_thread::sleep_for(100ms);
  CATCH_CHECK(HealthStatus(server.port) == grpc::health::v1::HealthCheckResponse::SERVING);
  CATCH_CHECK(HealthStatus(server.port, "") == grpc::health::v1::HealthCheckResponse::SERVING);

  auto stub = Stub(server.port);
  LayoutGraph g = w.Graph();
  const std::string hash = RegisterHash(*stub, g);
  CATCH_CHECK(hash == GraphContentHash(g.graph, g.node_config_ids));
  // Gauges are current at each scrape, not only after a RankConfigs.
  CATCH_CHECK_THAT(HttpGet(server.metrics_port, "/metrics"), Catch::Contains("\ntgraph_registered_graphs 1\n"));

  v1::RankConfigsResponse first, second;
  CATCH_REQUIRE(Call(*stub, RankRequestFor(g, hash), &first).ok());
  CATCH_CHECK(first.model_version() == 1);
  CATCH_CHECK(first.scores_size() == g.num_configs);
  CATCH_CHECK_FALSE(first.timing().cache_hit());
  CATCH_REQUIRE(Call(*stub, RankRequestFor(g, hash), &second).ok());
  CATCH_CHECK(second.timing().cache_hit());
  CATCH_CHECK(second.timing().graph_prepare_ms() == 0);

  // The evaluator's scores for the same graph and version.
  auto model = LoadModel(Registry(w.registry), "layout:xla:random", 1);
  const ScoreResult eval = EvaluatorScores(*model, w.File("layout:xla:random", "train"));
  for (int i = 0; i < first.scores_size(); ++i) CATCH_CHECK(first.scores(i) == Approx(eval.score[i]).margin(1e-5));

  // Errors, with their codes.
  v1::RankConfigsResponse r;
  v1::RankConfigsRequest q = RankRequestFor(g, std::string(64, '0'));
  // NOT_FOUND has two meanings; the trailing reason is what tells "register and retry"
  // from "unknown collection or version" (proto/error_reason.h).
  auto reason_of = [&](const v1::RankConfigsRequest& req, grpc::StatusCode* code) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    *code = stub->RankConfigs(&ctx, req, &r).error_code();
    auto it = ctx.GetServerTrailingMetadata().find(kErrorReasonKey);
    return it == ctx.GetServerTrailingMetadata().end() ? std::string() : std::string(it->second.data(), it->second.size());
  };
  grpc::StatusCode code;
  CATCH_CHECK(reason_of(q, &code) == kGraphNotRegistered);
  CATCH_CHECK(code == grpc::NOT_FOUND);
  grpc::Status s = Call(*stub, q, &r);
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("call RegisterGraph"));
  q = RankRequestFor(g, hash);
  q.set_num_configs(q.num_configs() + 1);
  CATCH_CHECK(Call(*stub, q, &r).error_code() == grpc::INVALID_ARGUMENT);
  q = RankRequestFor(g, hash);
  q.set_collection("layout:nlp:random");
  CATCH_CHECK(reason_of(q, &code).empty());  // a collection without a model: not a registration matter
  CATCH_CHECK(code == grpc::NOT_FOUND);
  // Client input of any length is echoed cut short, so the real error gets through (a
  // 1 MiB message would exceed gRPC's metadata limit and hide it).
  q = RankRequestFor(g, std::string(1 << 20, 'z'));
  s = Call(*stub, q, &r);
  CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("graph_hash must be 64 lowercase hex digits"));
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("... (1048576 bytes)"));
  q = RankRequestFor(g, hash);
  q.set_collection(std::string(1 << 20, 'c'));
  s = Call(*stub, q, &r);
  CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);  // a name that does not parse, in every RPC
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("unknown collection 'cccc"));
  CATCH_CHECK(s.error_message().size() < 512u);  // the 1 MiB name cut short; the valid names listed
  {
    v1::RegisterGraphRequest empty;
    v1::RegisterGraphResponse resp;
    grpc::ClientContext ctx;
    CATCH_CHECK(stub->RegisterGraph(&ctx, empty, &resp).error_code() == grpc::INVALID_ARGUMENT);
  }
  {
    v1::ListModelsResponse models;
    grpc::ClientContext ctx;
    CATCH_REQUIRE(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
    CATCH_REQUIRE(models.models_size() == 1);
    CATCH_CHECK(models.models(0).collection() == "layout:xla:random");
    CATCH_CHECK(models.models(0).folds() == 2);
    // A hand-made manifest without provenance: unknown, and said so.
    CATCH_CHECK(models.models(0).provenance().data() == "");
    CATCH_CHECK_FALSE(models.models(0).provenance().synthetic_only());
    CATCH_CHECK(models.models(0).provenance().summary() == "provenance unknown (published before manifests recorded it)");
  }

  // Prometheus metrics on their own port.
  const std::string metrics = HttpGet(server.metrics_port, "/metrics");
  {  // The standard process metrics, with values this process can have.
    auto value = [&](const std::string& name) {
      const size_t at = metrics.find("\n" + name + " ");
      return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size() + 2));
    };
    CATCH_CHECK_THAT(metrics, Catch::Contains("# TYPE process_cpu_seconds_total counter\n"));
    CATCH_CHECK(value("process_cpu_seconds_total") > 0);
    CATCH_CHECK(value("process_resident_memory_bytes") > 10e6);
    CATCH_CHECK(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    CATCH_CHECK(value("process_open_fds") >= 3);
    CATCH_CHECK(value("process_max_fds") >= value("process_open_fds"));
    const double now = static_cast<double>(std::time(nullptr));
    CATCH_CHECK(value("process_start_time_seconds") > now - 600);
    CATCH_CHECK(value("process_start_time_seconds") <= now + 1);
  }
  CATCH_CHECK_THAT(metrics, Catch::Contains("tgraph_requests_total{code=\"OK\",method=\"RankConfigs\"} 2"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("tgraph_requests_total{code=\"NOT_FOUND\",method=\"RankConfigs\"} 3"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("# TYPE tgraph_cache_hits_total counter\ntgraph_cache_hits_total 1\n"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("# TYPE tgraph_rejected_queue_full_total counter"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("tgraph_build_info{commit=\"" + std::string(BuildCommit()) +
                                            "\",precision=\"fp32\",version=\"" + BuildVersion() + "\"} 1"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("tgraph_model_version{collection=\"layout:xla:random\"} 1"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("tgraph_request_latency_seconds_bucket"));

  // SIGTERM: an in-flight request still completes, the server exits 0.
  q = RankRequestFor(g, hash);
  // 40 copies of the rows, each copy made distinct (repeated rows are scored once) and
  // legal: the copy's number in the mixed radix of the configurable nodes' output-group
  // candidates (model/core/layout_space.h), written into those groups.
  std::string big;
  const size_t row = q.layout_configs().size() / static_cast<size_t>(q.num_configs());
  const LayoutSpace space = LayoutSpaceOf(g.graph, g.node_config_ids);
  for (int copy = 0; copy < 40; ++copy) {
    std::string rows = q.layout_configs();
    for (size_t at = 0; at < rows.size(); at += row) {
      int k = copy;
      for (size_t j = 0; j < space.nodes.size() && k > 0; ++j) {
        const std::vector<GroupLayout>& cand = space.nodes[j].groups[0].candidates;
        const GroupLayout& l = cand[static_cast<size_t>(k) % cand.size()];
        std::copy(l.begin(), l.end(), rows.begin() + static_cast<std::ptrdiff_t>(at + j * kConfigFeatDim));
        k /= static_cast<int>(cand.size());
      }
    }
    big += rows;
  }
  q.set_layout_configs(big);
  q.set_num_configs(q.num_configs() * 40);
  std::atomic<bool> started{false};
  grpc::Status inflight;
  std::thread client([&] {
    v1::RankConfigsResponse resp;
    started = true;
    inflight = Call(*stub, q, &resp, 60s);
  });
  while (!started) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(300ms);
  CATCH_CHECK(server.Stop() == 0);
  client.join();
  CATCH_CHECK(inflight.ok());
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("BLAS: "));
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("draining"));
}

CATCH_TEST_CASE("server: hot swap under load with zero failed RPCs, a corrupt version changes nothing, rollback by retiring", "[e2e]") {
  World w;
  w.Publish();
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  auto stub = Stub(server.port);
  LayoutGraph g = w.Graph();
  const std::string hash = RegisterHash(*stub, g);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::set<int64_t> versions;
  std::mutex mu;
  std::thread client([&] {
    while (!stop) {
      v1::RankConfigsResponse r;
      grpc::Status s = Call(*stub, RankRequestFor(g, hash), &r);
      if (s.ok()) {
        ++ok;
        std::lock_guard<std::mutex> lock(mu);
        versions.insert(r.model_version());
      } else {
        ++failed;
      }
    }
  });
  std::this_thread::sleep_for(300ms);
  const int64_t v2 = w.Publish();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(50ms);
    std::lock_guard<std::mutex> lock(mu);
    if (versions.count(v2)) break;
  }
  w.Publish(2, /*corrupt=*/true);  // version 3, broken
  std::this_thread::sleep_for(800ms);
  stop = true;
  client.join();
  CATCH_CHECK(failed == 0);
  CATCH_CHECK(ok > 5);
  CATCH_CHECK(versions.count(1) == 1);
  CATCH_CHECK(versions.count(v2) == 1);
  CATCH_CHECK(versions.count(3) == 0);
  v1::RankConfigsResponse r;
  CATCH_REQUIRE(Call(*stub, RankRequestFor(g, hash), &r).ok());
  CATCH_CHECK(r.model_version() == v2);
  // Pinning the older version still works.
  v1::RankConfigsRequest pinned = RankRequestFor(g, hash);
  pinned.set_model_version(1);
  CATCH_REQUIRE(Call(*stub, pinned, &r).ok());
  CATCH_CHECK(r.model_version() == 1);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("FAILED to load layout:xla:random version 3"));
  {
    // An explicit OpenMP wait policy is the operator's choice: the server keeps it.
    setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
    TempDir other;
    ServerProcess active(w.registry, other.path());
    unsetenv("OMP_WAIT_POLICY");
    CATCH_REQUIRE(active.port > 0);
    CATCH_CHECK_THAT(active.Log(), Catch::Contains("OMP_WAIT_POLICY=ACTIVE"));
  }
  CATCH_CHECK_THAT(HttpGet(server.metrics_port, "/metrics"),
                   Catch::Contains("tgraph_model_loads_total{collection=\"layout:xla:random\",result=\"failed\"} 1"));

  // Rollback: retiring v2 makes the running server serve version 1 again, without a
  // restart; restoring v2 brings it back.
  Registry reg(w.registry);
  CATCH_REQUIRE(reg.Retire("layout:xla:random", v2, "e2e rollback").ok());
  // Ranks until the server answers with `version` (at most 5 s): the last answer's
  // version, or -1 as soon as an RPC fails.
  auto rank_until = [&](int64_t version) -> int64_t {
    for (int i = 0; i < 100; ++i) {
      if (!Call(*stub, RankRequestFor(g, hash), &r).ok()) return -1;
      if (r.model_version() == version) break;
      std::this_thread::sleep_for(50ms);
    }
    return r.model_version();
  };
  CATCH_CHECK(rank_until(1) == 1);
  pinned.set_model_version(v2);
  grpc::Status gone = Call(*stub, pinned, &r);
  CATCH_CHECK(gone.error_code() == grpc::StatusCode::NOT_FOUND);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("unloaded layout:xla:random version 2"));
  CATCH_CHECK_THAT(HttpGet(server.metrics_port, "/metrics"),
                   Catch::Contains("tgraph_model_loads_total{collection=\"layout:xla:random\",result=\"unloaded\"} 1"));
  CATCH_REQUIRE(reg.Restore("layout:xla:random", v2).ok());
  CATCH_CHECK(rank_until(v2) == v2);
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: random and truncated messages never crash it", "[e2e]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  auto stub = Stub(server.port);
  LayoutGraph g = w.Graph();
  const std::string hash = RegisterHash(*stub, g);
  v1::RegisterGraphRequest reg;
  EncodeGraph(g.graph, g.node_config_ids, reg.mutable_graph());
  const std::string reg_bytes = reg.SerializeAsString();
  const std::string rank_bytes = RankRequestFor(g, hash).SerializeAsString();
  std::mt19937 gen(42);
  int answered = 0;
  for (int i = 0; i < 300; ++i) {
    const bool rank = i % 2 == 0;
    std::string bytes = rank ? rank_bytes : reg_bytes;
    switch (i % 3) {
      case 0: bytes.resize(gen() % bytes.size()); break;  // truncated
      case 1:
        for (int k = 0; k < 8; ++k) bytes[gen() % bytes.size()] = static_cast<char>(gen());  // flipped bytes
        break;
      default: bytes.assign(gen() % 200, '\0'); for (char& c : bytes) c = static_cast<char>(gen());  // noise
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::Status s;
    if (rank) {
      v1::RankConfigsRequest q;
      if (!q.ParseFromString(bytes)) continue;  // not even a message: the client library would not send it
      v1::RankConfigsResponse r;
      s = stub->RankConfigs(&ctx, q, &r);
    } else {
      v1::RegisterGraphRequest q;
      if (!q.ParseFromString(bytes)) continue;
      v1::RegisterGraphResponse r;
      s = stub->RegisterGraph(&ctx, q, &r);
    }
    CATCH_CHECK(s.error_code() != grpc::UNAVAILABLE);  // the server is still there
    CATCH_CHECK(s.error_code() != grpc::INTERNAL);
    ++answered;
  }
  CATCH_CHECK(answered > 50);
  v1::RankConfigsResponse r;
  CATCH_CHECK(Call(*stub, RankRequestFor(g, hash), &r).ok());
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: a registry with nothing to serve says why in the log and a metric until a model loads", "[e2e]") {
  World w;
  std::filesystem::create_directories(w.registry + "/models");  // not a collection folder
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  CATCH_CHECK(HealthStatus(server.port) == grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  std::this_thread::sleep_for(1s);  // polls every 0.2 s: logged at each poll while nothing loads
  const std::string problem = "holds no collection folder: found 'models'";
  const std::string log = server.Log();
  size_t lines = 0;
  for (size_t at = log.find(problem); at != std::string::npos; at = log.find(problem, at + 1)) ++lines;
  CATCH_CHECK(lines >= 3);
  CATCH_CHECK_THAT(log, Catch::Contains("ERROR tgraph-server: registry " + w.registry));
  CATCH_CHECK_THAT(HttpGet(server.metrics_port, "/metrics"),
                   Catch::Contains("tgraph_registry_errors_total{reason=\"no_collection\"}"));
  // Once a model is published it loads, health turns SERVING, and the log says so.
  w.Publish(1);
  for (int i = 0; i < 100 && HealthStatus(server.port) != grpc::health::v1::HealthCheckResponse::SERVING; ++i)
    std::this_thread::sleep_for(100ms);
  CATCH_CHECK(HealthStatus(server.port) == grpc::health::v1::HealthCheckResponse::SERVING);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("holds a servable version again"));
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: scrapes answer beside slow and idle metrics clients, which are dropped", "[e2e][metrics]") {
  World w;
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.metrics_port > 0);
  // A client trickling a request a byte a second (it never ends it).
  std::atomic<bool> dropped{false};
  std::thread slow([&] {
    const int fd = ConnectLoopback(server.metrics_port, 1);
    for (int i = 0; i < 30 && fd >= 0; ++i) {
      if (send(fd, "G", 1, MSG_NOSIGNAL) != 1) break;
      char b;
      const ssize_t n = recv(fd, &b, 1, 0);  // waits up to 1 s; 0: the server closed it
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        dropped = true;
        break;
      }
    }
    if (fd >= 0) close(fd);
  });
  // Scrapes still answer, each within 3 s (the single-threaded endpoint this replaced
  // waited on the trickling client for as long as it kept sending).
  auto scrapes_answer = [&] {
    for (int i = 0; i < 3; ++i) {
      const std::string body = HttpGet(server.metrics_port, "/metrics", 3);
      CATCH_CHECK_THAT(body, Catch::StartsWith("HTTP/1.1 200 OK"));
      CATCH_CHECK_THAT(body, Catch::Contains("tgraph_build_info"));
    }
  };
  scrapes_answer();
  slow.join();
  CATCH_CHECK(dropped.load());  // the request deadline ended it, well before its 30 s of trickling
  // 100 idle connections, more than the endpoint keeps open: the oldest make way.
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(ConnectLoopback(server.metrics_port, 1));
  scrapes_answer();
  for (int fd : idle)
    if (fd >= 0) close(fd);
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: SIGTERM while it starts ends it cleanly", "[e2e]") {
  // The handler is installed on main's first line: a signal during startup (models
  // loading) used to kill the process by signal.
  World w;
  w.Publish(2, /*hidden=*/64);
  ServerProcess server(w.registry, w.dir.path(), {}, 0, /*wait_for_port=*/false);
  for (int i = 0; i < 600 && server.Log().find("registry=") == std::string::npos; ++i) std::this_thread::sleep_for(5ms);
  CATCH_REQUIRE(server.Log().find("registry=") != std::string::npos);
  CATCH_CHECK(server.Stop() == 0);  // -1 when killed by the signal
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("signal 15"));
}

CATCH_TEST_CASE("server: a 40,000-node graph (23 MB) registers, ranks and is searched within the deadline", "[e2e]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  NodeGraph g;
  g.num_nodes = 40000;
  g.node_feat.assign(static_cast<size_t>(g.num_nodes) * kNodeFeatDim, 1.0f);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < g.num_nodes; ++i) {
    g.node_feat[i * kNodeFeatDim + 21] = static_cast<float>(1 + i % 7);
    g.node_opcode.push_back(i % 10 == 0 ? op::kDot : op::kAdd);
    if (i % 10 == 0) ids.push_back(i);
    if (i > 0) {
      g.edge_index.push_back(i);
      g.edge_index.push_back(i - 1);
    }
  }
  RankerClient client(server.Client());
  auto hash = client.Register(g, ids);
  CATCH_REQUIRE(hash.ok());
  // Legal rows (model/core/layout_space.h): output groups of rank-6 dots, [i % 3] in
  // every seventh configurable node.
  std::vector<int8_t> configs(8 * ids.size() * kConfigFeatDim, -1);
  for (size_t i = 0; i < configs.size(); i += 7 * kConfigFeatDim) configs[i] = static_cast<int8_t>(i % 3);
  RankOptions o;
  o.collection = "layout:xla:random";
  auto r = client.RankLayout(g, ids, configs.data(), 8, o);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->registrations == 0);
  CATCH_CHECK(r->scores.size() == 8u);
  // Searching it: a search too long for its deadline stops at it (DEADLINE_EXCEEDED,
  // the server keeps serving); a small one proposes legal rows.
  ClientOptions short_deadline = server.Client();
  short_deadline.timeout_s = 1.5;
  RankerClient hurried(short_deadline);
  SearchConfigsOptions so;
  so.collection = "layout:xla:random";
  so.max_evaluations = 100000;
  const auto t0 = std::chrono::steady_clock::now();
  auto too_long = hurried.Search(g, ids, so);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CATCH_REQUIRE_FALSE(too_long.ok());
  CATCH_CHECK(too_long.status().code() == absl::StatusCode::kDeadlineExceeded);
  CATCH_CHECK(took < 5.0);
  // Rankings whose 1 ms deadline passes about when they arrive, on a connected channel:
  // those the server sees at all end as deadlines, never as CANCELLED (the search above
  // was counted as CANCELLED, such rankings not at all).
  {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port), grpc::InsecureChannelCredentials());
    CATCH_REQUIRE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
    auto stub = v1::Ranker::NewStub(channel);
    v1::RankConfigsRequest rank;
    rank.set_collection("layout:xla:random");
    rank.set_graph_hash(hash->graph_hash);
    rank.set_num_configs(8);
    rank.set_layout_configs(reinterpret_cast<const char*>(configs.data()), configs.size());
    for (int i = 0; i < 20; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
      v1::RankConfigsResponse resp;
      stub->RankConfigs(&ctx, rank, &resp);
    }
  }
  const auto count = [](const std::string& metrics, const std::string& series) {
    const size_t at = metrics.find(series + " ");
    return at == std::string::npos ? 0.0 : std::stod(metrics.substr(at + series.size() + 1));
  };
  const std::string search_deadlines = "tgraph_requests_total{code=\"DEADLINE_EXCEEDED\",method=\"SearchConfigs\"}";
  const auto rank_series = [](const std::string& code) {
    return "tgraph_requests_total{code=\"" + code + "\",method=\"RankConfigs\"}";
  };
  std::string counted;
  for (int i = 0; i < 50; ++i) {  // the server counts the search once it notices, between two batches
    counted = HttpGet(server.metrics_port, "/metrics");
    if (count(counted, search_deadlines) == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CATCH_CHECK(count(counted, search_deadlines) == 1);
  CATCH_CHECK(count(counted, rank_series("OK")) == 1);  // the ranking before
  CATCH_CHECK(counted.find("code=\"CANCELLED\"") == std::string::npos);
  so.max_evaluations = 64;
  so.results = 4;
  // The stopped search held its working memory (--request_bytes) until it noticed the
  // deadline, between two batches: a search sent meanwhile is refused, and retried.
  auto small = client.Search(g, ids, so);
  for (int i = 0; i < 100 && small.status().code() == absl::StatusCode::kResourceExhausted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    small = client.Search(g, ids, so);
  }
  CATCH_INFO(small.status().message());
  CATCH_REQUIRE(small.ok());
  CATCH_CHECK(small->count == 4);
  CATCH_CHECK(FirstIllegalLayoutRow(LayoutSpaceOf(g, ids), small->rows.data(), 4) == "");
  CATCH_CHECK(server.Stop() == 0);

  // Concurrent registrations are bounded by --request_bytes (here: one at a time):
  // 8 at once of this 23 MB graph used to decode side by side (8 x 251 MB took 3.98 GB).
  ServerProcess bounded(w.registry, w.dir.path(), {"--request_bytes", "1"});
  CATCH_REQUIRE(bounded.port > 0);
  v1::RegisterGraphRequest req;
  EncodeGraph(g, ids, req.mutable_graph());
  OverBudgetCounts registered = SendAtOnce(8, "RegisterGraph", [&](grpc::ClientContext* ctx) {
    v1::RegisterGraphResponse resp;
    return Stub(bounded.port)->RegisterGraph(ctx, req, &resp);
  });
  CheckSomeAdmittedSomeRefused(registered);
  CATCH_CHECK(bounded.Stop() == 0);

  // Concurrent reports share that budget (a report holds about 13x its bytes while it is
  // stored): 8 at once of 100 rows of this graph (7 MB each), one at a time here.
  ServerProcess reports(w.registry, w.dir.path(),
                        {"--request_bytes", "1", "--measurement_store", w.dir.path() + "/store"});
  CATCH_REQUIRE(reports.port > 0);
  RankerClient reporter(reports.Client());
  CATCH_REQUIRE(reporter.Register(g, ids).ok());
  v1::ReportMeasurementsRequest report;
  report.set_collection("layout:xla:random");
  report.set_graph_hash(GraphContentHash(g, ids));
  report.set_num_configs(100);
  report.set_layout_configs(std::string(100 * ids.size() * kConfigFeatDim, static_cast<char>(-1)));
  for (int i = 0; i < 100; ++i) report.add_runtimes_ns(1000 + i);
  OverBudgetCounts reported = SendAtOnce(8, "ReportMeasurements", [&](grpc::ClientContext* ctx) {
    v1::ReportMeasurementsResponse resp;
    return Stub(reports.port)->ReportMeasurements(ctx, report, &resp);
  });
  CheckSomeAdmittedSomeRefused(reported);
  CATCH_CHECK(reports.Stop() == 0);

  // Concurrent searches and ranks share it too, admitted before they queue: a search for
  // its request and working memory (64 evaluations of 4,000-node rows, 100 excluded
  // rows: ~19 MB here), a ranking for twice its bytes. 17 searches of 100,000 excluded
  // rows each once took 2.2 GB, queued side by side.
  ServerProcess searches(w.registry, w.dir.path(), {"--request_bytes", "1"});
  CATCH_REQUIRE(searches.port > 0);
  CATCH_REQUIRE(RankerClient(searches.Client()).Register(g, ids).ok());
  v1::SearchConfigsRequest search;
  search.set_collection("layout:xla:random");
  search.set_graph_hash(GraphContentHash(g, ids));
  search.set_num_results(4);
  search.set_max_evaluations(64);
  search.set_num_exclude(100);
  search.set_exclude_layout_configs(report.layout_configs());
  OverBudgetCounts searched = SendAtOnce(6, "SearchConfigs", [&](grpc::ClientContext* ctx) {
    v1::SearchConfigsResponse resp;
    return Stub(searches.port)->SearchConfigs(ctx, search, &resp);
  });
  CheckSomeAdmittedSomeRefused(searched);
  CATCH_CHECK(searches.Stop() == 0);
}
