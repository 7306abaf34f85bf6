// A tile kernel's configuration space as measured on real hardware: the Triton matrix
// product of tile@h100-triton (docs/format.md "Triton tile values"). It says what one
// configuration sets (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), which candidates the
// GPU's compiler refused, and the 24 config_feat values a (problem, configuration) pair
// becomes, so that the ingest, the trainer, the evaluator, the server's checks and its
// search all compute one row the same way.
//
// Torch-free. Values only: a TileSpace is built once (ingest, or read from a collection's
// tile_space.json or a manifest) and then only read, from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/graph.h"
#include "model/tile/gpu_table.h"

namespace tgraph {

// The file of a collection that has a tile space: <split dir's parent>/tile_space.json.
inline constexpr char kTileSpaceFile[] = "tile_space.json";

// One matrix product C[M, N] = A[M, K] B[K, N]; dtype is the inputs' element type
// ("bf16", "f16" or "f32").
struct GemmProblem {
  std::string dtype;
  int64_t m = 0, n = 0, k = 0;
  int64_t ElementBytes() const { return dtype == "f32" ? 4 : 2; }
  std::string Name() const;  // "bf16 128x256x1024" (M x N x K)
  // The kernel the compiler builds for it. Triton specialises a kernel on whether each
  // integer argument is a multiple of 16, and for N and K (the strides of A, B and C,
  // whose rows its loads read as vectors) the variants differ in what compiles and what
  // is fast: measured on an H200, N and K not multiples of 16 compile every bf16
  // candidate (28 refused otherwise) and refuse two more f32 ones, and ranked from
  // problems whose N and K are, their first pick was 2.5x the fastest. M (no stride, only
  // the grid) compiled the same candidates and ranked alike, so it does not count. The
  // dtype alone when N and K are multiples of 16; else the dtype, '/' and those that are
  // not: "bf16/K", "f32/NK".
  std::string Variant() const;
};

// The dtype of a Variant() ("bf16" of "bf16/NK").
std::string VariantDtype(absl::string_view variant);
// "N and K multiples of 16" for a dtype alone, "K not a multiple of 16" for "bf16/K".
std::string DescribeVariant(absl::string_view variant);

// One configuration of the kernel.
struct TritonTile {
  int64_t block_m = 0, block_n = 0, block_k = 0, num_warps = 0, num_stages = 0;
  auto Key() const { return std::tie(block_m, block_n, block_k, num_warps, num_stages); }
  bool operator<(const TritonTile& o) const { return Key() < o.Key(); }
  bool operator==(const TritonTile& o) const { return Key() == o.Key(); }
  std::string Name() const;  // "128x128x64 w4 s3"
};

// Parses Name()'s form back; errors quote the text.
absl::StatusOr<TritonTile> ParseTritonTile(absl::string_view text);

// One of the format's groups of tile values at out[0..8): six values, their sum and the
// product of the non-zero ones.
void TileValueGroup(const std::array<double, 6>& v, float* out);

// The 24 config_feat values of the first feature set (docs/format.md "Triton tile values"):
//   0-7   the tile: BLOCK_M, BLOCK_N, BLOCK_K, 0, 0, 0, their sum, their product;
//   8-15  the grid over the problem: programs along M (ceil M/BLOCK_M), along N, K steps
//         (ceil K/BLOCK_K), waves (ceil programs/sm_count), the output tiles' fill
//         (M N over the tiles' area), the last wave's fill (programs over waves x
//         sm_count), sum, product;
//   16-23 the schedule: warps, stages, shared memory per program in KiB (stages x
//         (BLOCK_M + BLOCK_N) x BLOCK_K x element bytes / 1024), 0, 0, 0, sum, product.
std::array<float, kTileConfigDim> TritonTileFeatures(const GemmProblem& p, const TritonTile& t, int64_t sm_count);

// The second feature set: the first's, with the GPU's occupancy and waves in the slots it
// leaves at 0 (docs/format.md "Triton tile values"), so that the network sees how the
// configuration's CTAs fill this GPU, not only the block sizes:
//   3  CTAs (programs along M x along N), 4 the padded share of the work in percent
//      (100 (1 - M N K over the blocks' cover of M, N and K)), 5 bytes a CTA loads per
//      1000 FLOPs (element bytes (BLOCK_M + BLOCK_N) / (2 BLOCK_M BLOCK_N) x 1000);
//   19 CTAs resident per SM (OccupancyOf), 20 waves of them (ceil CTAs / (SMs x
//      resident)), 21 the last of those waves' fill (CTAs over waves x SMs x resident).
// The sums and products (6, 7, 22, 23) include them; columns 8-15 are the first set's.
std::array<float, kTileConfigDim> TritonTileFeatures(const GemmProblem& p, const TritonTile& t, const GpuSpec& gpu);

// The configuration a row of TritonTileFeatures holds (its columns 0, 1, 2, 16, 17).
TritonTile TritonTileOfRow(const float* row);

struct TileSpace {
  std::string kernel = "triton-gemm";  // the only kernel so far
  std::string gpu;                     // where it was measured, e.g. "NVIDIA H100 80GB HBM3"
  int64_t sm_count = 0;                // the GPU's streaming multiprocessors (waves)
  // Which config_feat values a row holds: 1, the block sizes, the grid over sm_count and
  // the schedule (spaces written before the GPU's table: no key); 2, those and the GPU's
  // occupancy and waves from gpu_spec (TritonTileFeatures). A collection and the models
  // trained on it keep the set they were ingested with.
  int feature_set = 1;
  GpuSpec gpu_spec;  // feature_set 2: the GPU's row of the table, as ingested (its name is `gpu`)
  std::vector<int64_t> block_m, block_n, block_k, num_warps, num_stages;  // candidates, ascending
  std::map<std::string, std::set<TritonTile>> refused;                  // per variant (GemmProblem::Variant)
  // The dtypes whose problems were measured. Only for these does the space know which
  // candidates the compiler accepts (a dtype never compiled has no refusals recorded, not
  // none), and only these have runtimes a model learned from: across dtypes the order
  // does not transfer (docs/results.md), so a problem of another dtype is refused
  // (CheckProblem) rather than ranked with a guess. Spaces written before this list was
  // kept read it from `refused`'s keys.
  std::set<std::string> dtypes;
  // The kernel variants whose problems were measured (GemmProblem::Variant), for the same
  // reason: a problem of a variant never measured is refused. Spaces written before this
  // list was kept measured N and K multiples of 16 only: their dtypes.
  std::set<std::string> variants;

