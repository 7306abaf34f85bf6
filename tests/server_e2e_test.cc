// End-to-end tests of tgraph-server over loopback: a real server process on an
// ephemeral port, a registry made here, and raw gRPC stubs.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "client/bench.h"
#include "client/client.h"
#include "tests/server_process.h"
#include "model/hlo/apply_layouts.h"
#include "client/replay.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "model/tools/build_info.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/store/measurement_store.h"
#include "model/hlo/featurize.h"
#include "model/train/evaluator.h"
#include <nlohmann/json.hpp>
#include "model/core/rank_metrics.h"
#include "model/nn/model_io.h"
#include "model/nn/scoring.h"
#include "model/synth/generator.h"
#include "model/train/train_data.h"
#include "proto/error_reason.h"
#include "proto/graph_codec.h"
#include "tests/model_fixtures.h"
#include "tests/test_util.h"
#include "tgraph/v1/ranker.grpc.pb.h"

using namespace tgraph;
using namespace std::chrono_literals;

namespace {

// An HTTP GET on the loopback port; with `timeout_s`, it gives up after that many
// seconds without data ("" when nothing came).
std::string HttpGet(int port, const std::string& path, int timeout_s = 0) {
  const int fd = ConnectLoopback(port, timeout_s);
  if (fd < 0) return "";
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// What `n` calls sent at once answered: OK, RESOURCE_EXHAUSTED from `method` naming
// --request_bytes (the in-flight budget), or anything else.
struct OverBudgetCounts {
  int ok = 0, refused = 0, other = 0;
};
template <typename Call>
OverBudgetCounts SendAtOnce(int n, const std::string& method, Call call) {
  std::atomic<int> ok{0}, refused{0}, other{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> senders;
  for (int t = 0; t < n; ++t)
    senders.emplace_back([&] {
      while (!go) std::this_thread::yield();
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      const grpc::Status st = call(&ctx);
      if (st.ok()) ++ok;
      else if (st.error_code() == grpc::RESOURCE_EXHAUSTED && st.error_message().find(method + ": ") == 0 &&
               st.error_message().find("--request_bytes") != std::string::npos) ++refused;
      else ++other;
    });
  go = true;
  for (std::thread& t : senders) t.join();
  return {ok.load(), refused.load(), other.load()};
}

// A one-at-a-time budget: at least one call through, at least one refused, no other error.
void CheckSomeAdmittedSomeRefused(const OverBudgetCounts& c) {
  CATCH_CHECK(c.ok >= 1);
  CATCH_CHECK(c.refused >= 1);
  CATCH_CHECK(c.other == 0);
}

struct World : ModelWorld {
  World() : ModelWorld(3, {"layout:xla:random"}) { tta = 2; }
  int64_t Publish(int folds = 2, bool corrupt = false) {
    const int64_t v = ModelWorld::Publish("layout:xla:random", folds);
    if (corrupt)
      std::ofstream(Registry(registry).VersionDir("layout:xla:random", v) + "/fold_0.npz", std::ios::app) << "junk";
    return v;
  }
  LayoutGraph Graph(int i = 0) { return *LoadLayoutGraph(File("layout:xla:random", "train", i).path); }
};

std::unique_ptr<v1::Ranker::Stub> Stub(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Ranker::NewStub(
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
}

v1::RankConfigsRequest RankRequestFor(const LayoutGraph& g, const std::string& hash) {
  v1::RankConfigsRequest q;
  q.set_collection("layout:xla:random");
  q.set_graph_hash(hash);
  q.set_num_configs(g.num_configs);
  q.set_layout_configs(reinterpret_cast<const char*>(g.config_feat.data()), g.config_feat.size());
  return q;
}

grpc::Status Call(v1::Ranker::Stub& stub, const v1::RankConfigsRequest& q, v1::RankConfigsResponse* r,
                  std::chrono::milliseconds timeout = 20s) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  return stub.RankConfigs(&ctx, q, r);
}

std::string RegisterHash(v1::Ranker::Stub& stub, const LayoutGraph& g) {
  v1::RegisterGraphRequest req;
  EncodeGraph(g.graph, g.node_config_ids, req.mutable_graph());
  v1::RegisterGraphResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub.RegisterGraph(&ctx, req, &resp);
  return s.ok() ? resp.graph_hash() : "";
}

int HealthStatus(int port, const std::string& service = "tgraph.v1.Ranker") {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  return health->Check(&ctx, req, &resp).ok() ? static_cast<int>(resp.status()) : -1;
}

}  // namespace

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

const std::string kReal = TGRAPH_REAL_DATA;

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

CATCH_TEST_CASE("server: HLO text of real TensorFlow and PyTorch/XLA models (a transformer too) registers, is searched, ranks and is applied", "[e2e][hlo]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  auto program = HloProgram::FromFile(kReal + "/hlo/graphsage_tf.hlo");  // text, as XLA prints it
  CATCH_REQUIRE(program.ok());
  auto reg = client.Register(*program);  // the text goes to the server as it is
  CATCH_REQUIRE(reg.ok());
  CATCH_CHECK(reg->graph_hash == program->graph_hash);
  CATCH_CHECK(reg->num_nodes == 138);
  CATCH_REQUIRE(reg->configurable_nodes.size() == 27u);
  int dots = 0;
  for (const auto& n : reg->configurable_nodes) {
    dots += n.opcode == "dot";
    CATCH_CHECK((n.opcode == "dot" || n.opcode == "reshape"));
  }
  CATCH_CHECK(dots == 7);
  // The program's own groups (computed locally) are the server's.
  for (size_t i = 0; i < 27; ++i)
    for (int g = 0; g < 3; ++g) {
      CATCH_CHECK(program->configurable_nodes[i].groups[g].rank == reg->configurable_nodes[i].groups[g].rank);
      CATCH_CHECK((program->configurable_nodes[i].groups[g].candidates == reg->configurable_nodes[i].groups[g].candidates));
    }
  // shape.22 = s32[1]{0} reshape(mul_2.1), a scalar: output rank 1, input rank 0.
  CATCH_CHECK(reg->configurable_nodes[0].instruction == "shape.22");
  CATCH_CHECK(reg->configurable_nodes[0].groups[0].rank == 1);
  CATCH_CHECK(reg->configurable_nodes[0].groups[1].rank == 0);
  SearchConfigsOptions so;
  so.collection = "layout:xla:random";
  so.results = 4;
  so.max_evaluations = 200;
  auto p = client.Search(*program, so);
  CATCH_REQUIRE(p.ok());
  CATCH_REQUIRE(p->count == 4);
  RankOptions o;
  o.collection = "layout:xla:random";
  auto ranked = client.RankLayout(*program, p->rows.data(), p->count, o);
  CATCH_REQUIRE(ranked.ok());
  CATCH_CHECK(ranked->scores.size() == 4u);

  // Another framework's text (PyTorch/XLA: operands written with their shapes, an
  // input_output_alias header) goes the same way, and the best proposal goes back into
  // the module as layouts (tgraph-featurize apply's function).
  auto mlp = HloProgram::FromFile(kReal + "/hlo/pytorch_xla_mlp_train_step.hlo");
  CATCH_REQUIRE(mlp.ok());
  auto mreg = client.Register(*mlp);
  CATCH_REQUIRE(mreg.ok());
  CATCH_CHECK(mreg->graph_hash == mlp->graph_hash);
  CATCH_CHECK(mreg->num_nodes == 92);
  CATCH_REQUIRE(mreg->configurable_nodes.size() == 2u);
  CATCH_CHECK(mreg->configurable_nodes[1].instruction == "dot.25");
  auto mp = client.Search(*mlp, so);
  CATCH_REQUIRE(mp.ok());
  CATCH_REQUIRE(mp->count >= 1);
  auto mranked = client.RankLayout(*mlp, mp->rows.data(), mp->count, o);
  CATCH_REQUIRE(mranked.ok());
  const std::vector<int8_t> best(mp->rows.begin(), mp->rows.begin() + 2 * 18);
  auto applied = tgraph::hlo::ApplyLayoutRow(mlp->serialized, best, "mlp.hlo");
  CATCH_REQUIRE(applied.ok());
  auto back = tgraph::hlo::WrittenLayoutRow(applied->text, "applied.hlo");
  CATCH_REQUIRE(back.ok());
  for (size_t i = 0; i < best.size(); ++i)
    if (best[i] >= 0) CATCH_CHECK((*back)[i] == best[i]);

  // A transformer (a Llama decoder layer from PyTorch/XLA): 13 dots, 12 reshapes.
  auto llama = HloProgram::FromFile(kReal + "/hlo/pytorch_xla_llama_decoder_layer.hlo");
  CATCH_REQUIRE(llama.ok());
  auto lreg = client.Register(*llama);
  CATCH_REQUIRE(lreg.ok());
  CATCH_CHECK(lreg->num_nodes == 204);
  CATCH_CHECK(lreg->configurable_nodes.size() == 25u);
  auto lp = client.Search(*llama, so);
  CATCH_REQUIRE(lp.ok());
  CATCH_REQUIRE(lp->count == 4);
  auto lranked = client.RankLayout(*llama, lp->rows.data(), lp->count, o);
  CATCH_REQUIRE(lranked.ok());
  CATCH_CHECK(lranked->scores.size() == 4u);
}

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

// The per-request lines of a server's log (server/request_log.h).
std::vector<std::string> RequestLines(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find(" request method=") != std::string::npos) lines.push_back(line);
  return lines;
}

}  // namespace

