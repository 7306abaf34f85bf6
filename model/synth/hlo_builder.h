// A small HLO-like graph builder for the synthetic data generator: typed nodes with
// shapes and attributes, appended in topological order, turned into TpuGraphs
// node_feat rows (docs/format.md) and [consumer, producer] edges.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/core/graph.h"

namespace tgraph::synth {

enum class ElemType { kPred, kS32, kBF16, kF32 };
int ElemBits(ElemType t);

using Shape = std::vector<int64_t>;

// A layout: minor-to-major list of dimension indices (layout[0] is the most minor).
using Layout = std::array<int8_t, kLayoutSlots>;
Layout DefaultLayout(int rank);  // descending: rank-1, ..., 0, then -1
bool SameLayout(const Layout& a, const Layout& b, int rank);

// Which of a training step's three convolutions a convolution node is. The dimension
// numbers follow the real files (unet_3d.4x4.bf16: forward, input-gradient and
// weight-gradient convolutions share one kernel tensor and differ in which dims are
// batch and feature).
enum class ConvKind { kForward, kInputGrad, kWeightGrad };

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
  ConvKind conv_kind = ConvKind::kForward;
  // Convolution: the input's feature (contracting) dim, and the kernel's input- and
  // output-feature dims, per conv_kind (NHWC data, HWIO kernel).
  int ConvInputFeatureDim() const { return conv_kind == ConvKind::kWeightGrad ? 0 : 3; }
  int ConvKernelInputFeatureDim() const {
    return conv_kind == ConvKind::kForward ? 2 : conv_kind == ConvKind::kInputGrad ? 3 : 0;
  }
  int ConvKernelOutputFeatureDim() const { return conv_kind == ConvKind::kInputGrad ? 2 : 3; }
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
  int Compare(int a, int b);             // a PRED of a's shape
  int Select(int pred, int on_true, int on_false);
  // NHWC input, HWIO kernel [kh, kw, cin, cout], SAME-like padding.
  int Conv(int input, int kernel, int64_t stride);
  // The backward pass of Conv(x, kernel, 1): the gradient with respect to x, from the
  // output gradient dz [N, H, W, cout] and the same kernel (feature dims swapped,
  // window reversed) -> [N, H, W, cin]; and the gradient with respect to the kernel,
  // from x [N, H, W, cin] and dz, with the batch as the contracting dim and dz's
  // spatial extent as the window -> [kh, kw, cin, cout].
  int ConvInputGrad(int dz, int kernel);
  int ConvWeightGrad(int x, int dz, int64_t kh, int64_t kw);
  // lhs [..., M, K] x rhs [K, N] or batched rhs [b..., K, N] -> [..., M, N].
  int Dot(int lhs, int rhs);
  int Reshape(int x, const Shape& shape);
  int Transpose(int x, const std::vector<int64_t>& perm);
  int Reduce(int x, const std::vector<int64_t>& dims, int opcode_of_init = op::kConstant);
  int ReduceWindow(int x, int64_t window, int64_t stride);  // over dims 1, 2 of NHWC
  // The gradient of ReduceWindow(x, window, stride) (max pooling): g scattered back to
  // the positions of x's maxima -> x's shape.
  int SelectAndScatter(int x, int g, int64_t window, int64_t stride);
  void MarkRoot(int x) { nodes_[x].is_root = true; }

  const std::vector<SynthNode>& nodes() const { return nodes_; }
  // Valid until the next node is added (the nodes may move): copy what must outlive that.
  const SynthNode& node(int i) const { return nodes_[i]; }
  int size() const { return static_cast<int>(nodes_.size()); }

 private:
  int Add(SynthNode n);
  std::vector<SynthNode> nodes_;
  int next_param_ = 0;
};

// The TpuGraphs view of a built graph: node_feat filled per docs/format.md with the
// default layout (0-padded) in [134:140], opcodes, and [consumer, producer] edges.
NodeGraph ToNodeGraph(const std::vector<SynthNode>& nodes);
// Indices of the configurable nodes (convolution, dot, reshape), ascending.
std::vector<int64_t> ConfigurableNodes(const std::vector<SynthNode>& nodes);

}  // namespace tgraph::synth
