#include "model/store/measurement_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/core/config_rows.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/npy.h"
#include "model/store/report_ids.h"
#include "model/tile/tile_space.h"

namespace tgraph {
namespace fs = std::filesystem;

namespace {

constexpr char kSourceKey[] = "tgraph_source";
constexpr char kKernelKey[] = "tgraph_kernel";
constexpr char kShardMark[] = ".m";       // <hash>.m<seq>.npz
constexpr char kPartialSuffix[] = ".partial";
constexpr char kWritersDir[] = "writers";    // <root>/writers/<writer>.lock

// The writer token of a temporary's name (<hash>.m<seq>.<writer>.npz.partial...), or "".
std::string WriterOfTemporary(const std::string& filename) {
  const size_t npz = filename.find(".npz");
  if (npz == std::string::npos) return "";
  const size_t dot = filename.rfind('.', npz - 1);
  if (dot == std::string::npos || npz - dot != 9) return "";
  const std::string w = filename.substr(dot + 1, 8);
  return std::all_of(w.begin(), w.end(), [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); })
             ? w
             : "";
}

// Whether a process holds `lock_path`'s lock: false when it could be taken (then its
// file is removed under the lock: that writer is gone), nullopt when there is no file.
std::optional<bool> WriterAlive(const std::string& lock_path) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const bool alive = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  if (!alive) ::unlink(lock_path.c_str());
  ::close(fd);
  return alive;
}

bool IsHex(const std::string& s) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
}

}  // namespace

std::string ShardGraphHash(const std::string& filename) {
  if (!absl::EndsWith(filename, ".npz")) return "";
  const size_t mark = filename.find(kShardMark);
  if (mark == std::string::npos || mark == 0) return "";
  const std::string hash = filename.substr(0, mark);
  return IsHex(hash) ? hash : "";
}

