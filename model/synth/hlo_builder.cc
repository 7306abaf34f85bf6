#include "model/synth/hlo_builder.h"

#include <algorithm>
#include <cassert>

namespace tgraph::synth {

int ElemBits(ElemType t) {
  switch (t) {
    case ElemType::kPred: return 8;
    case ElemType::kS32: return 32;
    case ElemType::kBF16: return 16;
    case ElemType::kF32: return 32;
  }
  return 32;
}

Layout DefaultLayout(int rank) {
  Layout l;
  l.fill(-1);
  for (int i = 0; i < rank; ++i) l[i] = static_cast<int8_t>(rank - 1 - i);
  return l;
}

bool SameLayout(const Layout& a, const Layout& b, int rank) {
  for (int i = 0; i < rank; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

int64_t SynthNode::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int GraphBuilder::Add(SynthNode n) {
#ifndef NDEBUG
  for (int o : n.operands) assert(o >= 0 && o < size());
#endif
  nodes_.push_back(std::move(n));
  return size() - 1;
}

int GraphBuilder::Parameter(const Shape& shape, ElemType t) {
  SynthNode n;
  n.opcode = op::kParameter;
  n.shape = shape;
  n.elem = t;
  n.param_number = next_param_++;
  return Add(std::move(n));
}

int GraphBuilder::Constant(const Shape& shape, ElemType t) {
  SynthNode n;
  n.opcode = op::kConstant;
  n.shape = shape;
  n.elem = t;
  return Add(std::move(n));
}

int GraphBuilder::Broadcast(int x, const Shape& shape, const std::vector<int64_t>& dims) {
  SynthNode n;
  n.opcode = op::kBroadcast;
  n.shape = shape;
  n.elem = nodes_[x].elem;
  n.operands = {x};
  n.dims = dims;
  return Add(std::move(n));
}

int GraphBuilder::Unary(int opcode, int x) {
  SynthNode n;
  n.opcode = opcode;
  n.shape = nodes_[x].shape;
  n.elem = nodes_[x].elem;
  n.operands = {x};
  return Add(std::move(n));
}

int GraphBuilder::Binary(int opcode, int a, int b) {
  assert(nodes_[a].shape == nodes_[b].shape);
  SynthNode n;
  n.opcode = opcode;
  n.shape = nodes_[a].shape;
  n.elem = nodes_[a].elem;
  n.operands = {a, b};
  return Add(std::move(n));
}

int GraphBuilder::Compare(int a, int b) {
  const int c = Binary(op::kCompare, a, b);
  nodes_[c].elem = ElemType::kPred;
  return c;
}

int GraphBuilder::Select(int pred, int on_true, int on_false) {
  assert(nodes_[pred].shape == nodes_[on_true].shape && nodes_[on_true].shape == nodes_[on_false].shape);
  SynthNode n;
  n.opcode = op::kSelect;
  n.shape = nodes_[on_true].shape;
  n.elem = nodes_[on_true].elem;
  n.operands = {pred, on_true, on_false};
  return Add(std::move(n));
}

int GraphBuilder::ConvInputGrad(int dz, int kernel) {
  const Shape& g = nodes_[dz].shape;
  const Shape& k = nodes_[kernel].shape;
  assert(g[3] == k[3]);
  SynthNode n;
  n.opcode = op::kConvolution;
  n.conv_kind = ConvKind::kInputGrad;
  n.elem = nodes_[dz].elem;
  n.shape = {g[0], g[1], g[2], k[2]};
  n.operands = {dz, kernel};
  n.win_size = {k[0], k[1]};
  n.win_stride = {1, 1};
  n.pad_lo = {(k[0] - 1) - (k[0] - 1) / 2, (k[1] - 1) - (k[1] - 1) / 2};
  n.pad_hi = {(k[0] - 1) / 2, (k[1] - 1) / 2};
  return Add(std::move(n));
}

int GraphBuilder::ConvWeightGrad(int x, int dz, int64_t kh, int64_t kw) {
  const Shape& in = nodes_[x].shape;
  const Shape& g = nodes_[dz].shape;
  assert(in[0] == g[0] && in[1] == g[1] && in[2] == g[2]);
  SynthNode n;
  n.opcode = op::kConvolution;
  n.conv_kind = ConvKind::kWeightGrad;
  n.elem = nodes_[x].elem;
  n.shape = {kh, kw, in[3], g[3]};
  n.operands = {x, dz};
  n.win_size = {g[1], g[2]};
  n.win_stride = {1, 1};
  n.pad_lo = {(kh - 1) / 2, (kw - 1) / 2};
  n.pad_hi = {kh - 1 - (kh - 1) / 2, kw - 1 - (kw - 1) / 2};
  return Add(std::move(n));
}

int GraphBuilder::Conv(int input, int kernel, int64_t stride) {
  const Shape& in = nodes_[input].shape;
  const Shape& k = nodes_[kernel].shape;
  SynthNode n;
  n.opcode = op::kConvolution;
  n.elem = nodes_[input].elem;
  const int64_t ho = (in[1] + stride - 1) / stride, wo = (in[2] + stride - 1) / stride;
  n.shape = {in[0], ho, wo, k[3]};
  n.operands = {input, kernel};
  n.win_size = {k[0], k[1]};
  n.win_stride = {stride, stride};
  const int64_t pad_h = std::max<int64_t>(0, (ho - 1) * stride + k[0] - in[1]);
  const int64_t pad_w = std::max<int64_t>(0, (wo - 1) * stride + k[1] - in[2]);
  n.pad_lo = {pad_h / 2, pad_w / 2};
  n.pad_hi = {pad_h - pad_h / 2, pad_w - pad_w / 2};
  return Add(std::move(n));
}

int GraphBuilder::Dot(int lhs, int rhs) {
  const Shape& a = nodes_[lhs].shape;
  const Shape& b = nodes_[rhs].shape;
  SynthNode n;
  n.opcode = op::kDot;
  n.elem = nodes_[lhs].elem;
  n.shape = a;
  n.shape.back() = b.back();
  n.operands = {lhs, rhs};
  n.contracting = static_cast<int64_t>(a.size()) - 1;
  n.rhs_contracting = static_cast<int64_t>(b.size()) - 2;
  return Add(std::move(n));
}

int GraphBuilder::Reshape(int x, const Shape& shape) {
  SynthNode n;
  n.opcode = op::kReshape;
  n.shape = shape;
  n.elem = nodes_[x].elem;
  n.operands = {x};
  return Add(std::move(n));
}

int GraphBuilder::Transpose(int x, const std::vector<int64_t>& perm) {
  SynthNode n;
  n.opcode = op::kTranspose;
  n.elem = nodes_[x].elem;
  for (int64_t p : perm) n.shape.push_back(nodes_[x].shape[p]);
  n.operands = {x};
  n.dims = perm;
  return Add(std::move(n));
}

int GraphBuilder::Reduce(int x, const std::vector<int64_t>& dims, int) {
  const int init = Constant({}, nodes_[x].elem);
  SynthNode n;
  n.opcode = op::kReduce;
  n.elem = nodes_[x].elem;
  for (int64_t d = 0; d < nodes_[x].rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) n.shape.push_back(nodes_[x].shape[d]);
  n.operands = {x, init};
  n.dims = dims;
  return Add(std::move(n));
}

int GraphBuilder::ReduceWindow(int x, int64_t window, int64_t stride) {
  const int init = Constant({}, nodes_[x].elem);
  const Shape& in = nodes_[x].shape;
  SynthNode n;
  n.opcode = op::kReduceWindow;
  n.elem = nodes_[x].elem;
  n.shape = {in[0], (in[1] + stride - 1) / stride, (in[2] + stride - 1) / stride, in[3]};
  n.operands = {x, init};
  n.win_size = {1, window, window, 1};
  n.win_stride = {1, stride, stride, 1};
  n.pad_lo = {0, 0, 0, 0};
  n.pad_hi = {0, window / 2, window / 2, 0};
  return Add(std::move(n));
}

int GraphBuilder::SelectAndScatter(int x, int g, int64_t window, int64_t stride) {
  const int init = Constant({}, nodes_[g].elem);
  SynthNode n;
  n.opcode = op::kSelectAndScatter;
  n.elem = nodes_[g].elem;
  n.shape = nodes_[x].shape;
  n.operands = {x, g, init};
  n.win_size = {1, window, window, 1};
  n.win_stride = {1, stride, stride, 1};
  n.pad_lo = {0, 0, 0, 0};
  n.pad_hi = {0, window / 2, window / 2, 0};
  return Add(std::move(n));
}

namespace {

// Writes values[0..5] at base, then their sum and product (the *_sum, *_product columns).
void PutWithSumProduct(float* row, int base, const std::vector<int64_t>& values) {
  double sum = 0, product = 1;
  for (size_t i = 0; i < values.size() && i < 6; ++i) {
    row[base + i] = static_cast<float>(values[i]);
    sum += static_cast<double>(values[i]);
    product *= static_cast<double>(values[i]);
  }
  row[base + 6] = static_cast<float>(sum);
  row[base + 7] = static_cast<float>(values.empty() ? 0.0 : product);
}

int ElemOneHot(ElemType t) {
  switch (t) {
    case ElemType::kPred: return 3;
    case ElemType::kS32: return 6;
    case ElemType::kBF16: return 15;
    case ElemType::kF32: return 13;
  }
  return 13;
}

}  // namespace

NodeGraph ToNodeGraph(const std::vector<SynthNode>& nodes) {
  NodeGraph g;
  g.num_nodes = static_cast<int64_t>(nodes.size());
  g.node_feat.assign(g.num_nodes * kNodeFeatDim, 0.0f);
  g.node_opcode.resize(g.num_nodes);
  for (int64_t i = 0; i < g.num_nodes; ++i) {
    const SynthNode& n = nodes[i];
    float* row = g.node_feat.data() + i * kNodeFeatDim;
    g.node_opcode[i] = n.opcode;
    row[0] = n.is_root ? 1.0f : 0.0f;
    // row[1] (element_size_in_bits) stays 0: the TpuGraphs encoder always writes 0 there.
    row[ElemOneHot(n.elem)] = 1.0f;
    double sum = 0, product = 1;
    for (int d = 0; d < n.rank() && d < 6; ++d) {
      row[kShapeDimsBegin + d] = static_cast<float>(n.shape[d]);
      sum += static_cast<double>(n.shape[d]);
      product *= static_cast<double>(n.shape[d]);
    }
    row[27] = static_cast<float>(sum);
    row[28] = static_cast<float>(product);
    if (n.param_number >= 0) row[30] = static_cast<float>(n.param_number);
    for (size_t d = 0; d < n.dims.size() && d < 6; ++d) row[31 + d] = static_cast<float>(n.dims[d]);
    if (!n.win_size.empty()) {
      const std::vector<int64_t> ones(n.win_size.size(), 1);
      PutWithSumProduct(row, 37, n.win_size);
      PutWithSumProduct(row, 45, n.win_stride);
      PutWithSumProduct(row, 53, n.pad_lo);
      PutWithSumProduct(row, 61, n.pad_hi);
      PutWithSumProduct(row, 69, ones);  // window dilation
      PutWithSumProduct(row, 77, ones);  // base dilation
      // Window reversal (true count, false count): the input gradient reverses its window.
      const bool reversed = n.conv_kind == ConvKind::kInputGrad;
      for (size_t d = 0; reversed && d < n.win_size.size() && d < 6; ++d) row[85 + d] = 1.0f;
      row[91] = reversed ? static_cast<float>(n.win_size.size()) : 0.0f;
      row[92] = reversed ? 0.0f : static_cast<float>(n.win_size.size());
    }
    if (n.opcode == op::kConvolution) {
      // Forward and input gradient: NHWC input and output. Weight gradient: the batch
      // is the input's feature dim and the output is HWIO (as in the real files).
      const bool wgrad = n.conv_kind == ConvKind::kWeightGrad;
      row[93] = wgrad ? 3 : 0; row[94] = static_cast<float>(n.ConvInputFeatureDim()); row[95] = 1; row[96] = 2;
      row[99] = static_cast<float>(n.ConvKernelInputFeatureDim());
      row[100] = static_cast<float>(n.ConvKernelOutputFeatureDim());
      row[101] = wgrad ? 1 : 0; row[102] = wgrad ? 2 : 1;
      row[105] = wgrad ? 2 : 0; row[106] = 3;
      row[107] = 1; row[108] = 1;
    }
    const Layout l = DefaultLayout(n.rank());
    for (int k = 0; k < n.rank() && k < kLayoutSlots; ++k) row[kLayoutFeatBegin + k] = l[k];  // 0-padded
    // As in real files: one edge per distinct operand, rows sorted by (u, v), u > v.
    std::vector<int> operands = n.operands;
    std::sort(operands.begin(), operands.end());
    operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
    for (int o : operands) {
      g.edge_index.push_back(i);
      g.edge_index.push_back(o);
    }
  }
  return g;
}

std::vector<int64_t> ConfigurableNodes(const std::vector<SynthNode>& nodes) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].configurable()) ids.push_back(static_cast<int64_t>(i));
  return ids;
}

}  // namespace tgraph::synth
