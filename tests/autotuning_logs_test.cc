// XLA's autotuning logs (model/hlo/autotuning_logs.h) joined to the real MLP dump's
// fusions (model/hlo/gemm_fusions.h). No GPU has written a log for this project yet:
// the logs here are written by the test, in XLA's message layout (AutotuningLogs and
// its parts, the field numbers of the installed jaxlib's XLA), binary and as text, each
// kind of result XLA records (a Triton key, a newer backend's packed key, a library
// algorithm, a failure).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "google/protobuf/text_format.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/hlo/autotuning_logs.h"
#include "model/hlo/featurize.h"
#include "model/hlo/gemm_fusions.h"
#include "tgraph/hlo/autotuning.pb.h"

using namespace tgraph;
using tgraph::hlo::FusionLog;
using tgraph::hlo::ReadAutotuningLogs;

namespace {

const std::string kAfter = std::string(TGRAPH_REAL_DATA) + "/hlo/jax/mlp_train_step.sm_9.0a_gpu_after_optimizations.txt";

void Triton(xla::AutotuneResult* r, int64_t m, int64_t n, int64_t k, int64_t split_k, int64_t ns) {
  xla::TritonGemmKey* t = r->mutable_triton();
  t->set_block_m(m);
  t->set_block_n(n);
  t->set_block_k(k);
  t->set_split_k(split_k);
  t->set_num_stages(3);
  t->set_num_warps(4);
  t->set_num_ctas(1);
  r->mutable_run_time()->set_nanos(static_cast<int32_t>(ns));
}

// Three logs: gemm_fusion_dot.2 by name (two Triton candidates, the first again, a
// library algorithm, a failure); gemm_fusion_dot.3 by its packed instruction, its
// candidate in a newer backend's key; and a fusion this module does not have.
xla::AutotuningLogs Logs() {
  xla::AutotuningLogs logs;
  xla::AutotuningLog* a = logs.add_logs();
  a->set_fusion_name("gemm_fusion_dot.2");
  a->mutable_compute_capability()->set_major(9);
  Triton(a->add_results(), 64, 32, 64, 1, 12000);
  Triton(a->add_results(), 32, 32, 32, 2, 15000);
  Triton(a->add_results(), 64, 32, 64, 1, 13000);  // tried again: the first time is kept
  xla::AutotuneResult* lib = a->add_results();
  lib->mutable_gemm()->set_algorithm(3);
  lib->mutable_run_time()->set_nanos(11000);
  a->add_results()->mutable_failure()->set_kind(xla::DISQUALIFIED);
  xla::AutotuningLog* b = logs.add_logs();
  xla::HloInstructionProto inst;
  inst.set_name("gemm_fusion_dot.3");
  b->mutable_instr()->set_type_url("type.googleapis.com/xla.HloInstructionProto");
  b->mutable_instr()->set_value(inst.SerializeAsString());
  xla::AutotuneResult* other = b->add_results();
  xla::TritonGemmKey key;
  key.set_block_m(16);
  key.set_block_n(16);
  key.set_block_k(32);
  key.set_split_k(1);
  key.set_num_stages(2);
  key.set_num_warps(2);
  other->mutable_other()->set_name("TRITON");
  other->mutable_other()->mutable_config()->set_type_url("type.googleapis.com/xla.AutotuneResult.TritonGemmKey");
  other->mutable_other()->mutable_config()->set_value(key.SerializeAsString());
  other->mutable_run_time()->set_seconds(0);
  other->mutable_run_time()->set_nanos(7000);
  logs.add_logs()->set_fusion_name("fusion.404");
  return logs;
}

std::vector<hlo::GemmFusion> Fusions() {
  auto bytes = ReadFile(kAfter);
  REQUIRE(bytes.ok());
  auto m = hlo::ParseModule(*bytes, kAfter);
  REQUIRE(m.ok());
  auto f = hlo::FindGemmFusions(*m, kAfter);
  REQUIRE(f.ok());
  return *f;
}

}  // namespace

