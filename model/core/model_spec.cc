#include "model/core/model_spec.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace tgraph {

const char* ArchitectureName(Architecture a) {
  return a == Architecture::kTpuGraphsBaseline ? "tpugraphs-baseline" : "tgraph";
}

absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name) {
  if (name == "tgraph") return Architecture::kTGraph;
  if (name == "tpugraphs-baseline") return Architecture::kTpuGraphsBaseline;
  return absl::InvalidArgumentError(
      absl::StrCat("architecture '", name, "' is unknown; expected tgraph or tpugraphs-baseline"));
}

const char* CrossAttentionFormName(CrossAttentionForm f) {
  return f == CrossAttentionForm::kPaper ? "paper" : "standardized";
}

absl::StatusOr<CrossAttentionForm> ParseCrossAttentionForm(absl::string_view name) {
  if (name == "paper") return CrossAttentionForm::kPaper;
  if (name == "standardized") return CrossAttentionForm::kStandardized;
  return absl::InvalidArgumentError(
      absl::StrCat("cross_attention_form must be paper or standardized, got '", name, "'"));
}

std::string ModelSpec::ToJson() const {
  nlohmann::json j;
  j["architecture"] = ArchitectureName(architecture);
  j["kind"] = kind == CollectionKind::kTile ? "tile" : "layout";
  j["hidden"] = hidden;
  j["blocks"] = blocks;
  j["layout_embedding"] = layout_embedding;
  j["opcode_embedding"] = opcode_embedding;
  j["se_reduction"] = se_reduction;
  j["self_attention"] = self_attention;
  j["cross_attention"] = cross_attention;
  j["edges"] = edges;
  j["cross_attention_form"] = CrossAttentionFormName(cross_attention_form);
  if (kind == CollectionKind::kTile) j["tile_head_layers"] = tile_head_layers;
  return j.dump();
}