absl::Status ValidateTileKernel(const TileKernelId& k, absl::string_view what) {
  const auto ok = [](char ch) { return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' ||
                                       ch == ':' || ch == '-'; };
  if (k.name.empty() || k.name.size() > 128 || !std::all_of(k.name.begin(), k.name.end(), ok))
    return absl::InvalidArgumentError(absl::StrCat(what, ".name: '", absl::CHexEscape(k.name.substr(0, 140)),
                                                   "' is not a kernel name (1-128 of letters, digits and \"_.:-\")"));
  if (!k.source_hash.empty() && !IsHex(k.source_hash))
    return absl::InvalidArgumentError(absl::StrCat(what, ".source_hash: expected empty or 1-64 lowercase hex digits, got '",
                                                   absl::CHexEscape(k.source_hash.substr(0, 80)), "'"));
  const auto printable = [](char ch) { return ch >= 0x20 && ch < 0x7f; };
  if (!k.gpu.empty() && (k.gpu.size() > 128 || !std::all_of(k.gpu.begin(), k.gpu.end(), printable) ||
                         k.gpu.front() == ' ' || k.gpu.back() == ' '))
    return absl::InvalidArgumentError(absl::StrCat(what, ".gpu: '", absl::CHexEscape(k.gpu.substr(0, 140)),
                                                   "' is not a GPU's name (1-128 printable ASCII characters, as the CUDA "
                                                   "runtime names it, e.g. \"NVIDIA H100 80GB HBM3\"), nor empty"));
  if (!k.compute_capability.empty()) {
    const std::vector<absl::string_view> parts = absl::StrSplit(k.compute_capability, '.');
    const auto digits = [](absl::string_view p) {
      return !p.empty() && p.size() <= 3 && std::all_of(p.begin(), p.end(), absl::ascii_isdigit);
    };
    if (parts.size() != 2 || !digits(parts[0]) || !digits(parts[1]))
      return absl::InvalidArgumentError(absl::StrCat(what, ".compute_capability: expected empty or MAJOR.MINOR (\"9.0\"), got '",
                                                     absl::CHexEscape(k.compute_capability.substr(0, 40)), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TileKernelId> ParseTileKernelKey(absl::string_view key, absl::string_view what) {
  TileKernelId k;
  const size_t slash = key.find('/');
  if (slash != absl::string_view::npos) {
    k.gpu = std::string(key.substr(slash + 1));
    if (k.gpu.empty())
      return absl::InvalidArgumentError(absl::StrCat(what, ": '", key, "' ends in '/' (expected NAME[@HASH][/GPU])"));
    key = key.substr(0, slash);
  }
  const size_t at = key.find('@');
  k.name = std::string(key.substr(0, at));
  if (at != absl::string_view::npos) {
    k.source_hash = std::string(key.substr(at + 1));
    if (k.source_hash.empty())
      return absl::InvalidArgumentError(absl::StrCat(what, ": '", key, "' ends in '@' (expected NAME[@HASH][/GPU])"));
  }
  if (absl::Status s = ValidateTileKernel(k, what); !s.ok()) return s;
  return k;
}

std::string KernelKeyOnGpu(const std::string& key, const std::string& gpu) {
  if (gpu.empty() || key.find('/') != std::string::npos) return key;
  return key + "/" + gpu;
}

namespace {

// A tile report's own fields (the kind's other checks are ValidateMeasurementReport's).
absl::Status ValidateTileRows(const MeasurementReport& r) {
  if (absl::Status s = ValidateTileKernel(r.kernel, "kernel"); !s.ok()) return s;
  if (!r.config_feat.empty() || !r.node_config_ids.empty())
    return absl::InvalidArgumentError("layout_configs: a tile report holds tile rows, not layout rows");
  if (static_cast<int64_t>(r.tile_config_feat.size()) != r.num_configs * kTileConfigDim)
    return absl::InvalidArgumentError(absl::StrCat("tile rows: ", r.tile_config_feat.size(), " values for ", r.num_configs,
                                                   " rows of ", kTileConfigDim));
  for (size_t i = 0; i < r.tile_config_feat.size(); ++i)
    if (!std::isfinite(r.tile_config_feat[i]))
      return absl::InvalidArgumentError(absl::StrCat("tile rows: row ", i / kTileConfigDim, ", value ", i % kTileConfigDim,
                                                     " is not finite"));
  if (absl::StatusOr<GemmProblem> p = GemmProblemOfGraph(r.graph, absl::StrCat("report for graph ", r.graph_hash));
      !p.ok())
    return p.status();
  return ValidateNodeGraph(r.graph, absl::StrCat("report for graph ", r.graph_hash));
}

}  // namespace

absl::Status ValidateMeasurementReport(const MeasurementReport& r) {
  if (!IsHex(r.graph_hash))
    return absl::InvalidArgumentError(
        absl::StrCat("graph_hash: expected 1-64 lowercase hex digits, got ", r.graph_hash.size(), " characters"));
  if (!r.report_id.empty())
    if (absl::Status s = ValidateReportId(r.report_id); !s.ok()) return s;
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
  if (r.collection.kind == CollectionKind::kLayout &&
      static_cast<int64_t>(r.config_feat.size()) != r.num_configs * nc * kConfigFeatDim)
    return absl::InvalidArgumentError(absl::StrCat("layout_configs: ", r.config_feat.size(), " values for ", r.num_configs,
                                                   " rows of ", nc, " configurable nodes x ", kConfigFeatDim,
                                                   " (expected ", r.num_configs * nc * kConfigFeatDim, ")"));
  for (int64_t i = 0; i < r.num_configs; ++i) {
    if (r.runtime_ns[i] <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("runtimes_ns[", i, "]: ", r.runtime_ns[i], " is not a runtime (expected > 0 ns)"));
    if (r.runtime_ns[i] > kMaxRuntimeNs)
      return absl::InvalidArgumentError(absl::StrCat("runtimes_ns[", i, "]: ", r.runtime_ns[i], " ns is over an hour (",
                                                     kMaxRuntimeNs, " ns), not a measured runtime: are they ns?"));
  }
  if (r.collection.kind == CollectionKind::kTile) return ValidateTileRows(r);
  if (!r.tile_config_feat.empty() || !r.kernel.name.empty())
    return absl::InvalidArgumentError("tile rows and a kernel are for tile collections; this is a layout collection");
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

MeasurementStore::~MeasurementStore() {
  if (lock_fd_ < 0) return;
  ::unlink(absl::StrCat(root_, "/", kWritersDir, "/", writer_, ".lock").c_str());
  ::close(lock_fd_);
}

absl::Status MeasurementStore::HoldWriterLock() {
  if (lock_fd_ >= 0) return absl::OkStatus();
  const std::string dir = absl::StrCat(root_, "/", kWritersDir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": create directory"));
  std::random_device rd;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string path = absl::StrCat(dir, "/", writer_, ".lock");
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat(path, ": open"));
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      lock_fd_ = fd;
      return absl::OkStatus();
    }
    const int e = errno;
    ::close(fd);
    if (e != EWOULDBLOCK) return ErrnoStatus(e, absl::StrCat(path, ": lock"));
    char token[16];  // a live writer has this token: another one
    std::snprintf(token, sizeof(token), "%08x", static_cast<unsigned>(rd()));
    absl::MutexLock lock(&mu_);
    writer_ = token;
  }
  return absl::InternalError(absl::StrCat(dir, ": no free writer token in 8 tries"));
}

std::string MeasurementStore::NextShardPath(const MeasurementReport& r, int64_t* seq) {
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    *seq = last_seq_ = std::max(now, last_seq_ + 1);
  }
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%019lld", static_cast<long long>(*seq));
  return absl::StrCat(SplitDir(root_, r.collection, "train"), "/", r.graph_hash, kShardMark, digits, ".", writer_,
                      ".npz");
}

