#include "model/nn/tgraph_net.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>

#include "model/core/config_rows.h"
#include "model/nn/chunked_block.h"

namespace tgraph {
namespace {

namespace F = torch::nn::functional;
using torch::Tensor;



// Exact GELU; for inference our vectorised one (model/nn/block_kernels.h, error < 3e-7).
Tensor Gelu(const Tensor& x) {
  if (torch::GradMode::is_enabled() || x.scalar_type() != torch::kFloat32) return torch::gelu(x);
  return InferenceGelu(x);
}

// Activations are node-major, [N, C, F]: linear layers act on the last dim, and the sum
// over neighbours works on [N, C*F] rows: a sparse matmul of the adjacency when autograd
// is on, a gather-sum of contiguous rows by destination (CSR) for inference, which
// avoids the sparse kernel's zero-fill and scatter (profiled: 4x faster at N=1000).
// TGraph's inference blocks sum neighbours in model/nn/chunked_block.cc.
// The gather-sum: adds to the f floats at dst the same row of every in-neighbour of i.
inline void AddNeighbourRows(float* dst, const float* src, int64_t f, int64_t i, const int64_t* off,
                             const int64_t* nbr) {
  for (int64_t e = off[i]; e < off[i + 1]; ++e) {
    const float* from = src + nbr[e] * f;
    for (int64_t k = 0; k < f; ++k) dst[k] += from[k];
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
      AddNeighbourRows(o, src, row, i, off, nbr);
    }
  });
  return out;
}

// Tile config features span 1..1e9 (products): log-scale them.
Tensor TileFeatures(const Tensor& tile) { return torch::log1p(torch::clamp_min(tile, 0)); }

// The tile head's layers past the fusion (ModelSpec::tile_head_layers - 1), registered
// as "tile_hidden" only when there are any, so that one-layer weights load as before.
torch::nn::ModuleList TileHidden(torch::nn::Module& net, const ModelSpec& s) {
  torch::nn::ModuleList list;
  if (s.kind != CollectionKind::kTile || s.tile_head_layers <= 1) return list;
  for (int64_t i = 1; i < s.tile_head_layers; ++i) list->push_back(torch::nn::Linear(s.hidden, s.hidden));
  return net.register_module("tile_hidden", list);
}