absl::Status ModelSpec::Validate() const {
  if (hidden < 8 || hidden % 2 != 0 || hidden > 8192)
    return absl::InvalidArgumentError(absl::StrCat("hidden must be an even number in 8..8192, got ", hidden));
  if (blocks < 1 || blocks > 16) return absl::InvalidArgumentError(absl::StrCat("blocks must be 1..16, got ", blocks));
  if (layout_embedding < 1 || opcode_embedding < 1 || se_reduction < 1 || (hidden / 2) / se_reduction < 1)
    return absl::InvalidArgumentError("embedding widths and se_reduction must be positive and fit hidden/2");
  if (tile_head_layers < 1 || tile_head_layers > 8)
    return absl::InvalidArgumentError(absl::StrCat("tile_head_layers must be 1..8, got ", tile_head_layers));
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> ModelSpec::FromJson(const std::string& text, absl::string_view what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  ModelSpec s;
  auto err = [&](const char* key, const char* expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' must be ", expected));
  };
  auto get_int = [&](const char* key, int64_t* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return err(key, "an integer");
    *out = it->get<int64_t>();
    return absl::OkStatus();
  };
  auto get_bool = [&](const char* key, bool* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_boolean()) return err(key, "true or false");
    *out = it->get<bool>();
    return absl::OkStatus();
  };
  auto arch = j.find("architecture");
  if (arch == j.end() || !arch->is_string()) return err("architecture", "a string");
  absl::StatusOr<Architecture> architecture = ParseArchitecture(arch->get<std::string>());
  if (!architecture.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", architecture.status().message()));
  s.architecture = *architecture;
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() || (*kind != "tile" && *kind != "layout"))
    return err("kind", "\"layout\" or \"tile\"");
  s.kind = *kind == "tile" ? CollectionKind::kTile : CollectionKind::kLayout;
  for (auto [key, ptr] : {std::pair<const char*, int64_t*>{"hidden", &s.hidden}, {"blocks", &s.blocks},
                          {"layout_embedding", &s.layout_embedding}, {"opcode_embedding", &s.opcode_embedding},
                          {"se_reduction", &s.se_reduction}})
    if (absl::Status st = get_int(key, ptr); !st.ok()) return st;
  for (auto [key, ptr] : {std::pair<const char*, bool*>{"self_attention", &s.self_attention},
                          {"cross_attention", &s.cross_attention}, {"edges", &s.edges}})
    if (absl::Status st = get_bool(key, ptr); !st.ok()) return st;
  if (auto form = j.find("cross_attention_form"); form == j.end()) {
    s.cross_attention_form = CrossAttentionForm::kPaper;  // written before the key existed: the paper's form
  } else if (!form->is_string()) {
    return err("cross_attention_form", "a string");
  } else {
    absl::StatusOr<CrossAttentionForm> f = ParseCrossAttentionForm(form->get<std::string>());
    if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", f.status().message()));
    s.cross_attention_form = *f;
  }
  s.tile_head_layers = 1;  // written before the key existed: one layer
  if (j.contains("tile_head_layers"))
    if (absl::Status st = get_int("tile_head_layers", &s.tile_head_layers); !st.ok()) return st;
  if (absl::Status st = s.Validate(); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", st.message()));
  return s;
}

bool CpuHasBf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

const char* PrecisionName(Precision p) { return p == Precision::kBFloat16 ? "bf16" : "fp32"; }

absl::StatusOr<Precision> ResolvePrecision(const std::string& flag) {
  if (flag == "fp32") return Precision::kFloat32;
  if (flag == "auto") return CpuHasBf16() ? Precision::kBFloat16 : Precision::kFloat32;
  if (flag == "bf16") {
    if (!CpuHasBf16())
      return absl::InvalidArgumentError(
          "precision bf16: this CPU has no native bf16 dot products (avx512_bf16); use fp32 or auto");
    return Precision::kBFloat16;
  }
  return absl::InvalidArgumentError("precision must be auto, fp32 or bf16, got '" + flag + "'");
}

int64_t ActivationBytesPerConfig(const ModelSpec& spec, int64_t pruned_nodes) {
  if (spec.kind == CollectionKind::kTile) return 0;
  // The chunked block's peaks are within 10% of each other in bf16 and fp32 (14.7, 13.2).
  constexpr int64_t kBytesPerElement = 16;
  return kBytesPerElement * std::max<int64_t>(1, pruned_nodes) * spec.hidden;
}

int64_t ConfigsWithinBudget(const ModelSpec& spec, int64_t pruned_nodes, int64_t groups, int64_t budget) {
  const int64_t per_config = ActivationBytesPerConfig(spec, pruned_nodes);
  if (budget <= 0 || per_config <= 0) return -1;
  return std::max<int64_t>(0, (budget - ReferenceStatsBytes(spec, pruned_nodes, groups)) / per_config);
}

int64_t ReferenceStatsBytes(const ModelSpec& spec, int64_t pruned_nodes, int64_t groups) {
  if (spec.kind == CollectionKind::kTile || !spec.cross_attention || spec.architecture != Architecture::kTGraph) return 0;
  // CrossStats: a, b and lse, [groups, N, H / 2] float, per block.
  return spec.blocks * std::max<int64_t>(1, groups) * 3 * std::max<int64_t>(1, pruned_nodes) * (spec.hidden / 2) *
         static_cast<int64_t>(sizeof(float));
}

int64_t AutoActivationBytes(int64_t available_bytes, int64_t cache_bytes, int64_t graph_store_bytes, int workers) {
  const int64_t spare = available_bytes - cache_bytes - graph_store_bytes - (int64_t{1} << 30);
  return std::max<int64_t>(int64_t{256} << 20, spare / std::max(1, workers));
}

int64_t ReferenceGroups(int64_t reference_configs, int64_t training_batch) {
  return std::max<int64_t>(1, reference_configs / std::max<int64_t>(1, training_batch));
}

}  // namespace tgraph
