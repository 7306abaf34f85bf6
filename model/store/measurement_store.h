// The measurement store: runtimes an autotuning farm measured and reported, kept
// durably on disk as a TpuGraphs dataset, so that tgraph-train and numpy read it as
// they read any other. Torch-free.
//
// Layout: <root>/npz/layout/<xla|nlp>/<random|default>/train/<graph_hash>.m<sequence>.<writer>.npz
// (the collection's directories, not the report's source label),
// the sequence in nanoseconds since the epoch and the writer a random token per store
// instance, so that server replicas sharing one directory never pick the same name.
// Each shard is a complete layout npz: the graph as it was reported (the server
// passes the pruned graph it keeps; pruning it again keeps every node), the reported
// configuration rows and their runtimes in ns, and the reporter's label under the
// extra key `tgraph_source` (uint8 bytes; numpy and the readers ignore extra keys).
// A shard is written under a temporary name, fsynced, renamed and its directory
// fsynced before Append returns: once Append says OK, a crash cannot lose it, and a
// crash before then leaves no shard (a stale temporary at most, which readers skip).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/graph.h"

namespace tgraph {

struct MeasurementReport {
  Collection collection;                 // a layout collection
  std::string graph_hash;                // 1-64 lowercase hex digits (it names files)
  NodeGraph graph;
  std::vector<int64_t> node_config_ids;  // nc
  int64_t num_configs = 0;               // c
  std::vector<int8_t> config_feat;       // c x nc x 18, values in -1..5
  std::vector<int64_t> runtime_ns;       // c, each > 0
  std::string source;                    // free text, e.g. the farm's worker pool; may be empty; at most kMaxSourceBytes
};

struct AppendResult {
  std::string path;
  int64_t bytes = 0;
  int64_t measurements = 0;
};

// Checks a report before anything is written: INVALID_ARGUMENT naming the field and,
// for rows, the row index (a runtime <= 0, a layout value outside -1..5, a row count
// that does not match, a graph hash that is not hex, a tile collection).
absl::Status ValidateMeasurementReport(const MeasurementReport& r);

class MeasurementStore {
 public:
  explicit MeasurementStore(std::string root);

  // Validates and writes one shard durably (see the file comment). A full disk is
  // RESOURCE_EXHAUSTED, a read-only store FAILED_PRECONDITION or PERMISSION_DENIED;
  // nothing partial stays behind under a shard's name. Thread-safe.
  absl::StatusOr<AppendResult> Append(const MeasurementReport& r);

  const std::string& root() const { return root_; }

  // Deletes temporaries (names containing ".partial") older than `min_age_s` under the
  // store, which crashed writes leave behind; younger ones may be another replica's
  // write in flight. Returns how many were deleted; errors name the path.
  absl::StatusOr<int> RemoveStaleTemporaries(double min_age_s = 3600) const;

 private:
  std::string root_;
  std::string writer_;   // 8 random hex digits
  absl::Mutex mu_;  // serialises shard naming
  int64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;  // strictly increasing shard sequence (nanoseconds since the epoch)
};

// Every graph measured in a collection, its shards merged: one LayoutGraph per graph
// hash (named by it), its rows de-duplicated, and each distinct configuration's runtime
// the median of all its reported measurements (the upper median for an even count, so
// that it is one of them). A shard that does not load (corrupt, truncated) or whose
// graph disagrees with its hash's first good shard is left out and listed in `skipped`
// ("PATH: why"): one bad file never stops fine-tuning on the good ones. Only a store
// that cannot be listed is an error.
// A report's `source` label is stored in its shard: a label, not a payload.
inline constexpr size_t kMaxSourceBytes = 256;

struct LoadedMeasurements {
  std::vector<LayoutGraph> graphs;
  std::vector<std::string> skipped;
};
absl::StatusOr<LoadedMeasurements> LoadMeasurements(const std::string& root, const Collection& collection);

}  // namespace tgraph
