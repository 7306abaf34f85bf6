// What the end-to-end tests of tgraph-server share (tests/*_e2e_test.cc): a real
// server process on an ephemeral port (tests/server_process.h), a registry made here
// (World), raw gRPC stubs, and helpers for metrics, health and admission under load.
#pragma once

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

namespace tgraph::e2e {

using namespace std::chrono_literals;

// The real files, with their provenance (tests/data/real/README.md).
inline const std::string kReal = TGRAPH_REAL_DATA;


// An HTTP GET on the loopback port; with `timeout_s`, it gives up after that many
// seconds without data ("" when nothing came).
inline std::string HttpGet(int port, const std::string& path, int timeout_s = 0) {
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
inline void CheckSomeAdmittedSomeRefused(const OverBudgetCounts& c) {
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

inline std::unique_ptr<v1::Ranker::Stub> Stub(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Ranker::NewStub(
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
}

inline v1::RankConfigsRequest RankRequestFor(const LayoutGraph& g, const std::string& hash) {
  v1::RankConfigsRequest q;
  q.set_collection("layout:xla:random");
  q.set_graph_hash(hash);
  q.set_num_configs(g.num_configs);
  q.set_layout_configs(reinterpret_cast<const char*>(g.config_feat.data()), g.config_feat.size());
  return q;
}

inline grpc::Status Call(v1::Ranker::Stub& stub, const v1::RankConfigsRequest& q, v1::RankConfigsResponse* r,
                         std::chrono::milliseconds timeout = 20s) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  return stub.RankConfigs(&ctx, q, r);
}

inline std::string RegisterHash(v1::Ranker::Stub& stub, const LayoutGraph& g) {
  v1::RegisterGraphRequest req;
  EncodeGraph(g.graph, g.node_config_ids, req.mutable_graph());
  v1::RegisterGraphResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub.RegisterGraph(&ctx, req, &resp);
  return s.ok() ? resp.graph_hash() : "";
}

inline int HealthStatus(int port, const std::string& service = "tgraph.v1.Ranker") {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  return health->Check(&ctx, req, &resp).ok() ? static_cast<int>(resp.status()) : -1;
}

}  // namespace tgraph::e2e
