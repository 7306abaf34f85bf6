// tgraph-client xla-gpu: from a module dumped after XLA's GPU passes to the shortlist
// XLA's autotuner measures instead of its whole space: each Triton GEMM fusion's own XLA
// choice and the model's best of XlaGemmCandidates (client/xla_gpu_shortlist.h: which
// model, and how), their union written as the candidate list
// --xla_gpu_gemm_autotuner_override_file reads, and the XLA_FLAGS that point at it. (XLA's per-fusion cache keys are its compiler's canonical print of
// each fusion on one device; tgraph does not reproduce them, so the hand-off is the
// candidate list, which XLA measures, rather than its answers.)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "client/xla_gpu_shortlist.h"
#include "model/core/file_util.h"
#include "model/tools/tool.h"
#include "proto/xla_gpu_codec.h"

namespace tgraph::cli {

namespace {

// The flags to run the program with: the user's own XLA_FLAGS (from the environment)
// and the override file's absolute path, so that it is found wherever the job runs.
std::string XlaFlags(const std::string& out) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(out, ec);
  const std::string own = std::getenv("XLA_FLAGS") != nullptr ? std::getenv("XLA_FLAGS") : "";
  return absl::StrCat(own, own.empty() ? "" : " ", "--xla_gpu_gemm_autotuner_override_file=",
                      ec ? out : abs.lexically_normal().string());
}

}  // namespace

int XlaGpu(RankerClient& client) {
  const std::string in = absl::GetFlag(FLAGS_hlo), out = absl::GetFlag(FLAGS_out);
  if (in.empty() || out.empty())
    return Fail(UsageError("xla-gpu needs --hlo MODULE (dumped after XLA's GPU passes) and --out OVERRIDE.textproto"));
  const int64_t top = absl::GetFlag(FLAGS_per_fusion), sm_count = absl::GetFlag(FLAGS_sm_count);
  if (top < 1 || top > 100) return Fail(UsageError("--per_fusion must be in 1..100"));
  if (sm_count < 1 || sm_count > 100000) return Fail(UsageError("--sm_count must be in 1..100000"));
  if (absl::Status s = CheckOutputFile(out, "--out", absl::GetFlag(FLAGS_force)); !s.ok()) return Fail(s);
  absl::StatusOr<std::string> bytes = ReadFile(in);
  if (!bytes.ok()) return Fail(bytes.status());
  std::vector<std::string> notes;  // what a reader should know: unread fusions, a model's refusals
  absl::StatusOr<std::vector<DecodedFusion>> fusions = DecodeGemmFusions(*bytes, in, &notes);
  if (!fusions.ok()) return Fail(fusions.status());
  for (std::string& n : notes) n += ": XLA measures it over the list as it stands";
  absl::StatusOr<std::vector<ModelInfo>> loaded = client.ListModels();
  if (!loaded.ok()) return Fail(loaded.status());
  absl::StatusOr<ShortlistModel> model =
      ChooseShortlistModel(*loaded, absl::GetFlag(FLAGS_collection), absl::GetFlag(FLAGS_allow_any_model));
  if (!model.ok()) return Fail(model.status());
  for (const std::string& w : model->warnings) std::fprintf(stderr, "tgraph-client: warning: %s\n", w.c_str());
  // XLA's own choices first (the list is never without them), then each fusion's best.
  std::vector<XlaGemmConfig> shortlist;
  std::set<XlaGemmConfig> listed;
  for (const DecodedFusion& f : *fusions)
    if (listed.insert(f.chosen).second) shortlist.push_back(f.chosen);
  nlohmann::json report = {{"module", in}, {"model", model->collection}, {"ranked_by", model->label},
                           {"fusions", nlohmann::json::array()}};
  for (const DecodedFusion& f : *fusions) {
    absl::StatusOr<std::vector<XlaGemmConfig>> best =
        FusionShortlist(client, *model, f, sm_count, top, absl::GetFlag(FLAGS_model_version),
                        absl::GetFlag(FLAGS_allow_split_k), &notes);
    if (!best.ok()) return Fail(best.status());
    nlohmann::json names = nlohmann::json::array();
    for (const XlaGemmConfig& c : *best) {
      names.push_back(c.Name());
      if (listed.insert(c).second) shortlist.push_back(c);
    }
    report["fusions"].push_back({{"fusion", f.name}, {"problem", f.problem.Name()}, {"xla_chose", f.chosen.Name()},
                                 {"shortlist", names}});
  }
  if (absl::Status s = WriteFileAtomic(out, EncodeXlaCandidateList(shortlist)); !s.ok()) return Fail(s);
  const std::string flags = XlaFlags(out);
  report["candidates"] = shortlist.size();
  report["notes"] = notes;
  report["xla_flags"] = flags;
  if (absl::GetFlag(FLAGS_json)) return PrintJson(report);
  std::printf("ranked by %s; each fusion's list starts with XLA's own choice\n", model->label.c_str());
  for (const auto& f : report["fusions"])
    std::printf("%s (%s): %s\n", f["fusion"].get<std::string>().c_str(), f["problem"].get<std::string>().c_str(),
                f["shortlist"].dump().c_str());
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  std::printf("%zu candidates for %zu fusions -> %s\nXLA_FLAGS=\"%s\"\n", shortlist.size(), fusions->size(),
              out.c_str(), flags.c_str());
  return 0;
}

}  // namespace tgraph::cli
