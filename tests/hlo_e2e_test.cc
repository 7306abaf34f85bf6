// End-to-end tests of XLA programs through a real server: HLO text and modules register,
// are searched, rank and are applied; mutated modules never crash it.
#include "tests/e2e_util.h"

using namespace tgraph;
using namespace tgraph::e2e;

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