  // The config_feat row of `t` on `p`, in this space's feature set.
  std::array<float, kTileConfigDim> Row(const GemmProblem& p, const TritonTile& t) const;
  // Every candidate (the product of the five lists), in lexicographic order.
  std::vector<TritonTile> Candidates() const;
  // The candidates the compiler accepts for this variant (GemmProblem::Variant), in
  // Candidates() order.
  std::vector<TritonTile> Legal(absl::string_view variant) const;
  // OK when `p`'s dtype and variant were measured; else FAILED_PRECONDITION naming the
  // dtype or which of N and K are not multiples of 16, what was measured and the GPU (the
  // request is well formed; this space cannot answer it).
  absl::Status CheckProblem(const GemmProblem& p) const;
  // Whether `row` is TritonTileFeatures of a legal configuration for `p`; the error
  // (INVALID_ARGUMENT) says which configuration and why: a value outside the candidates,
  // refused by the compiler for this variant, or a column that does not match the problem.
  // `what` names the row ("tile_configs row 3"). The variant is CheckProblem's to check.
  absl::Status CheckRow(const GemmProblem& p, const float* row, absl::string_view what) const;
  // Every list non-empty, positive and ascending, sm_count positive, variants well formed
  // and of measured dtypes, refusals candidates of measured variants; feature set 2: a
  // valid gpu_spec of the space's GPU and SM count.
  absl::Status Validate(absl::string_view what) const;

  // One line: "triton-gemm measured on GPU (132 SMs) for bf16, f32: 288 candidates; refused by
  // the compiler: bf16 28, f32 90" (with other variants: "for bf16, bf16/NK, ...").
  std::string Summary() const;
  std::string ToJson() const;
  // Errors name `what` (a file) and the key.
  static absl::StatusOr<TileSpace> FromJson(const std::string& json, absl::string_view what);
};

// The problem a kernel graph computes: its one dot, C[M, N] = A[M, K] B[K, N] with A and
// B parameters 0 and 1, A of element type bf16, f16 or f32 (the problem's dtype, whatever
// the result's: bf16 inputs with an f32 result are a bf16 problem). INVALID_ARGUMENT
// (naming `what` and the operand) for any other graph, an operand stored transposed
// included (K x M, or N x K: another kernel).
absl::StatusOr<GemmProblem> GemmProblemOfGraph(const NodeGraph& g, absl::string_view what);

// Reads <dir>/tile_space.json; NOT_FOUND when there is none.
absl::StatusOr<TileSpace> LoadTileSpace(const std::string& dir);

}  // namespace tgraph
