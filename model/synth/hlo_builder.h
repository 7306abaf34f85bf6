// A small HLO-like graph builder for the synthetic data generator: typed nodes with
// shapes and attributes, appended in topological order, turned into TpuGraphs
// node_feat rows (node_feat.tsv) and [consumer, producer] edges.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/graph.h"

namespace tgraph::synth {

enum class ElemType { kPred, kS32, kBF16, kF32 };
int ElemBits(ElemType t);

using Shape = std::vector<int64_t>;

// A layout: minor-to-major list of dimension indices (layout[0] is the most minor).
using Layout = std::array<int8_t, kLayoutSlots>;
Layout DefaultLayout(int rank);  // descending: rank-1, ..., 0, then -1
bool SameLayout(const Layout& a, const Layout& b, int rank);

struct SynthNode {
  int opcode = 0;
  Shape shape;
  ElemType elem = ElemType::kF32;
  std::vector<int> operands;
  std::vector<int64_t> dims;  // `dimensions`: transpose permutation, reduce or broadcast dims
  // Window over the window dims (conv: the spatial dims; reduce-window: all dims).
  std::vector<int64_t> win_size, win_stride, pad_lo, pad_hi;
  int param_number = -1;
  bool is_root = false;
  int64_t contracting = -1;  // dot: contracting dimension of the lhs (the last one)
  int64_t rhs_contracting = -1;
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t elements() const;
  bool configurable() const {
    return opcode == op::kConvolution || opcode == op::kDot || opcode == op::kReshape;
  }
};

class GraphBuilder {
 public:
  int Parameter(const Shape& shape, ElemType t);
  int Constant(const Shape& shape, ElemType t);
  int Broadcast(int x, const Shape& shape, const std::vector<int64_t>& dims);
  int Unary(int opcode, int x);
  int Binary(int opcode, int a, int b);  // shapes must match
  // NHWC input, HWIO kernel [kh, kw, cin, cout], SAME-like padding.
  int Conv(int input, int kernel, int64_t stride);
  // lhs [..., M, K] x rhs [K, N] or batched rhs [b..., K, N] -> [..., M, N].
  int Dot(int lhs, int rhs);
  int Reshape(int x, const Shape& shape);
  int Transpose(int x, const std::vector<int64_t>& perm);
  int Reduce(int x, const std::vector<int64_t>& dims, int opcode_of_init = op::kConstant);
  int ReduceWindow(int x, int64_t window, int64_t stride);  // over dims 1, 2 of NHWC
  void MarkRoot(int x) { nodes_[x].is_root = true; }

  const std::vector<SynthNode>& nodes() const { return nodes_; }
  const SynthNode& node(int i) const { return nodes_[i]; }
  int size() const { return static_cast<int>(nodes_.size()); }

 private:
  int Add(SynthNode n);
  std::vector<SynthNode> nodes_;
  int next_param_ = 0;
};

// The TpuGraphs view of a built graph: node_feat filled per node_feat.tsv with the
// default layout (0-padded) in [134:140], opcodes, and [consumer, producer] edges.
NodeGraph ToNodeGraph(const std::vector<SynthNode>& nodes);
// Indices of the configurable nodes (convolution, dot, reshape), ascending.
std::vector<int64_t> ConfigurableNodes(const std::vector<SynthNode>& nodes);

}  // namespace tgraph::synth
