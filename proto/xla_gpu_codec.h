// XLA's GPU autotuner as the client library meets it: a module dumped after XLA's GPU
// passes decoded into its Triton GEMM fusions (model/hlo/gemm_fusions.h), each with its
// problem, XLA's choice and its graph featurized, and a shortlist of configurations
// encoded as the candidate list XLA reads (--xla_gpu_gemm_autotuner_override_file).
// Pure functions: any thread; results are the caller's.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/graph.h"
#include "model/tile/xla_gemm.h"

namespace tgraph {

struct DecodedFusion {
  std::string name;
  XlaGemmProblem problem;
  XlaGemmConfig chosen;  // what XLA chose
  NodeGraph graph;       // the fused computation, every instruction a node
};

// The module's fusions, in its order: the module's reader's and FindGemmFusions' errors
// (INVALID_ARGUMENT; FAILED_PRECONDITION for a module without such fusions), naming `what`.
// With `refused`, a fusion that cannot be read is said there (why) and the others decoded.
absl::StatusOr<std::vector<DecodedFusion>> DecodeGemmFusions(absl::string_view module_bytes, absl::string_view what,
                                                             std::vector<std::string>* refused = nullptr);

// The HLO text of C[M, N] = A[M, K] B[K, N] as XLA writes jnp.dot's, in `dtype` (the
// graph a Triton tile model's collection holds for a problem), and that graph, as one
// kernel (nothing configurable). INVALID_ARGUMENT for a dtype HLO has not.
std::string GemmModuleText(int64_t m, int64_t n, int64_t k, const std::string& dtype);
absl::StatusOr<NodeGraph> GemmKernelGraph(int64_t m, int64_t n, int64_t k, const std::string& dtype);

// The candidate list XLA reads in place of its search space (protobuf text).
std::string EncodeXlaCandidateList(const std::vector<XlaGemmConfig>& configs);

}  // namespace tgraph