absl::StatusOr<AppendResult> MeasurementStore::Append(const MeasurementReport& r) {
  if (absl::Status s = ValidateMeasurementReport(r); !s.ok()) return s;
  const std::string dir = SplitDir(root_, r.collection, "train");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": create directory"));
  int64_t seq;
  std::string path = NextShardPath(r, &seq);
  if (!r.report_id.empty()) {
    // A retried report: stored as the shard its first attempt claimed, or found there.
    absl::StatusOr<ClaimedShard> claim = ClaimReportShard(root_, r.report_id, path);
    if (!claim.ok()) return claim.status();
    if (claim->claimed_before) {
      path = claim->path;
      const std::string name = fs::path(path).filename().string();
      (void)absl::SimpleAtoi(name.substr(r.graph_hash.size() + 2, 19), &seq);
      if (fs::exists(path, ec))
        return AppendResult{path, static_cast<int64_t>(fs::file_size(path, ec)), r.num_configs, true};
    }
  }
  // A name of this attempt's own: a retry may write the same shard at once.
  static std::atomic<int64_t> attempts{0};
  const std::string partial = absl::StrCat(path, kPartialSuffix, ".", attempts++);

  const bool tile = r.collection.kind == CollectionKind::kTile;
  NpzArchive npz;
  if (tile) {
    TileGraph g;
    g.graph = r.graph;
    g.num_configs = r.num_configs;
    g.config_feat = r.tile_config_feat;
    g.config_runtime = r.runtime_ns;
    g.config_runtime_normalizers.assign(r.runtime_ns.size(), *std::min_element(r.runtime_ns.begin(), r.runtime_ns.end()));
    npz = TileGraphToNpz(g);
    const std::string key = r.kernel.Key();
    npz[kKernelKey] = NpyArray::From<uint8_t>({static_cast<int64_t>(key.size())},
                                              std::vector<uint8_t>(key.begin(), key.end()));
  } else {
    npz = LayoutToNpz(r.graph, r.node_config_ids, r.num_configs, r.config_feat, r.runtime_ns, {}, DType::kInt8);
  }
  npz[kSourceKey] = NpyArray::From<uint8_t>({static_cast<int64_t>(r.source.size())},
                                            std::vector<uint8_t>(r.source.begin(), r.source.end()));
  // WriteNpz fsyncs the file and renames it to `partial`; the rename to the shard's
  // name and the directory's fsync make it visible and durable together.
  if (absl::Status s = WriteNpz(partial, npz); !s.ok()) return s;
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(partial.c_str());
    if (!(e == ENOENT && fs::exists(path, ec)))  // else a concurrent retry's rename took it
      return ErrnoStatus(e, absl::StrCat(path, ": rename"));
  }
  if (absl::Status s = FsyncParentDir(path); !s.ok()) return s;
  if (tile) {
    // Durable first, then counted: the index never holds what a crash could lose.
    std::vector<TritonTile> tiles;
    for (int64_t c = 0; c < r.num_configs; ++c) tiles.push_back(TritonTileOfRow(r.tile_config_feat.data() + c * kTileConfigDim));
    const GemmProblem problem = *GemmProblemOfGraph(r.graph, r.graph_hash);  // validated above
    absl::MutexLock lock(&mu_);
    Index(r.collection.name(), r.kernel.Key(), r.graph_hash, problem, tiles, r.runtime_ns, seq);
    Snapshot({r.collection.name(), r.kernel.Key()});
  }
  AppendResult out;
  out.path = path;
  out.bytes = static_cast<int64_t>(fs::file_size(path, ec));
  out.measurements = r.num_configs;
  return out;
}