CATCH_TEST_CASE("server: one request in --request_log_every gets a log line with its method, code, latency and graph", "[e2e]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path(), {"--request_log_every", "2"});
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  auto program = HloProgram::FromFile(kReal + "/hlo/graphsage_tf.hlo");
  CATCH_REQUIRE(program.ok());
  CATCH_REQUIRE(client.Register(*program).ok());  // call 1: logged
  const std::vector<int8_t> rows(3 * program->configurable_nodes.size() * kConfigFeatDim, -1);
  RankOptions o;
  o.collection = "layout:xla:random";
  CATCH_REQUIRE(client.RankLayout(*program, rows.data(), 3, o).ok());  // call 2
  CATCH_REQUIRE(client.RankLayout(*program, rows.data(), 3, o).ok());  // call 3: logged
  CATCH_REQUIRE(client.ListModels().ok());                              // call 4
  CATCH_CHECK(server.Stop() == 0);
  const std::vector<std::string> lines = RequestLines(server.Log());
  CATCH_REQUIRE(lines.size() == 2u);
  const std::string hash = program->graph_hash.substr(0, 12);
  CATCH_CHECK_THAT(lines[0], Catch::Contains("INFO tgraph-server: request method=RegisterGraph code=OK ms="));
  CATCH_CHECK_THAT(lines[0], Catch::EndsWith(" graph=" + hash));
  CATCH_CHECK_THAT(lines[1], Catch::Contains("INFO tgraph-server: request method=RankConfigs code=OK ms="));
  CATCH_CHECK_THAT(lines[1], Catch::EndsWith(" graph=" + hash + " configs=3 model_version=1"));
}

