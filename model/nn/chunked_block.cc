#include "model/nn/chunked_block.h"

#include "model/nn/block_kernels.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace tgraph {
namespace {

using torch::Tensor;

constexpr double kNormEps = 1e-5;  // torch::batch_norm's default, as the training path uses

// Instance-norm statistics accumulated over chunks of nodes: sums of x - shift and of its
// square per (configuration, channel), for a shift near the mean (a node's values, or the
// previous block's mean), which keeps the variance free of cancellation. Rows are summed
// in float in groups of at most kFlushRows, and the groups in float64.
class StatsAccumulator {
 public:
  StatsAccumulator(const float* shift, int64_t width)
      : shift_(shift), width_(width), p1_(Size()), p2_(Size()), s1_(Size()), s2_(Size()) {}

  const float* shift() const { return shift_; }
  int64_t width() const { return width_; }

  // Adds `count` rows of width_ floats.
  void AddRows(const float* x, int64_t count) {
    while (count > 0) {
      const int64_t take = std::min<int64_t>(count, kFlushRows - pending_);
      kernels::AccumulateShifted(x, take, width_, shift_, p1_.data(), p2_.data());
      x += take * width_;
      count -= take;
      if ((pending_ += take) == kFlushRows) Flush();
    }
  }
  void Merge(StatsAccumulator& o) {
    Flush();
    o.Flush();
    for (size_t k = 0; k < s1_.size(); ++k) {
      s1_[k] += o.s1_[k];
      s2_[k] += o.s2_[k];
    }
    n_ += o.n_;
  }
  // Mean and biased variance, [c, h] float64.
  NodeStats Finish(int64_t c, int64_t h) {
    Flush();
    NodeStats s;
    s.mean = torch::empty({c, h}, torch::kFloat64);
    s.var = torch::empty({c, h}, torch::kFloat64);
    double* mean = s.mean.data_ptr<double>();
    double* var = s.var.data_ptr<double>();
    const double n = static_cast<double>(std::max<int64_t>(n_, 1));
    for (size_t k = 0; k < s1_.size(); ++k) {
      const double m = s1_[k] / n;  // mean of x - shift
      mean[k] = shift_[k] + m;
      var[k] = std::max(0.0, s2_[k] / n - m * m);
    }
    return s;
  }

 private:
  static constexpr int64_t kFlushRows = 32;
  size_t Size() const { return static_cast<size_t>(width_); }
  void Flush() {
    for (size_t k = 0; k < s1_.size(); ++k) {
      s1_[k] += p1_[k];
      s2_[k] += p2_[k];
    }
    std::fill(p1_.begin(), p1_.end(), 0.0f);
    std::fill(p2_.begin(), p2_.end(), 0.0f);
    n_ += pending_;
    pending_ = 0;
  }

  const float* shift_;
  int64_t width_;
  std::vector<float> p1_, p2_;
  std::vector<double> s1_, s2_;
  int64_t n_ = 0, pending_ = 0;
};

int64_t NodesPerChunk(int64_t c, int64_t chunk_rows) { return std::max<int64_t>(1, chunk_rows / std::max<int64_t>(c, 1)); }

// Runs fn(first_node, node_count, accumulator) for every chunk of nodes, the chunks spread
// over LibTorch's intra-op threads in contiguous runs. With `stats`, each run has its own
// accumulator, merged into *stats afterwards in chunk order: the same request gives the
// same statistics to the last bit, whichever thread finishes first.
template <typename Fn>
void ForEachChunk(int64_t n, int64_t per_chunk, StatsAccumulator* stats, const Fn& fn) {
  const int64_t chunks = (n + per_chunk - 1) / per_chunk;
  std::vector<std::optional<StatsAccumulator>> runs(static_cast<size_t>(stats ? chunks : 0));  // at each run's start
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    StatsAccumulator* local = nullptr;
    if (stats) local = &runs[static_cast<size_t>(begin)].emplace(stats->shift(), stats->width());
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t * per_chunk;
      fn(first, std::min(per_chunk, n - first), local);
    }
  });
  for (auto& run : runs)
    if (run) stats->Merge(*run);
}

