#include "proto/xla_gpu_codec.h"

#include "absl/strings/str_cat.h"
#include "model/hlo/featurize.h"
#include "model/hlo/gemm_fusions.h"

namespace tgraph {

absl::StatusOr<std::vector<DecodedFusion>> DecodeGemmFusions(absl::string_view module_bytes, absl::string_view what) {
  absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(module_bytes, what);
  if (!module.ok()) return module.status();
  absl::StatusOr<std::vector<hlo::GemmFusion>> fusions = hlo::FindGemmFusions(*module, what);
  if (!fusions.ok()) return fusions.status();
  std::vector<DecodedFusion> out;
  for (hlo::GemmFusion& f : *fusions) {
    absl::StatusOr<hlo::ModuleGraph> g = hlo::FeaturizeModule(f.module, absl::StrCat(what, ": fusion ", f.name));
    if (!g.ok()) return g.status();
    out.push_back({f.name, f.problem, f.chosen, std::move(g->graph)});
  }
  return out;
}

std::string EncodeXlaCandidateList(const std::vector<XlaGemmConfig>& configs) { return hlo::OverrideFileText(configs); }

}  // namespace tgraph
