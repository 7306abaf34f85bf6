// End-to-end tests of the server's request log and its connections: log lines per
// request and per failure, TLS and mutual TLS with rotation, idle and excess connections.
#include "tests/e2e_util.h"

using namespace tgraph;
using namespace tgraph::e2e;

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

CATCH_TEST_CASE("server: every failed call is logged with its reason, whatever --request_log_every says", "[e2e]") {
  World w;
  w.Publish(1);
  ServerProcess server(w.registry, w.dir.path(), {"--request_log_every", "0"});
  CATCH_REQUIRE(server.port > 0);
  auto stub = Stub(server.port);
  for (int i = 0; i < 8; ++i) {  // modules a new user might send: each refused, each logged
    v1::RegisterGraphRequest req;
    req.set_hlo_module(absl::StrCat("HloModule m", i, "\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] negate(a#0)\n}"));
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
    CATCH_CHECK_THAT(line, Catch::EndsWith(" error=\"hlo_module: line 4, column 26: operand 'a#0': the instruction is "
                                           "not a tuple\""));
  }
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
