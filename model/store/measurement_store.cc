#include "model/store/measurement_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/core/config_rows.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/npy.h"

namespace tgraph {
namespace fs = std::filesystem;

namespace {

constexpr char kSourceKey[] = "tgraph_source";
constexpr char kShardMark[] = ".m";       // <hash>.m<seq>.npz
constexpr char kPartialSuffix[] = ".partial";

bool IsHex(const std::string& s) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
}

// The graph hash a shard's file name carries, or "" when the name is not a shard's.
std::string HashOfShard(const std::string& filename) {
  if (!absl::EndsWith(filename, ".npz")) return "";
  const size_t mark = filename.find(kShardMark);
  if (mark == std::string::npos || mark == 0) return "";
  const std::string hash = filename.substr(0, mark);
  return IsHex(hash) ? hash : "";
}

bool SameGraph(const LayoutGraph& a, const LayoutGraph& b) {
  return a.graph.num_nodes == b.graph.num_nodes && a.graph.node_opcode == b.graph.node_opcode &&
         a.graph.edge_index == b.graph.edge_index && a.graph.node_feat == b.graph.node_feat &&
         a.node_config_ids == b.node_config_ids;
}

}  // namespace

absl::Status ValidateMeasurementReport(const MeasurementReport& r) {
  if (r.collection.kind != CollectionKind::kLayout)
    return absl::InvalidArgumentError(
        absl::StrCat("collection: measurements are stored for layout collections only, not ", r.collection.name()));
  if (!IsHex(r.graph_hash))
    return absl::InvalidArgumentError(
        absl::StrCat("graph_hash: expected 1-64 lowercase hex digits, got ", r.graph_hash.size(), " characters"));
  if (r.source.size() > kMaxSourceBytes)
    return absl::InvalidArgumentError(absl::StrCat("source: ", r.source.size(), " bytes; a label of at most ",
                                                   kMaxSourceBytes, " bytes (e.g. the farm and its hardware)"));
  if (r.num_configs < 1) return absl::InvalidArgumentError("num_configs: a report needs at least one configuration row");
  // num_configs is the client's number: compared with the runtimes it sent before it is
  // multiplied, so that the product below is of sizes the request really holds.
  if (static_cast<int64_t>(r.runtime_ns.size()) != r.num_configs)
    return absl::InvalidArgumentError(absl::StrCat("runtimes_ns: ", r.runtime_ns.size(), " runtimes for ",
                                                   r.num_configs, " configuration rows"));
  const int64_t nc = static_cast<int64_t>(r.node_config_ids.size());
  if (static_cast<int64_t>(r.config_feat.size()) != r.num_configs * nc * kConfigFeatDim)
    return absl::InvalidArgumentError(absl::StrCat("layout_configs: ", r.config_feat.size(), " values for ", r.num_configs,
                                                   " rows of ", nc, " configurable nodes x ", kConfigFeatDim,
                                                   " (expected ", r.num_configs * nc * kConfigFeatDim, ")"));
  for (int64_t i = 0; i < r.num_configs; ++i)
    if (r.runtime_ns[i] <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("runtimes_ns[", i, "]: ", r.runtime_ns[i], " is not a runtime (expected > 0 ns)"));
  if (std::string bad = FirstBadLayoutConfigValue(r.config_feat.data(), r.config_feat.size(), nc); !bad.empty())
    return absl::InvalidArgumentError(absl::StrCat("layout_configs: ", bad));
  // The configurations and runtimes are checked above; the graph without copying them.
  return ValidateConfigurableNodes(r.graph, r.node_config_ids, absl::StrCat("report for graph ", r.graph_hash));
}

MeasurementStore::MeasurementStore(std::string root) : root_(std::move(root)) {
  std::random_device rd;
  char token[16];
  std::snprintf(token, sizeof(token), "%08x", static_cast<unsigned>(rd()));
  writer_ = token;
}