CATCH_TEST_CASE("server: an XLA HLO module registers, names its configurable nodes and ranks like its npz", "[e2e][hlo]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  RankerClient client(server.Client());
  // The raw tuning data of unet_3d holds the module in field 1, as an xla.HloProto does.
  auto program = HloProgram::FromFile(kReal + "/module_tuning_data_layout.pb");
  CATCH_REQUIRE(program.ok());
  const LayoutGraph real = *LoadLayoutGraph(kReal + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  // Same program, its nodes in the canonical order (model/hlo/canonical_order.h), where the
  // dataset's file keeps the TpuGraphs encoder's: another node order, so another hash.
  CATCH_CHECK(program->graph_hash != GraphContentHash(real.graph, real.node_config_ids));
  auto reg = client.Register(*program);
  CATCH_REQUIRE(reg.ok());
  CATCH_CHECK_FALSE(reg->already_registered);
  CATCH_CHECK(reg->num_nodes == 3163);
  CATCH_REQUIRE(reg->configurable_nodes.size() == 62u);
  // Its convolution/dot/reshape nodes are the file's configurable nodes, in the file's row
  // order: the same node features one by one.
  for (size_t i = 0; i < 62; ++i) {
    const int64_t node = reg->configurable_nodes[i].node;
    CATCH_CHECK(std::equal(program->graph.feat(node), program->graph.feat(node) + kNodeFeatDim,
                           real.graph.feat(real.node_config_ids[i])));
    CATCH_CHECK(reg->configurable_nodes[i].instruction == program->configurable_nodes[i].instruction);
    CATCH_CHECK(reg->configurable_nodes[i].computation == program->configurable_nodes[i].computation);
  }
  CATCH_CHECK(reg->configurable_nodes[0].opcode == "reshape");
  CATCH_CHECK_FALSE(reg->configurable_nodes[0].instruction.empty());
  // The answer lists each node's layout search space (model/core/layout_space.h): a
  // convolution's input group chooses between its batch and feature dims (0 and 4 here),
  // and every layout the real file's autotuner tried there is a candidate.
  const LayoutSpace space = LayoutSpaceOf(real.graph, real.node_config_ids);
  for (size_t i = 0; i < 62; ++i) {
    CATCH_REQUIRE(reg->configurable_nodes[i].groups.size() == 3u);
    for (int g = 0; g < 3; ++g) {
      CATCH_CHECK(reg->configurable_nodes[i].groups[g].rank == space.nodes[i].groups[g].rank);
      CATCH_CHECK((reg->configurable_nodes[i].groups[g].candidates == space.nodes[i].groups[g].candidates));
    }
  }
  const std::vector<GroupSpace>& conv_groups = reg->configurable_nodes[5].groups;
  CATCH_CHECK(conv_groups[1].rank == 5);
  CATCH_CHECK((conv_groups[1].candidates ==
               std::vector<GroupLayout>{{-1, -1, -1, -1, -1, -1}, {0, 4, -1, -1, -1, -1}, {4, 0, -1, -1, -1, -1}}));
  // The npz is the same graph in another node order: registered as one of its own.
  auto again = client.Register(real.graph, real.node_config_ids);
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK_FALSE(again->already_registered);
  CATCH_CHECK(again->graph_hash != reg->graph_hash);
  CATCH_CHECK(again->configurable_nodes[5].opcode == "convolution");
  CATCH_CHECK(again->configurable_nodes[5].instruction.empty());  // arrays carry no names

  // Ranking by HLO and by npz: the file's rows rank on the module as they are, with the
  // same scores up to the order the network sums its nodes in.
  RankOptions o;
  o.collection = "layout:xla:random";
  const int64_t count = 40;
  auto by_hlo = client.RankLayout(*program, real.config_feat.data(), count, o);
  auto by_npz = client.RankLayout(real.graph, real.node_config_ids, real.config_feat.data(), count, o);
  CATCH_REQUIRE(by_hlo.ok());
  CATCH_REQUIRE(by_npz.ok());
  CATCH_REQUIRE(by_hlo->scores.size() == by_npz->scores.size());
  for (size_t i = 0; i < by_hlo->scores.size(); ++i) CATCH_CHECK(by_hlo->scores[i] == Approx(by_npz->scores[i]).margin(1e-3));
  // The row helper: an instruction's layouts by name.
  const ConfigurableNode& conv = program->configurable_nodes[5];
  auto row = program->LayoutRow({{conv.instruction, {{4, 3, 2, 1, 0}, {4, 0, 3, 2, 1}}}});
  CATCH_REQUIRE(row.ok());
  CATCH_CHECK((*row)[5 * kConfigFeatDim + 0] == 4);
  CATCH_CHECK((*row)[5 * kConfigFeatDim + 7] == 0);
  CATCH_CHECK((*row)[5 * kConfigFeatDim + 12] == -1);
  CATCH_CHECK(std::count(row->begin(), row->end(), int8_t{-1}) == 62 * 18 - 10);
  CATCH_CHECK_THAT(std::string(program->LayoutRow({{"no.such", {}}}).status().message()),
                   Catch::Contains("'no.such' is not a configurable instruction"));
  CATCH_CHECK_THAT(std::string(program->LayoutRow({{conv.instruction, {{9}}}}).status().message()),
                   Catch::Contains("instruction '" + conv.instruction + "': tensor 0, position 0 is 9"));

  // The CLI: register lists the nodes; rank --hlo --configs ranks rows from a file.
  const std::string rows = w.dir.path() + "/rows.npz";
  NpzArchive npz;
  std::vector<float> values(real.config_feat.begin(), real.config_feat.begin() + count * 62 * kConfigFeatDim);
  npz["node_config_feat"] = NpyArray::From<float>({count, 62, kConfigFeatDim}, values);
  CATCH_REQUIRE(WriteNpz(rows, npz).ok());
  const std::string cli = std::string(TGRAPH_CLIENT_BIN) + " --server 127.0.0.1:" + std::to_string(server.port);
  auto [rc1, listing] = RunCommand(cli + " register --hlo " + kReal + "/module_tuning_data_layout.pb");
  CATCH_CHECK(rc1 == 0);
  CATCH_CHECK_THAT(listing, Catch::Contains("graph " + reg->graph_hash + ": 3163 nodes"));
  CATCH_CHECK_THAT(listing, Catch::Contains(conv.instruction));
  auto [rc2, ranked] = RunCommand(cli + " rank --collection layout:xla:random --hlo " + kReal +
                           "/module_tuning_data_layout.pb --configs " + rows + " --top_k 40");
  CATCH_CHECK(rc2 == 0);
  CATCH_CHECK_THAT(ranked, Catch::Contains("3163 nodes, 40 configurations ranked"));
  const int32_t best = by_hlo->order[0];
  CATCH_CHECK_THAT(ranked, Catch::Contains("     1 " + std::string(8 - std::to_string(best).size(), ' ') + std::to_string(best)));

  // Bad modules: INVALID_ARGUMENT naming the computation and instruction.
  auto stub = Stub(server.port);
  auto register_hlo = [&](const std::string& bytes, v1::RegisterGraphResponse* resp) {
    v1::RegisterGraphRequest req;
    req.set_hlo_module(bytes);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    return stub->RegisterGraph(&ctx, req, resp);
  };
  v1::RegisterGraphResponse resp;
  xla::HloModuleProto bad = *hlo::ParseModule(program->serialized, "x");
  bad.mutable_computations(3)->mutable_instructions(1)->add_operand_ids(999999);
  grpc::Status s = register_hlo(bad.SerializeAsString(), &resp);
  CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("hlo_module: computation '" + bad.computations(3).name() +
                                                      "', instruction '" + bad.computations(3).instructions(1).name()));
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("operand id 999999 is not an instruction of this computation"));
  s = register_hlo(program->serialized.substr(0, 1000), &resp);
  CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);
  CATCH_CHECK_THAT(s.error_message(), Catch::StartsWith("hlo_module: "));
  v1::RegisterGraphRequest empty;
  grpc::ClientContext ctx;
  s = stub->RegisterGraph(&ctx, empty, &resp);
  CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("graph (TpuGraphs arrays) or hlo_module"));
  CATCH_CHECK(server.Stop() == 0);

  // Limits as for nodes: a module over --max_nodes instructions.
  ServerProcess small(w.registry, w.dir.path(), {"--max_nodes", "3000"});
  CATCH_REQUIRE(small.port > 0);
  stub = Stub(small.port);
  s = register_hlo(program->serialized, &resp);
  CATCH_CHECK(s.error_code() == grpc::RESOURCE_EXHAUSTED);
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("3163 instructions, over the limit of 3000"));
  CATCH_CHECK(small.Stop() == 0);

  // And its working memory is admitted, not its bytes: the real module (0.5 MB) needs
  // about 6 MB to read, so a 2 MB --request_bytes refuses it, saying why (it was
  // admitted on its bytes before, whatever it took to read).
  ServerProcess tight(w.registry, w.dir.path(), {"--request_bytes", "2000000"});
  CATCH_REQUIRE(tight.port > 0);
  stub = Stub(tight.port);
  s = register_hlo(program->serialized, &resp);
  CATCH_CHECK(s.error_code() == grpc::RESOURCE_EXHAUSTED);
  CATCH_CHECK_THAT(s.error_message(), Catch::StartsWith("hlo_module: reading it needs "));
  CATCH_CHECK_THAT(s.error_message(), Catch::Contains("MiB of working memory or more: more than --request_bytes (1 MiB) "
                                                      "allows with nothing else in progress"));
  CATCH_CHECK(tight.Stop() == 0);
}

