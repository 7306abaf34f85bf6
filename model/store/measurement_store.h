// The measurement store: runtimes an autotuning farm measured and reported, kept
// durably on disk as a TpuGraphs dataset, so that tgraph-train and numpy read it as
// they read any other. Torch-free.
//
// Layout: <root>/npz/layout/<xla|nlp>/<random|default>/train/<graph_hash>.m<sequence>.<writer>.npz
// (the collection's directories, not the report's source label; a tile collection's
// under npz/tile/@NAME/train),
// the sequence in nanoseconds since the epoch and the writer a random token per store
// instance, so that server replicas sharing one directory never pick the same name.
// Each shard is a complete layout npz: the graph as it was reported (the server
// passes the pruned graph it keeps; pruning it again keeps every node), the reported
// configuration rows and their runtimes in ns, and the reporter's label under the
// extra key `tgraph_source` (uint8 bytes; numpy and the readers ignore extra keys). A
// tile shard is a complete tile npz (the kernel's graph, its measured rows of 24 values,
// runtimes in ns with the report's fastest as every row's normalizer) and names its
// kernel under `tgraph_kernel` (TileKernelId::Key, uint8 bytes).
// A shard is written under a temporary name, fsynced, renamed and its directory
// fsynced before Append returns: once Append says OK, a crash cannot lose it, and a
// crash before then leaves no shard (a stale temporary at most, which readers skip).
// A writing instance holds an advisory lock on <root>/writers/<writer>.lock while it
// lives (HoldWriterLock), so that a later start knows which writers' temporaries no
// process can still be writing: the kernel drops a crashed process's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/graph.h"
#include "model/tile/tile_baselines.h"
#include "model/tile/tile_space.h"

namespace tgraph {

// Which GPU kernel tile measurements belong to, and on which GPU: two kernels (or one
// kernel's two sources, or one kernel on two GPUs) never share measurements.
struct TileKernelId {
  std::string name;                // 1-128 of letters, digits and "_.:-"
  std::string source_hash;         // empty, or 1-64 lowercase hex digits
  std::string gpu;                 // empty, or the GPU's name: 1-128 printable ASCII, no edge spaces
  std::string compute_capability;  // empty, or "MAJOR.MINOR"; not part of the key
  // "name", "name@source_hash", then "/gpu" when it names one: how shards and indexes
  // name it (the name and hash never hold '/', so the first '/' starts the GPU).
  std::string Key() const {
    std::string k = source_hash.empty() ? name : name + "@" + source_hash;
    return gpu.empty() ? k : k + "/" + gpu;
  }
};
// INVALID_ARGUMENT naming `what` and the field.
absl::Status ValidateTileKernel(const TileKernelId& k, absl::string_view what);
// TileKernelId::Key's form back; errors name `what`.
absl::StatusOr<TileKernelId> ParseTileKernelKey(absl::string_view key, absl::string_view what);
// `key` (TileKernelId::Key) on `gpu` when it names no GPU: shards and priors written
// before kernels named their GPU hold timings of their collection's GPU.
std::string KernelKeyOnGpu(const std::string& key, const std::string& gpu);

struct MeasurementReport {
  Collection collection;                 // a layout collection, or a tile collection
  std::string graph_hash;                // 1-64 lowercase hex digits (it names files)
  NodeGraph graph;
  std::vector<int64_t> node_config_ids;  // nc (layout)
  int64_t num_configs = 0;               // c
  std::vector<int8_t> config_feat;       // layout: c x nc x 18, values in -1..5
  std::vector<float> tile_config_feat;   // tile: c x 24 (TritonTileFeatures of the graph's problem)
  TileKernelId kernel;                   // tile: the kernel measured
  std::vector<int64_t> runtime_ns;       // c, each > 0 and at most kMaxRuntimeNs
  std::string source;                    // free text, e.g. the farm's worker pool; may be empty; at most kMaxSourceBytes
  std::string report_id;                 // the client's id of this report, "" for none (model/store/report_ids.h)
};

struct AppendResult {
  std::string path;
  int64_t bytes = 0;
  int64_t measurements = 0;     // the report's rows, stored
  bool already_stored = false;  // a retry of a report with the same report_id, whose shard was there
};

// Checks a report before anything is written: INVALID_ARGUMENT naming the field and,
// for rows, the row index (a runtime <= 0 or over kMaxRuntimeNs, a layout value outside -1..5, a row count
// that does not match, a graph hash that is not hex, a tile report without its kernel).
absl::Status ValidateMeasurementReport(const MeasurementReport& r);

class MeasurementStore {
 public:
  explicit MeasurementStore(std::string root);
  ~MeasurementStore();  // releases the writer lock and removes its file
  MeasurementStore(const MeasurementStore&) = delete;
  MeasurementStore& operator=(const MeasurementStore&) = delete;

  // Takes this instance's writer lock (see the file comment; a new writer token when a
  // live writer holds the same one). Call before the first Append of a long-lived writer;
  // errors name the path. Idempotent.
  absl::Status HoldWriterLock();

  // Validates and writes one shard durably (see the file comment). A full disk is
  // RESOURCE_EXHAUSTED, a read-only store FAILED_PRECONDITION or PERMISSION_DENIED;
  // nothing partial stays behind under a shard's name. Thread-safe.
  absl::StatusOr<AppendResult> Append(const MeasurementReport& r);

  const std::string& root() const { return root_; }