// Residual hidden layers over the fused tile representation, in the net's activation.
template <typename Activation>
Tensor TileHiddenForward(const torch::nn::ModuleList& hidden, Tensor x, Activation act) {
  if (!hidden) return x;
  for (const auto& layer : *hidden) x = x + act(layer->as<torch::nn::Linear>()->forward(x));
  return x;
}

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

  // x: [N, C, H]. The training path; inference runs InferenceForward. `members`: the
  // cross-attention's reference is the first `members` configurations (-1: all).
  Tensor forward(const Tensor& x, const GraphTensors& g, int64_t members = -1, int64_t groups = 1) {
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
    Tensor cross = spec_.cross_attention ? CrossAttention(eta, members, groups) : eta;
    return x + Gelu(torch::cat({eta, cross}, -1));
  }

  // Cross-configuration attention: eta weighted by a softmax over the configuration axis
  // (dim 1). The paper's form feeds eta / T to the softmax; but eta is an L2-normalised
  // row (elements about 1 / sqrt(H / 2)) and T stays near 1 in training, so its weights
  // are nearly uniform and the cross half is about eta / C, C the batch's configurations
  // (64 in training, 128 at inference). The standardised form feeds the softmax eta's
  // deviations from its mean over the configurations in units of their std (per node and
  // channel; StandardizedCrossEps keeps differences far below eta's own scale from being
  // amplified)
  // and scales the weights by C: uniform weights give eta back, at any batch size.
  //
  // The softmax runs over the reference, the first `members` configurations (-1: all;
  // model/nn/scoring.h says why): their statistics standardise every row, and each other
  // configuration joins the reference's softmax alone, its weight
  // exp(u) / (exp(lse) + exp(u)) = sigmoid(u - lse), times R + 1 when standardised.
  // With `groups`, the reference is cut into near-equal groups (members g R / G onwards),
  // each its own softmax, and the weights are averaged over the groups.
  Tensor CrossAttention(const Tensor& eta, int64_t members, int64_t groups) {
    const Tensor inv_t = log_temperature_.neg().exp();
    const int64_t c = eta.size(1);
    if (members < 0 || members > c) members = c;
    groups = std::max<int64_t>(1, std::min(groups, members));
    if (members == c && groups == 1) {
      if (spec_.cross_attention_form == CrossAttentionForm::kPaper) return eta * torch::softmax(eta * inv_t, 1);
      auto [var, mean] = torch::var_mean(eta, {1}, /*unbiased=*/false, /*keepdim=*/true);
      const Tensor z = (eta - mean) * torch::rsqrt(var + StandardizedCrossEps(eta.size(2)));
      return eta * torch::softmax(z * inv_t, 1) * static_cast<double>(c);
    }
    TORCH_CHECK(members > 0, "the cross-attention's reference needs at least one configuration");
    const bool standardized = spec_.cross_attention_form != CrossAttentionForm::kPaper;
    Tensor w;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t lo = g * members / groups, n = (g + 1) * members / groups - lo;
      Tensor u = eta * inv_t;
      if (standardized) {
        auto [var, mean] = torch::var_mean(eta.narrow(1, lo, n), {1}, /*unbiased=*/false, /*keepdim=*/true);
        u = (eta - mean) * torch::rsqrt(var + StandardizedCrossEps(eta.size(2))) * inv_t;
      }
      const Tensor lse = torch::logsumexp(u.narrow(1, lo, n), {1}, /*keepdim=*/true);
      const double r = static_cast<double>(n);
      std::vector<Tensor> parts;
      if (lo > 0) parts.push_back(torch::sigmoid(u.narrow(1, 0, lo) - lse) * (standardized ? r + 1 : 1.0));
      parts.push_back(torch::exp(u.narrow(1, lo, n) - lse) * (standardized ? r : 1.0));
      if (lo + n < c)
        parts.push_back(torch::sigmoid(u.narrow(1, lo + n, c - lo - n) - lse) * (standardized ? r + 1 : 1.0));
      const Tensor wg = torch::cat(parts, 1);
      w = w.defined() ? w + wg : wg;
    }
    return eta * w / static_cast<double>(groups);
  }

  // The same arithmetic as forward(), for inference: model/nn/chunked_block.h runs it in
  // cache-sized tiles of nodes. f1 is folded into f2 unless SetInferenceFolding(false).
  // x is updated in place (the caller passes a fresh activation it does not reuse);
  // `stats` are x's instance-norm statistics on entry and the updated x's on return.
  void InferenceForward(Tensor& x, const GraphTensors& g, NodeStats& stats, const CrossPass& cross) {
    ChunkedBlockForward(x, g, InferenceWeights(), stats, &stats, chunk_rows_, cross);
  }

  ChunkedBlockWeights InferenceWeights() const {
    const int64_t h = spec_.hidden;
    ChunkedBlockWeights tw;
    tw.norm_weight = norm_weight_;
    tw.norm_bias = norm_bias_;
    // bf16: the matmuls' inputs and weights in bf16; their outputs are read as bf16 by
    // the SAGE pass, which sums and normalises in float.
    const bool bf16 = precision_ == Precision::kBFloat16;
    auto mm_weight = [bf16](const Tensor& t) { return (bf16 ? t.to(torch::kBFloat16) : t).contiguous(); };
    const Tensor& w = f2_->weight;
    const Tensor self_half = w.narrow(1, 0, h), nbr_half = w.narrow(1, h, h);
    if (!spec_.edges) {
      tw.w_in = mm_weight(self_half);
    } else if (fold_) {
      // f1 and the neighbour half of f2 have nothing between them:
      // (y W1^T + b1) W2b^T = y (W2b W1)^T + W2b b1. One [H x H] matmul then yields the
      // self half and the folded neighbour half together: 17 instead of 34 GFLOP per
      // block at N=1000, C=128, H=256. The fold itself is an [H/2 x H x H] matmul.
      tw.w_in = mm_weight(torch::cat({self_half, torch::mm(nbr_half, f1_->weight)}, 0));
    } else {
      tw.w_in = mm_weight(torch::cat({self_half, f1_->weight}, 0));
      tw.w_nbr = mm_weight(nbr_half);
    }
    tw.self_bias = f2_->bias;
    if (spec_.edges) tw.nbr_bias = torch::mm(f1_->bias.unsqueeze(0), nbr_half.t()).squeeze(0);  // W2b b1
    if (spec_.self_attention) {
      tw.se1_weight_t = se1_->weight.t().contiguous();
      tw.se1_bias = se1_->bias;
      tw.se2_weight_t = se2_->weight.t().contiguous();
      tw.se2_bias = se2_->bias;
    }
    tw.cross_attention = spec_.cross_attention;
    tw.standardized_cross = spec_.cross_attention_form == CrossAttentionForm::kStandardized;
    tw.inv_temperature = std::exp(-log_temperature_.item<double>());
    return tw;
  }

  void set_fold(bool fold) { fold_ = fold; }
  bool fold() const { return fold_; }
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }
  void set_chunk_rows(int64_t rows) { chunk_rows_ = rows; }

 private:
  ModelSpec spec_;
  bool fold_ = true;
  Precision precision_ = Precision::kFloat32;
  int64_t chunk_rows_ = kDefaultChunkRows;
  Tensor norm_weight_, norm_bias_, log_temperature_;
  torch::nn::Linear f1_{nullptr}, f2_{nullptr}, se1_{nullptr}, se2_{nullptr};
};
TORCH_MODULE(Block);

