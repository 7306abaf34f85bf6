// A nested GEMM fusion's output tile, read back over its dot. XLA tiles the fusion's
// result (the fused computation's root: one size per dimension of its first output),
// and the configuration's BLOCK_M and BLOCK_N are that tile as it reaches the dot's
// result through what lies between them: elementwise epilogues and converts (the same
// dimensions), transposes (a permutation), broadcasts (dimensions added), and bitcasts
// and reshapes that split or merge dimensions (sizes in the physical order of the
// layouts for a bitcast, the logical order for a reshape), as XLA's own tiling
// propagates a tile from the root to the dot.
//
// Torch-free; a pure function of its arguments, callable from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

// The tile over `dot`'s result dimensions that `root_tile` (over the root's first
// output) is, following the one path of operands from `comp`'s root to the dot.
// INVALID_ARGUMENT naming `where`, the instruction and why, for a tile of the wrong
// length, no path, or an instruction on it whose tile this does not follow (a slice, a
// concatenate, a reduce: listed by opcode).
absl::StatusOr<std::vector<int64_t>> TileOverDot(const tgraph::xla::HloComputationProto& comp,
                                                 const tgraph::xla::HloInstructionProto& dot,
                                                 const std::vector<int64_t>& root_tile, absl::string_view where);

// A tile over dimensions of `from` sizes (in the order the elements are laid out, major
// first) as a tile over `to` sizes of the same element count: dimension groups of
// equal products matched in order; a tile over merged dimensions split from the minor
// one out (the minor gets what fits, the next the rest), over split ones merged by
// product. Sizes of 1 are their own groups.
std::vector<int64_t> ReshapeTile(const std::vector<int64_t>& from, const std::vector<int64_t>& tile,
                                 const std::vector<int64_t>& to);

}  // namespace tgraph::hlo