absl::StatusOr<MeasurementStore::TemporarySweep> MeasurementStore::RemoveStaleTemporaries(double min_age_s) const {
  const std::string npz = root_ + "/npz";
  TemporarySweep out;
  std::error_code ec;
  if (!fs::exists(npz, ec)) return out;
  std::vector<fs::path> temporaries;
  for (fs::recursive_directory_iterator it(npz, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && it->path().filename().string().find(kPartialSuffix) != std::string::npos)
      temporaries.push_back(it->path());
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(npz, ": listing temporaries"));
  // Each writer asked once: a dead one's lock file is gone after the first question.
  std::map<std::string, std::optional<bool>> alive;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::path& p : temporaries) {
    const std::string w = WriterOfTemporary(p.filename().string());
    std::optional<bool> live;
    if (!w.empty()) {
      auto [at, asked] = alive.try_emplace(w);
      if (asked) at->second = w == writer_ && lock_fd_ >= 0 ? std::optional<bool>(true)
                                                            : WriterAlive(absl::StrCat(root_, "/", kWritersDir, "/", w, ".lock"));
      live = at->second;
    }
    if (live.value_or(false)) {
      ++out.kept_live;
      continue;
    }
    if (!live.has_value()) {
      const auto mtime = fs::last_write_time(p, ec);
      if (ec) return ErrnoStatus(ec.value(), absl::StrCat(p.string(), ": reading its time"));
      if (std::chrono::duration<double>(now - mtime).count() < min_age_s) {
        ++out.kept_unknown;
        continue;
      }
    }
    if (!fs::remove(p, ec) && ec) return ErrnoStatus(ec.value(), absl::StrCat(p.string(), ": removing"));
    ++out.removed;
  }
  return out;
}

void MeasurementStore::Index(const std::string& collection, const std::string& kernel, const std::string& graph_hash,
                             const GemmProblem& problem, const std::vector<TritonTile>& tiles,
                             const std::vector<int64_t>& runtime_ns, int64_t seq) {
  const KernelIndexKey key{collection, kernel};
  std::map<std::string, KernelProblem>& problems = kernels_[key];
  KernelProblem& kp = problems[graph_hash];
  kp.problem = problem;
  kp.last_report = std::max(kp.last_report, seq);
  for (size_t i = 0; i < tiles.size(); ++i) {
    std::vector<int64_t>& runs = kp.runs[tiles[i]];
    runs.push_back(runtime_ns[i]);
    if (runs.size() > kMaxRunsPerTile) runs.erase(runs.begin());
  }
  while (static_cast<int64_t>(problems.size()) > kMaxKernelProblems) {
    auto oldest = problems.begin();
    for (auto it = problems.begin(); it != problems.end(); ++it)
      if (it->second.last_report < oldest->second.last_report) oldest = it;
    problems.erase(oldest);
  }
}