class TGraphNet : public RankingNet {
 public:
  explicit TGraphNet(const ModelSpec& s) : RankingNet(s) {
    const int64_t h = s.hidden;
    layout_embed_ = register_module("layout_embed", torch::nn::Embedding(kLayoutValueIndices, s.layout_embedding));
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
      tile_hidden_ = TileHidden(*this, s);
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
  void SetInferenceChunkRows(int64_t rows) override {
    chunk_rows_ = std::max<int64_t>(1, rows);
    for (const auto& block : *blocks_) block->as<Block>()->set_chunk_rows(chunk_rows_);
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
      Tensor x = enc.node_in.unsqueeze(1).clone();  // [N, 1, H]
      NodeStats stats;
      if (!torch::GradMode::is_enabled()) stats = ComputeNodeStats(x, chunk_rows_);
      enc.graph_emb = PoolBlocks(std::move(x), g, std::move(stats), {});
    }
    return enc;
  }

  bool UsesReference() const override { return spec_.cross_attention && spec_.kind == CollectionKind::kLayout; }

  Tensor ScoreCached(const GraphTensors& g, const ConfigBatch& batch, const StaticEncoding& enc,
                     const ScoreMode& mode) override {
    const StaticEncoding* cached = &enc;
    const int64_t c = batch.size();
    if (spec_.kind == CollectionKind::kTile) {
      Tensor emb = cached->graph_emb.expand({c, spec_.hidden});
      Tensor fused = Gelu(tile_fuse_->forward(torch::cat({emb, TileFeatures(batch.tile)}, -1)));
      return out_->forward(TileHiddenForward(tile_hidden_, fused, Gelu)).squeeze(-1);
    }
    const int64_t nc = g.config_nodes.numel();
    if (!torch::GradMode::is_enabled()) {
      NodeStats stats;
      Tensor x = BuildBlockInput(cached->node_in.contiguous(), g.config_nodes,
                                 InferenceConfigInput(batch.layout, cached->config_h0), &stats, chunk_rows_);
      return out_->forward(PoolBlocks(std::move(x), g, std::move(stats), mode)).squeeze(-1);
    }
    TORCH_CHECK(!mode.use && !mode.record, "a recorded reference is for inference only (no autograd)");
    Tensor cfg = layout_embed_->forward(batch.layout).reshape({c, nc, kConfigFeatDim * spec_.layout_embedding});
    // [nc, C, H]: the configurable nodes' f_in, per config.
    Tensor hc = cached->config_h0.unsqueeze(1) + in_config_->forward(cfg.transpose(0, 1)) - DefaultConfigTerm();
    Tensor fc = Gelu(in2_->forward(Gelu(hc)));
    Tensor x = cached->node_in.unsqueeze(1).expand({g.num_nodes, c, spec_.hidden}).index_copy(0, g.config_nodes, fc);
    return out_->forward(PoolBlocks(std::move(x), g, {}, mode)).squeeze(-1);
  }

 private:
  // The graph blocks on a fresh activation x [N, C, H], then the mean over the nodes,
  // [C, H]. Under autograd the training path. Else the chunked inference path (`stats`:
  // x's, ComputeNodeStats), which updates x in place and has each block compute the
  // statistics of its output: the next block's instance norm, and after the last block
  // the pooled mean.
  Tensor PoolBlocks(Tensor x, const GraphTensors& g, NodeStats stats, const ScoreMode& mode) {
    if (torch::GradMode::is_enabled()) {
      for (const auto& block : *blocks_) x = block->as<Block>()->forward(x, g, mode.members, mode.groups);
      return x.mean(0);
    }
    if (blocks_->begin() == blocks_->end()) return x.mean(0);
    const bool cross = UsesReference();
    if (cross && mode.use) TORCH_CHECK(mode.use->blocks.size() == blocks_->size(), "the reference is for another network");
    if (cross && mode.record) {
      mode.record->blocks.assign(blocks_->size(), CrossStats());
      mode.record->count = mode.members < 0 ? x.size(1) : std::min(mode.members, x.size(1));
    }
    size_t b = 0;
    for (const auto& block : *blocks_) {
      CrossPass pass;
      pass.members = mode.members;
      pass.groups = mode.groups;
      if (cross && mode.use) pass.use = &mode.use->blocks[b];
      if (cross && mode.record) pass.record = &mode.record->blocks[b];
      block->as<Block>()->InferenceForward(x, g, stats, pass);
      ++b;
    }
    return stats.mean.to(torch::kFloat32);
  }

