#include "server/graph_store.h"

#include "absl/strings/str_cat.h"

namespace tgraph {

namespace {

// A heap block of `bytes`: glibc rounds to 16 and adds an 8-byte header.
int64_t Block(size_t bytes) { return bytes ? static_cast<int64_t>((bytes + 8 + 15) / 16 * 16) : 0; }

}  // namespace

// Its arrays as the heap holds them, the struct with its shared_ptr's control block, and
// the cache's entry (the 64-character hash key twice, a map and a list node): for the
// few-node graphs of GPU kernels the fixed part is most of it.
int64_t StoredGraph::bytes() const {
  constexpr int64_t kCacheEntry = 256;
  return Block(pruned.graph.node_feat.size() * sizeof(float)) + Block(pruned.graph.node_opcode.size() * sizeof(int32_t)) +
         Block(pruned.graph.edge_index.size() * sizeof(int64_t)) + Block(pruned.original_ids.size() * sizeof(int64_t)) +
         Block(pruned.config_node_index.size() * sizeof(int64_t)) + LayoutSpaceBytes(space) +
         Block(sizeof(StoredGraph) + 16) + kCacheEntry;
}

absl::StatusOr<StoredGraphResult> GraphStore::Register(WireGraph g) {
  StoredGraphResult r;
  r.graph_hash = GraphContentHash(g.graph, g.node_config_ids);
  const bool exact = !g.first_operands.empty();
  if (std::shared_ptr<const StoredGraph> known = graphs_.Get(r.graph_hash)) {
    r.already_registered = true;
    if (exact && !known->exact_operand_ranks && !g.node_config_ids.empty()) {  // refine the space (header)
      auto refined = std::make_shared<StoredGraph>(*known);
      const std::vector<std::string> names = hlo::InstructionNames(g.sources, g.node_config_ids);
      refined->space = LayoutSpaceOf(g.graph, g.node_config_ids, &g.first_operands, &names);
      refined->exact_operand_ranks = true;
      graphs_.Put(r.graph_hash, refined, refined->bytes());
      known = std::move(refined);
    }
    r.graph = std::move(known);
    return r;
  }
  auto stored = std::make_shared<StoredGraph>();
  stored->original_nodes = g.graph.num_nodes;
  stored->num_config_nodes = static_cast<int64_t>(g.node_config_ids.size());
  if (g.node_config_ids.empty()) {  // a tile graph: nothing to prune
    stored->pruned.graph = std::move(g.graph);
    stored->pruned.original_ids.resize(static_cast<size_t>(stored->pruned.graph.num_nodes));
    for (size_t i = 0; i < stored->pruned.original_ids.size(); ++i) stored->pruned.original_ids[i] = static_cast<int64_t>(i);
  } else {
    const std::vector<std::string> names = hlo::InstructionNames(g.sources, g.node_config_ids);
    stored->space = LayoutSpaceOf(g.graph, g.node_config_ids, exact ? &g.first_operands : nullptr, &names);
    stored->exact_operand_ranks = exact;
    stored->pruned = PruneGraph(g.graph, g.node_config_ids);
  }
  stored->gemm_problem = GemmProblemOfGraph(stored->pruned.graph, "graph_hash");
  const int64_t bytes = stored->bytes();
  if (bytes > budget_)
    return absl::ResourceExhaustedError(absl::StrCat("the pruned graph needs ", bytes,
                                                     " bytes, more than the server's graph store of ", budget_));
  graphs_.Put(r.graph_hash, stored, bytes);
  r.graph = std::move(stored);
  return r;
}

}  // namespace tgraph
