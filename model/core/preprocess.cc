#include "model/core/preprocess.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/string_view.h"
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"

namespace tgraph {

PrunedGraph PruneGraph(const NodeGraph& g, const std::vector<int64_t>& node_config_ids) {
  const int64_t n = g.num_nodes;
  std::vector<char> configurable(n, 0), keep(n, 0);
  for (int64_t id : node_config_ids) configurable[id] = keep[id] = 1;
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    if (configurable[u]) keep[v] = 1;  // a producer of a configurable node
    if (configurable[v]) keep[u] = 1;  // a consumer of a configurable node
  }
  PrunedGraph p;
  std::vector<int64_t> new_id(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    new_id[i] = static_cast<int64_t>(p.original_ids.size());
    p.original_ids.push_back(i);
  }
  const int64_t k = static_cast<int64_t>(p.original_ids.size());
  p.graph.num_nodes = k;
  p.graph.node_feat.resize(k * kNodeFeatDim);
  p.graph.node_opcode.resize(k);
  for (int64_t j = 0; j < k; ++j) {
    std::copy_n(g.feat(p.original_ids[j]), kNodeFeatDim, p.graph.node_feat.begin() + j * kNodeFeatDim);
    p.graph.node_opcode[j] = g.node_opcode[p.original_ids[j]];
  }
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    const int64_t u = new_id[g.edge_index[2 * e]], v = new_id[g.edge_index[2 * e + 1]];
    if (u < 0 || v < 0) continue;
    p.graph.edge_index.push_back(u);
    p.graph.edge_index.push_back(v);
  }
  p.config_node_index.reserve(node_config_ids.size());
  for (int64_t id : node_config_ids) p.config_node_index.push_back(new_id[id]);
  return p;
}

int64_t DeduplicateConfigs(LayoutGraph* g) {
  const int64_t c = g->num_configs;
  const size_t row = static_cast<size_t>(g->num_config_nodes()) * kConfigFeatDim;
  std::unordered_map<std::string_view, int64_t> first;  // row bytes -> kept row index
  first.reserve(static_cast<size_t>(c));
  std::vector<int64_t> kept;
  std::vector<int64_t> runtime;
  kept.reserve(c);
  for (int64_t i = 0; i < c; ++i) {
    std::string_view key(reinterpret_cast<const char*>(g->config(i)), row);
    auto [it, inserted] = first.emplace(key, static_cast<int64_t>(kept.size()));
    if (inserted) {
      kept.push_back(i);
      runtime.push_back(g->config_runtime[i]);
    } else {
      runtime[it->second] = std::min(runtime[it->second], g->config_runtime[i]);
    }
  }
  const int64_t removed = c - static_cast<int64_t>(kept.size());
  if (removed == 0) return 0;
  // Compact in place: kept[j] >= j, so moving forward never overwrites an unread row.
  for (size_t j = 0; j < kept.size(); ++j)
    if (static_cast<int64_t>(j) != kept[j])
      std::copy_n(g->config(kept[j]), row, g->config_feat.begin() + j * row);
  g->num_configs = static_cast<int64_t>(kept.size());
  g->config_feat.resize(kept.size() * row);
  g->config_runtime = std::move(runtime);
  return removed;
}

uint32_t EncodeLayoutGroup(const int8_t* six) {
  uint32_t code = 0;
  for (int k = kLayoutSlots - 1; k >= 0; --k) code = code * 7 + static_cast<uint32_t>(six[k] + 1);
  return code;
}

void DecodeLayoutGroup(uint32_t code, int8_t* six) {
  for (int k = 0; k < kLayoutSlots; ++k) {
    six[k] = static_cast<int8_t>(static_cast<int>(code % 7) - 1);
    code /= 7;
  }
}

CompressedConfigs CompressedConfigs::Compress(const int8_t* config_feat, int64_t num_configs,
                                              int64_t num_config_nodes) {
  CompressedConfigs out;
  out.num_configs = num_configs;
  out.num_config_nodes = num_config_nodes;
  const int64_t groups = num_configs * num_config_nodes * kConfigGroups;
  out.codes.resize(groups);
  for (int64_t i = 0; i < groups; ++i) out.codes[i] = EncodeLayoutGroup(config_feat + i * kLayoutSlots);
  return out;
}

void CompressedConfigs::DecompressRows(const std::vector<int64_t>& rows, int8_t* out) const {
  const int64_t groups_per_row = num_config_nodes * kConfigGroups;
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint32_t* src = codes.data() + rows[r] * groups_per_row;
    int8_t* dst = out + static_cast<int64_t>(r) * groups_per_row * kLayoutSlots;
    for (int64_t k = 0; k < groups_per_row; ++k) DecodeLayoutGroup(src[k], dst + k * kLayoutSlots);
  }
}

