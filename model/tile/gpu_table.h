// The GPUs a tile space can be measured on, with what a configuration's occupancy and
// waves depend on: how many streaming multiprocessors (SMs) run CTAs at once, and what
// one SM shares among the CTAs resident on it (shared memory, registers, warps, CTA
// slots). A tile space of the second feature set (TileSpace::feature_set 2) holds its
// GPU's row, so that the network sees how a configuration's CTAs fill that GPU
// (TritonTileFeatures with a GpuSpec); the values are the vendor's published limits for
// the compute capability and the SM count of the named product.
//
// Torch-free; the table is constant, read from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tgraph {

struct GpuSpec {
  std::string name;                    // as the CUDA runtime names it (torch.cuda.get_device_name)
  std::string compute_capability;      // "9.0"
  int64_t sm_count = 0;                // streaming multiprocessors
  int64_t shared_memory_per_sm = 0;    // bytes the CTAs resident on one SM share
  int64_t shared_memory_per_cta = 0;   // bytes one CTA may use at most (opt-in)
  int64_t shared_memory_reserved = 0;  // bytes the runtime keeps per resident CTA
  int64_t registers_per_sm = 0;        // 32-bit registers
  int64_t max_ctas_per_sm = 0;
  int64_t max_warps_per_sm = 0;
  bool measured = false;  // whether this project holds tile timings of it (tests/data/real)

  // Every limit positive and each CTA's shared memory within the SM's; errors name `what`.
  absl::Status Validate(absl::string_view what) const;
};

// The table, measured GPUs first.
const std::vector<GpuSpec>& KnownGpus();

// The row named `name` (exactly as the CUDA runtime writes it). NOT_FOUND for any other
// name, listing the table's names and where it is kept.
absl::StatusOr<GpuSpec> FindGpu(absl::string_view name);

// What one CTA of a Triton matrix-product configuration asks of an SM, and how many of
// them one SM holds at once. Shared memory: the software pipeline's buffers, stages x
// (BLOCK_M + BLOCK_N) x BLOCK_K x element bytes, plus the runtime's reserve. Registers:
// an estimate, not the compiler's allocation: the f32 accumulator's BLOCK_M x BLOCK_N
// values spread over the CTA's threads, plus 32 for addresses and loop state, rounded up
// to the allocation unit of 8 and capped at 255 a thread (beyond it the compiler spills).
struct CtaOccupancy {
  int64_t shared_memory = 0;         // bytes, with the reserve
  int64_t registers_per_thread = 0;  // the estimate
  // CTAs resident per SM: the least of what shared memory, registers, warps and the CTA
  // slots allow, at least 1 (a configuration the compiler accepts runs at least one).
  int64_t resident = 0;
};
CtaOccupancy OccupancyOf(const GpuSpec& gpu, int64_t block_m, int64_t block_n, int64_t block_k, int64_t num_warps,
                         int64_t num_stages, int64_t element_bytes);

}  // namespace tgraph