// Sweep 2 of ChunkedBlockForward on nodes [first, first + count): SAGE from P, the
// squeeze-excitation gate, the softmax over configurations, GELU and both residual halves
// into x; then the chunk's statistics into acc (when given) for the next block.
void CombineChunk(Tensor& x, const Tensor& p, const GraphTensors& g, const ChunkedBlockWeights& w,
                  const CrossPass& cross, int64_t first, int64_t count, StatsAccumulator* acc) {
  const int64_t c = x.size(1), h = x.size(2), half = h / 2;
  const bool edges = w.nbr_bias.defined();
  Tensor s = torch::empty({count * c, half}, x.options());
  float* sp = s.data_ptr<float>();
  const int64_t* off = g.csr_offsets.data_ptr<int64_t>();
  const int64_t* src = g.csr_sources.data_ptr<int64_t>();
  const float* self_bias = w.self_bias.data_ptr<float>();
  const float* nbr_bias = edges ? w.nbr_bias.data_ptr<float>() : nullptr;
  if (p.scalar_type() == torch::kBFloat16)
    kernels::SageRowsBf16(sp, reinterpret_cast<const uint16_t*>(p.data_ptr<c10::BFloat16>()), p.size(1), half, edges,
                          self_bias, nbr_bias, off, src, first, first + count, c);
  else
    kernels::SageRows(sp, p.data_ptr<float>(), p.size(1), half, edges, self_bias, nbr_bias, off, src, first,
                      first + count, c);
  Tensor gate_logits;  // squeeze-excitation: sigmoid(se2(relu(se1(s)))), the sigmoid in CombineNodes
  if (w.se1_weight_t.defined()) {
    gate_logits = torch::empty_like(s);
    kernels::SqueezeExcite(sp, count * c, half, w.se1_weight_t.size(1), w.se1_weight_t.data_ptr<float>(),
                           w.se1_bias.data_ptr<float>(), w.se2_weight_t.data_ptr<float>(), w.se2_bias.data_ptr<float>(),
                           gate_logits.data_ptr<float>());
  }
  std::vector<float> scratch(static_cast<size_t>(c * half));
  float* xp = x.data_ptr<float>() + first * c * h;
  // The chunk's rows of the reference's statistics (in use, or to record).
  auto rows_of = [&](const CrossStats& cs) {
    kernels::CrossStatsRows r;
    r.a = cs.a.data_ptr<float>() + first * half;
    r.b = cs.b.data_ptr<float>() + first * half;
    r.lse = cs.lse.data_ptr<float>() + first * half;
    r.group_stride = cs.a.size(1) * half;
    return r;
  };
  kernels::CrossStatsRows use, record;
  kernels::CrossRowsMode mode;
  mode.members = cross.members < 0 ? c : cross.members;
  mode.groups = cross.groups;
  if (cross.use) {
    use = rows_of(*cross.use);
    mode.use = &use;
    mode.use_count = cross.use->count;
    mode.groups = cross.use->groups;
  }
  if (cross.record) {
    record = rows_of(*cross.record);
    mode.record = &record;
  }
  kernels::CombineNodes(xp, sp, gate_logits.defined() ? gate_logits.data_ptr<float>() : nullptr, count, c, half,
                        w.cross_attention, w.standardized_cross, static_cast<float>(StandardizedCrossEps(half)),
                        static_cast<float>(w.inv_temperature), scratch.data(), mode);
  if (acc) acc->AddRows(xp, count);
}

}  // namespace

NodeStats ComputeNodeStats(const Tensor& x, int64_t chunk_rows) {
  RECORD_FUNCTION("tgraph::NodeStats", std::vector<c10::IValue>());
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2);
  const float* data = x.data_ptr<float>();
  StatsAccumulator acc(data, c * h);  // shifted by node 0's values
  ForEachChunk(n, NodesPerChunk(c, chunk_rows), &acc,
              [&](int64_t first, int64_t count, StatsAccumulator* s) { s->AddRows(data + first * c * h, count); });
  return acc.Finish(c, h);
}

