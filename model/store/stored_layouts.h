// Reading the layout measurements the measurement store (measurement_store.h) holds:
// a collection's every graph for fine-tuning, or one graph's for a search to join.
// Torch-free.
//
// Threads: pure functions of the files; any thread, any number at once, beside the
// store's writers (a shard appears whole, under its final name, or not at all).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/core/graph.h"

namespace tgraph {

// Every graph measured in a collection, its shards merged: one LayoutGraph per graph
// hash (named by it), its rows de-duplicated, and each distinct configuration's runtime
// the median of all its reported measurements (the upper median for an even count, so
// that it is one of them). A shard that does not load (corrupt, truncated) or whose
// graph disagrees with its hash's first good shard is left out and listed in `skipped`
// ("PATH: why"): one bad file never stops fine-tuning on the good ones. Only a store
// that cannot be listed is an error.
struct LoadedMeasurements {
  std::vector<LayoutGraph> graphs;
  std::vector<std::string> skipped;
};
absl::StatusOr<LoadedMeasurements> LoadMeasurements(const std::string& root, const Collection& collection);

// What a search joins of one graph's measurements: its newest kMaxJoinedShards shards
// (reports) at most, and of their distinct rows the JoinedRowLimit reported most
// recently, each at the upper median of its runtimes in those shards. A loop reports
// tens of rows a round, so the bounds hold its recent hundreds to thousands of
// measurements while a search's reading and memory stay bounded however long the store
// has grown: each shard holds the graph (reading one costs about the graph's size), and
// a shard whose rows would take over kMaxJoinedRowBytes (a bulk import, not a round) is
// left out, said in `skipped`, before it is read.
inline constexpr int64_t kMaxJoinedShards = 64;
inline constexpr int64_t kMaxJoinedRows = 4096;
inline constexpr int64_t kMaxJoinedRowBytes = int64_t{16} << 20;
// kMaxJoinedRows, fewer where the rows of `num_config_nodes` would pass kMaxJoinedRowBytes
// (at least 1).
int64_t JoinedRowLimit(int64_t num_config_nodes);

struct GraphMeasurements {
  int64_t num_config_nodes = 0;     // of the shards read (0: none read)
  int64_t count = 0;                // distinct rows
  std::vector<int8_t> rows;         // count x nc x 18, in the order first reported
  std::vector<int64_t> runtime_ns;  // count: each row's median over the shards read
  int64_t shards = 0;               // shards read
  int64_t older_shards = 0;         // shards beyond kMaxJoinedShards, not read
  std::vector<std::string> skipped;  // shards that did not load, disagree or are too large ("PATH: why")
};
// `graph_hash`'s measurements in `collection` (a layout collection) under the store at
// `root`, the `max_rows` reported most recently: none when it holds none. Listing the
// collection's directory costs a directory entry per shard of every graph; only a
// directory that cannot be listed is an error, and CANCELLED when `cancelled` (polled
// before each shard; may be null) says so.
absl::StatusOr<GraphMeasurements> LoadGraphMeasurements(const std::string& root, const Collection& collection,
                                                        const std::string& graph_hash,
                                                        int64_t max_rows = kMaxJoinedRows,
                                                        const std::function<bool()>& cancelled = nullptr);

}  // namespace tgraph
