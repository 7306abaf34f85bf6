#include "model/synth/cost_model.h"

#include <algorithm>
#include <cmath>

namespace tgraph::synth {
namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

double Bytes(const SynthNode& n, const Layout& l) { return PaddedElements(n.shape, l) * ElemBits(n.elem) / 8.0; }

double Utilization(const SynthNode& n, const Layout& l) {
  return static_cast<double>(n.elements()) / PaddedElements(n.shape, l);
}

bool IsElementwise(int opcode) {
  switch (opcode) {
    case op::kAdd: case op::kSubtract: case op::kMultiply: case op::kDivide: case op::kMaximum:
    case op::kExponential: case op::kTanh: case op::kRsqrt: case op::kConvert: case op::kSelect:
    case op::kCompare:
      return true;
    default:
      return false;
  }
}

// Nodes whose layout the compiler chooses to suit the consumer: no copy is ever needed.
bool IsLayoutFlexible(int opcode) {
  return opcode == op::kBroadcast || opcode == op::kConstant || opcode == op::kIota;
}

bool IsDescending(const Layout& l, int rank) { return SameLayout(l, DefaultLayout(rank), rank); }


// Where the new layout's most-minor dim sits in the old layout (0 = stays minor-most).
int MinorShift(const Layout& from, const Layout& to, int rank) {
  for (int i = 0; i < rank; ++i)
    if (from[i] == to[0]) return i;
  return rank;
}

// Efficiency factor for how minor a dimension is in a layout: 1 minor-most,
// `second` when second-most-minor, `other` otherwise.
double MinorFactor(const Layout& l, int rank, int64_t dim, double second, double other) {
  if (rank > 0 && l[0] == dim) return 1.0;
  if (rank > 1 && l[1] == dim) return second;
  return other;
}

Layout Partial(std::initializer_list<int> dims) {
  Layout l;
  l.fill(-1);
  int i = 0;
  for (int d : dims) l[i++] = static_cast<int8_t>(d);
  return l;
}

// What the real files' autotuner tries (TpuGraphs layout:*:random, unet_3d and the
// nlp test graphs): a choice of which of two dims is most-minor, the rest left to
// the compiler; data tensors of convolutions choose between batch and feature,
// kernels between their two feature dims, dots between their two minor-most dims.
// Rank-2 groups may also stay at the default; reshapes of rank <= 3 try every
// permutation, as in the real files.
std::vector<Layout> LayoutCandidates(const SynthNode& node, int group, int rank) {
  std::vector<Layout> c;
  if (rank <= 0) return c;
  Layout none;
  none.fill(-1);
  if (rank == 1) return {none, Partial({0})};
  if (node.opcode == op::kReshape && rank <= 3) {
    c.push_back(none);
    std::vector<int> perm(rank);
    for (int i = 0; i < rank; ++i) perm[i] = i;
    do {
      Layout l;
      l.fill(-1);
      for (int i = 0; i < rank; ++i) l[i] = static_cast<int8_t>(perm[i]);
      c.push_back(l);
    } while (std::next_permutation(perm.begin(), perm.end()));
    return c;
  }
  int a = rank - 1, b = rank - 2;  // dots and reshapes: the two minor-most dims
  if (node.opcode == op::kConvolution && rank == 4) {
    const bool kernel_like = (group == 2 && node.conv_kind != ConvKind::kWeightGrad) ||
                             (group == 0 && node.conv_kind == ConvKind::kWeightGrad);
    if (kernel_like) {
      a = group == 2 ? node.ConvKernelOutputFeatureDim() : 3;
      b = group == 2 ? node.ConvKernelInputFeatureDim() : 2;
    } else {
      a = 3;  // feature (for the weight gradient's input, the batch plays that part)
      b = 0;  // batch
    }
  }
  if (rank == 2) c.push_back(none);
  c.push_back(Partial({a, b}));
  c.push_back(Partial({b, a}));
  return c;
}

}  // namespace

Layout CompleteLayout(const int8_t* group, int rank) {
  Layout l;
  l.fill(-1);
  if (group[0] < 0) return DefaultLayout(rank);
  bool used[kLayoutSlots] = {};
  int k = 0;
  for (int i = 0; i < kLayoutSlots && group[i] >= 0; ++i) {
    l[k++] = group[i];
    used[group[i]] = true;
  }
  for (int d = rank - 1; d >= 0; --d)
    if (!used[d]) l[k++] = static_cast<int8_t>(d);
  return l;
}

double PaddedElements(const Shape& shape, const Layout& layout) {
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) return 1.0;
  double e = static_cast<double>(RoundUp(shape[layout[0]], 128));
  if (rank > 1) e *= static_cast<double>(RoundUp(shape[layout[1]], 8));
  for (int i = 2; i < rank; ++i) e *= static_cast<double>(shape[layout[i]]);
  return e;
}

