#include "model/synth/families.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tgraph::synth {
namespace {

// x + broadcast(param[c]) along `dim`.
int BiasAdd(GraphBuilder& b, int x, int dim) {
  const Shape s = b.node(x).shape;  // a copy: adding nodes moves the builder's nodes
  const int p = b.Parameter({s[dim]}, b.node(x).elem);
  return b.Binary(op::kAdd, x, b.Broadcast(p, s, {dim}));
}

int Relu(GraphBuilder& b, int x) {
  const int zero = b.Constant({}, b.node(x).elem);
  return b.Binary(op::kMaximum, x, b.Broadcast(zero, b.node(x).shape, {}));
}

// x[..., K] . W[K, out] + bias.
int Projection(GraphBuilder& b, int x, int64_t out) {
  const Shape s = b.node(x).shape;
  const int w = b.Parameter({s.back(), out}, b.node(x).elem);
  const int y = b.Dot(x, w);
  return BiasAdd(b, y, b.node(y).rank() - 1);
}

// Layer norm over the last dim of [B, S, H]: reduce, subtract, square, reduce, rsqrt, scale.
int LayerNorm(GraphBuilder& b, int x) {
  const Shape s = b.node(x).shape;
  const int64_t last = static_cast<int64_t>(s.size()) - 1;
  std::vector<int64_t> keep;
  for (int64_t d = 0; d < last; ++d) keep.push_back(d);
  const int mean = b.Reduce(x, {last});
  const int centered = b.Binary(op::kSubtract, x, b.Broadcast(mean, s, keep));
  const int sq = b.Binary(op::kMultiply, centered, centered);
  const int var = b.Reduce(sq, {last});
  const int inv = b.Unary(op::kRsqrt, var);
  const int y = b.Binary(op::kMultiply, centered, b.Broadcast(inv, s, keep));
  const int gamma = b.Parameter({s[last]}, b.node(x).elem);
  return b.Binary(op::kMultiply, y, b.Broadcast(gamma, s, {last}));
}

// One encoder layer on x [B, S, H]. `compact` drops the layer norms (tiny graphs).
int TransformerLayer(GraphBuilder& b, int x, int64_t heads, int64_t ff, bool compact) {
  const Shape s = b.node(x).shape;
  const int64_t B = s[0], S = s[1], H = s[2], d = H / heads;
  auto split = [&](int t, std::vector<int64_t> perm) {
    return b.Transpose(b.Reshape(t, {B, S, heads, d}), perm);
  };
  const int q = split(Projection(b, x, H), {0, 2, 1, 3});  // [B, h, S, d]
  const int k = split(Projection(b, x, H), {0, 2, 3, 1});  // [B, h, d, S]
  const int v = split(Projection(b, x, H), {0, 2, 1, 3});  // [B, h, S, d]
  int scores = b.Dot(q, k);                                 // [B, h, S, S]
  const int scale = b.Constant({}, b.node(x).elem);
  scores = b.Binary(op::kMultiply, scores, b.Broadcast(scale, b.node(scores).shape, {}));
  const int e = b.Unary(op::kExponential, scores);
  const int sum = b.Reduce(e, {3});
  const int probs = b.Binary(op::kDivide, e, b.Broadcast(sum, b.node(e).shape, {0, 1, 2}));
  int ctx = b.Dot(probs, v);                                // [B, h, S, d]
  ctx = b.Reshape(b.Transpose(ctx, {0, 2, 1, 3}), {B, S, H});
  x = b.Binary(op::kAdd, x, Projection(b, ctx, H));
  if (!compact) x = LayerNorm(b, x);
  int f = Projection(b, x, ff);
  // gelu, tanh form: f * (1 + tanh(f)) (the constants of the real formula omitted).
  const int one = b.Constant({}, b.node(f).elem);
  const int t = b.Binary(op::kAdd, b.Unary(op::kTanh, f), b.Broadcast(one, b.node(f).shape, {}));
  f = b.Binary(op::kMultiply, f, t);
  x = b.Binary(op::kAdd, x, Projection(b, f, H));
  if (!compact) x = LayerNorm(b, x);
  return x;
}

// One conv block of the forward pass, as its backward pass needs it.
struct ConvBlock {
  int input = -1, kernel = -1;
  int64_t k = 1;
  int scale = -1;      // batch-norm scale parameter, or -1
  int relu = -1;       // the relu's output
  bool residual = false;
  int pooled = -1;     // the node max-pooled after the block, or -1
};

// The training step's backward pass over the conv stack: the output gradient enters
// as a parameter (the head's backward pass is not generated); per block, from the
// last: pooling's gradient (select-and-scatter), relu's mask (compare, select), the
// batch-norm scale, the bias gradient (reduce), the weight gradient and an SGD update,
// and the input gradient (none for the first block, as XLA prunes it). Activations
// and kernels thus feed two convolutions each, as in real training graphs.
void ConvStackBackward(GraphBuilder& b, const std::vector<ConvBlock>& stack, int out) {
  const ElemType t = b.node(out).elem;
  int g = b.Parameter(b.node(out).shape, t);
  auto zeros = [&](int like) {
    const int zero = b.Constant({}, t);  // before the shape is read: adding a node moves them
    return b.Broadcast(zero, b.node(like).shape, {});
  };
  const int lr = b.Constant({}, t);
  for (int i = static_cast<int>(stack.size()) - 1; i >= 0; --i) {
    const ConvBlock& cb = stack[i];
    if (cb.pooled >= 0) g = b.SelectAndScatter(cb.pooled, g, 3, 2);
    const int mask = b.Compare(cb.relu, zeros(cb.relu));
    int dz = b.Select(mask, g, zeros(g));
    if (cb.scale >= 0) dz = b.Binary(op::kMultiply, dz, b.Broadcast(cb.scale, b.node(dz).shape, {3}));
    b.Reduce(dz, {0, 1, 2});  // the bias gradient
    const int dw = b.ConvWeightGrad(cb.input, dz, cb.k, cb.k);
    b.Binary(op::kSubtract, cb.kernel, b.Binary(op::kMultiply, dw, b.Broadcast(lr, b.node(dw).shape, {})));
    if (i == 0) break;
    int dx = b.ConvInputGrad(dz, cb.kernel);
    if (cb.residual) dx = b.Binary(op::kAdd, dx, g);
    g = dx;
  }
}

// Channel widths: mostly multiples of 8, sometimes an odd count as in real models.
int64_t Width(Rng& rng, int64_t base) {
  if (rng.Bernoulli(0.1)) return std::max<int64_t>(3, base + rng.Int(-5, 5) * 2 + 1);
  return base;
}

ElemType FloatType(Rng& rng) { return rng.Bernoulli(0.7) ? ElemType::kBF16 : ElemType::kF32; }

}  // namespace

