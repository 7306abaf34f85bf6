// XLA's Triton matrix-product fusions as tile problems: the problem one fusion's dot
// computes (batch, M, N, K, the operands' and result's element types, which operands are
// transposed) and a configuration of XLA's Triton GEMM parameters (block_m, block_n,
// block_k, split_k, stages, warps, ctas), with the 24 config_feat values a (problem,
// configuration) pair becomes (docs/format.md "XLA's Triton GEMM fusions"), computed the
// same way wherever a row is made.
//
// Torch-free. Values and pure functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/graph.h"

namespace tgraph {

// C[batch, M, N] = A[batch, M, K] B[batch, K, N] as one fusion's dot computes it (each of
// batch, M, N and K the product of its dimensions). An operand is transposed when its
// minor-most dimension (its layout's first) is not the one the plain product reads rows
// along: A's contracting dimension, B's non-contracting one.
struct XlaGemmProblem {
  std::string lhs_dtype, rhs_dtype, out_dtype;  // "bf16", "f32", "f8e4m3fn", ...
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool lhs_transposed = false, rhs_transposed = false;
  // The wider operand's bytes per element (1 to 16; 2 for a type it does not know).
  int64_t ElementBytes() const;
  // "bf16 x bf16 -> f32 8x128x512x100 (lhs T)": the types, [batch x] M x N x K, and which
  // operands are transposed when any is.
  std::string Name() const;
};

// One configuration of XLA's Triton GEMM emitter (xla/autotuning.proto's TritonGemmKey).
struct XlaGemmConfig {
  int64_t block_m = 0, block_n = 0, block_k = 0, split_k = 1, num_stages = 0, num_warps = 0, num_ctas = 1;
  auto Key() const { return std::tie(block_m, block_n, block_k, split_k, num_stages, num_warps, num_ctas); }
  bool operator<(const XlaGemmConfig& o) const { return Key() < o.Key(); }
  bool operator==(const XlaGemmConfig& o) const { return Key() == o.Key(); }
  // "64x32x64 sk1 s1 w4 c1": the tile (block_m x block_n x block_k), then split_k,
  // stages, warps and CTAs.
  std::string Name() const;
};

// Parses Name()'s form back; errors quote the text.
absl::StatusOr<XlaGemmConfig> ParseXlaGemmConfig(absl::string_view text);

// The 24 config_feat values of `c` on `p` (the three groups of the format's tile values,
// each six values, their sum and their product):
//   0-7   the tile: block_m, block_n, block_k, split_k, 0, 0;
//   8-15  the grid: programs along M (ceil M / block_m), along N, K steps of one split
//         (ceil K / (block_k split_k)), waves (ceil programs / sm_count, programs counting
//         the batch and the splits), the output tiles' fill, the last wave's fill;
//   16-23 the schedule: warps, stages, shared memory per program in KiB (stages x
//         (block_m + block_n) x block_k x element bytes / 1024), CTAs, 0, 0.
std::array<float, kTileConfigDim> XlaGemmFeatures(const XlaGemmProblem& p, const XlaGemmConfig& c, int64_t sm_count);

// The configuration a row of XlaGemmFeatures holds (columns 0-3, 16, 17, 19).
XlaGemmConfig XlaGemmConfigOfRow(const float* row);

// The candidates tgraph ranks for a problem when it hands XLA a shortlist (XLA's own
// exhaustive space is its compiler's to enumerate; this grid spans the same parameters):
// block_m, block_n, block_k in 16..256 (powers of 2), split_k 1..16 (powers of 2),
// stages 1..4, warps 2, 4, 8, one CTA; without tiles larger than the problem needs (a
// block over the next power of 2 of its dimension, at least 16; block_k x split_k over
// that of K). In Key() order.
std::vector<XlaGemmConfig> XlaGemmCandidates(const XlaGemmProblem& p);

}  // namespace tgraph
