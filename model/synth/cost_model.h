// The synthetic data's TPU-like runtime model (docs/synthetic-data.md): layout
// assignment, (8, 128) tile padding, layout-mismatch copies, roofline compute for
// convolution and dot, bandwidth-bound memory ops, bitcast-or-copy reshapes; and the
// tile collection's per-kernel model. Noise-free; measurement noise is added by search.h.
#pragma once

#include <cstdint>
#include <vector>

#include "model/synth/families.h"
#include "model/synth/hlo_builder.h"

namespace tgraph::synth {

// Roughly one TPU v3 core. Times in nanoseconds.
struct CostConstants {
  double hbm_bytes_per_ns = 900.0;      // 900 GB/s
  double mxu_flops_per_ns = 123000.0;   // 123 TFLOP/s bf16
  double f32_slowdown = 4.0;            // f32 matmuls take several bf16 passes
  double vector_flops_per_ns = 4000.0;  // the vector unit, for reductions in tile kernels
  double launch_ns = 5000.0;            // per program
  double per_node_ns = 40.0;            // per HLO instruction
  double copy_penalty_per_step = 0.5;   // copy cost grows with how far the minor dim moves
  double tile_overhead_ns = 150.0;      // per tile of a tiled kernel
  double vmem_bytes = 16.0 * 1024 * 1024;
};

// A configured group as a full layout: the dims it lists (minor-to-major; real groups
// often list only the two most-minor), then the dims it leaves out in descending
// order, as the compiler's default would place them.
Layout CompleteLayout(const int8_t* group, int rank);

// Elements of a tensor as stored: most-minor dim padded to 128, second-minor to 8.
double PaddedElements(const Shape& shape, const Layout& layout);

struct RuntimeBreakdown {
  double total_ns = 0;
  double compute_ns = 0;  // convolution and dot
  double memory_ns = 0;   // everything else, reshapes that are not bitcasts included
  double copy_ns = 0;     // inserted layout-conversion copies
  int copies = 0;
};

class LayoutCostModel {
 public:
  LayoutCostModel(std::vector<SynthNode> nodes, std::vector<int64_t> config_ids, CostConstants k = {});
  // config: nc x 18 values (output, input, kernel groups), -1 meaning "compiler default".
  RuntimeBreakdown Evaluate(const int8_t* config) const;

  const std::vector<SynthNode>& nodes() const { return nodes_; }
  const std::vector<int64_t>& config_ids() const { return config_ids_; }
  // Rank of each group (output, input, kernel) of configurable node j; 0 = unused.
  int GroupRank(int64_t j, int group) const { return group_rank_[j * 3 + group]; }
  // The layouts an autotuner tries for a group, as in the real files (see
  // LayoutCandidates in cost_model.cc); a layout of all -1 is the compiler default.
  const std::vector<Layout>& Candidates(int64_t j, int group) const { return candidates_[j * 3 + group]; }

 private:
  double MatrixUnitNs(const SynthNode& node, const Layout& out, const Layout* req) const;
  void AddNodeTime(size_t i, const Layout& out, const Layout* req, size_t nops, RuntimeBreakdown* r) const;

  std::vector<SynthNode> nodes_;
  std::vector<int64_t> config_ids_;
  std::vector<int> config_pos_;   // node -> position in config_ids_, or -1
  std::vector<int> group_rank_;   // nc x 3
  std::vector<std::vector<Layout>> candidates_;  // nc x 3
  CostConstants k_;
};

// TPU kernels (the TpuGraphs tile collection): config = output tile (one bound per
// output dim) and contracting tile.
struct TpuTiling {
  std::vector<int64_t> out_tile;
  int64_t contract_tile = 1;
};
double TpuKernelRuntimeNs(const TpuKernel& kernel, const TpuTiling& tile, const CostConstants& k = {});
// The compiler's default tile: (8, 128) on the two minor dims, 1 elsewhere, K up to 512.
TpuTiling DefaultTpuTiling(const TpuKernel& kernel);
// The 24 config_feat values: kernel, output, input bounds, each 6 + sum + product.
std::vector<float> TpuTilingFeatures(const TpuKernel& kernel, const TpuTiling& tile);

}  // namespace tgraph::synth