BuiltGraph MakeXlaGraph(Rng& rng, int target_nodes) {
  GraphBuilder b;
  const ElemType t = FloatType(rng);
  const int64_t batch = rng.Pick(std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64});
  int64_t hw = rng.Pick(std::vector<int64_t>{28, 32, 56, 64, 112, 224});
  const int64_t c0 = rng.Bernoulli(0.8) ? 3 : 1;
  const bool attention = target_nodes >= 150 && rng.Bernoulli(0.3);
  const bool batch_norm = rng.Bernoulli(0.7);
  // Half the programs are training steps, as most of the real xla collection is
  // (unet_3d.4x4.bf16 has 53 convolutions, most of them gradients): the conv stack's
  // backward pass follows the forward one.
  const bool training = target_nodes >= 40 && rng.Bernoulli(0.5);
  const int per_block = (batch_norm ? 13 : 9) + (training ? (batch_norm ? 17 : 15) : 0);
  const int budget = target_nodes - 12 - (attention ? 60 : 0);
  const int blocks = std::max(1, budget / per_block);
  const int pools = std::min(4, std::max(0, blocks / 3));
  const int pool_every = pools > 0 ? std::max(1, blocks / (pools + 1)) : blocks + 1;
  int64_t width = rng.Pick(std::vector<int64_t>{16, 32, 64});

  int x = b.Parameter({batch, hw, hw, c0}, t);
  std::vector<ConvBlock> stack;
  for (int blk = 0; blk < blocks; ++blk) {
    const int64_t cin = b.node(x).shape[3];
    const int64_t cout = Width(rng, width);
    const int64_t k = blk == 0 ? rng.Pick(std::vector<int64_t>{3, 5, 7}) : rng.Pick(std::vector<int64_t>{1, 3, 3, 3});
    const int kernel = b.Parameter({k, k, cin, cout}, t);
    ConvBlock cb{x, kernel, k};
    int y = b.Conv(x, kernel, 1);
    y = BiasAdd(b, y, 3);
    if (batch_norm) {
      cb.scale = b.Parameter({cout}, t);
      y = b.Binary(op::kMultiply, y, b.Broadcast(cb.scale, b.node(y).shape, {3}));
      y = BiasAdd(b, y, 3);
    }
    y = cb.relu = Relu(b, y);
    if (b.node(y).shape == b.node(x).shape && rng.Bernoulli(0.5)) {
      y = b.Binary(op::kAdd, y, x);
      cb.residual = true;
    }
    if ((blk + 1) % pool_every == 0 && hw > 4) {
      cb.pooled = y;
      y = b.ReduceWindow(y, 3, 2);
      hw = b.node(y).shape[1];
      width = std::min<int64_t>(512, width * 2);
    }
    x = y;
    stack.push_back(cb);
  }
  if (training) ConvStackBackward(b, stack, x);
  const Shape s = b.node(x).shape;
  if (attention && s[1] * s[2] <= 1024) {
    const int64_t c = s[3];
    const int64_t heads = c % 8 == 0 ? 8 : 1;
    int seq = b.Reshape(x, {s[0], s[1] * s[2], c});
    seq = TransformerLayer(b, seq, heads, 2 * c, /*compact=*/true);
    x = b.Reduce(seq, {1});  // mean over positions -> [B, C]
  } else {
    x = b.Reshape(x, {s[0], s[1] * s[2] * s[3]});
  }
  const int dense = static_cast<int>(rng.Int(1, 3));
  for (int i = 0; i < dense; ++i) {
    x = Projection(b, x, i + 1 == dense ? rng.Pick(std::vector<int64_t>{10, 100, 1000}) : Width(rng, 256));
    if (i + 1 < dense) x = Relu(b, x);
  }
  b.MarkRoot(x);
  return {absl::StrCat(attention ? "convattn" : (batch_norm ? "resnet" : "convnet"), training ? "_train" : "", "_b", batch, "_hw",
                       b.node(0).shape[1]),
          b.nodes()};
}