void MeasurementStore::Snapshot(const KernelIndexKey& key) {
  auto out = std::make_shared<std::vector<KnownTileProblem>>();
  std::vector<std::pair<int64_t, const std::string*>> newest_first;
  for (const auto& [hash, kp] : kernels_[key]) newest_first.push_back({-kp.last_report, &hash});
  std::sort(newest_first.begin(), newest_first.end());
  for (const auto& [unused, hash] : newest_first) {
    const KernelProblem& kp = kernels_[key][*hash];
    KnownTileProblem k;
    k.name = *hash;
    k.kernel = key.second;
    k.problem = kp.problem;
    for (const auto& [tile, runs] : kp.runs) {
      std::vector<int64_t> sorted = runs;
      std::sort(sorted.begin(), sorted.end());
      k.tiles.push_back(tile);
      k.runtime.push_back(static_cast<double>(sorted[sorted.size() / 2]));  // the upper median: one of them
    }
    out->push_back(std::move(k));
  }
  snapshots_[key] = std::move(out);
}

std::shared_ptr<const std::vector<KnownTileProblem>> MeasurementStore::KernelProblems(const std::string& collection,
                                                                                     const std::string& kernel) const {
  static const auto* const kNone = new std::shared_ptr<const std::vector<KnownTileProblem>>(
      std::make_shared<const std::vector<KnownTileProblem>>());
  absl::MutexLock lock(&mu_);
  auto it = snapshots_.find({collection, kernel});
  return it == snapshots_.end() ? *kNone : it->second;
}

std::vector<std::string> MeasurementStore::Kernels(const std::string& collection) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [key, problems] : kernels_)
    if (key.first == collection) out.push_back(key.second);
  return out;
}

