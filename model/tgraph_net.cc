#include "model/tgraph_net.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>

namespace tgraph {
namespace {

namespace F = torch::nn::functional;
using torch::Tensor;

constexpr int64_t kLayoutValues = 7;  // -1..5, shifted to 0..6

Tensor Gelu(const Tensor& x) { return torch::gelu(x); }

// Activations are node-major, [N, C, F]: linear layers act on the last dim, and the sum
// over neighbours works on [N, C*F] rows: a sparse matmul of the adjacency when autograd
// is on, a gather-sum of contiguous rows by destination (CSR) for inference, which
// avoids the sparse kernel's zero-fill and scatter (profiled: 4x faster at N=1000).
// The CSR neighbour sum of the inference paths: adds to the `rows` rows of f floats at
// dst (contiguous) the same rows of every in-neighbour j of node i, read from
// src + (j * rows + r) * ld.
template <typename T>  // float, or c10::BFloat16 (read, summed in float)
inline void AddNeighbourRows(float* dst, const T* src, int64_t ld, int64_t rows, int64_t f, int64_t i,
                             const int64_t* off, const int64_t* nbr) {
  for (int64_t e = off[i]; e < off[i + 1]; ++e) {
    const T* from = src + nbr[e] * rows * ld;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < f; ++k) dst[r * f + k] += static_cast<float>(from[r * ld + k]);
  }
}

Tensor Aggregate(const Tensor& m, const GraphTensors& g) {
  const auto sizes = m.sizes();
  if (g.edge_src.numel() == 0) return torch::zeros_like(m);
  if (torch::GradMode::is_enabled()) return torch::mm(g.adjacency, m.reshape({sizes[0], -1})).view(sizes);
  RECORD_FUNCTION("tgraph::Aggregate", std::vector<c10::IValue>());
  const Tensor in = m.contiguous();
  const int64_t n = sizes[0], row = in.numel() / n;
  Tensor out = torch::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t* off = g.csr_offsets.data_ptr<int64_t>();
  const int64_t* nbr = g.csr_sources.data_ptr<int64_t>();
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* o = dst + i * row;
      std::fill(o, o + row, 0.0f);
      AddNeighbourRows(o, src, row, 1, row, i, off, nbr);
    }
  });
  return out;
}