CATCH_TEST_CASE("server: every failed call is logged with its reason, whatever --request_log_every says", "[e2e]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path(), {"--request_log_every", "0"});
  CATCH_REQUIRE(server.port > 0);
  auto stub = Stub(server.port);
  for (int i = 0; i < 8; ++i) {  // modules a new user might send: each refused, each logged
    v1::RegisterGraphRequest req;
    req.set_hlo_module(absl::StrCat("HloModule m", i, "\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] nope(a#0)\n}"));
    v1::RegisterGraphResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    CATCH_CHECK(stub->RegisterGraph(&ctx, req, &resp).error_code() == grpc::INVALID_ARGUMENT);
  }
  v1::ListModelsResponse models;
  grpc::ClientContext ctx;
  CATCH_REQUIRE(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());  // not logged: OK, and every 0
  CATCH_CHECK(server.Stop() == 0);
  const std::vector<std::string> lines = RequestLines(server.Log());
  CATCH_REQUIRE(lines.size() == 8u);
  for (const std::string& line : lines) {
    CATCH_CHECK_THAT(line, Catch::Contains("WARNING tgraph-server: request method=RegisterGraph code=INVALID_ARGUMENT"));
    CATCH_CHECK_THAT(line, Catch::EndsWith(" error=\"hlo_module: line 4, column 24: operand 'a#0': the instruction is "
                                           "not a tuple\""));
  }
}

