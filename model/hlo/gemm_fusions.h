// XLA's Triton matrix-product fusions in a module after XLA's GPU passes: each fusion
// whose backend config says `"kind":"__triton_nested_gemm_fusion"` (or the older
// `"__triton_gemm"`), with the problem its dot computes, the configuration XLA chose for
// it, and its fused computation as a module of its own (the fused computation the entry,
// with what it calls), which FeaturizeModule makes a tile graph of: every instruction a
// node, the dot's prologue and epilogue included.
//
// Where XLA keeps the chosen configuration: a nested GEMM fusion's
// block_level_fusion_config holds the output tile (one size per dimension of the
// fusion's result: batch, then M, then N), warps, stages and CTAs, and its dot's own
// backend config the contracting tile (`"sizes":["64"]`: BLOCK_K); split_k is 1 (XLA
// splits K by rewriting the fusion, not by a parameter). An older GEMM fusion's
// triton_gemm_config holds all seven.
//
// Torch-free; pure functions of their arguments, callable from any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/hlo/autotuning_logs.h"
#include "model/hlo/working_memory.h"
#include "model/tile/xla_gemm.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

struct GemmFusion {
  std::string name;         // the fusion instruction's
  std::string computation;  // the fused computation's
  std::string kind;         // "__triton_nested_gemm_fusion" or "__triton_gemm"
  std::string dot;          // the product's name in the fused computation (a dot or a scaled-dot)
  XlaGemmProblem problem;
  XlaGemmConfig chosen;  // what XLA chose (its autotuner's pick, or its heuristic's)
  tgraph::xla::HloModuleProto module;  // named as the fusion; the fused computation its entry
  // From XLA's autotuning log of the fusion (AttachLogs), when there is one: the Triton
  // candidates that ran, the fastest library candidate's time, the candidates that failed.
  std::vector<TriedConfig> measured;
  std::optional<int64_t> library_ns;
  int64_t failed = 0;
};

// Every Triton matrix-product fusion of `module`, in the order of its computations and
// instructions. INVALID_ARGUMENT, naming `what` and the fusion, for a fusion whose
// backend config is not JSON, whose fused computation has no dot or several, or whose
// configuration or tile cannot be read (which key, what was expected); with `refused`,
// such a fusion is listed there instead and the others are read (the first refusal is
// the error only when none could be read); FAILED_PRECONDITION when the module has no
// such fusion (a module before XLA's GPU
// passes, or one the GPU compiler gave no Triton fusion).
// A fusion that could not be read, and why (the message FindGemmFusions would return).
struct RefusedFusion {
  std::string name, reason;
};

absl::StatusOr<std::vector<GemmFusion>> FindGemmFusions(const tgraph::xla::HloModuleProto& module,
                                                        absl::string_view what,
                                                        std::vector<RefusedFusion>* refused = nullptr);

// The fusion's dot alone, as a module: its operands as parameters 0, 1 (and, for a
// scaled-dot, the scales 2 and 3), their shapes and layouts as the dot reads them, and
// the dot as the root, in a computation of
// the fused computation's name, so that a model can be fed the product without its fused
// prologue and epilogue (what the graph adds is then measurable: the same rows, fewer
// nodes). INVALID_ARGUMENT naming `what` when the module has no such dot.
absl::StatusOr<tgraph::xla::HloModuleProto> LoneDotModule(const GemmFusion& f, absl::string_view what);

// Gives each fusion its log's measurements (by fusion name; a configuration tried twice
// keeps its first time). Returns the names of logs whose fusion the module does not hold.
std::vector<std::string> AttachLogs(const std::vector<FusionLog>& logs, std::vector<GemmFusion>* fusions);

// Writes each fusion's tile graph to `dir`/<fusion>.npz (the graph of its module, one
// configuration row: XLA's choice, XlaGemmFeatures with `sm_count`; its runtime unmeasured,
// 0 with normalizer 1, as in a test file; a fusion with measurements has a row per Triton
// configuration that ran instead, runtimes in ns, normalized by the fastest library
// candidate's time, or else the fastest Triton one's) and `dir`/fusions.tsv, a line per fusion (dot_node:
// the dot's node in the graph; the fusion's parameters are its parameter nodes):
//   fusion computation kind dot dot_node nodes batch m n k lhs_dtype rhs_dtype out_dtype
//   lhs_transposed rhs_transposed chosen block_m block_n block_k split_k num_stages
//   num_warps num_ctas measured failed fastest_ns library_ns file
// `dir` is made when missing; an existing fusions.tsv is refused unless `force`.
// Returns a line per fusion ("gemm_fusion_dot.2: f32 x f32 -> f32 8x128x512x100, chosen
// 64x32x64 sk1 s1 w4 c1, 3 nodes").
// With a `prefix` (a program's name and '.', when several programs' fusions share a
// collection's split folder) every file name begins with it: <prefix><fusion>.npz and
// <prefix>fusions.tsv.
// Fusions that could not be read are listed in the table as comment lines,
// `# refused<TAB>NAME<TAB>REASON`, which its readers skip.
absl::StatusOr<std::vector<std::string>> WriteGemmFusions(const std::vector<GemmFusion>& fusions,
                                                          const std::string& dir, int64_t sm_count, bool force,
                                                          const Limits& limits = {}, const std::string& prefix = "",
                                                          const std::vector<RefusedFusion>& refused = {});

// The candidate list XLA reads from --xla_gpu_gemm_autotuner_override_file in place of
// its own search space: an xla.TritonGemmConfigsProto in protobuf text format, one
// `config { block_m: ... }` per configuration, in the order given.
std::string OverrideFileText(const std::vector<XlaGemmConfig>& configs);

}  // namespace tgraph::hlo