// Inference: out[i*c + r] = normalize(self[i*c + r] + self_bias + sum over neighbours
// j of i of (nbr[j*c + r] + nbr_bias)) for every node i and config r, as one pass over
// rows of F floats (row strides of the inputs may exceed F; the biases are added here
// rather than by the matmuls, which would spend a pass over their outputs on it).
// nbr undefined = no edges. self and nbr are float or bf16 (the matmuls' outputs, read
// as they are); the biases, the sums and the output are float. Returns [N*c, F] float.
template <typename T>
Tensor SageSumNormalizeImpl(const Tensor& self, const Tensor& self_bias, const Tensor& nbr, const Tensor& nbr_bias,
                            const GraphTensors& g, int64_t c) {
  const int64_t rows = self.size(0), f = self.size(1), n = rows / c;
  TORCH_CHECK(self.stride(1) == 1 && self_bias.is_contiguous() && self_bias.numel() == f);
  TORCH_CHECK(!nbr.defined() || (nbr.stride(1) == 1 && nbr.sizes() == self.sizes() && nbr_bias.is_contiguous() &&
                                 nbr_bias.numel() == f && nbr.scalar_type() == self.scalar_type()));
  Tensor out = torch::empty({rows, f}, self.options().dtype(torch::kFloat32));
  const T* sp = self.data_ptr<T>();
  const float* sb = self_bias.data_ptr<float>();
  const T* np = nbr.defined() ? nbr.data_ptr<T>() : nullptr;
  const float* nb = nbr.defined() ? nbr_bias.data_ptr<float>() : nullptr;
  const int64_t sld = self.stride(0), nld = nbr.defined() ? nbr.stride(0) : 0;
  float* op = out.data_ptr<float>();
  const int64_t* off = g.csr_offsets.data_ptr<int64_t>();
  const int64_t* src = g.csr_sources.data_ptr<int64_t>();
  at::parallel_for(0, n, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> bias(static_cast<size_t>(f));
    for (int64_t i = begin; i < end; ++i) {
      // The node's bias: its own, plus one neighbour bias per incoming message.
      const float deg = np ? static_cast<float>(off[i + 1] - off[i]) : 0.0f;
      for (int64_t k = 0; k < f; ++k) bias[k] = sb[k] + (np ? deg * nb[k] : 0.0f);
      float* block = op + i * c * f;
      for (int64_t r = 0; r < c; ++r) {
        const T* a = sp + (i * c + r) * sld;
        float* o = block + r * f;
        for (int64_t k = 0; k < f; ++k) o[k] = static_cast<float>(a[k]) + bias[k];
      }
      if (np) AddNeighbourRows(block, np, nld, c, f, i, off, src);
      for (int64_t r = 0; r < c; ++r) {
        float* o = block + r * f;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // 8 partial sums: a reduction the compiler vectorises
        int64_t k = 0;
        for (; k + 8 <= f; k += 8)
          for (int j = 0; j < 8; ++j) acc[j] += o[k + j] * o[k + j];
        for (; k < f; ++k) acc[0] += o[k] * o[k];
        const float ss = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        const float scale = 1.0f / std::max(std::sqrt(ss), 1e-12f);
        for (k = 0; k < f; ++k) o[k] *= scale;
      }
    }
  });
  return out;
}

Tensor SageSumNormalize(const Tensor& self, const Tensor& self_bias, const Tensor& nbr, const Tensor& nbr_bias,
                        const GraphTensors& g, int64_t c) {
  RECORD_FUNCTION("tgraph::SageSumNormalize", std::vector<c10::IValue>());
  if (self.scalar_type() == torch::kBFloat16)
    return SageSumNormalizeImpl<c10::BFloat16>(self, self_bias, nbr, nbr_bias, g, c);
  return SageSumNormalizeImpl<float>(self, self_bias, nbr, nbr_bias, g, c);
}

// Tile config features span 1..1e9 (products): log-scale them.
Tensor TileFeatures(const Tensor& tile) { return torch::log1p(torch::clamp_min(tile, 0)); }

// Instance norm over the nodes, per config and channel. Seen as [N, C*H], that is batch
// norm over the first axis with per-feature statistics; its CPU kernel reduces the outer
// axis faster than var_mean + addcmul (profiled on [1000, 128, 256]: 212 ms vs 400 ms
// for the two blocks).
Tensor InstanceNorm(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2);
  return torch::batch_norm(x.reshape({n, c * h}), weight.repeat({c}), bias.repeat({c}), /*running_mean=*/{},
                           /*running_var=*/{}, /*training=*/true, /*momentum=*/0.0, /*eps=*/1e-5,
                           /*cudnn_enabled=*/false)
      .view({n, c, h});
}