int NodeRank(const float* row) {
  int rank = 0;
  for (int k = 0; k < kLayoutSlots; ++k) rank += row[kShapeDimsBegin + k] != 0.0f;
  return rank;
}

void RepadLayoutFeatures(NodeGraph* g) {
  for (int64_t i = 0; i < g->num_nodes; ++i) {
    float* row = g->node_feat.data() + i * kNodeFeatDim;
    for (int k = NodeRank(row); k < kLayoutSlots; ++k) row[kLayoutFeatBegin + k] = -1.0f;
  }
}

FeatureStats FeatureStats::Compute(const std::vector<const NodeGraph*>& graphs) {
  FeatureStats total;
  for (const NodeGraph* g : graphs) {
    // Two-pass statistics per graph in double, merged into the running total.
    FeatureStats part;
    part.count = g->num_nodes;
    if (part.count == 0) continue;
    std::vector<double> m2(kNumericFeatDim, 0.0);
    for (int64_t i = 0; i < g->num_nodes; ++i)
      for (int k = 0; k < kNumericFeatDim; ++k) part.mean[k] += g->feat(i)[k];
    for (int k = 0; k < kNumericFeatDim; ++k) part.mean[k] /= static_cast<double>(part.count);
    for (int64_t i = 0; i < g->num_nodes; ++i)
      for (int k = 0; k < kNumericFeatDim; ++k) {
        const double d = g->feat(i)[k] - part.mean[k];
        m2[k] += d * d;
      }
    for (int k = 0; k < kNumericFeatDim; ++k) part.std[k] = std::sqrt(m2[k] / static_cast<double>(part.count));
    total.Merge(part);
  }
  return total;
}

void FeatureStats::Merge(const FeatureStats& o) {
  if (o.count == 0) return;
  if (count == 0) {
    *this = o;
    return;
  }
  const double na = static_cast<double>(count), nb = static_cast<double>(o.count), n = na + nb;
  for (int k = 0; k < kNumericFeatDim; ++k) {
    const double delta = o.mean[k] - mean[k];
    const double m2 = std[k] * std[k] * na + o.std[k] * o.std[k] * nb + delta * delta * na * nb / n;
    mean[k] += delta * nb / n;
    std[k] = std::sqrt(m2 / n);
  }
  count += o.count;
}

void FeatureStats::Standardize(const float* in, float* out) const {
  for (int k = 0; k < kNumericFeatDim; ++k) {
    // Relative threshold: a "constant" feature may carry rounding noise from the merge.
    const bool constant = std[k] <= 1e-9 * std::max(1.0, std::abs(mean[k]));
    out[k] = constant ? 0.0f : static_cast<float>((in[k] - mean[k]) / std[k]);
  }
}

std::string FeatureStats::ToJson() const {
  nlohmann::json j;
  j["format"] = "tgraph.feature_stats.v1";
  j["features"] = kNumericFeatDim;
  j["count"] = count;
  j["mean"] = mean;
  j["std"] = std;
  return j.dump(1);
}

absl::StatusOr<FeatureStats> FeatureStats::FromJson(const std::string& text, absl::string_view what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON"));
  FeatureStats s;
  auto vec = [&](const char* key, std::vector<double>* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array() || it->size() != static_cast<size_t>(kNumericFeatDim))
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": key '", key, "' must be an array of ", kNumericFeatDim, " numbers"));
    for (size_t k = 0; k < it->size(); ++k) {
      if (!(*it)[k].is_number() || !std::isfinite((*it)[k].get<double>()))
        return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' entry ", k, " is not a finite number"));
      (*out)[k] = (*it)[k].get<double>();
    }
    return absl::OkStatus();
  };
  auto cnt = j.find("count");
  if (cnt == j.end() || !cnt->is_number_integer() || cnt->get<int64_t>() < 0)
    return absl::InvalidArgumentError(absl::StrCat(what, ": key 'count' must be a non-negative integer"));
  s.count = cnt->get<int64_t>();
  if (absl::Status st = vec("mean", &s.mean); !st.ok()) return st;
  if (absl::Status st = vec("std", &s.std); !st.ok()) return st;
  for (int k = 0; k < kNumericFeatDim; ++k)
    if (s.std[k] < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": key 'std' entry ", k, " is negative"));
  return s;
}

absl::Status FeatureStats::Save(const std::string& path) const { return WriteFileAtomic(path, ToJson()); }

absl::StatusOr<FeatureStats> FeatureStats::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return FromJson(*text, path);
}

}  // namespace tgraph
