#include "model/tile/gpu_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tgraph {

namespace {

constexpr int64_t kKiB = 1024;

// Hopper (compute capability 9.0): 228 KiB of shared memory per SM, 227 KiB for one CTA;
// Ampere's A100 (8.0): 164 and 163 KiB; Ada (8.9): 100 and 99 KiB, 24 CTAs and 48 warps.
// Every one: 64 Ki registers per SM, 1 KiB of shared memory kept per CTA.
GpuSpec Hopper(const char* name, int64_t sms, bool measured) {
  return {name, "9.0", sms, 228 * kKiB, 227 * kKiB, kKiB, 65536, 32, 64, measured};
}

}  // namespace

const std::vector<GpuSpec>& KnownGpus() {
  static const std::vector<GpuSpec> table = {
      Hopper("NVIDIA H100 80GB HBM3", 132, true),
      Hopper("NVIDIA H200", 132, true),
      Hopper("NVIDIA H100 PCIe", 114, false),
      {"NVIDIA A100-SXM4-80GB", "8.0", 108, 164 * kKiB, 163 * kKiB, kKiB, 65536, 32, 64, false},
      {"NVIDIA A100-SXM4-40GB", "8.0", 108, 164 * kKiB, 163 * kKiB, kKiB, 65536, 32, 64, false},
      {"NVIDIA L4", "8.9", 58, 100 * kKiB, 99 * kKiB, kKiB, 65536, 24, 48, false},
  };
  return table;
}

absl::Status GpuSpec::Validate(absl::string_view what) const {
  const auto bad = [&](const char* key, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": gpu_spec.", key, " must be ", want));
  };
  if (name.empty()) return bad("name", "the GPU's name");
  if (sm_count <= 0 || sm_count > 100000) return bad("sm_count", "in 1..100000");
  if (max_ctas_per_sm <= 0 || max_ctas_per_sm > 1024) return bad("max_ctas_per_sm", "in 1..1024");
  if (max_warps_per_sm <= 0 || max_warps_per_sm > 1024) return bad("max_warps_per_sm", "in 1..1024");
  if (registers_per_sm <= 0 || registers_per_sm > (int64_t{1} << 24)) return bad("registers_per_sm", "in 1..2^24");
  if (shared_memory_per_sm <= 0 || shared_memory_per_sm > (int64_t{1} << 30))
    return bad("shared_memory_per_sm", "bytes in 1..2^30");
  if (shared_memory_per_cta <= 0 || shared_memory_per_cta > shared_memory_per_sm)
    return bad("shared_memory_per_cta", "bytes in 1..shared_memory_per_sm");
  if (shared_memory_reserved < 0 || shared_memory_reserved >= shared_memory_per_sm)
    return bad("shared_memory_reserved", "bytes in 0..shared_memory_per_sm");
  return absl::OkStatus();
}

absl::StatusOr<GpuSpec> FindGpu(absl::string_view name) {
  std::vector<std::string> names;
  for (const GpuSpec& g : KnownGpus()) {
    if (g.name == name) return g;
    names.push_back(absl::StrCat("'", g.name, "'"));
  }
  return absl::NotFoundError(absl::StrCat(
      "GPU '", name, "' is not in the table of GPUs (model/tile/gpu_table.cc: ", absl::StrJoin(names, ", "),
      "); a tile space needs its SMs, shared memory, registers and CTA slots: name the GPU as the CUDA runtime does "
      "(torch.cuda.get_device_name()), or add its row to the table"));
}

CtaOccupancy OccupancyOf(const GpuSpec& gpu, int64_t block_m, int64_t block_n, int64_t block_k, int64_t num_warps,
                         int64_t num_stages, int64_t element_bytes) {
  CtaOccupancy o;
  o.shared_memory = num_stages * (block_m + block_n) * block_k * element_bytes + gpu.shared_memory_reserved;
  const int64_t threads = std::max<int64_t>(1, 32 * num_warps);
  const int64_t accumulator = (block_m * block_n + threads - 1) / threads;
  o.registers_per_thread = std::min<int64_t>(255, (accumulator + 32 + 7) / 8 * 8);
  int64_t resident = std::min(gpu.max_ctas_per_sm, gpu.max_warps_per_sm / std::max<int64_t>(1, num_warps));
  resident = std::min(resident, gpu.shared_memory_per_sm / std::max<int64_t>(1, o.shared_memory));
  resident = std::min(resident, gpu.registers_per_sm / (o.registers_per_thread * threads));
  o.resident = std::max<int64_t>(1, resident);
  return o;
}

}  // namespace tgraph