// One TGraph block: B(e) = e + GELU(concat(eta, A_cross(eta))), eta = A_self(SAGE(IN(e))).
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelSpec& s) : spec_(s) {
    const int64_t h = s.hidden, half = s.hidden / 2;
    norm_weight_ = register_parameter("norm_weight", torch::ones({h}));
    norm_bias_ = register_parameter("norm_bias", torch::zeros({h}));
    f1_ = register_module("f1", torch::nn::Linear(h, h));
    f2_ = register_module("f2", torch::nn::Linear(2 * h, half));
    se1_ = register_module("se1", torch::nn::Linear(half, half / s.se_reduction));
    se2_ = register_module("se2", torch::nn::Linear(half / s.se_reduction, half));
    log_temperature_ = register_parameter("log_temperature", torch::zeros({1}));
  }

  // x: [N, C, H]. Without autograd (inference) the block runs as InferenceForward.
  Tensor forward(const Tensor& x, const GraphTensors& g) {
    if (!torch::GradMode::is_enabled()) return InferenceForward(x, g);
    const int64_t h = spec_.hidden;
    Tensor y = InstanceNorm(x, norm_weight_, norm_bias_);
    // f2(concat(y, agg)) without materialising the concat: two halves of f2's weight.
    Tensor w = f2_->weight;
    Tensor s = torch::linear(y, w.narrow(1, 0, h), f2_->bias);
    // A (f1(y) W2b^T) = (A f1(y)) W2b^T: aggregating after the projection moves half
    // as many bytes through the neighbour sum.
    if (spec_.edges) s = s + Aggregate(torch::linear(f1_->forward(y), w.narrow(1, h, h)), g);
    s = F::normalize(s, F::NormalizeFuncOptions().dim(-1).eps(1e-12));
    Tensor eta = spec_.self_attention ? s * torch::sigmoid(se2_->forward(torch::relu(se1_->forward(s)))) : s;
    // Cross-configuration attention: softmax over the configuration axis (dim 1).
    Tensor cross = spec_.cross_attention ? eta * torch::softmax(eta / log_temperature_.exp(), 1) : eta;
    return x + Gelu(torch::cat({eta, cross}, -1));
  }

  // The same arithmetic as forward() on fewer, fused passes: these activations are
  // 100+ MB and every elementwise pass over them costs as much as a small matmul.
  // Matmuls run on [N*C, F] views without bias; the biases, the neighbour sum, the
  // residual of SAGE and the L2 normalisation are one pass (SageSumNormalize). f1 is
  // folded into f2 unless SetInferenceFolding(false). x is updated in place (ScoreCached
  // passes a fresh activation it does not reuse).
  Tensor InferenceForward(const Tensor& x, const GraphTensors& g) {
    RECORD_FUNCTION("tgraph::Block", std::vector<c10::IValue>());
    const int64_t n = x.size(0), c = x.size(1), h = spec_.hidden, half = h / 2;
    Tensor y = InstanceNorm(x, norm_weight_, norm_bias_).view({n * c, h});
    // bf16: the matmuls' inputs and weights in bf16; their outputs are read as bf16 by
    // SageSumNormalize, which sums and normalises in float.
    const bool bf16 = precision_ == Precision::kBFloat16;
    auto mm_weight = [bf16](const Tensor& t) { return bf16 ? t.to(torch::kBFloat16) : t; };
    if (bf16) y = y.to(torch::kBFloat16);
    const Tensor& w = f2_->weight;
    Tensor self_part, nbr_part, nbr_bias;
    if (spec_.edges) nbr_bias = torch::mm(f1_->bias.unsqueeze(0), w.narrow(1, h, h).t()).squeeze(0);  // W2b b1
    if (spec_.edges && fold_) {
      // f1 and the neighbour half of f2 have nothing between them:
      // (y W1^T + b1) W2b^T = y (W2b W1)^T + W2b b1. One [H x H] matmul then yields the
      // self half and the folded neighbour half together: 17 instead of 34 GFLOP per
      // block at N=1000, C=128, H=256. The fold itself is an [H/2 x H x H] matmul.
      const Tensor wcat = torch::cat({w.narrow(1, 0, h), torch::mm(w.narrow(1, h, h), f1_->weight)}, 0);
      const Tensor p = torch::mm(y, mm_weight(wcat).t());  // [N*C, H]: self half | neighbour half
      self_part = p.narrow(1, 0, half);
      nbr_part = p.narrow(1, half, half);
    } else {
      self_part = torch::mm(y, mm_weight(w.narrow(1, 0, h)).t());
      if (spec_.edges)
        nbr_part = torch::mm(torch::mm(y, mm_weight(f1_->weight).t()), mm_weight(w.narrow(1, h, h)).t());
    }
    y = Tensor();
    Tensor s = SageSumNormalize(self_part, f2_->bias, nbr_part, nbr_bias, g, c);  // [N*C, half]
    self_part = nbr_part = Tensor();
    if (spec_.self_attention) {
      Tensor gate = torch::addmm(se1_->bias, s, se1_->weight.t()).relu_();
      s.mul_(torch::addmm(se2_->bias, gate, se2_->weight.t()).sigmoid_());
    }
    s = s.view({n, c, half});
    if (spec_.cross_attention) {
      Tensor cross = torch::softmax(s * log_temperature_.neg().exp(), 1).mul_(s);
      x.narrow(-1, half, half).add_(torch::gelu_(cross));
      x.narrow(-1, 0, half).add_(torch::gelu_(s));
    } else {
      torch::gelu_(s);
      x.narrow(-1, 0, half).add_(s);
      x.narrow(-1, half, half).add_(s);
    }
    return x;
  }

  void set_fold(bool fold) { fold_ = fold; }
  bool fold() const { return fold_; }
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }

 private:
  ModelSpec spec_;
  bool fold_ = true;
  Precision precision_ = Precision::kFloat32;
  Tensor norm_weight_, norm_bias_, log_temperature_;
  torch::nn::Linear f1_{nullptr}, f2_{nullptr}, se1_{nullptr}, se2_{nullptr};
};
TORCH_MODULE(Block);