  // The tile problems measured of `kernel` (TileKernelId::Key) in `collection`, each
  // configuration at the median of its runtimes: what the store read when it opened
  // (LoadKernelIndex) and every tile report Append stored since. At most
  // kMaxKernelProblems per kernel, the least recently reported dropped first; the most
  // recently reported first, each named by its graph's hash with `kernel` set. Never null.
  std::shared_ptr<const std::vector<KnownTileProblem>> KernelProblems(const std::string& collection,
                                                                     const std::string& kernel) const;
  // The kernels (keys) the index holds measurements of in `collection`, sorted.
  std::vector<std::string> Kernels(const std::string& collection) const;
  // The tile shards under the store, listed by collection (paths sorted: report order by
  // hash), for IndexTileShards. Listing reads directory entries only (fast); reading the
  // shards is not, so a server lists before it serves and reads while serving: a shard a
  // report adds after the listing is indexed by its Append, never twice.
  struct TileShards {
    std::vector<std::pair<Collection, std::vector<std::string>>> by_collection;
    std::vector<std::string> skipped;  // collections' directories that do not parse ("PATH: why")
    int64_t count() const;
  };
  absl::StatusOr<TileShards> ListTileShards() const;
  // Reads `shards` into the index above; the shards left out ("PATH: why"), the listing's
  // skipped first. A shard whose kernel names no GPU counts as its collection's GPU's
  // (`gpu_of`: collection name -> its tile space's GPU; a collection not in it keeps the
  // key as written). `stop` (may be null) set: returns early with what was read. Call
  // once; Appends and searches may run meanwhile.
  absl::StatusOr<std::vector<std::string>> IndexTileShards(const TileShards& shards,
                                                           const std::map<std::string, std::string>& gpu_of = {},
                                                           const std::atomic<bool>* stop = nullptr);
  // ListTileShards and IndexTileShards at once (tools reading a store).
  absl::StatusOr<std::vector<std::string>> LoadKernelIndex(const std::map<std::string, std::string>& gpu_of = {});

  // Deletes the temporaries (names containing ".partial") that crashed writes left under
  // the store: at once, whatever their age, those of a writer whose lock no process
  // holds; those of a writer without a lock file (a server of an older version, or a
  // file system where the lock file was lost) once older than `min_age_s`, since they
  // may be a write in flight. A live writer's are kept. Errors name the path.
  struct TemporarySweep {
    int removed = 0;
    int kept_live = 0;     // a running writer's (another replica's write in flight)
    int kept_unknown = 0;  // no lock file, younger than min_age_s
  };
  absl::StatusOr<TemporarySweep> RemoveStaleTemporaries(double min_age_s = 3600) const;

 private:
  // One graph's measurements of one kernel: runtimes per configuration, the most recent
  // kMaxRunsPerTile.
  struct KernelProblem {
    GemmProblem problem;
    std::map<TritonTile, std::vector<int64_t>> runs;
    int64_t last_report = 0;  // the sequence of the report that last added to it
  };
  using KernelIndexKey = std::pair<std::string, std::string>;  // collection name, kernel key
  // The shard's path for `r`; its sequence in *seq.
  std::string NextShardPath(const MeasurementReport& r, int64_t* seq);
  void Index(const std::string& collection, const std::string& kernel, const std::string& graph_hash,
             const GemmProblem& problem, const std::vector<TritonTile>& tiles, const std::vector<int64_t>& runtime_ns,
             int64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rebuilds the key's snapshot from kernels_ (Index leaves that to its caller).
  void Snapshot(const KernelIndexKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string root_;
  std::string writer_;   // 8 random hex digits
  int lock_fd_ = -1;     // the writer lock's descriptor, held (flock) while this instance lives
  mutable absl::Mutex mu_;  // serialises shard naming; guards the kernel index
  int64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;  // strictly increasing shard sequence (nanoseconds since the epoch)
  // collection, kernel -> graph hash -> its measurements, and the snapshot readers share.
  std::map<KernelIndexKey, std::map<std::string, KernelProblem>> kernels_ ABSL_GUARDED_BY(mu_);
  std::map<KernelIndexKey, std::shared_ptr<const std::vector<KnownTileProblem>>> snapshots_ ABSL_GUARDED_BY(mu_);
};

// What the kernel index keeps: problems per kernel (a prior's bound), runs per
// configuration of a problem (the median of the recent ones).
inline constexpr int64_t kMaxKernelProblems = 200;
inline constexpr size_t kMaxRunsPerTile = 15;

// A report's `source` label is stored in its shard: a label, not a payload.
inline constexpr size_t kMaxSourceBytes = 256;
// The longest runtime a report may hold: an hour. Autotuning measures a configuration in
// seconds to minutes; a larger number is a unit mistake or garbage (2^63-1 ns is 292
// years), and stored it would dominate every mean the prior and fine-tuning take.
inline constexpr int64_t kMaxRuntimeNs = int64_t{3600} * 1000 * 1000 * 1000;

// The graph hash a shard's file name carries (<hash>.m<seq>.<writer>.npz), or "" when
// the name is not a shard's.
std::string ShardGraphHash(const std::string& filename);

// A tile collection's measurements, by kernel (TileKernelId::Key): per graph hash one
// problem (GemmProblemOfGraph), each configuration at the median of its reported
// runtimes (the upper median), named by the hash. Shards that do not load, whose graph
// is not one matrix product or differs from its hash's first good shard, or whose kernel
// is missing, are left out and listed in `skipped`.
struct LoadedTileMeasurements {
  std::map<std::string, std::vector<KnownTileProblem>> kernels;
  std::vector<std::string> skipped;
};
absl::StatusOr<LoadedTileMeasurements> LoadTileMeasurements(const std::string& root, const Collection& collection);

}  // namespace tgraph