namespace {

// The tile collections the store holds shards of: npz/tile/<xla | @NAME>.
std::vector<Collection> StoredTileCollections(const std::string& root, std::vector<std::string>* skipped) {
  std::vector<Collection> out;
  std::error_code ec;
  const std::string dir = root + "/npz/tile";
  if (!fs::exists(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    absl::StatusOr<Collection> c = ParseCollection(absl::StartsWith(name, "@") ? "tile" + name : "tile:" + name);
    if (c.ok() && c->kind == CollectionKind::kTile) out.push_back(*c);
    else skipped->push_back(absl::StrCat(it->path().string(), ": not a tile collection's directory"));
  }
  return out;
}

// One tile shard: its graph and rows, and its kernel's key.
struct TileShard {
  TileGraph graph;
  std::string kernel;
};
absl::StatusOr<TileShard> ReadTileShard(const std::string& path) {
  absl::StatusOr<NpzArchive> npz = ReadNpz(path);
  if (!npz.ok()) return npz.status();
  TileShard out;
  auto k = npz->find(kKernelKey);
  if (k == npz->end() || k->second.dtype != DType::kUint8)
    return absl::InvalidArgumentError(absl::StrCat("no '", kKernelKey, "' (the kernel measured; uint8 bytes)"));
  out.kernel.assign(k->second.bytes.begin(), k->second.bytes.end());
  if (absl::StatusOr<TileKernelId> id = ParseTileKernelKey(out.kernel, kKernelKey); !id.ok()) return id.status();
  absl::StatusOr<TileGraph> g = TileGraphFromNpz(*npz, path);
  if (!g.ok()) return g.status();
  out.graph = std::move(*g);
  return out;
}

}  // namespace

int64_t MeasurementStore::TileShards::count() const {
  int64_t n = 0;
  for (const auto& [c, paths] : by_collection) n += static_cast<int64_t>(paths.size());
  return n;
}

absl::StatusOr<MeasurementStore::TileShards> MeasurementStore::ListTileShards() const {
  TileShards out;
  for (const Collection& c : StoredTileCollections(root_, &out.skipped)) {
    const std::string dir = SplitDir(root_, c, "train");
    std::error_code ec;
    if (!fs::exists(dir, ec)) continue;
    std::vector<std::string> paths;  // named <hash>.m<seq>...: in report order by hash
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (!ShardGraphHash(it->path().filename().string()).empty()) paths.push_back(it->path().string());
    if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": list"));
    std::sort(paths.begin(), paths.end());
    out.by_collection.emplace_back(c, std::move(paths));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> MeasurementStore::LoadKernelIndex(const std::map<std::string, std::string>& gpu_of) {
  absl::StatusOr<TileShards> shards = ListTileShards();
  if (!shards.ok()) return shards.status();
  return IndexTileShards(*shards, gpu_of);
}

absl::StatusOr<std::vector<std::string>> MeasurementStore::IndexTileShards(const TileShards& shards,
                                                                          const std::map<std::string, std::string>& gpu_of,
                                                                          const std::atomic<bool>* stop) {
  std::vector<std::string> skipped = shards.skipped;
  for (const auto& [c, paths] : shards.by_collection) {
    const auto gpu = gpu_of.find(c.name());
    std::map<std::pair<std::string, std::string>, std::string> first;  // (kernel, hash) -> first good shard
    std::map<std::pair<std::string, std::string>, NodeGraph> graphs;
    for (const std::string& p : paths) {
      if (stop && *stop) break;
      absl::StatusOr<TileShard> shard = ReadTileShard(p);
      if (!shard.ok()) {
        skipped.push_back(absl::StrCat(p, ": ", shard.status().message()));
        continue;
      }
      const std::string name = fs::path(p).filename().string();
      const std::string hash = ShardGraphHash(name);
      const NodeGraph& g = shard->graph.graph;
      absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(g, p);
      if (!problem.ok()) {
        skipped.push_back(absl::StrCat(p, ": ", problem.status().message()));
        continue;
      }
      if (gpu != gpu_of.end()) shard->kernel = KernelKeyOnGpu(shard->kernel, gpu->second);
      const auto id = std::make_pair(shard->kernel, hash);
      if (auto it = graphs.find(id); it == graphs.end()) {
        graphs[id] = g;
        first[id] = p;
      } else if (!(it->second.node_feat == g.node_feat && it->second.node_opcode == g.node_opcode &&
                   it->second.edge_index == g.edge_index)) {
        skipped.push_back(absl::StrCat(p, ": its graph differs from ", first[id], "'s, though both are named for graph ",
                                       hash));
        continue;
      }
      std::vector<TritonTile> tiles;
      for (int64_t r = 0; r < shard->graph.num_configs; ++r)
        tiles.push_back(TritonTileOfRow(shard->graph.config_feat.data() + r * kTileConfigDim));
      int64_t seq = 0;
      (void)absl::SimpleAtoi(name.substr(hash.size() + 2, 19), &seq);
      absl::MutexLock lock(&mu_);
      Index(c.name(), shard->kernel, hash, *problem, tiles, shard->graph.config_runtime, seq);
    }
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [key, problems] : kernels_) Snapshot(key);
  return skipped;
}

absl::StatusOr<LoadedTileMeasurements> LoadTileMeasurements(const std::string& root, const Collection& collection) {
  MeasurementStore store(root);
  absl::StatusOr<std::vector<std::string>> skipped = store.LoadKernelIndex();
  if (!skipped.ok()) return skipped.status();
  LoadedTileMeasurements out;
  out.skipped = std::move(*skipped);
  for (const std::string& kernel : store.Kernels(collection.name()))
    out.kernels[kernel] = *store.KernelProblems(collection.name(), kernel);
  return out;
}

}  // namespace tgraph