Tensor BuildBlockInput(const Tensor& node_in, const Tensor& config_nodes, const ConfigNodeRows& config,
                       NodeStats* stats, int64_t chunk_rows) {
  RECORD_FUNCTION("tgraph::BlockInput", std::vector<c10::IValue>());
  const int64_t n = node_in.size(0), h = node_in.size(1), nc = config_nodes.numel();
  const int64_t c = config.index.size(1);
  TORCH_CHECK(node_in.is_contiguous() && config.rows.is_contiguous() && config.rows.size(1) == h &&
              config.index.is_contiguous() && config.index.size(0) == nc &&
              config.index.scalar_type() == torch::kInt64);
  std::vector<int64_t> row_of(static_cast<size_t>(n), -1);  // node -> its configurable index, or -1
  const int64_t* cn = config_nodes.data_ptr<int64_t>();
  for (int64_t j = 0; j < nc; ++j) row_of[static_cast<size_t>(cn[j])] = j;
  Tensor x = torch::empty({n, c, h}, node_in.options());
  float* xp = x.data_ptr<float>();
  const float* in = node_in.data_ptr<float>();
  const float* cr = config.rows.data_ptr<float>();
  const int64_t* index = config.index.data_ptr<int64_t>();
  // Node i's row for configuration r.
  auto source = [&](int64_t i, int64_t r) { return row_of[i] >= 0 ? cr + index[row_of[i] * c + r] * h : in + i * h; };
  // Shifted by node 0's rows (ComputeNodeStats's shift), known before any chunk is written.
  std::vector<float> shift(static_cast<size_t>(c * h));
  for (int64_t r = 0; r < c; ++r) std::copy_n(source(0, r), h, shift.begin() + r * h);
  StatsAccumulator acc(shift.data(), c * h);
  ForEachChunk(n, NodesPerChunk(c, chunk_rows), stats ? &acc : nullptr,
              [&](int64_t first, int64_t count, StatsAccumulator* s) {
                for (int64_t i = first; i < first + count; ++i)
                  for (int64_t r = 0; r < c; ++r) std::copy_n(source(i, r), h, xp + (i * c + r) * h);
                if (s) s->AddRows(xp + first * c * h, count);
              });
  if (stats) *stats = acc.Finish(c, h);
  return x;
}

namespace {

// The distinct layouts of each configurable node in layout [C, nc, slots]: fills
// local[j * C + r] with the index of configuration r's layout among node j's distinct
// ones (numbered in lexicographic order), first[j * C + k] with the first configuration
// holding the k-th, and count[j] with their number, for nodes [j0, j1).
void DistinctNodeLayouts(const int64_t* layout, int64_t c, int64_t nc, int64_t slots, int64_t j0, int64_t j1,
                         int64_t* local, int64_t* first, int64_t* count) {
  std::vector<int64_t> order(static_cast<size_t>(c));
  for (int64_t j = j0; j < j1; ++j) {
    auto row = [&](int64_t r) { return layout + (r * nc + j) * slots; };
    auto less = [&](int64_t a, int64_t b) { return std::lexicographical_compare(row(a), row(a) + slots, row(b), row(b) + slots); };
    for (int64_t r = 0; r < c; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(), less);
    int64_t k = -1;
    for (int64_t q = 0; q < c; ++q) {
      const int64_t r = order[q];
      if (q == 0 || less(order[q - 1], r)) first[j * c + ++k] = r;
      local[j * c + r] = k;
    }
    count[j] = k + 1;
  }
}

}  // namespace

