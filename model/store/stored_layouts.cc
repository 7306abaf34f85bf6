#include "model/store/stored_layouts.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/store/measurement_store.h"

namespace tgraph {
namespace fs = std::filesystem;
namespace {

bool SameGraph(const LayoutGraph& a, const LayoutGraph& b) {
  return a.graph.num_nodes == b.graph.num_nodes && a.graph.node_opcode == b.graph.node_opcode &&
         a.graph.edge_index == b.graph.edge_index && a.graph.node_feat == b.graph.node_feat &&
         a.node_config_ids == b.node_config_ids;
}

// One graph's shards (`paths`, oldest first) merged: its distinct rows in the order
// first reported, each at the upper median of its runtimes; no configurations when
// none loaded. Shards left out are added to `skipped`.
LayoutGraph MergeShards(const std::string& hash, const std::vector<std::string>& paths,
                        std::vector<std::string>* skipped) {
  LayoutGraph merged;
  std::vector<std::vector<int64_t>> measured;          // per distinct row
  std::unordered_map<std::string, size_t> row_index;  // row bytes -> distinct row
  std::string first_path;
  for (const std::string& p : paths) {
    absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(p);
    if (!g.ok()) {
      skipped->push_back(absl::StrCat(p, ": ", g.status().message()));
      continue;
    }
    if (first_path.empty()) {
      merged = *g;
      merged.name = hash;
      merged.num_configs = 0;
      merged.config_feat.clear();
      merged.config_runtime.clear();
      first_path = p;
    } else if (!SameGraph(merged, *g)) {
      skipped->push_back(
          absl::StrCat(p, ": its graph differs from ", first_path, "'s, though both are named for graph ", hash));
      continue;
    }
    const size_t row = static_cast<size_t>(merged.num_config_nodes()) * kConfigFeatDim;
    for (int64_t c = 0; c < g->num_configs; ++c) {
      const int8_t* values = g->config_feat.data() + static_cast<size_t>(c) * row;
      auto [it, inserted] = row_index.emplace(std::string(reinterpret_cast<const char*>(values), row), measured.size());
      if (inserted) {
        measured.emplace_back();
        merged.config_feat.insert(merged.config_feat.end(), values, values + row);
      }
      measured[it->second].push_back(g->config_runtime[static_cast<size_t>(c)]);
    }
  }
  for (std::vector<int64_t>& m : measured) {
    std::nth_element(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(m.size() / 2), m.end());
    merged.config_runtime.push_back(m[m.size() / 2]);
  }
  merged.num_configs = static_cast<int64_t>(measured.size());
  return merged;
}

}  // namespace

absl::StatusOr<LoadedMeasurements> LoadMeasurements(const std::string& root, const Collection& collection) {
  const std::string dir = SplitDir(root, collection, "train");
  std::error_code ec;
  if (!fs::exists(dir, ec)) return LoadedMeasurements{};
  std::map<std::string, std::vector<std::string>> shards;  // hash -> shard paths
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string hash = ShardGraphHash(it->path().filename().string());
    if (!hash.empty()) shards[hash].push_back(it->path().string());
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": list"));
  LoadedMeasurements out;
  for (auto& [hash, paths] : shards) {
    std::sort(paths.begin(), paths.end());  // the sequence is zero-padded: report order
    LayoutGraph merged = MergeShards(hash, paths, &out.skipped);
    if (merged.num_configs > 0) out.graphs.push_back(std::move(merged));
  }
  return out;
}

int64_t JoinedRowLimit(int64_t num_config_nodes) {
  const int64_t row = std::max<int64_t>(1, num_config_nodes) * kConfigFeatDim;
  return std::clamp<int64_t>(kMaxJoinedRowBytes / row, 1, kMaxJoinedRows);
}

absl::StatusOr<GraphMeasurements> LoadGraphMeasurements(const std::string& root, const Collection& collection,
                                                        const std::string& graph_hash, int64_t max_rows) {
  const std::string dir = SplitDir(root, collection, "train");
  GraphMeasurements out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  std::vector<std::string> paths;
  const std::string prefix = graph_hash + ".m";
  // The newest kMaxJoinedShards names (their sequence is zero-padded: report order), kept
  // as the listing goes so that a graph's thousands of reports never sit in memory.
  const auto keep_newest = [&] {
    std::sort(paths.begin(), paths.end());
    const int64_t older = std::max<int64_t>(0, static_cast<int64_t>(paths.size()) - kMaxJoinedShards);
    out.older_shards += older;
    paths.erase(paths.begin(), paths.begin() + older);
  };
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix) || ShardGraphHash(name) != graph_hash) continue;
    paths.push_back(it->path().string());
    if (static_cast<int64_t>(paths.size()) >= 4 * kMaxJoinedShards) keep_newest();
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": list"));
  keep_newest();
  LayoutGraph merged = MergeShards(graph_hash, paths, &out.skipped);
  out.shards = static_cast<int64_t>(paths.size() - out.skipped.size());
  if (merged.num_configs == 0) return out;
  out.num_config_nodes = merged.num_config_nodes();
  const int64_t drop = std::max<int64_t>(0, merged.num_configs - std::max<int64_t>(0, max_rows));
  const size_t row = static_cast<size_t>(out.num_config_nodes) * kConfigFeatDim;
  out.count = merged.num_configs - drop;
  out.rows.assign(merged.config_feat.begin() + static_cast<std::ptrdiff_t>(drop * row), merged.config_feat.end());
  out.runtime_ns.assign(merged.config_runtime.begin() + drop, merged.config_runtime.end());
  return out;
}

}  // namespace tgraph