LayoutCostModel::LayoutCostModel(std::vector<SynthNode> nodes, std::vector<int64_t> config_ids, CostConstants k)
    : nodes_(std::move(nodes)), config_ids_(std::move(config_ids)), k_(k) {
  config_pos_.assign(nodes_.size(), -1);
  group_rank_.assign(config_ids_.size() * 3, 0);
  for (size_t j = 0; j < config_ids_.size(); ++j) {
    const SynthNode& n = nodes_[config_ids_[j]];
    config_pos_[config_ids_[j]] = static_cast<int>(j);
    group_rank_[j * 3 + 0] = n.rank();
    group_rank_[j * 3 + 1] = nodes_[n.operands[0]].rank();
    // The kernel group: a convolution's kernel, a dot's rhs (the real files configure both).
    if (n.opcode == op::kConvolution || n.opcode == op::kDot) group_rank_[j * 3 + 2] = nodes_[n.operands[1]].rank();
  }
  candidates_.resize(group_rank_.size());
  for (size_t j = 0; j < config_ids_.size(); ++j)
    for (int g = 0; g < 3; ++g)
      candidates_[j * 3 + g] = LayoutCandidates(nodes_[config_ids_[j]], g, group_rank_[j * 3 + g]);
}

RuntimeBreakdown LayoutCostModel::Evaluate(const int8_t* config) const {
  const size_t n = nodes_.size();
  std::vector<Layout> out(n);
  std::vector<std::vector<Layout>> copies_made(n);  // per producer: the layouts copied to
  RuntimeBreakdown r;
  Layout req[4];
  for (size_t i = 0; i < n; ++i) {
    const SynthNode& node = nodes_[i];
    const int rank = node.rank();
    const int pos = config_pos_[i];
    const int8_t* cfg = pos >= 0 ? config + static_cast<size_t>(pos) * kConfigFeatDim : nullptr;
    auto group_set = [&](int g) { return cfg && cfg[g * kLayoutSlots] >= 0; };
    const size_t nops = std::min<size_t>(node.operands.size(), 4);

    // 1. Layout assignment: what this node produces, and what it needs of each operand.
    int first_fixed = -1;
    for (size_t o = 0; o < nops; ++o)
      if (!IsLayoutFlexible(nodes_[node.operands[o]].opcode)) {
        first_fixed = node.operands[o];
        break;
      }
    if (cfg) {
      out[i] = CompleteLayout(cfg, rank);
    } else if (IsElementwise(node.opcode) && first_fixed >= 0) {
      out[i] = out[first_fixed];  // elementwise ops keep their operand's layout
    } else {
      out[i] = DefaultLayout(rank);
    }
    for (size_t o = 0; o < nops; ++o) {
      const int src = node.operands[o];
      if (cfg && o == 0 && group_set(1)) req[o] = CompleteLayout(cfg + kLayoutSlots, nodes_[src].rank());
      else if (cfg && o == 1 && group_rank_[pos * 3 + 2] > 0 && group_set(2))
        req[o] = CompleteLayout(cfg + 2 * kLayoutSlots, nodes_[src].rank());
      else if (IsElementwise(node.opcode)) req[o] = out[i];
      else req[o] = out[src];
      // 3. A copy wherever the producer's layout differs from what is needed.
      const SynthNode& p = nodes_[src];
      if (IsLayoutFlexible(p.opcode)) {
        if (IsElementwise(node.opcode)) out[src] = req[o];  // materialised in the layout needed
        continue;
      }
      if (!SameLayout(out[src], req[o], p.rank())) {
        // One copy per producer and layout: consumers that need the same layout share it
        // (as XLA's layout assignment does), so siblings' decisions interact.
        std::vector<Layout>& made = copies_made[src];
        if (std::any_of(made.begin(), made.end(), [&](const Layout& l) { return SameLayout(l, req[o], p.rank()); }))
          continue;
        made.push_back(req[o]);
        const double penalty = 1.0 + k_.copy_penalty_per_step * MinorShift(out[src], req[o], p.rank());
        r.copy_ns += (Bytes(p, out[src]) + Bytes(p, req[o])) / k_.hbm_bytes_per_ns * penalty;
        ++r.copies;
      }
    }

    // 4./5. The node's own time.
    AddNodeTime(i, out[i], req, nops, &r);
  }
  r.total_ns = k_.launch_ns + r.compute_ns + r.memory_ns + r.copy_ns;
  return r;
}