ConfigNodeRows ConfigNodeInput(const Tensor& base, const Tensor& table, const Tensor& layout, const Tensor& in2_weight,
                               const Tensor& in2_bias) {
  RECORD_FUNCTION("tgraph::ConfigNodeInput", std::vector<c10::IValue>());
  const int64_t c = layout.size(0), nc = layout.size(1), slots = layout.size(2);
  const int64_t values = table.size(1), h = table.size(2);
  TORCH_CHECK(base.is_contiguous() && table.is_contiguous() && layout.is_contiguous() && base.size(0) == nc &&
              base.size(1) == h && table.size(0) == slots && layout.scalar_type() == torch::kInt64);
  const int64_t* lp = layout.data_ptr<int64_t>();
  const int64_t bad = std::count_if(lp, lp + layout.numel(), [&](int64_t v) { return v < 0 || v >= values; });
  TORCH_CHECK(bad == 0, "layout configuration index outside [0, ", values, ")");
  ConfigNodeRows out;
  out.index = torch::empty({nc, c}, torch::kInt64);
  int64_t* index = out.index.data_ptr<int64_t>();
  std::vector<int64_t> first(static_cast<size_t>(nc * c)), count(static_cast<size_t>(nc));
  const int64_t grain = std::max<int64_t>(1, 256 / std::max<int64_t>(c, 1));
  at::parallel_for(0, nc, grain, [&](int64_t j0, int64_t j1) {
    DistinctNodeLayouts(lp, c, nc, slots, j0, j1, index, first.data(), count.data());
  });
  // Node j's distinct rows start at offset[j]; (node, config) of every distinct row.
  std::vector<int64_t> offset(static_cast<size_t>(nc)), node, config;
  for (int64_t j = 0, total = 0; j < nc; ++j) {
    offset[j] = total;
    for (int64_t k = 0; k < count[j]; ++k) {
      node.push_back(j);
      config.push_back(first[j * c + k]);
    }
    total += count[j];
  }
  for (int64_t j = 0; j < nc; ++j)
    for (int64_t r = 0; r < c; ++r) index[j * c + r] += offset[j];
  const int64_t u = static_cast<int64_t>(node.size());
  Tensor g1 = torch::empty({u, h}, base.options());
  at::parallel_for(0, u, 16, [&](int64_t u0, int64_t u1) {
    kernels::ConfigInputGelu(base.data_ptr<float>(), table.data_ptr<float>(), lp, nc, slots, values, h,
                             node.data() + u0, config.data() + u0, u1 - u0, g1.data_ptr<float>() + u0 * h);
  });
  out.rows = torch::addmm(in2_bias, g1, in2_weight.t());
  float* yp = out.rows.data_ptr<float>();
  at::parallel_for(0, out.rows.numel(), 1 << 16, [&](int64_t begin, int64_t end) {  // in place
    kernels::Gelu(yp + begin, yp + begin, end - begin);
  });
  return out;
}

Tensor InferenceGelu(const Tensor& x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32);
  const Tensor in = x.contiguous();
  Tensor out = torch::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, in.numel(), 1 << 16,
                   [&](int64_t begin, int64_t end) { kernels::Gelu(src + begin, dst + begin, end - begin); });
  return out;
}

