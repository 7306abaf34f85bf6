#include "model/store/stored_layouts.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <system_error>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/npy.h"
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

// The names of `graph_hash`'s shards in `dir`, the newest kMaxJoinedShards, oldest first
// (their sequence is zero-padded: report order); the others counted in *older. Kept as
// the listing goes, so that a graph's thousands of reports never sit in memory.
absl::StatusOr<std::vector<std::string>> NewestShards(const std::string& dir, const std::string& graph_hash,
                                                      int64_t* older) {
  std::vector<std::string> paths;
  const std::string prefix = graph_hash + ".m";
  const auto keep_newest = [&] {
    std::sort(paths.begin(), paths.end());
    const int64_t drop = std::max<int64_t>(0, static_cast<int64_t>(paths.size()) - kMaxJoinedShards);
    *older += drop;
    paths.erase(paths.begin(), paths.begin() + drop);
  };
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix) || ShardGraphHash(name) != graph_hash) continue;
    paths.push_back(it->path().string());
    if (static_cast<int64_t>(paths.size()) >= 4 * kMaxJoinedShards) keep_newest();
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": list"));
  keep_newest();
  return paths;
}

// Why a shard is not read for a search ("" when it is): rows over kMaxJoinedRowBytes
// (a bulk import, not a loop's round), as its archive declares them before reading.
std::string TooLargeToJoin(const std::string& path) {
  absl::StatusOr<std::map<std::string, int64_t>> sizes = NpzMemberSizes(path);
  if (!sizes.ok()) return std::string(sizes.status().message());
  const auto rows = sizes->find("node_config_feat");
  constexpr int64_t kNpyHeader = 4096;
  if (rows != sizes->end() && rows->second > kMaxJoinedRowBytes + kNpyHeader)
    return absl::StrCat("its rows take ", rows->second >> 20, " MiB, over the ", kMaxJoinedRowBytes >> 20,
                        " MiB a search reads of one report");
  return "";
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
                                                        const std::string& graph_hash, int64_t max_rows,
                                                        const std::function<bool()>& cancelled) {
  const std::string dir = SplitDir(root, collection, "train");
  GraphMeasurements out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  absl::StatusOr<std::vector<std::string>> paths = NewestShards(dir, graph_hash, &out.older_shards);
  if (!paths.ok()) return paths.status();
  // Newest first: the rows held are those reported most recently; an older shard adds
  // runs to the rows held and moves their first report earlier, and no rows past max_rows.
  struct Held {
    std::vector<int64_t> runs;
    std::pair<size_t, int64_t> first;  // (shard, row) of its earliest report read
  };
  std::unordered_map<std::string, Held> held;
  LayoutGraph reference;  // the newest good shard's graph, configurations dropped
  std::string reference_path;
  for (size_t s = paths->size(); s-- > 0;) {
    if (cancelled && cancelled()) return absl::CancelledError("the search was cancelled while reading the store");
    const std::string& p = (*paths)[s];
    if (std::string why = TooLargeToJoin(p); !why.empty()) {
      out.skipped.push_back(absl::StrCat(p, ": ", why));
      continue;
    }
    absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(p);
    if (!g.ok()) {
      out.skipped.push_back(absl::StrCat(p, ": ", g.status().message()));
      continue;
    }
    const size_t row = static_cast<size_t>(g->num_config_nodes()) * kConfigFeatDim;
    if (reference_path.empty()) {
      out.num_config_nodes = g->num_config_nodes();
      reference_path = p;
    } else if (!SameGraph(reference, *g)) {
      out.skipped.push_back(absl::StrCat(p, ": its graph differs from ", reference_path,
                                         "'s, though both are named for graph ", graph_hash));
      continue;
    }
    ++out.shards;
    for (int64_t c = 0; c < g->num_configs; ++c) {
      std::string key(reinterpret_cast<const char*>(g->config(c)), row);
      auto it = held.find(key);
      if (it == held.end()) {
        if (static_cast<int64_t>(held.size()) >= max_rows) continue;
        it = held.emplace(std::move(key), Held{{}, {s, c}}).first;
      }
      it->second.runs.push_back(g->config_runtime[static_cast<size_t>(c)]);
      it->second.first = std::min(it->second.first, std::pair<size_t, int64_t>{s, c});
    }
    if (reference_path == p) {  // keep the graph to compare, not its rows
      g->config_feat = {};
      g->config_runtime = {};
      reference = std::move(*g);
    }
  }
  std::vector<std::pair<std::pair<size_t, int64_t>, const std::string*>> order;
  for (const auto& [key, h] : held) order.push_back({h.first, &key});
  std::sort(order.begin(), order.end());
  for (const auto& [first, key] : order) {
    std::vector<int64_t> runs = held.at(*key).runs;
    std::nth_element(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2), runs.end());
    out.rows.insert(out.rows.end(), key->begin(), key->end());
    out.runtime_ns.push_back(runs[runs.size() / 2]);
  }
  out.count = static_cast<int64_t>(order.size());
  return out;
}

}  // namespace tgraph