CATCH_TEST_CASE("server: ApplyLayouts writes a row into a module's text and says what stock XLA takes", "[e2e][hlo]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  auto stub = Stub(server.port);
  const std::string text = *ReadFile(kReal + "/hlo/jax/mlp_train_step.before_optimizations.txt");
  auto program = HloProgram::FromSerialized(text, "mlp.txt");
  CATCH_REQUIRE(program.ok());
  const size_t nc = program->configurable_nodes.size();
  // dot_general.5 (x times p[0][0]) with its input column-major: argument 13's layout.
  std::vector<int8_t> row(nc * kConfigFeatDim, -1);
  size_t dot = nc;
  for (size_t j = 0; j < nc; ++j)
    if (program->configurable_nodes[j].instruction == "dot_general.5") dot = j;
  CATCH_REQUIRE(dot < nc);
  row[dot * kConfigFeatDim + 6] = 0;
  row[dot * kConfigFeatDim + 7] = 1;
  v1::ApplyLayoutsRequest req;
  req.set_hlo_text(text);
  req.set_layout_config(std::string(row.begin(), row.end()));
  v1::ApplyLayoutsResponse resp;
  {
    grpc::ClientContext ctx;
    CATCH_REQUIRE(stub->ApplyLayouts(&ctx, req, &resp).ok());
  }
  // The same as tgraph-featurize apply: one copy into {0,1}, x's layout as JAX takes it.
  auto local = hlo::ApplyLayoutRow(text, row, "hlo_text");
  CATCH_REQUIRE(local.ok());
  CATCH_CHECK(resp.hlo_text() == local->text);
  CATCH_CHECK(resp.copies() == 1);
  CATCH_REQUIRE(resp.entry_layouts_size() == 1);
  CATCH_CHECK(resp.entry_layouts(0).index() == 13);
  CATCH_CHECK(resp.entry_layouts(0).name() == "x");
  CATCH_CHECK(resp.entry_layouts(0).shape() == "f32[128,784]");
  CATCH_CHECK(resp.entry_layouts(0).jax() == "Format(Layout(major_to_minor=(1, 0)), sharding)");
  CATCH_CHECK(resp.entry_layouts(0).asked_by() == "dot_general.5 input");
  CATCH_CHECK(resp.needs_hook_size() == 0);
  // The applied text registers with the same configurable instructions in the same order.
  auto applied = HloProgram::FromSerialized(resp.hlo_text(), "applied.txt");
  CATCH_REQUIRE(applied.ok());
  CATCH_REQUIRE(applied->configurable_nodes.size() == nc);
  for (size_t j = 0; j < nc; ++j)
    CATCH_CHECK(applied->configurable_nodes[j].instruction == program->configurable_nodes[j].instruction);
  // Errors name the instruction; a proto is refused (apply edits text).
  row[dot * kConfigFeatDim + 7] = 0;
  req.set_layout_config(std::string(row.begin(), row.end()));
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->ApplyLayouts(&ctx, req, &resp);
    CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);
    CATCH_CHECK_THAT(s.error_message(), Catch::Contains("(dot 'dot_general.5', node ") &&
                                            Catch::Contains("input group [0, 0, -1, -1, -1, -1]: dimension 0 appears twice"));
  }
  req.set_hlo_text(*ReadFile(kReal + "/hlo/jax/mlp_train_step.before_optimizations.hlo.pb"));
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->ApplyLayouts(&ctx, req, &resp);
    CATCH_CHECK(s.error_code() == grpc::INVALID_ARGUMENT);
    CATCH_CHECK_THAT(s.error_message(), Catch::Contains("not HLO text"));
  }
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: mutated HLO modules never crash it", "[e2e][hlo]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path());
  CATCH_REQUIRE(server.port > 0);
  auto stub = Stub(server.port);
  xla::TuningData tiles;
  CATCH_REQUIRE(tiles.ParseFromString(*ReadFile(kReal + "/op_tuning_data.pb")));
  std::mt19937 gen(11);
  int ok = 0, refused = 0;
  for (int i = 0; i < 200; ++i) {
    std::string bytes = tiles.modules(i % tiles.modules_size()).module().SerializeAsString();
    switch (i % 3) {
      case 0: bytes.resize(gen() % bytes.size()); break;
      case 1: for (int k = 0; k < 6; ++k) bytes[gen() % bytes.size()] = static_cast<char>(gen()); break;
      default: bytes.insert(gen() % bytes.size(), std::string(1 + gen() % 8, static_cast<char>(gen())));
    }
    v1::RegisterGraphRequest req;
    req.set_hlo_module(bytes);
    v1::RegisterGraphResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    const grpc::Status s = stub->RegisterGraph(&ctx, req, &resp);
    CATCH_CHECK((s.ok() || s.error_code() == grpc::INVALID_ARGUMENT));
    (s.ok() ? ok : refused)++;
  }
  CATCH_CHECK(refused > 0);
  CATCH_CHECK(HealthStatus(server.port) == 1);  // SERVING
  CATCH_CHECK(server.Stop() == 0);
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
  for (const auto& entry : std::filesystem::directory_iterator(SplitDir(store, xla_default, "train"))) {
    const std::string name = entry.path().filename().string();
    if (name.find(".partial") != std::string::npos) continue;
    CATCH_CHECK(entry.path().extension() == ".npz");
    CATCH_CHECK(LoadLayoutGraph(entry.path().string()).ok());
  }

  // A restarted server (graphs forgotten) accepts reports again: the client re-registers.
  ServerProcess again(registry, dir.path(), {"--measurement_store", store});
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