TEST_CASE("autotuning logs: each fusion's candidates and times, from binary and text alike", "[hlo][fusions][logs]") {
  const xla::AutotuningLogs logs = Logs();
  auto binary = ReadAutotuningLogs(logs.SerializeAsString(), "logs.pb");
  REQUIRE(binary.ok());
  std::string text;
  REQUIRE(google::protobuf::TextFormat::PrintToString(logs, &text));
  // XLA writes the packed instruction expanded; the reader skips what it does not read.
  text = "# written by XLA\n" + text +
         "logs {\n  instr {\n    [type.googleapis.com/xla.HloInstructionProto] { name: \"x\" opcode: \"fusion\" }\n"
         "  }\n  fusion_name: \"gemm_fusion_dot\"\n  cudnn_version { major: 9 }\n}\n"
         // Named only by the instruction it packs, expanded: its own name, not a nested one's.
         "logs {\n  instr {\n    [type.googleapis.com/xla.HloInstructionProto] {\n      metadata { op_name: \"a\" }\n"
         "      sharding { name: \"inner\" }\n      name: \"gemm_fusion_dot.1\"\n    }\n  }\n"
         "  results { triton { block_m: 32 block_n: 16 block_k: 64 num_stages: 2 num_warps: 4 } "
         "run_time { nanos: 9000 } }\n  results { failure { kind: WRONG_RESULT msg: \"differs\" } }\n}\n";
  auto from_text = ReadAutotuningLogs(text, "logs.txt");
  INFO(from_text.status().message());
  REQUIRE(from_text.ok());
  REQUIRE(binary->size() == 3);
  REQUIRE(from_text->size() == 5);
  for (const std::vector<FusionLog>* read : {&*binary, &*from_text}) {
    const FusionLog& a = read->at(0);
    CHECK(a.fusion == "gemm_fusion_dot.2");
    CHECK(a.compute_capability == "9.0");
    REQUIRE(a.triton.size() == 3);
    CHECK(a.triton[0].config.Name() == "64x32x64 sk1 s3 w4 c1");
    CHECK(a.triton[0].run_time_ns == 12000);
    CHECK(a.triton[1].config.Name() == "32x32x32 sk2 s3 w4 c1");
    CHECK(a.failed == 1);
    REQUIRE(a.library_ns);
    CHECK(*a.library_ns == 11000);
    const FusionLog& b = read->at(1);
    CHECK(b.fusion == "gemm_fusion_dot.3");  // named by the instruction it packs
    REQUIRE(b.triton.size() == 1);
    CHECK(b.triton[0].config.Name() == "16x16x32 sk1 s2 w2 c1");
    CHECK(b.triton[0].run_time_ns == 7000);
    CHECK_FALSE(b.library_ns);
  }
  CHECK(from_text->at(3).fusion == "gemm_fusion_dot");
  CHECK(from_text->at(4).fusion == "gemm_fusion_dot.1");
  REQUIRE(from_text->at(4).triton.size() == 1);
  CHECK(from_text->at(4).triton[0].config.Name() == "32x16x64 sk1 s2 w4 c1");  // split_k, CTAs absent: 1
  CHECK(from_text->at(4).failed == 1);
}

TEST_CASE("autotuning logs: joined to the real dump's fusions, every timed candidate is a row", "[hlo][fusions][logs]") {
  std::vector<hlo::GemmFusion> fusions = Fusions();
  auto logs = ReadAutotuningLogs(Logs().SerializeAsString(), "logs.pb");
  REQUIRE(logs.ok());
  CHECK(hlo::AttachLogs(*logs, &fusions) == std::vector<std::string>{"fusion.404"});
  const std::string dir = (std::filesystem::temp_directory_path() / "tgraph_logs_test").string();
  std::filesystem::remove_all(dir);
  auto lines = hlo::WriteGemmFusions(fusions, dir, 132, false);
  REQUIRE(lines.ok());
  CHECK(lines->at(0) == "gemm_fusion_dot.2: f32 x f32 -> f32 8x128x512x100, chosen 64x32x64 sk1 s1 w4 c1, 3 nodes, "
                        "2 measured");
  auto a = LoadTileGraph(dir + "/gemm_fusion_dot.2.npz");
  REQUIRE(a.ok());
  REQUIRE(a->num_configs == 2);
  CHECK(a->config_runtime == std::vector<int64_t>{12000, 15000});
  CHECK(a->config_runtime_normalizers == std::vector<int64_t>{11000, 11000});  // the library's time
  CHECK(a->config_feat[3] == 1);                                                 // split_k of row 0
  CHECK(a->config_feat[24 + 3] == 2);                                            // and of row 1
  CHECK(a->config_feat[24 + 10] == 2);  // K steps of one split: ceil(100 / (32 x 2))
  auto b = LoadTileGraph(dir + "/gemm_fusion_dot.3.npz");
  REQUIRE(b.ok());
  CHECK(b->config_runtime == std::vector<int64_t>{7000});
  CHECK(b->config_runtime_normalizers == std::vector<int64_t>{7000});  // no library time: the fastest's
  auto c = LoadTileGraph(dir + "/gemm_fusion_dot.npz");  // no log: XLA's choice, unmeasured
  REQUIRE(c.ok());
  CHECK(c->config_runtime == std::vector<int64_t>{0});
  auto tsv = ReadFile(dir + "/fusions.tsv");
  REQUIRE(tsv.ok());
  CHECK_THAT(*tsv, Catch::Contains("\t1\t1\t4\t1\t2\t1\t12000\t11000\tgemm_fusion_dot.2.npz\n"));
  CHECK_THAT(*tsv, Catch::Contains("\t0\t0\t\t\tgemm_fusion_dot.npz\n"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("autotuning logs: what is not a log, or names no fusion, or has no time, is refused", "[hlo][fusions][logs]") {
  auto s = ReadAutotuningLogs(std::string("\xff\xff\xff\xff", 4), "bad.pb").status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("bad.pb: not a serialized xla.AutotuningLogs"));
  s = ReadAutotuningLogs("logs {\n  results { run_time { seconds: x } }\n}\n", "bad.txt").status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("bad.txt: line 2, column"));
  xla::AutotuningLogs logs;
  logs.add_logs()->add_results()->mutable_run_time()->set_nanos(5);
  s = ReadAutotuningLogs(logs.SerializeAsString(), "anon.pb").status();
  CHECK_THAT(std::string(s.message()), Catch::Contains("anon.pb: log 0: names no fusion"));
  logs.mutable_logs(0)->set_fusion_name("f");
  logs.mutable_logs(0)->mutable_results(0)->mutable_run_time()->set_seconds(-1);
  s = ReadAutotuningLogs(logs.SerializeAsString(), "neg.pb").status();
  CHECK_THAT(std::string(s.message()), Catch::Contains("neg.pb: log 0: result 0: run_time -1 s 5 ns is not a time"));
}