// The time of a convolution or dot on the matrix unit: its FLOPs at the peak rate times
// the efficiency its layouts allow (minor dims, tile utilisation), or its bytes at HBM
// bandwidth, whichever is longer.
double LayoutCostModel::MatrixUnitNs(const SynthNode& node, const Layout& out, const Layout* req) const {
  const int rank = node.rank();
  const double peak = k_.mxu_flops_per_ns / (node.elem == ElemType::kF32 ? k_.f32_slowdown : 1.0);
  double flops = 0, eff = 1, bytes = 0;
  if (node.opcode == op::kConvolution) {
    const SynthNode& in = nodes_[node.operands[0]];
    const SynthNode& ker = nodes_[node.operands[1]];
    // Each output element contracts the window over the input's feature dim (for the
    // weight gradient: dz's spatial extent over the batch).
    double window = 1;
    for (int64_t w : node.win_size) window *= static_cast<double>(w);
    const int feature = node.ConvInputFeatureDim();
    flops = 2.0 * static_cast<double>(node.elements()) * window * static_cast<double>(in.shape[feature]);
    eff = MinorFactor(req[0], in.rank(), feature, 0.6, 0.35) *
          std::max(MinorFactor(req[1], ker.rank(), node.ConvKernelInputFeatureDim(), 0.7, 0.5),
                   MinorFactor(req[1], ker.rank(), node.ConvKernelOutputFeatureDim(), 0.7, 0.5)) *
          MinorFactor(out, rank, 3, 0.8, 0.7);
    eff *= std::sqrt(Utilization(in, req[0]) * Utilization(node, out));
    bytes = Bytes(in, req[0]) + Bytes(ker, req[1]) + Bytes(node, out);
  } else {  // dot
    const SynthNode& lhs = nodes_[node.operands[0]];
    const SynthNode& rhs = nodes_[node.operands[1]];
    flops = 2.0 * static_cast<double>(node.elements()) * static_cast<double>(lhs.shape.back());
    eff = MinorFactor(req[0], lhs.rank(), node.contracting, 0.6, 0.4) *
          MinorFactor(req[1], rhs.rank(), rhs.rank() - 1, 1.0, 0.6) * MinorFactor(out, rank, rank - 1, 0.8, 0.7);
    eff *= std::sqrt(Utilization(lhs, req[0]) * Utilization(node, out));
    bytes = Bytes(lhs, req[0]) + Bytes(rhs, req[1]) + Bytes(node, out);
  }
  return std::max(flops / (peak * eff), bytes / k_.hbm_bytes_per_ns);
}

// 4./5. of Evaluate: node i's own time, given its layout and its operands' (req).
void LayoutCostModel::AddNodeTime(size_t i, const Layout& out, const Layout* req, size_t nops,
                                  RuntimeBreakdown* r) const {
  const SynthNode& node = nodes_[i];
  const int rank = node.rank();
  r->memory_ns += k_.per_node_ns;
  switch (node.opcode) {
    case op::kParameter:
    case op::kConstant:
      break;
    case op::kConvolution:
    case op::kDot:
      r->compute_ns += MatrixUnitNs(node, out, req);
      break;
    case op::kReshape: {
      const SynthNode& in = nodes_[node.operands[0]];
      // A bitcast when both sides keep row-major physical order and the tiled minor
      // dim is unchanged (or tiles evenly on both sides); otherwise a real copy.
      const bool same_order = IsDescending(req[0], in.rank()) && IsDescending(out, rank);
      const bool tiles_match = in.rank() > 0 && rank > 0 &&
                               (in.shape.back() == node.shape.back() ||
                                (in.shape.back() % 128 == 0 && node.shape.back() % 128 == 0));
      if (!(same_order && tiles_match))
        r->memory_ns += (Bytes(in, req[0]) + Bytes(node, out)) / k_.hbm_bytes_per_ns;
      break;
    }
    case op::kTranspose: {
      // Free when the input layout, seen through the permutation, is the output layout.
      const SynthNode& in = nodes_[node.operands[0]];
      Layout mapped;
      mapped.fill(-1);
      for (int s = 0; s < rank; ++s)
        for (int d = 0; d < rank; ++d)
          if (node.dims[d] == req[0][s]) mapped[s] = static_cast<int8_t>(d);
      if (!SameLayout(mapped, out, rank))
        r->memory_ns += (Bytes(in, req[0]) + Bytes(node, out)) / k_.hbm_bytes_per_ns;
      break;
    }
    default: {
      double bytes = Bytes(node, out);
      for (size_t o = 0; o < nops; ++o)
        if (!IsLayoutFlexible(nodes_[node.operands[o]].opcode)) bytes += Bytes(nodes_[node.operands[o]], req[o]);
      r->memory_ns += bytes / k_.hbm_bytes_per_ns;
    }
  }
}

TpuTiling DefaultTpuTiling(const TpuKernel& kernel) {
  TpuTiling t;
  const int rank = static_cast<int>(kernel.out.size());
  t.out_tile.assign(rank, 1);
  if (rank >= 1) t.out_tile[rank - 1] = std::min<int64_t>(kernel.out[rank - 1], 128);
  if (rank >= 2) t.out_tile[rank - 2] = std::min<int64_t>(kernel.out[rank - 2], 8);
  t.contract_tile = std::min<int64_t>(kernel.contract, 512);
  return t;
}