class TGraphNet : public RankingNet {
 public:
  explicit TGraphNet(const ModelSpec& s) : RankingNet(s) {
    const int64_t h = s.hidden;
    layout_embed_ = register_module("layout_embed", torch::nn::Embedding(kLayoutValues, s.layout_embedding));
    opcode_embed_ = register_module("opcode_embed", torch::nn::Embedding(kNumOpcodes, s.opcode_embedding));
    const int64_t static_width = kNumericFeatDim + kLayoutSlots * s.layout_embedding + s.opcode_embedding;
    in_static_ = register_module("in_static", torch::nn::Linear(static_width, h));
    in_config_ = register_module(
        "in_config", torch::nn::Linear(torch::nn::LinearOptions(kConfigFeatDim * s.layout_embedding, h).bias(false)));
    in2_ = register_module("in2", torch::nn::Linear(h, h));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (int64_t b = 0; b < s.blocks; ++b) blocks_->push_back(Block(s));
    if (s.kind == CollectionKind::kTile) {
      tile_fuse_ = register_module("tile_fuse", torch::nn::Linear(h + kTileConfigDim, h));
    }
    out_ = register_module("out", torch::nn::Linear(h, 1));
  }

  void SetInferenceFolding(bool fold) override {
    for (const auto& block : *blocks_) block->as<Block>()->set_fold(fold);
  }
  bool InferenceFolding() const override {  // every block is told the same
    return blocks_->begin() != blocks_->end() && (*blocks_->begin())->as<Block>()->fold();
  }
  void SetInferencePrecision(Precision p) override {
    for (const auto& block : *blocks_) block->as<Block>()->set_precision(p);
  }
  Precision InferencePrecision() const override {
    return blocks_->begin() != blocks_->end() ? (*blocks_->begin())->as<Block>()->precision() : Precision::kFloat32;
  }

  StaticEncoding Precompute(const GraphTensors& g) override {
    const int64_t n = g.num_nodes;
    Tensor static_in = torch::cat({g.numeric, layout_embed_->forward(g.layout_index).reshape({n, -1}),
                                   opcode_embed_->forward(g.opcode)},
                                  -1);
    // f_in's first layer is linear in the concat, so the config part separates: the
    // all-default (-1) config contributes the constant k to every node.
    Tensor h0 = in_static_->forward(static_in) + DefaultConfigTerm();
    StaticEncoding enc;
    enc.node_in = Gelu(in2_->forward(Gelu(h0)));
    if (spec_.kind == CollectionKind::kLayout) {
      enc.config_h0 = h0.index_select(0, g.config_nodes);
    } else {
      // Tile: the encoder does not see the configs (late fusion): run it once.
      Tensor x = enc.node_in.unsqueeze(1).clone();  // [N, 1, H]; blocks update it in place
      for (const auto& block : *blocks_) x = block->as<Block>()->forward(x, g);
      enc.graph_emb = x.mean(0);
    }
    return enc;
  }