  // The configurable nodes' f_in for inference (ConfigNodeRows), from layout [C, nc, 18]
  // indices and config_h0 [nc, H]. in_config is linear in the 18 slots' embeddings, so
  // in_config(embed(v)) - k = sum over slots s of W_s (E[v_s] - E[0]), W_s the slot's
  // columns of in_config and E the layout embedding: a sum of 18 rows of a [18, 7, H]
  // table instead of a [18 x emb] x [H] matmul per row. in2 stays fp32 in every
  // precision: in bf16 it saved a few percent of a request and lowered agreement with
  // fp32 on the trained test model.
  ConfigNodeRows InferenceConfigInput(const Tensor& layout, const Tensor& config_h0) {
    const int64_t h = spec_.hidden, e = spec_.layout_embedding;
    const Tensor& emb = layout_embed_->weight;  // [7, e]
    const Tensor table = torch::einsum("ve,hse->svh", {emb - emb.narrow(0, 0, 1),
                                                        in_config_->weight.view({h, kConfigFeatDim, e})})
                             .contiguous();
    return ConfigNodeInput(config_h0.contiguous(), table, layout.contiguous(), in2_->weight, in2_->bias);
  }

  // in_config applied to the embedding of an all -1 configuration.
  Tensor DefaultConfigTerm() {
    Tensor idx = torch::zeros({kConfigFeatDim}, torch::kInt64);
    return in_config_->forward(layout_embed_->forward(idx).reshape({-1}));
  }

  torch::nn::Embedding layout_embed_{nullptr}, opcode_embed_{nullptr};
  torch::nn::Linear in_static_{nullptr}, in_config_{nullptr}, in2_{nullptr}, tile_fuse_{nullptr}, out_{nullptr};
  torch::nn::ModuleList tile_hidden_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  int64_t chunk_rows_ = kDefaultChunkRows;
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
    if (s.kind == CollectionKind::kTile) {
      tile_fuse_ = register_module("tile_fuse", torch::nn::Linear(h + kTileConfigDim, h));
      tile_hidden_ = TileHidden(*this, s);
    }
    out_ = register_module("out", torch::nn::Linear(h, 1));
  }

  StaticEncoding Precompute(const GraphTensors& g) override {
    StaticEncoding enc;
    enc.node_in = NodeInputs(g);  // [N, width - 18]: the config-independent columns
    if (spec_.kind == CollectionKind::kTile) enc.graph_emb = Encode(torch::relu(in_->forward(enc.node_in)).unsqueeze(1), g).mean(0);
    return enc;
  }

  Tensor ScoreCached(const GraphTensors& g, const ConfigBatch& batch, const StaticEncoding& enc,
                     const ScoreMode&) override {
    const StaticEncoding* cached = &enc;
    const int64_t c = batch.size(), n = g.num_nodes;
    if (spec_.kind == CollectionKind::kTile) {
      Tensor emb = cached->graph_emb.expand({c, spec_.hidden});
      Tensor fused = torch::relu(tile_fuse_->forward(torch::cat({emb, TileFeatures(batch.tile)}, -1)));
      return out_->forward(TileHiddenForward(tile_hidden_, fused, [](const Tensor& t) { return torch::relu(t); }))
          .squeeze(-1);
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
  torch::nn::ModuleList tile_hidden_{nullptr};
  std::vector<torch::nn::Linear> f1_, f2_;
};

}  // namespace

std::shared_ptr<RankingNet> MakeRankingNet(const ModelSpec& spec) {
  if (spec.architecture == Architecture::kTpuGraphsBaseline) return std::make_shared<BaselineNet>(spec);
  return std::make_shared<TGraphNet>(spec);
}

double ForwardFlops(const ModelSpec& s, int64_t n, int64_t nc, int64_t e, int64_t c, bool folded) {
  // Multiply-adds x 2 of the matmuls; elementwise work is not counted.
  const double h = static_cast<double>(s.hidden), half = h / 2, C = static_cast<double>(c);
  const double N = static_cast<double>(n), NC = static_cast<double>(nc);
  double flops = 0;
  if (s.architecture == Architecture::kTpuGraphsBaseline) {
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