absl::StatusOr<AppendResult> MeasurementStore::Append(const MeasurementReport& r) {
  if (absl::Status s = ValidateMeasurementReport(r); !s.ok()) return s;
  const std::string dir = SplitDir(root_, r.collection, "train");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": create directory"));
  int64_t seq;
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    seq = last_seq_ = std::max(now, last_seq_ + 1);
  }
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%019lld", static_cast<long long>(seq));
  const std::string path = absl::StrCat(dir, "/", r.graph_hash, kShardMark, digits, ".", writer_, ".npz");
  const std::string partial = absl::StrCat(path, kPartialSuffix);

  NpzArchive npz = LayoutToNpz(r.graph, r.node_config_ids, r.num_configs, r.config_feat, r.runtime_ns, {}, DType::kInt8);
  npz[kSourceKey] = NpyArray::From<uint8_t>({static_cast<int64_t>(r.source.size())},
                                            std::vector<uint8_t>(r.source.begin(), r.source.end()));
  // WriteNpz fsyncs the file and renames it to `partial`; the rename to the shard's
  // name and the directory's fsync make it visible and durable together.
  if (absl::Status s = WriteNpz(partial, npz); !s.ok()) return s;
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(partial.c_str());
    return ErrnoStatus(e, absl::StrCat(path, ": rename"));
  }
  if (absl::Status s = FsyncParentDir(path); !s.ok()) return s;
  AppendResult out;
  out.path = path;
  out.bytes = static_cast<int64_t>(fs::file_size(path, ec));
  out.measurements = r.num_configs;
  return out;
}

absl::StatusOr<int> MeasurementStore::RemoveStaleTemporaries(double min_age_s) const {
  const std::string npz = root_ + "/npz";
  std::error_code ec;
  if (!fs::exists(npz, ec)) return 0;
  const auto now = fs::file_time_type::clock::now();
  int removed = 0;
  for (fs::recursive_directory_iterator it(npz, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().filename().string().find(kPartialSuffix) == std::string::npos) continue;
    const auto mtime = fs::last_write_time(it->path(), ec);
    if (ec) break;
    if (std::chrono::duration<double>(now - mtime).count() < min_age_s) continue;
    if (!fs::remove(it->path(), ec) || ec) break;
    ++removed;
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(npz, ": removing stale temporaries"));
  return removed;
}

absl::StatusOr<LoadedMeasurements> LoadMeasurements(const std::string& root, const Collection& collection) {
  const std::string dir = SplitDir(root, collection, "train");
  std::error_code ec;
  if (!fs::exists(dir, ec)) return LoadedMeasurements{};
  std::map<std::string, std::vector<std::string>> shards;  // hash -> shard paths, sorted
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string hash = HashOfShard(name);
    if (!hash.empty()) shards[hash].push_back(it->path().string());
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": list"));
  LoadedMeasurements out;
  for (auto& [hash, paths] : shards) {
    std::sort(paths.begin(), paths.end());
    LayoutGraph merged;
    std::vector<std::vector<int64_t>> measured;          // per distinct row
    std::unordered_map<std::string, size_t> row_index;  // row bytes -> distinct row
    std::string first_path;
    for (const std::string& p : paths) {
      absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(p);
      if (!g.ok()) {
        out.skipped.push_back(absl::StrCat(p, ": ", g.status().message()));
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
        out.skipped.push_back(
            absl::StrCat(p, ": its graph differs from ", first_path, "'s, though both are named for graph ", hash));
        continue;
      }
      const size_t row = static_cast<size_t>(g->num_config_nodes()) * kConfigFeatDim;
      for (int64_t c = 0; c < g->num_configs; ++c) {
        std::string key(reinterpret_cast<const char*>(g->config(c)), row);
        auto [it, inserted] = row_index.emplace(std::move(key), measured.size());
        if (inserted) {
          measured.emplace_back();
          merged.config_feat.insert(merged.config_feat.end(), g->config(c), g->config(c) + row);
        }
        measured[it->second].push_back(g->config_runtime[c]);
      }
    }
    for (std::vector<int64_t>& m : measured) {
      std::nth_element(m.begin(), m.begin() + m.size() / 2, m.end());
      merged.config_runtime.push_back(m[m.size() / 2]);
    }
    merged.num_configs = static_cast<int64_t>(measured.size());
    if (merged.num_configs > 0) out.graphs.push_back(std::move(merged));
  }
  return out;
}

}  // namespace tgraph