void ChunkedBlockForward(Tensor& x, const GraphTensors& g, const ChunkedBlockWeights& w, const NodeStats& stats,
                         NodeStats* next_stats, int64_t chunk_rows, const CrossPass& cross) {
  TORCH_CHECK(x.dim() == 3 && x.is_contiguous() && x.scalar_type() == torch::kFloat32);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), half = h / 2;
  if (w.cross_attention) {
    TORCH_CHECK(!(cross.use && cross.record), "a pass either uses a reference or records one");
    TORCH_CHECK(cross.use || cross.members != 0, "a pass without a reference needs members of its own");
    if (cross.use)
      TORCH_CHECK(cross.use->defined() && cross.use->a.dim() == 3 && cross.use->a.size(1) == n &&
                      cross.use->a.size(2) == half && cross.use->count > 0 &&
                      cross.use->a.size(0) == std::max<int64_t>(1, std::min(cross.use->groups, cross.use->count)),
                  "the reference's statistics are for another graph or width");
    if (cross.record) {
      cross.record->count = cross.members < 0 ? c : std::min(cross.members, c);
      cross.record->groups = std::max<int64_t>(1, std::min(cross.groups, cross.record->count));
      for (Tensor* t : {&cross.record->a, &cross.record->b, &cross.record->lse})
        *t = torch::empty({cross.record->groups, n, half}, x.options());
    }
  }
  const bool edges = w.nbr_bias.defined();
  const int64_t per_chunk = NodesPerChunk(c, chunk_rows);

  // Instance norm as one multiply-add per element: y = x * scale + shift, [C, H].
  const Tensor scale = (w.norm_weight.to(torch::kFloat64) / (stats.var + kNormEps).sqrt()).to(torch::kFloat32);
  const Tensor shift = (w.norm_bias.to(torch::kFloat64) - stats.mean * scale.to(torch::kFloat64)).to(torch::kFloat32);

  // Sweep 1: normalise and project, in slabs of nodes: each slab normalised chunk by
  // chunk in parallel, then projected by one matmul over the whole slab, which runs on
  // every thread (per-chunk matmuls inside the parallel loop ran at half the rate: the
  // matmul libraries' per-call costs). P: [N * C, half (+ half with edges)].
  const int64_t p_width = edges ? h : half;
  Tensor p = torch::empty({n * c, p_width}, x.options().dtype(w.w_in.scalar_type()));
  {
    RECORD_FUNCTION("tgraph::BlockProject", std::vector<c10::IValue>());  // (a name per sweep for --trace)
    const Tensor w_in_t = w.w_in.t(), w_nbr_t = w.w_nbr.defined() ? w.w_nbr.t() : Tensor();
    const int64_t per_slab = std::max(per_chunk, kProjectRows / std::max<int64_t>(c, 1));
    Tensor y = torch::empty({std::min(n, per_slab) * c, h}, p.options());
    for (int64_t slab = 0; slab < n; slab += per_slab) {
      const int64_t nodes = std::min(per_slab, n - slab);
      ForEachChunk(nodes, per_chunk, nullptr, [&](int64_t first, int64_t count, StatsAccumulator*) {
        const float* xp = x.data_ptr<float>() + (slab + first) * c * h;
        if (y.scalar_type() == torch::kBFloat16)
          kernels::NormalizeRowsBf16(xp, count, c, h, scale.data_ptr<float>(), shift.data_ptr<float>(),
                                     reinterpret_cast<uint16_t*>(y.data_ptr<c10::BFloat16>()) + first * c * h);
        else
          kernels::NormalizeRows(xp, count, c, h, scale.data_ptr<float>(), shift.data_ptr<float>(),
                                 y.data_ptr<float>() + first * c * h);
      });
      const Tensor yc = y.narrow(0, 0, nodes * c);
      Tensor rows = p.narrow(0, slab * c, nodes * c);
      if (!w_nbr_t.defined()) {
        torch::mm_out(rows, yc, w_in_t);
      } else {  // unfolded: [self half | y W1^T], then W2b on the second part
        const Tensor t = torch::mm(yc, w_in_t);
        rows.narrow(1, 0, half).copy_(t.narrow(1, 0, half));
        rows.narrow(1, half, half).copy_(torch::mm(t.narrow(1, half, h), w_nbr_t));
      }
    }
  }

  // Sweep 2: per chunk, everything after the matmul, into x.
  RECORD_FUNCTION("tgraph::BlockCombine", std::vector<c10::IValue>());
  // The updated x's statistics, shifted by x's mean on entry (the block adds terms of
  // about 1 / sqrt(H) to it).
  const Tensor next_shift = stats.mean.to(torch::kFloat32).contiguous();
  StatsAccumulator next(next_shift.data_ptr<float>(), c * h);
  ForEachChunk(n, per_chunk, next_stats ? &next : nullptr,
              [&](int64_t first, int64_t count, StatsAccumulator* acc) {
                CombineChunk(x, p, g, w, cross, first, count, acc);
              });
  if (next_stats) *next_stats = next.Finish(c, h);
}

}  // namespace tgraph
