#include "model/nn/features.h"

#include <torch/torch.h>

#include "model/core/config_rows.h"

namespace tgraph {

int64_t HeldBytes(const torch::Tensor& t) {
  if (!t.defined()) return 0;
  if (t.is_sparse()) return HeldBytes(t._indices()) + HeldBytes(t._values()) + kTensorOverheadBytes;
  return (t.numel() * static_cast<int64_t>(t.element_size()) + 63) / 64 * 64 + kTensorOverheadBytes;
}

int64_t GraphTensors::bytes() const {
  int64_t b = 0;
  for (const torch::Tensor* t : {&numeric, &layout_index, &opcode, &edge_src, &edge_dst, &adjacency, &config_nodes,
                                 &csr_offsets, &csr_sources})
    b += HeldBytes(*t);
  return b;
}

GraphTensors MakeGraphTensors(const NodeGraph& g, const std::vector<int64_t>& config_node_index,
                              const FeatureStats& stats) {
  GraphTensors t;
  const int64_t n = g.num_nodes;
  t.num_nodes = n;
  t.numeric = torch::empty({n, kNumericFeatDim}, torch::kFloat32);
  t.layout_index = torch::empty({n, kLayoutSlots}, torch::kInt64);
  t.opcode = torch::empty({n}, torch::kInt64);
  float* num = t.numeric.data_ptr<float>();
  int64_t* lay = t.layout_index.data_ptr<int64_t>();
  int64_t* opc = t.opcode.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = g.feat(i);
    stats.Standardize(row, num + i * kNumericFeatDim);
    const int rank = NodeRank(row);
    for (int k = 0; k < kLayoutSlots; ++k) {
      // Re-padding (TGraph 2.2.4): -1 past the rank, so 0 always means axis 0.
      const int v = k < rank ? static_cast<int>(row[kLayoutFeatBegin + k]) : -1;
      lay[i * kLayoutSlots + k] = LayoutValueIndex(std::clamp(v, kLayoutValueMin, kLayoutValueMax));
    }
    opc[i] = g.node_opcode[i];
  }
  const int64_t m = g.num_edges();
  t.edge_src = torch::empty({2 * m}, torch::kInt64);
  t.edge_dst = torch::empty({2 * m}, torch::kInt64);
  int64_t* src = t.edge_src.data_ptr<int64_t>();
  int64_t* dst = t.edge_dst.data_ptr<int64_t>();
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    src[2 * e] = v, dst[2 * e] = u;      // producer -> consumer
    src[2 * e + 1] = u, dst[2 * e + 1] = v;  // consumer -> producer
  }
  // Sum over neighbours as one sparse matmul: A[dst, src] counts the edges.
  t.adjacency = torch::sparse_coo_tensor(torch::stack({t.edge_dst, t.edge_src}), torch::ones({2 * m}), {n, n})
                    .coalesce();
  // The same messages grouped by destination, for the inference path's gather-sum.
  t.csr_offsets = torch::zeros({n + 1}, torch::kInt64);
  t.csr_sources = torch::empty({2 * m}, torch::kInt64);
  int64_t* off = t.csr_offsets.data_ptr<int64_t>();
  for (int64_t e = 0; e < 2 * m; ++e) ++off[dst[e] + 1];
  for (int64_t i = 0; i < n; ++i) off[i + 1] += off[i];
  std::vector<int64_t> fill(off, off + n);
  int64_t* srcs = t.csr_sources.data_ptr<int64_t>();
  for (int64_t e = 0; e < 2 * m; ++e) srcs[fill[dst[e]]++] = src[e];
  t.config_nodes = torch::tensor(config_node_index.empty() ? std::vector<int64_t>{} : config_node_index,
                                 torch::kInt64);
  return t;
}

torch::Tensor MakeLayoutConfigTensor(const int8_t* rows, int64_t count, int64_t nc) {
  torch::Tensor out = torch::empty({count, nc, kConfigFeatDim}, torch::kInt64);
  int64_t* p = out.data_ptr<int64_t>();
  const int64_t total = count * nc * kConfigFeatDim;
  LayoutValueIndices(rows, total, p);
  return out;
}

}  // namespace tgraph
