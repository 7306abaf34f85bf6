// TGraph's graph block for inference, run in cache-sized chunks of nodes.
//
// The block (TGraph paper 2.3) is B(x) = x + GELU(concat(eta, A_cross(eta))) with
// eta = A_self(SAGE(IN(x))). At the paper's widths its activations are 100+ MB per
// batch, and run pass by pass (one LibTorch op over the whole tensor at a time) every
// elementwise pass streams them through memory: measured, those passes took 5x the
// time of the matmuls in bf16. Here the block makes two sweeps over node chunks
// (a few nodes with all their configurations, about a megabyte):
//
//   1. instance norm with statistics of the whole x (computed by the block before),
//      chunk by chunk, then the matmul of f2's self half and the (folded) neighbour half
//      over groups of chunks, into a buffer P of every node's projections;
//   2. per chunk, once P is complete: neighbour sum from P, biases, SAGE residual and
//      L2 norm, squeeze-excitation, softmax over the reference (CrossPass), GELU and both residual
//      halves into x, and the instance-norm statistics of the updated x for the next
//      block, all while the chunk is in cache.
//
// The neighbour sum needs every node's projection, so P is the one full-size
// intermediate (bf16 when the matmuls are). Same arithmetic as the training path
// (tested to 1e-4 in fp32 for every ablation); only summation order and rounding differ.
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

#include <torch/types.h>

#include "model/nn/features.h"

namespace tgraph {

// Instance-norm statistics of x [N, C, H] over the node axis, per (configuration,
// channel): mean and biased variance, [C, H] float64.
struct NodeStats {
  torch::Tensor mean, var;
  bool defined() const { return mean.defined(); }
};
NodeStats ComputeNodeStats(const torch::Tensor& x, int64_t chunk_rows);

// The configurable nodes' f_in for inference, one row per distinct (node, layout of that
// node) pair of a batch: configurations of one graph mostly share a node's layout (a
// real nlp:default batch of 128 has 4.5% distinct pairs, a search's mutants fewer), and
// each row is the same function of its node's 18 values whichever configuration holds
// them, so the duplicates are computed once.
struct ConfigNodeRows {
  torch::Tensor rows;   // [U, H] float: GELU(in2(GELU(...))) of each distinct pair
  torch::Tensor index;  // [nc, C] int64: node j's row for configuration r
};

// The first block's input x [N, C, H] for layout graphs: node_in [N, H] (every node with
// the default configuration) repeated over the C configurations, except the configurable
// nodes config_nodes [nc], whose rows come from config (node j, configuration r:
// config.rows[config.index[j, r]]); with its statistics (ComputeNodeStats's), accumulated
// as the rows are written.
torch::Tensor BuildBlockInput(const torch::Tensor& node_in, const torch::Tensor& config_nodes,
                              const ConfigNodeRows& config, NodeStats* stats, int64_t chunk_rows);

// The configurable nodes' f_in for inference: for node j and configuration r,
// GELU(in2(GELU(base[j] + sum over slots s of table[s, layout[r, j, s]]))), one row per
// distinct (j, layout[r, j]) (the first r holding it computes it). base [nc, H]; table
// [slots, values, H]; layout [C, nc, slots] int64 indices (an index outside [0, values)
// is an error); in2_weight [H, H] and in2_bias [H].
ConfigNodeRows ConfigNodeInput(const torch::Tensor& base, const torch::Tensor& table, const torch::Tensor& layout,
                               const torch::Tensor& in2_weight, const torch::Tensor& in2_bias);

// GELU of a float tensor, in parallel, with our vectorised GELU (for inference).
torch::Tensor InferenceGelu(const torch::Tensor& x);

// What one block needs, prepared for inference (matmul weights already in the matmul
// precision). half = H / 2.
struct ChunkedBlockWeights {
  torch::Tensor norm_weight, norm_bias;  // [H] float
  // First matmul, [F, H]: f2's self half [half, H] then, with edges, the neighbour half:
  // folded, W2b W1 [half, H] (F = H); unfolded, W1 [H, H] (F = half + H).
  torch::Tensor w_in;
  torch::Tensor w_nbr;      // unfolded with edges: W2b [half, H], applied after W1; else undefined
  torch::Tensor self_bias;  // [half] float: f2's bias
  torch::Tensor nbr_bias;   // [half] float: W2b b1, added once per incoming message; undefined = no edges
  // Squeeze-excitation, float, undefined = no self-attention: se1's weight transposed
  // [half, half / r] and bias, se2's weight transposed [half / r, half] and bias.
  torch::Tensor se1_weight_t, se1_bias, se2_weight_t, se2_bias;
  bool cross_attention = true;
  // ModelSpec::cross_attention_form kStandardized (else kPaper).
  bool standardized_cross = true;
  double inv_temperature = 1.0;  // 1 / exp(log_temperature)
};

// The variance floor of the standardised cross-attention input (ModelSpec), for eta of
// width `half`: eta's rows have unit L2 norm, so its elements' mean square is 1 / half,
// and the floor is (1/8)^2 of that. Differences between configurations below about an
// eighth of eta's typical element stay near-uniform in the softmax: that keeps bf16
// rounding of eta (2^-8 relative) from being amplified into the weights (bf16 against
// fp32 tau 0.990 with a floor of 1e-4 at half 16, 0.995 with this one).
inline double StandardizedCrossEps(int64_t half) { return 1.0 / (64.0 * static_cast<double>(half)); }

// Rows (nodes x configurations) per chunk: large enough for the matmul to run near its
// rate, small enough for a chunk's activations to stay in a core's L2.
constexpr int64_t kDefaultChunkRows = 512;
// Rows per matmul of the projection sweep (a bf16 slab of y: 8 MiB at H = 256).
constexpr int64_t kProjectRows = 16384;

// The reference (model/nn/scoring.h): the cross-attention's softmax runs over a fixed set
// of configurations, so that a configuration's score does not depend on what shares its
// batch. A block records, per node and channel, the statistics of the reference's
// softmax input here, [N, half] float each: u = eta * a + b (a = rstd / T and
// b = -mean * a, standardised; a = 1 / T and b = 0 for the paper's form) and lse, the
// log of the sum over the reference of exp(u). `count` is the reference's size. A
// reference in `groups` (CrossPass) has a set per group: [groups, N, half].
struct CrossStats {
  torch::Tensor a, b, lse;
  int64_t count = 0;
  int64_t groups = 1;
  bool defined() const { return a.defined(); }
};

// How one forward pass's configurations meet the cross-attention: with `use`, each is
// scored against that reference (it joins the reference's softmax alone); without, the
// batch's first `members` configurations are the reference (-1: all of them, the
// paper's softmax over the batch) and the others join it one at a time; `record`, when
// set, receives the statistics of that reference. `groups`: the reference is cut into
// that many near-equal groups, each its own softmax, and the weights averaged over them
// (model/nn/block_kernels.h, CombineNodes); a recorded reference keeps its own.
struct CrossPass {
  int64_t members = -1;
  int64_t groups = 1;
  const CrossStats* use = nullptr;
  CrossStats* record = nullptr;
};

// Runs one block on x [N, C, H] float (contiguous) in place. `stats` are x's statistics
// (ComputeNodeStats, or the previous block's `next_stats`); with `next_stats` the
// statistics of the updated x are returned there, computed chunk by chunk.
void ChunkedBlockForward(torch::Tensor& x, const GraphTensors& g, const ChunkedBlockWeights& w,
                         const NodeStats& stats, NodeStats* next_stats, int64_t chunk_rows = kDefaultChunkRows,
                         const CrossPass& cross = {});

}  // namespace tgraph
