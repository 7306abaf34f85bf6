// The elementwise work of TGraph's chunked inference block (model/nn/chunked_block.h) as
// fused loops over raw rows, without LibTorch: one pass per chunk instead of a dozen
// LibTorch ops each with its own pass, with exp, erf and bf16 rounding of our own that
// the compiler vectorises (tgraph-bench-kernels times them against LibTorch's). Each
// function is compiled for AVX-512, AVX2+FMA and baseline x86-64 and picked at load
// time by the CPU (GCC's target_clones).
//
// Layouts: a chunk holds `nodes` nodes with all c configurations of each, as rows of
// node-major [node, config] order. bf16 values are their uint16_t bit patterns.
//
// The TGraph block is written three times; change them together:
//   tgraph_net.cc    the plain LibTorch form, the one training differentiates;
//   chunked_block.cc the inference form, chunk by chunk in bounded memory;
//   block_kernels.cc the fused loops the chunked form calls (no LibTorch).
// tests/net_test.cc binds them: "the fused inference path, folded or not, computes what
// the training path computes" and "a configuration scored against a recorded reference
// is what training computes for it beside that reference" (tests/chunked_block_test.cc
// checks each kernel alone).
#pragma once

#include <cstdint>

namespace tgraph::kernels {

// y[row] = x[row] * scale[row % c] + shift[row % c] for nodes * c rows of h floats;
// scale and shift are [c, h]. The bf16 form rounds to nearest even.
void NormalizeRows(const float* x, int64_t nodes, int64_t c, int64_t h, const float* scale, const float* shift,
                   float* y);
void NormalizeRowsBf16(const float* x, int64_t nodes, int64_t c, int64_t h, const float* scale, const float* shift,
                       uint16_t* y);

// SAGE for nodes [i0, i1) into out [(i1 - i0) * c, half]: for node i and configuration r,
// normalize(self[i, r] + self_bias + sum over in-neighbours j (CSR off/src) of
// (nbr[j, r] + nbr_bias)), where self and nbr are P's columns [0, half) and
// [half, 2 half) (rows of ld values; nbr only with edges), summed in float, and
// normalize divides by max(L2 norm, 1e-12).
void SageRows(float* out, const float* p, int64_t ld, int64_t half, bool edges, const float* self_bias,
              const float* nbr_bias, const int64_t* off, const int64_t* src, int64_t i0, int64_t i1, int64_t c);
void SageRowsBf16(float* out, const uint16_t* p, int64_t ld, int64_t half, bool edges, const float* self_bias,
                  const float* nbr_bias, const int64_t* off, const int64_t* src, int64_t i0, int64_t i1, int64_t c);

// The cross-attention statistics of a reference set of configurations, for the nodes of
// one call, node-major rows of `half` floats each (model/nn/chunked_block.h, CrossStats): the
// softmax input is u = eta * a + b, and lse = log of the sum over the reference of exp(u).
// A reference in groups has one such set per group, group g's `group_stride` floats
// after group g - 1's.
struct CrossStatsRows {
  float* a = nullptr;
  float* b = nullptr;
  float* lse = nullptr;
  int64_t group_stride = 0;
};

// How one call's configurations meet the cross-attention softmax (model/nn/chunked_block.h
// explains the reference): with `use`, every row is scored against those recorded
// statistics of a reference of `use_count` configurations; without, rows [0, members) of
// each node are the reference (members = c: the whole batch, the paper's softmax), and
// their statistics are written to `record` when it is set. The reference is cut into
// `groups` near-equal parts (row g * R / groups onwards), each its own softmax, and a
// row's weight is the mean of its weights in each.
struct CrossRowsMode {
  int64_t members = 0;
  int64_t groups = 1;
  const CrossStatsRows* use = nullptr;
  int64_t use_count = 0;
  const CrossStatsRows* record = nullptr;
};

// The end of the block for `nodes` nodes: eta = s * sigmoid(gate_logits) (the
// squeeze-excitation gate; gate_logits may be null: eta = s);
// with cross attention, x[:, half:] += GELU(eta * w) and x[:, :half] += GELU(eta);
// without, both halves += GELU(eta). The weights w, per node and channel, are the mean
// over the reference's groups of: from the softmax input u = eta * inv_temperature, or
// with `standardized` (eta - mean) / sqrt(var + eps) * inv_temperature with the group's
// mean and variance, for a member of an R-configuration group its softmax weight over
// the group, times R when standardized; for any other row, its softmax weight over the
// group plus itself, times R + 1 when standardized. x rows have 2 * half floats,
// s and gate rows half. s is overwritten. scratch: c * half floats.
void CombineNodes(float* x, float* s, const float* gate_logits, int64_t nodes, int64_t c, int64_t half, bool cross,
                  bool standardized, float eps, float inv_temperature, float* scratch, const CrossRowsMode& mode);

// The configurable nodes' first f_in layer and GELU, as table lookups: output row u in
// [0, count) is GELU(base[j] + sum over slots s of table[s * values + layout[(r * nc + j) * slots + s]])
// (rows of h) for node j = node[u] and configuration r = config[u]. Every layout index
// must lie in [0, values) (the caller checks).
void ConfigInputGelu(const float* base, const float* table, const int64_t* layout, int64_t nc, int64_t slots,
                     int64_t values, int64_t h, const int64_t* node, const int64_t* config, int64_t count, float* out);
// y = GELU(x) for n floats (x == y allowed).
void Gelu(const float* x, float* y, int64_t n);

// The squeeze-excitation's logits: logits[row] = b2 + W2 relu(W1 s[row] + b1), for rows of
// s [rows, half]; w1t is W1 transposed, [half, q]; w2t is W2 transposed, [q, half].
void SqueezeExcite(const float* s, int64_t rows, int64_t half, int64_t q, const float* w1t, const float* b1,
                   const float* w2t, const float* b2, float* logits);

// p1 += x - shift and p2 += (x - shift)^2 elementwise, for `rows` rows of `width`.
void AccumulateShifted(const float* x, int64_t rows, int64_t width, const float* shift, float* p1, float* p2);

// The approximations, exposed for their tests: exp (relative error < 2e-7 on
// [-87, 88], clamped outside), GELU with erf by Abramowitz and Stegun 7.1.26 (absolute
// error of erf < 1.5e-7; of GELU < 3e-7 x max(1, |GELU|)), and bf16 rounding (to nearest
// even, NaN kept a NaN).
float Exp(float x);
float Gelu(float x);
uint16_t ToBf16(float x);

}  // namespace tgraph::kernels