namespace {

// A throwaway CA and certificates from scripts/dev-certs (openssl), in `dir`.
std::string DevCerts(const std::string& dir) {
  const std::string certs = dir + "/certs";
  const std::string cmd = std::string(TGRAPH_SOURCE_DIR) + "/scripts/dev-certs " + certs;
  if (std::system(cmd.c_str()) != 0) return "";
  return certs;
}

ClientOptions TlsClient(int port, const std::string& certs, const std::string& ca, const std::string& client = "") {
  ClientOptions co;
  co.target = "127.0.0.1:" + std::to_string(port);
  co.retry_budget_s = 0;  // a refused handshake is UNAVAILABLE: no waiting for it
  co.timeout_s = 10;
  co.tls = *TlsFromFiles(certs + "/" + ca + ".pem", client.empty() ? "" : certs + "/" + client + ".pem",
                         client.empty() ? "" : certs + "/" + client + ".key", "");
  return co;
}

}  // namespace

CATCH_TEST_CASE("server: TLS and mutual TLS with generated certificates, rotation without a restart, precise refusals",
                "[e2e][tls]") {
  World w;
  w.Publish();
  const std::string certs = DevCerts(w.dir.path());
  CATCH_REQUIRE_FALSE(certs.empty());
  const LayoutGraph g = w.Graph();
  RankOptions ro;
  ro.collection = "layout:xla:random";
  auto rank = [&](const ClientOptions& co) {
    RankerClient c(co);
    return c.RankLayout(g.graph, g.node_config_ids, g.config_feat.data(), g.num_configs, ro);
  };

  // The same ranking over TLS as over plaintext.
  absl::StatusOr<Ranking> plain;
  {
    const std::string dir = w.dir.path() + "/plain";
    std::filesystem::create_directories(dir);
    ServerProcess server(w.registry, dir);
    CATCH_REQUIRE(server.port > 0);
    plain = rank({"127.0.0.1:" + std::to_string(server.port)});
    CATCH_REQUIRE(plain.ok());
  }
  // The server's files are copies, so that they can be rotated below.
  const std::string live = w.dir.path() + "/live";
  std::filesystem::create_directories(live);
  for (const char* f : {"server.pem", "server.key"}) std::filesystem::copy_file(certs + "/" + f, live + "/" + f);
  ServerProcess tls(w.registry, w.dir.path(),
                    {"--tls_cert", live + "/server.pem", "--tls_key", live + "/server.key", "--tls_reload_s", "1"});
  CATCH_REQUIRE(tls.port > 0);
  CATCH_CHECK_THAT(tls.Log(), Catch::Contains("transport=TLS"));
  absl::StatusOr<Ranking> secure = rank(TlsClient(tls.port, certs, "ca"));
  CATCH_REQUIRE(secure.ok());
  CATCH_CHECK(secure->scores == plain->scores);
  // A plaintext client, a client that trusts another CA, and a client expecting
  // another name all fail the handshake: UNAUTHENTICATED, named as TLS's and not retried
  // (a 30 s retry budget is not waited out), nothing served.
  const auto refused_at_once = [](const ClientOptions& co, const std::string& says) {
    ClientOptions patient = co;
    patient.retry_budget_s = 30;
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<std::string> h = RankerClient(patient).Health();
    CATCH_CHECK(h.status().code() == absl::StatusCode::kUnauthenticated);
    CATCH_CHECK_THAT(std::string(h.status().message()), Catch::Contains("TLS with " + co.target + " failed: " + says));
    CATCH_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  };
  ClientOptions cleartext;
  cleartext.target = "127.0.0.1:" + std::to_string(tls.port);
  cleartext.retry_budget_s = 0;
  refused_at_once(cleartext, "the server speaks TLS and this client connected in plaintext: give --tls_ca");
  refused_at_once(TlsClient(tls.port, certs, "other-ca"),
                  "the server's certificate does not chain to the CAs of --tls_ca (error:0A000086:SSL "
                  "routines::certificate verify failed)");
  ClientOptions wrong_name = TlsClient(tls.port, certs, "ca");
  wrong_name.tls.server_name = "elsewhere.example";
  refused_at_once(wrong_name, "Peer name elsewhere.example is not in peer certificate: give --tls_server_name");
  // A certificate the server name carries in its SANs other than the address's host.
  ClientOptions by_name = TlsClient(tls.port, certs, "ca");
  by_name.tls.server_name = "tgraph";
  CATCH_CHECK(*RankerClient(by_name).Health() == "SERVING");

  // Rotation: the files are replaced (each by a rename, as a Secret's update) with a
  // certificate another CA signed; new connections get it within --tls_reload_s, no restart.
  for (const char* ext : {".key", ".pem"}) {
    std::filesystem::copy_file(certs + "/other-server" + ext, live + "/next" + ext);
    std::filesystem::rename(live + "/next" + ext, live + "/server" + ext);
  }
  bool rotated = false;
  for (int i = 0; i < 100 && !rotated; ++i) {
    std::this_thread::sleep_for(100ms);
    rotated = RankerClient(TlsClient(tls.port, certs, "other-ca")).Health().ok();
  }
  CATCH_CHECK(rotated);
  CATCH_CHECK(RankerClient(TlsClient(tls.port, certs, "ca")).Health().status().code() ==
              absl::StatusCode::kUnauthenticated);
  CATCH_CHECK(tls.Stop() == 0);

  // Mutual TLS: only a client certificate the client CA signed gets in.
  const std::string mdir = w.dir.path() + "/mtls";
  std::filesystem::create_directories(mdir);
  ServerProcess mtls(w.registry, mdir,
                     {"--tls_cert", certs + "/server.pem", "--tls_key", certs + "/server.key", "--tls_client_ca",
                      certs + "/ca.pem"});
  CATCH_REQUIRE(mtls.port > 0);
  CATCH_CHECK_THAT(mtls.Log(), Catch::Contains("transport=mutual TLS"));
  absl::StatusOr<Ranking> mutual = rank(TlsClient(mtls.port, certs, "ca", "client"));
  CATCH_REQUIRE(mutual.ok());
  CATCH_CHECK(mutual->scores == plain->scores);
  refused_at_once(TlsClient(mtls.port, certs, "ca"),
                  "the server closed the connection after the TLS handshake");  // no certificate
  CATCH_CHECK_THAT(std::string(RankerClient(TlsClient(mtls.port, certs, "ca")).Health().status().message()),
                   Catch::Contains("it requires a client certificate (mutual TLS); give --tls_cert and --tls_key"));
  CATCH_CHECK_THAT(
      std::string(RankerClient(TlsClient(mtls.port, certs, "ca", "other-client")).Health().status().message()),
      Catch::Contains("it refused this client's certificate (--tls_cert)"));  // signed by another CA
  CATCH_CHECK(mtls.Stop() == 0);
  // A TLS client against a plaintext server.
  const std::string pdir = w.dir.path() + "/plain-again";
  std::filesystem::create_directories(pdir);
  ServerProcess plaintext(w.registry, pdir);
  CATCH_REQUIRE(plaintext.port > 0);
  refused_at_once(TlsClient(plaintext.port, certs, "ca"), "the server does not speak TLS");
  CATCH_CHECK(plaintext.Stop() == 0);

  // Bad TLS settings stop the server at startup with a usage error naming the flag.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--tls_cert", certs + "/server.pem"}, "needs both --tls_cert and --tls_key"},
      {{"--tls_client_ca", certs + "/ca.pem"}, "needs both --tls_cert and --tls_key"},
      {{"--tls_cert", certs + "/server.pem", "--tls_key", certs + "/absent.key"}, "--tls_key: " + certs + "/absent.key"},
      {{"--tls_cert", certs + "/server.key", "--tls_key", certs + "/server.key"}, "--tls_cert: " + certs + "/server.key holds no PEM block"},
      {{"--tls_cert", certs + "/server.pem", "--tls_key", certs + "/other-server.key"},
       "--tls_key " + certs + "/other-server.key is not the private key of --tls_cert " + certs + "/server.pem"},
      {{"--tls_cert", certs + "/server.pem", "--tls_key", certs + "/server.key", "--tls_client_ca",
        certs + "/client.key"}, "--tls_client_ca: "},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string dir = w.dir.path() + "/bad" + std::to_string(i);
    std::filesystem::create_directories(dir);
    ServerProcess refused(w.registry, dir, bad[i].first, 0, /*wait_for_port=*/false);
    const int status = refused.ExitStatus();
    CATCH_INFO(refused.Log());
    CATCH_CHECK(status == 2);
    CATCH_CHECK_THAT(refused.Log(), Catch::Contains(bad[i].second));
  }
}