  Tensor ScoreCached(const GraphTensors& g, const ConfigBatch& batch, const StaticEncoding& enc) override {
    const StaticEncoding* cached = &enc;
    const int64_t c = batch.size();
    if (spec_.kind == CollectionKind::kTile) {
      Tensor emb = cached->graph_emb.expand({c, spec_.hidden});
      Tensor fused = Gelu(tile_fuse_->forward(torch::cat({emb, TileFeatures(batch.tile)}, -1)));
      return out_->forward(fused).squeeze(-1);
    }
    const int64_t nc = g.config_nodes.numel();
    Tensor cfg = layout_embed_->forward(batch.layout).reshape({c, nc, kConfigFeatDim * spec_.layout_embedding});
    // [nc, C, H]: the configurable nodes' f_in, per config.
    Tensor hc = cached->config_h0.unsqueeze(1) + in_config_->forward(cfg.transpose(0, 1)) - DefaultConfigTerm();
    Tensor fc = Gelu(in2_->forward(Gelu(hc)));
    Tensor x = cached->node_in.unsqueeze(1).expand({g.num_nodes, c, spec_.hidden}).index_copy(0, g.config_nodes, fc);
    for (const auto& block : *blocks_) x = block->as<Block>()->forward(x, g);
    return out_->forward(x.mean(0)).squeeze(-1);
  }

 private:
  // in_config applied to the embedding of an all -1 configuration.
  Tensor DefaultConfigTerm() {
    Tensor idx = torch::zeros({kConfigFeatDim}, torch::kInt64);
    return in_config_->forward(layout_embed_->forward(idx).reshape({-1}));
  }

  torch::nn::Embedding layout_embed_{nullptr}, opcode_embed_{nullptr};
  torch::nn::Linear in_static_{nullptr}, in_config_{nullptr}, in2_{nullptr}, tile_fuse_{nullptr}, out_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
};

// The TpuGraphs baseline: opcode embedding + features (+ raw config values on
// configurable nodes, zeros elsewhere), GraphSAGE layers with residuals, mean pool,
// linear; no attention, no instance norm. Tile: config features joined late.
class BaselineNet : public RankingNet {
 public:
  explicit BaselineNet(const ModelSpec& s) : RankingNet(s) {
    const int64_t h = s.hidden;
    opcode_embed_ = register_module("opcode_embed", torch::nn::Embedding(kNumOpcodes, s.opcode_embedding));
    const int64_t width = kNumericFeatDim + kLayoutSlots + s.opcode_embedding +
                          (s.kind == CollectionKind::kLayout ? kConfigFeatDim : 0);
    in_ = register_module("in", torch::nn::Linear(width, h));
    for (int64_t b = 0; b < s.blocks; ++b) {
      f1_.push_back(register_module("f1_" + std::to_string(b), torch::nn::Linear(h, h)));
      f2_.push_back(register_module("f2_" + std::to_string(b), torch::nn::Linear(2 * h, h)));
    }
    if (s.kind == CollectionKind::kTile) tile_fuse_ = register_module("tile_fuse", torch::nn::Linear(h + kTileConfigDim, h));
    out_ = register_module("out", torch::nn::Linear(h, 1));
  }