// Deep enough to reach TpuGraphs' largest nlp graphs (21,919 nodes at 81 per layer).
constexpr int kMaxNlpLayers = 272;

BuiltGraph MakeNlpGraph(Rng& rng, int target_nodes) {
  GraphBuilder b;
  const ElemType t = FloatType(rng);
  const bool compact = target_nodes < 100;
  const int per_layer = compact ? 55 : 81;
  const int layers = std::clamp((target_nodes - 1) / per_layer, 1, kMaxNlpLayers);
  const int64_t hidden = rng.Pick(std::vector<int64_t>{128, 256, 512, 768, 1024});
  std::vector<int64_t> head_options;
  for (int64_t h : {2, 4, 8, 12, 16})
    if (hidden % h == 0) head_options.push_back(h);
  const int64_t heads = rng.Pick(head_options);
  const int64_t seq = rng.Pick(std::vector<int64_t>{128, 256, 384, 512});
  const int64_t batch = rng.Pick(std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64});
  int x = b.Parameter({batch, seq, hidden}, t);
  for (int l = 0; l < layers; ++l) x = TransformerLayer(b, x, heads, 4 * hidden, compact);
  b.MarkRoot(x);
  return {absl::StrCat("bert_l", layers, "_h", hidden, "_a", heads, "_s", seq, "_b", batch), b.nodes()};
}

