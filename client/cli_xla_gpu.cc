// tgraph-client xla-gpu: from a module dumped after XLA's GPU passes to the shortlist
// XLA's autotuner measures instead of its whole space: each Triton GEMM fusion ranked by
// the server over XlaGemmCandidates, the union of each fusion's best --per_fusion written as
// the candidate list --xla_gpu_gemm_autotuner_override_file reads, and the XLA_FLAGS
// that point at it. (XLA's per-fusion cache keys are its compiler's canonical print of
// each fusion on one device; tgraph does not reproduce them, so the hand-off is the
// candidate list, which XLA measures, rather than its answers.)
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "model/core/file_util.h"
#include "model/tools/tool.h"
#include "proto/xla_gpu_codec.h"

namespace tgraph::cli {

namespace {

// One fusion's candidates ranked; its best `top` configurations, fastest first.
absl::StatusOr<std::vector<XlaGemmConfig>> BestOf(RankerClient& client, const DecodedFusion& f, int64_t sm_count,
                                                  int64_t top, const RankOptions& options) {
  const std::vector<XlaGemmConfig> candidates = XlaGemmCandidates(f.problem);
  std::vector<float> rows;
  rows.reserve(candidates.size() * kTileConfigDim);
  for (const XlaGemmConfig& c : candidates) {
    const std::array<float, kTileConfigDim> r = XlaGemmFeatures(f.problem, c, sm_count);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  RankOptions o = options;
  o.top_k = std::min<int64_t>(top, static_cast<int64_t>(candidates.size()));
  absl::StatusOr<Ranking> r = client.RankTile(f.graph, rows.data(), static_cast<int64_t>(candidates.size()), o);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("fusion ", f.name, ": ", r.status().message()));
  std::vector<XlaGemmConfig> best;
  for (int32_t i : r->order) best.push_back(candidates[static_cast<size_t>(i)]);
  return best;
}

}  // namespace

int XlaGpu(RankerClient& client) {
  const std::string in = absl::GetFlag(FLAGS_hlo), out = absl::GetFlag(FLAGS_out);
  if (in.empty() || out.empty())
    return Fail(UsageError("xla-gpu needs --hlo MODULE (dumped after XLA's GPU passes) and --out OVERRIDE.textproto"));
  const int64_t top = absl::GetFlag(FLAGS_per_fusion), sm_count = absl::GetFlag(FLAGS_sm_count);
  if (top < 1 || top > 100) return Fail(UsageError("--per_fusion must be in 1..100"));
  if (sm_count < 1 || sm_count > 100000) return Fail(UsageError("--sm_count must be in 1..100000"));
  absl::StatusOr<Collection> coll = CollectionFlag();
  if (!coll.ok()) return Fail(coll.status());
  if (absl::Status s = CheckOutputFile(out, "--out", absl::GetFlag(FLAGS_force)); !s.ok()) return Fail(s);
  absl::StatusOr<std::string> bytes = ReadFile(in);
  if (!bytes.ok()) return Fail(bytes.status());
  absl::StatusOr<std::vector<DecodedFusion>> fusions = DecodeGemmFusions(*bytes, in);
  if (!fusions.ok()) return Fail(fusions.status());
  RankOptions options;
  options.collection = absl::GetFlag(FLAGS_collection);
  options.model_version = absl::GetFlag(FLAGS_model_version);
  std::vector<XlaGemmConfig> shortlist;
  std::set<XlaGemmConfig> listed;
  nlohmann::json report = {{"module", in}, {"fusions", nlohmann::json::array()}};
  for (const DecodedFusion& f : *fusions) {
    absl::StatusOr<std::vector<XlaGemmConfig>> best = BestOf(client, f, sm_count, top, options);
    if (!best.ok()) return Fail(best.status());
    nlohmann::json names = nlohmann::json::array();
    for (const XlaGemmConfig& c : *best) {
      names.push_back(c.Name());
      if (listed.insert(c).second) shortlist.push_back(c);
    }
    report["fusions"].push_back({{"fusion", f.name}, {"problem", f.problem.Name()}, {"xla_chose", f.chosen.Name()},
                                 {"best", names}});
  }
  if (absl::Status s = WriteFileAtomic(out, EncodeXlaCandidateList(shortlist)); !s.ok()) return Fail(s);
  const std::string flags = absl::StrCat("--xla_gpu_gemm_autotuner_override_file=", out);
  report["candidates"] = shortlist.size();
  report["xla_flags"] = flags;
  if (absl::GetFlag(FLAGS_json)) return PrintJson(report);
  for (const auto& f : report["fusions"])
    std::printf("%s (%s): %s\n", f["fusion"].get<std::string>().c_str(), f["problem"].get<std::string>().c_str(),
                f["best"].dump().c_str());
  std::printf("%zu candidates for %zu fusions -> %s\nXLA_FLAGS=\"%s\"\n", shortlist.size(), fusions->size(),
              out.c_str(), flags.c_str());
  return 0;
}

}  // namespace tgraph::cli
