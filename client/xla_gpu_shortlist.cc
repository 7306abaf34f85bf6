#include "client/xla_gpu_shortlist.h"

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/tile/tile_space.h"

namespace tgraph {

namespace {

// A tile space's kernel ("triton-gemm"), or "" when the model has none (a fusion model's
// collection has no tile_space.json) or it does not parse.
std::string SpaceKernel(const ModelInfo& m) {
  if (m.tile_space.empty()) return "";
  const nlohmann::json j = nlohmann::json::parse(m.tile_space, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("kernel") && j["kernel"].is_string() ? j["kernel"].get<std::string>() : "";
}

std::string SpaceGpu(const ModelInfo& m) {
  const nlohmann::json j = nlohmann::json::parse(m.tile_space, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("gpu") && j["gpu"].is_string() ? j["gpu"].get<std::string>() : "";
}

bool IsTritonModel(const ModelInfo& m) {
  return absl::StartsWith(m.collection, "tile@") && SpaceKernel(m) == "triton-gemm" && !m.synthetic_only;
}

// Why `m` does not describe XLA's GPU GEMM fusions; "" when it does (a fusion model, or
// a Triton tile model).
std::string Misfit(const ModelInfo& m) {
  if (!absl::StartsWith(m.collection, "tile@")) {
    if (absl::StartsWith(m.collection, "tile:"))
      return absl::StrCat("'", m.collection, "' is a TPU tile collection of TpuGraphs' kind: its 24 values mean "
                          "other things than XLA's GPU GEMM configurations");
    return absl::StrCat("'", m.collection, "' is a layout collection, not a model of tile configurations");
  }
  if (m.synthetic_only)
    return absl::StrCat("'", m.collection, "' was trained on synthetic data only: its order says nothing of a GPU");
  const std::string kernel = SpaceKernel(m);
  if (!m.tile_space.empty() && kernel != "triton-gemm")
    return absl::StrCat("'", m.collection, "' is a tile space of the kernel '", kernel,
                        "', neither XLA's GEMM fusions nor the Triton matrix product");
  return "";
}

std::string Label(const ModelInfo& m) {
  if (IsTritonModel(m))
    return absl::StrCat("the Triton tile model ", m.collection, " (", SpaceGpu(m),
                        "), over XLA's configurations with split_k 1 and one CTA, a batched product as one batch "
                        "element");
  return absl::StrCat("the fusion model ", m.collection);
}

}  // namespace

absl::StatusOr<ShortlistModel> ChooseShortlistModel(const std::vector<ModelInfo>& loaded, const std::string& wanted,
                                                    bool allow_any) {
  std::vector<std::string> names, tritons;
  const ModelInfo* found = nullptr;
  for (const ModelInfo& m : loaded) {
    names.push_back(m.collection);
    if (m.collection == wanted) found = &m;
    if (IsTritonModel(m)) tritons.push_back(m.collection);
  }
  const std::string listed = names.empty() ? "none" : absl::StrJoin(names, ", ");
  if (found != nullptr) {
    ShortlistModel out{found->collection, IsTritonModel(*found), Label(*found), {}};
    if (const std::string why = Misfit(*found); !why.empty()) {
      if (!allow_any)
        return absl::FailedPreconditionError(absl::StrCat(
            why, "; xla-gpu ranks with a model of XLA's GEMM fusions or the GPU's Triton tile model (--allow_any_model "
                 "uses it anyway, with a warning)"));
      out.warnings.push_back(absl::StrCat("--allow_any_model: ", why));
      out.label = absl::StrCat("the model ", found->collection, " (not one of XLA's GPU fusions: see the warning)");
    }
    return out;
  }
  const std::string missing =
      wanted.empty() ? "no --collection given" : absl::StrCat("no model is loaded for collection '", wanted, "'");
  if (tritons.size() == 1) {
    const ModelInfo& m = *std::find_if(loaded.begin(), loaded.end(), [&](const ModelInfo& x) {
      return x.collection == tritons[0];
    });
    return ShortlistModel{m.collection, true, Label(m),
                          {absl::StrCat(missing, ": ranking with the GPU's Triton tile model ", m.collection)}};
  }
  if (tritons.empty())
    return absl::NotFoundError(absl::StrCat(
        missing, " (loaded: ", listed,
        "), and no Triton tile model to rank XLA's space with: train a fusion model on XLA's autotuning logs "
        "(docs/format.md) or a tile model of the GPU (docs/tile-model.md)"));
  return absl::FailedPreconditionError(absl::StrCat(missing, "; the server has several Triton tile models (",
                                                    absl::StrJoin(tritons, ", "), "): give --collection one of them"));
}

namespace {

// The Triton model's order of XLA's candidates for `p`: its search over its own space,
// each tile read as XLA's configuration with split_k 1 and one CTA, those XLA's space
// has, in that order.
absl::StatusOr<std::vector<XlaGemmConfig>> TritonOrder(RankerClient& client, const ShortlistModel& model,
                                                       const XlaGemmProblem& p, int64_t model_version) {
  absl::StatusOr<NodeGraph> g = GemmKernelGraph(p.m, p.n, p.k, p.lhs_dtype);
  if (!g.ok()) return g.status();
  SearchConfigsOptions o;
  o.collection = model.collection;
  o.model_version = model_version;
  o.results = 1000;  // every legal configuration, in the model's order
  absl::StatusOr<Proposals> found = client.Search(*g, {}, o);
  if (!found.ok()) return found.status();
  const std::vector<XlaGemmConfig> space = XlaGemmCandidates(p);
  const std::set<XlaGemmConfig> in_space(space.begin(), space.end());
  std::vector<XlaGemmConfig> order;
  for (const std::string& name : found->tile_names) {
    absl::StatusOr<TritonTile> t = ParseTritonTile(name);
    if (!t.ok()) continue;
    const XlaGemmConfig c{t->block_m, t->block_n, t->block_k, 1, t->num_stages, t->num_warps, 1};
    if (in_space.count(c) > 0) order.push_back(c);
  }
  return order;
}

// The fusion model's order of XLA's candidates: each ranked on the fusion's own graph.
absl::StatusOr<std::vector<XlaGemmConfig>> FusionOrder(RankerClient& client, const ShortlistModel& model,
                                                       const DecodedFusion& f, int64_t sm_count, int64_t top,
                                                       int64_t model_version) {
  const std::vector<XlaGemmConfig> candidates = XlaGemmCandidates(f.problem);
  std::vector<float> rows;
  rows.reserve(candidates.size() * kTileConfigDim);
  for (const XlaGemmConfig& c : candidates) {
    const std::array<float, kTileConfigDim> r = XlaGemmFeatures(f.problem, c, sm_count);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  RankOptions o;
  o.collection = model.collection;
  o.model_version = model_version;
  o.top_k = std::min<int64_t>(top, static_cast<int64_t>(candidates.size()));
  absl::StatusOr<Ranking> r = client.RankTile(f.graph, rows.data(), static_cast<int64_t>(candidates.size()), o);
  if (!r.ok()) return r.status();
  std::vector<XlaGemmConfig> order;
  for (int32_t i : r->order) order.push_back(candidates[static_cast<size_t>(i)]);
  return order;
}

}  // namespace

absl::StatusOr<std::vector<XlaGemmConfig>> FusionShortlist(RankerClient& client, const ShortlistModel& model,
                                                           const DecodedFusion& fusion, int64_t sm_count, int64_t top,
                                                           int64_t model_version, bool allow_split_k,
                                                           std::vector<std::string>* notes) {
  absl::StatusOr<std::vector<XlaGemmConfig>> order =
      model.triton ? TritonOrder(client, model, fusion.problem, model_version)
                   : FusionOrder(client, model, fusion, sm_count, /*top=*/1000, model_version);
  if (!order.ok() && model.triton && order.status().code() == absl::StatusCode::kFailedPrecondition) {
    // A problem the Triton model's space never measured (a dtype, N or K off its grid):
    // XLA's choice alone, as XLA would have it.
    notes->push_back(absl::StrCat(fusion.name, ": ", order.status().message(), ": XLA's choice alone"));
    order = std::vector<XlaGemmConfig>{};
  }
  if (!order.ok())
    return absl::Status(order.status().code(), absl::StrCat("fusion ", fusion.name, ": ", order.status().message()));
  std::vector<XlaGemmConfig> list{fusion.chosen};
  for (const XlaGemmConfig& c : *order) {
    if (static_cast<int64_t>(list.size()) >= top) break;
    if (!(c == fusion.chosen) && (allow_split_k || c.split_k == 1)) list.push_back(c);
  }
  return list;
}

}  // namespace tgraph