TpuKernel MakeTpuKernel(Rng& rng, int target_nodes) {
  TpuKernel k;
  GraphBuilder b;
  k.elem = FloatType(rng);
  const int kind = static_cast<int>(rng.Int(0, 2));
  int y = -1;
  if (kind == 0) {  // convolution
    const int64_t n = rng.Pick(std::vector<int64_t>{1, 8, 32}), hw = rng.Pick(std::vector<int64_t>{7, 14, 28, 56});
    const int64_t cin = Width(rng, rng.Pick(std::vector<int64_t>{32, 64, 128, 256}));
    const int64_t cout = Width(rng, rng.Pick(std::vector<int64_t>{32, 64, 128, 256}));
    k.kh = k.kw = rng.Pick(std::vector<int64_t>{1, 3});
    int x = b.Parameter({n, hw, hw, cin}, k.elem);
    if (rng.Bernoulli(0.5)) x = Relu(b, x);  // fused prologue
    const int kernel = b.Parameter({k.kh, k.kw, cin, cout}, k.elem);
    y = b.Conv(x, kernel, 1);
    k.contract = cin;
    k.window = k.kh * k.kw;
    k.graph.kind = absl::StrCat("conv", k.kh, "x", k.kw, "_c", cin, "_o", cout);
  } else if (kind == 1) {  // dot
    const int64_t m = rng.Pick(std::vector<int64_t>{64, 256, 1024, 4096});
    const int64_t kk = Width(rng, rng.Pick(std::vector<int64_t>{128, 256, 512, 1024}));
    const int64_t n = Width(rng, rng.Pick(std::vector<int64_t>{128, 256, 512, 1024}));
    int x = b.Parameter({m, kk}, k.elem);
    if (rng.Bernoulli(0.5)) x = b.Unary(op::kConvert, x);
    const int w = b.Parameter({kk, n}, k.elem);
    y = b.Dot(x, w);
    k.contract = kk;
    k.graph.kind = absl::StrCat("dot_m", m, "_k", kk, "_n", n);
  } else {  // reduction over the last dim
    const int64_t a = rng.Pick(std::vector<int64_t>{8, 32, 128}), m = rng.Pick(std::vector<int64_t>{128, 512, 2048});
    const int64_t r = rng.Pick(std::vector<int64_t>{64, 256, 1024, 4096});
    int x = b.Parameter({a, m, r}, k.elem);
    x = b.Unary(op::kExponential, x);
    y = b.Reduce(x, {2});
    k.contract = r;
    k.graph.kind = absl::StrCat("reduce_", a, "x", m, "_r", r);
  }
  k.main = y;
  k.out = b.node(y).shape;
  // Fused elementwise epilogue up to the node budget.
  while (k.tail_ops == 0 || b.size() < 5 || b.size() + 3 <= target_nodes) {
    const int choice = static_cast<int>(rng.Int(0, 3));
    if (choice == 0) y = BiasAdd(b, y, b.node(y).rank() - 1);
    else if (choice == 1) y = Relu(b, y);
    else if (choice == 2) y = b.Unary(op::kTanh, y);
    else y = b.Binary(op::kMultiply, y, y);
    ++k.tail_ops;
  }
  b.MarkRoot(y);
  k.graph.nodes = b.nodes();
  return k;
}

}  // namespace tgraph::synth