  StaticEncoding Precompute(const GraphTensors& g) override {
    StaticEncoding enc;
    enc.node_in = NodeInputs(g);  // [N, width - 18]: the config-independent columns
    if (spec_.kind == CollectionKind::kTile) enc.graph_emb = Encode(torch::relu(in_->forward(enc.node_in)).unsqueeze(1), g).mean(0);
    return enc;
  }

  Tensor ScoreCached(const GraphTensors& g, const ConfigBatch& batch, const StaticEncoding& enc) override {
    const StaticEncoding* cached = &enc;
    const int64_t c = batch.size(), n = g.num_nodes;
    if (spec_.kind == CollectionKind::kTile) {
      Tensor emb = cached->graph_emb.expand({c, spec_.hidden});
      return out_->forward(torch::relu(tile_fuse_->forward(torch::cat({emb, TileFeatures(batch.tile)}, -1)))).squeeze(-1);
    }
    // Raw config values (-1..5) on configurable nodes, zeros elsewhere.
    Tensor cfg = torch::zeros({n, c, kConfigFeatDim});
    cfg.index_copy_(0, g.config_nodes, (batch.layout - 1).to(torch::kFloat32).transpose(0, 1));
    Tensor x = torch::cat({cached->node_in.unsqueeze(1).expand({n, c, cached->node_in.size(1)}), cfg}, -1);
    x = Encode(torch::relu(in_->forward(x)), g);
    return out_->forward(x.mean(0)).squeeze(-1);
  }

 private:
  Tensor NodeInputs(const GraphTensors& g) {
    return torch::cat({g.numeric, (g.layout_index - 1).to(torch::kFloat32), opcode_embed_->forward(g.opcode)}, -1);
  }
  Tensor Encode(Tensor x, const GraphTensors& g) {
    for (size_t b = 0; b < f1_.size(); ++b) {
      Tensor agg = spec_.edges ? Aggregate(f1_[b]->forward(x), g) : torch::zeros_like(x);
      x = x + torch::relu(F::normalize(f2_[b]->forward(torch::cat({x, agg}, -1)),
                                       F::NormalizeFuncOptions().dim(-1).eps(1e-12)));
    }
    return x;
  }

  torch::nn::Embedding opcode_embed_{nullptr};
  torch::nn::Linear in_{nullptr}, tile_fuse_{nullptr}, out_{nullptr};
  std::vector<torch::nn::Linear> f1_, f2_;
};

}  // namespace

std::shared_ptr<RankingNet> MakeRankingNet(const ModelSpec& spec) {
  if (spec.architecture == "tpugraphs-baseline") return std::make_shared<BaselineNet>(spec);
  return std::make_shared<TGraphNet>(spec);
}

double ForwardFlops(const ModelSpec& s, int64_t n, int64_t nc, int64_t e, int64_t c, bool folded) {
  // Multiply-adds x 2 of the matmuls; elementwise work is not counted.
  const double h = static_cast<double>(s.hidden), half = h / 2, C = static_cast<double>(c);
  const double N = static_cast<double>(n), NC = static_cast<double>(nc);
  double flops = 0;
  if (s.architecture == "tpugraphs-baseline") {
    const double width = kNumericFeatDim + kLayoutSlots + s.opcode_embedding + kConfigFeatDim;
    flops += 2 * C * N * width * h;
    flops += s.blocks * (2 * C * N * (h * h + 2 * h * h) + C * 2.0 * static_cast<double>(e) * h);
  } else {
    flops += 2 * C * NC * (kConfigFeatDim * s.layout_embedding * h + h * h);  // f_in of configurable nodes
    const double se = half / static_cast<double>(s.se_reduction);
    // f1 (h x h) and f2 (2h -> h/2); folded, f1 and f2's neighbour half are one h x h/2.
    const double sage = folded && s.edges ? h * h : h * h + 2 * h * half;
    flops += s.blocks * (2 * C * N * (sage + 2 * half * se) + C * 2.0 * static_cast<double>(e) * h);
  }
  return flops + 2 * C * h;
}

}  // namespace tgraph
