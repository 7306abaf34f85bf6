#include "proto/xla_gpu_codec.h"

#include "absl/strings/str_cat.h"
#include "model/hlo/featurize.h"
#include "model/hlo/gemm_fusions.h"

namespace tgraph {

absl::StatusOr<std::vector<DecodedFusion>> DecodeGemmFusions(absl::string_view module_bytes, absl::string_view what,
                                                             std::vector<std::string>* refused) {
  absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(module_bytes, what);
  if (!module.ok()) return module.status();
  std::vector<hlo::RefusedFusion> unread;
  absl::StatusOr<std::vector<hlo::GemmFusion>> fusions =
      hlo::FindGemmFusions(*module, what, refused != nullptr ? &unread : nullptr);
  if (!fusions.ok()) return fusions.status();
  for (const hlo::RefusedFusion& r : unread) refused->push_back(r.reason);
  std::vector<DecodedFusion> out;
  for (hlo::GemmFusion& f : *fusions) {
    absl::StatusOr<hlo::ModuleGraph> g = hlo::FeaturizeModule(f.module, absl::StrCat(what, ": fusion ", f.name));
    if (!g.ok()) return g.status();
    out.push_back({f.name, f.problem, f.chosen, std::move(g->graph)});
  }
  return out;
}

std::string GemmModuleText(int64_t m, int64_t n, int64_t k, const std::string& dtype) {
  const std::string a = absl::StrCat(dtype, "[", m, ",", k, "]{1,0}"), b = absl::StrCat(dtype, "[", k, ",", n, "]{1,0}"),
                    c = absl::StrCat(dtype, "[", m, ",", n, "]{1,0}");
  return absl::StrCat("HloModule jit_dot, entry_computation_layout={(", a, ", ", b, ")->", c, "}\n\nENTRY main.1 {\n",
                      "  a.1 = ", a, " parameter(0)\n  b.1 = ", b, " parameter(1)\n  ROOT dot_general.1 = ", c,
                      " dot(a.1, b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
}

absl::StatusOr<NodeGraph> GemmKernelGraph(int64_t m, int64_t n, int64_t k, const std::string& dtype) {
  absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(GemmModuleText(m, n, k, dtype), "gemm");
  if (!module.ok()) return module.status();
  absl::StatusOr<hlo::ModuleGraph> g = hlo::FeaturizeModule(*module, "gemm");
  if (!g.ok()) return g.status();
  return std::move(g->graph);
}

std::string EncodeXlaCandidateList(const std::vector<XlaGemmConfig>& configs) { return hlo::OverrideFileText(configs); }

}  // namespace tgraph