namespace {

// The three bound groups of a tile choice: kernel, output, input.
void TpuTilingBounds(const TpuKernel& k, const TpuTiling& t, std::vector<int64_t>* kernel_b,
                     std::vector<int64_t>* out_b, std::vector<int64_t>* in_b) {
  *out_b = t.out_tile;
  const int rank = static_cast<int>(k.out.size());
  kernel_b->clear();
  in_b->clear();
  const SynthNode& main = k.graph.nodes[k.main];
  if (main.opcode == op::kConvolution) {
    *kernel_b = {k.kh, k.kw, t.contract_tile, t.out_tile[3]};
    *in_b = {t.out_tile[0], (t.out_tile[1] - 1) * k.stride + k.kh, (t.out_tile[2] - 1) * k.stride + k.kw,
             t.contract_tile};
  } else if (main.opcode == op::kDot) {
    *kernel_b = {t.contract_tile, t.out_tile[rank - 1]};
    *in_b = std::vector<int64_t>(t.out_tile.begin(), t.out_tile.end() - 1);
    in_b->push_back(t.contract_tile);
  } else {
    *in_b = t.out_tile;
    in_b->push_back(t.contract_tile);
  }
}

double TileElems(const std::vector<int64_t>& dims) {
  // Row-major tile in on-chip memory: minor padded to 128, second-minor to 8.
  const int r = static_cast<int>(dims.size());
  if (r == 0) return 1;
  double e = static_cast<double>(RoundUp(dims[r - 1], 128));
  if (r > 1) e *= static_cast<double>(RoundUp(dims[r - 2], 8));
  for (int i = 0; i + 2 < r; ++i) e *= static_cast<double>(dims[i]);
  return e;
}

}  // namespace

double TpuKernelRuntimeNs(const TpuKernel& kernel, const TpuTiling& t, const CostConstants& k) {
  std::vector<int64_t> kb, ob, ib;
  TpuTilingBounds(kernel, t, &kb, &ob, &ib);
  double tiles = std::ceil(static_cast<double>(kernel.contract) / static_cast<double>(t.contract_tile));
  for (size_t i = 0; i < kernel.out.size(); ++i)
    tiles *= std::ceil(static_cast<double>(kernel.out[i]) / static_cast<double>(t.out_tile[i]));
  const double elem_bytes = ElemBits(kernel.elem) / 8.0;
  const double bytes = (TileElems(kb) * (kb.empty() ? 0 : 1) + TileElems(ob) + TileElems(ib)) * elem_bytes;
  const SynthNode& main = kernel.graph.nodes[kernel.main];
  double compute;
  if (main.opcode == op::kReduce) {
    compute = TileElems(ib) / k.vector_flops_per_ns;
  } else {
    // The matrix unit works on padded tiles: padding waste is paid in flops.
    const double peak = k.mxu_flops_per_ns / (kernel.elem == ElemType::kF32 ? k.f32_slowdown : 1.0);
    compute = 2.0 * TileElems(ob) * static_cast<double>(RoundUp(t.contract_tile, 128)) *
              static_cast<double>(kernel.window) / peak;
  }
  double memory = bytes / k.hbm_bytes_per_ns;
  const double working_set = 2.0 * bytes;  // double-buffered
  if (working_set > k.vmem_bytes) memory *= 1.0 + 4.0 * (working_set / k.vmem_bytes - 1.0);
  double out_elems = 1;
  for (int64_t d : kernel.out) out_elems *= static_cast<double>(d);
  const double tail = kernel.tail_ops * out_elems * elem_bytes / k.hbm_bytes_per_ns * 0.1;
  return k.launch_ns * 0.2 + tiles * (std::max(compute, memory) + k.tile_overhead_ns) + tail;
}

std::vector<float> TpuTilingFeatures(const TpuKernel& kernel, const TpuTiling& t) {
  std::vector<int64_t> groups[3];
  TpuTilingBounds(kernel, t, &groups[0], &groups[1], &groups[2]);
  std::vector<float> f(kTileConfigDim, 0.0f);
  for (int g = 0; g < 3; ++g) {
    double sum = 0, product = 1;
    for (size_t i = 0; i < groups[g].size() && i < 6; ++i) {
      f[g * 8 + i] = static_cast<float>(groups[g][i]);
      sum += static_cast<double>(groups[g][i]);
      product *= static_cast<double>(groups[g][i]);
    }
    f[g * 8 + 6] = static_cast<float>(sum);
    f[g * 8 + 7] = static_cast<float>(groups[g].empty() ? 0.0 : product);
  }
  return f;
}

}  // namespace tgraph::synth
