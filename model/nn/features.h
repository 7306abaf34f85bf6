// Network inputs built from a pruned graph: the configuration-independent tensors
// of a graph (computed once per graph and model version, then cached) and the
// per-request configuration tensor. Shared by trainer, evaluator and server.
// Pure functions of their arguments: any thread; the tensors returned are the caller's.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "model/core/preprocess.h"

namespace tgraph {

struct GraphTensors {
  int64_t num_nodes = 0;
  torch::Tensor numeric;       // [N, 134] float32, standardised node_feat[0:134]
  torch::Tensor layout_index;  // [N, 6] int64, re-padded node_feat[134:140] + 1, in 0..6
  torch::Tensor opcode;        // [N] int64
  torch::Tensor edge_src;      // [2E] int64: message source, both directions of every edge
  torch::Tensor edge_dst;      // [2E] int64: message destination
  torch::Tensor adjacency;     // [N, N] sparse COO float32: A[dst][src] = edges between them
  torch::Tensor csr_offsets;   // [N + 1] int64: the same adjacency by destination (CSR) ...
  torch::Tensor csr_sources;   // [2E] int64: ... source of each message, grouped by destination
  torch::Tensor config_nodes;  // [nc] int64: node index of each configurable node (layout only)
  int64_t bytes() const;       // memory held, for cache accounting (HeldBytes of each)
};

// The memory a cached tensor holds: its data, rounded up to the CPU allocator's 64-byte
// alignment, and the fixed cost of each tensor (its TensorImpl, StorageImpl and their
// allocations), which for the few-node graphs of GPU kernels is most of it: without it a
// cache of such graphs counted under half the RSS it took. 0 for an undefined tensor.
int64_t HeldBytes(const torch::Tensor& t);
inline constexpr int64_t kTensorOverheadBytes = 384;

// Standardises with `stats`, re-pads the layout slots with -1, and makes the edges
// undirected. For tile graphs pass an empty config_node_index.
GraphTensors MakeGraphTensors(const NodeGraph& pruned, const std::vector<int64_t>& config_node_index,
                              const FeatureStats& stats);

// [count, nc, 18] int64 embedding indices (value + 1, 0..6) from int8 config rows.
torch::Tensor MakeLayoutConfigTensor(const int8_t* rows, int64_t count, int64_t num_config_nodes);

}  // namespace tgraph
