// Registered graphs, pruned once, by content hash: a byte-bounded LRU store. What
// RegisterGraph writes and RankConfigs reads. Torch-free.
// Threads: every method may be called from any thread at once (the LruCache's mutex);
// a StoredGraph is immutable and shared (shared_ptr), so an evicted graph lives on
// while a request still holds it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/core/layout_space.h"
#include "model/core/preprocess.h"
#include "model/tile/tile_space.h"
#include "proto/graph_codec.h"
#include "server/lru_cache.h"

namespace tgraph {

// A registered graph as the server keeps it: pruned (configurable nodes and their
// direct neighbours; tile graphs whole).
struct StoredGraph {
  PrunedGraph pruned;
  LayoutSpace space;  // the configurable nodes' (empty for tile graphs)
  bool exact_operand_ranks = false;  // the space came from an HLO module (layout_space.h)
  int64_t original_nodes = 0;
  int64_t num_config_nodes = 0;
  // The one matrix product a tile graph is (GemmProblemOfGraph, its errors naming
  // graph_hash), found once when stored; for any other graph the reason it is not one.
  absl::StatusOr<GemmProblem> gemm_problem;
  int64_t bytes() const;
};

struct StoredGraphResult {
  std::string graph_hash;
  std::shared_ptr<const StoredGraph> graph;
  bool already_registered = false;
};

class GraphStore {
 public:
  explicit GraphStore(int64_t budget_bytes) : budget_(budget_bytes), graphs_(budget_bytes) {}

  // Prunes and stores the graph under its content hash; a graph already stored is not
  // pruned again. The same graph registered as arrays and then from its HLO module (one
  // hash: the hash covers the arrays) keeps one stored graph whose space becomes the
  // HLO's, with exact operand ranks: that space accepts a subset of the rows the array
  // space accepted, and every row the module's compiler could apply. RESOURCE_EXHAUSTED
  // when the pruned graph alone exceeds the budget.
  absl::StatusOr<StoredGraphResult> Register(WireGraph graph);

  // The stored graph, or nullptr when unknown (never registered, or evicted).
  std::shared_ptr<const StoredGraph> Get(const std::string& graph_hash) { return graphs_.Get(graph_hash); }

  CacheStats Stats() const { return graphs_.Stats(); }

 private:
  const int64_t budget_;
  LruCache<std::string, StoredGraph> graphs_;
};

}  // namespace tgraph