CATCH_TEST_CASE("server: thousands of idle connections are closed after the handshake timeout, and the listener "
                "answers throughout and after",
                "[e2e][connections]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path(), {"--handshake_timeout_s", "2"});
  CATCH_REQUIRE(server.port > 0);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("file descriptors: "));
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("handshakes time out after 2 s"));
  // 3,000 TCP connections that never send a byte (no HTTP/2 preface), as a port scan or
  // a leaking client makes them.
  constexpr int kIdle = 3000;
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = ConnectLoopback(server.port, 1);
    if (fd >= 0) idle.push_back(fd);
  }
  CATCH_CHECK(idle.size() == static_cast<size_t>(kIdle));
  RankerClient client(server.Client());
  CATCH_CHECK(client.ListModels().ok());  // the listener still accepts and serves
  // The server closes each of them once the handshake timeout passes (gRPC's default kept
  // them 120 s): a read sees its SETTINGS and GOAWAY ("Did not receive HTTP/2 settings"),
  // then the end of the stream.
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::seconds(30);
  size_t closed = 0;
  std::vector<bool> done(idle.size(), false);
  while (closed < idle.size() && std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < idle.size(); ++i) {
      if (done[i]) continue;
      char buf[512];
      ssize_t n;
      while ((n = recv(idle[i], buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) done[i] = true, ++closed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CATCH_CHECK(closed == idle.size());
  // Within the timeout and a few seconds to close 3,000 (not the 120 s of gRPC's default).
  CATCH_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  for (int fd : idle) close(fd);
  CATCH_CHECK(client.ListModels().ok());
  CATCH_CHECK(client.Health("liveness").ok());
  const std::string metrics = HttpGet(server.metrics_port, "/metrics");
  CATCH_CHECK_THAT(metrics, Catch::Contains("\ntgraph_accept_errors_total 0\n"));
  CATCH_CHECK_THAT(metrics, Catch::Contains("\ntgraph_fd_limit "));
  CATCH_CHECK_THAT(metrics, Catch::Contains("\ntgraph_connections_unspoken_total 3000\n"));
  CATCH_CHECK(server.Stop() == 0);
}

CATCH_TEST_CASE("server: past --max_connections a new client is refused while the served ones are served, and is "
                "served once idle connections close",
                "[e2e][connections]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path(), {"--max_connections", "20", "--handshake_timeout_s", "60"});
  CATCH_REQUIRE(server.port > 0);
  CATCH_CHECK_THAT(server.Log(), Catch::Contains("at most 20 connections at once"));
  RankerClient served(server.Client());
  CATCH_REQUIRE(served.ListModels().ok());  // one connection, handed to gRPC
  std::vector<int> idle;
  for (int i = 0; i < 19; ++i) idle.push_back(ConnectLoopback(server.port, 1));
  const auto gauge = [&](const std::string& name) {
    const std::string m = HttpGet(server.metrics_port, "/metrics");
    const size_t at = m.find("\n" + name + " ");
    return at == std::string::npos ? -2.0 : std::stod(m.substr(at + name.size() + 2));
  };
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (gauge("tgraph_connections") < 20 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  CATCH_CHECK(gauge("tgraph_connections") == 20);
  CATCH_CHECK(gauge("tgraph_max_connections") == 20);
  // A new client's connection (its own subchannel: channels in one process otherwise
  // share one) is closed unserved: UNAVAILABLE, not a hang.
  const auto new_connection_lists = [&](grpc::StatusCode* code) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = v1::Ranker::NewStub(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server.port),
                                                               grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ListModelsResponse models;
    *code = stub->ListModels(&ctx, v1::ListModelsRequest(), &models).error_code();
    return *code == grpc::StatusCode::OK;
  };
  grpc::StatusCode code;
  CATCH_CHECK(!new_connection_lists(&code));
  CATCH_CHECK(code == grpc::StatusCode::UNAVAILABLE);
  CATCH_CHECK(gauge("tgraph_connections_refused_total") >= 1);
  CATCH_CHECK(served.ListModels().ok());  // the served connection is unaffected
  for (int fd : idle) close(fd);
  // Their places free at once (the loop sees each close): a new client is served.
  CATCH_CHECK(new_connection_lists(&code));
  CATCH_CHECK(server.Stop() == 0);
}
