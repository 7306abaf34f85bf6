// libFuzzer target: untrusted bytes as an HLO module (text or proto, told apart by
// content as every tool does) through the reader, the featurizer and the Triton GEMM
// fusions' reader (their backend configs' JSON included), each fusion's graph and its
// lone dot's. A crash, a leak, a sanitizer report or a hang is a defect; an error is the
// right answer to most inputs.
#include <cstddef>
#include <cstdint>

#include "model/hlo/featurize.h"
#include "model/hlo/gemm_fusions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tgraph::hlo::Limits limits;
  limits.max_instructions = 20000;  // bounded, as the server bounds a request
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tgraph::xla::HloModuleProto> module = tgraph::hlo::ParseModule(bytes, "fuzz", limits);
  if (!module.ok()) return 0;
  (void)tgraph::hlo::FeaturizeModule(*module, "fuzz", limits);
  absl::StatusOr<std::vector<tgraph::hlo::GemmFusion>> fusions = tgraph::hlo::FindGemmFusions(*module, "fuzz");
  if (!fusions.ok()) return 0;
  for (const tgraph::hlo::GemmFusion& f : *fusions) {
    (void)tgraph::hlo::FeaturizeModule(f.module, "fuzz", limits);
    absl::StatusOr<tgraph::xla::HloModuleProto> lone = tgraph::hlo::LoneDotModule(f, "fuzz");
    if (lone.ok()) (void)tgraph::hlo::FeaturizeModule(*lone, "fuzz", limits);
  }
  return 0;
}
