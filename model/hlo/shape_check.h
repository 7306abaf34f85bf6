// What makes an HLO shape describable: its checks are shared by the text reader (which
// reports them at the shape's line and column) and the featurizer (which reports them
// for a proto's instruction), so that no module, text or proto, puts a value into the
// node features that no tensor has.
// - An array's dimensions are sizes (>= 0) or dynamic (-1, text '?'), and the product of
//   its non-zero sizes is at most 2^62 elements (checked arithmetic: never wraps).
//   This also bounds the features' sums of dimensions.
// - A layout, when it lists any dimension, lists each of the shape's dimensions once:
//   minor_to_major is a permutation of 0..rank-1 (`{1,0}` on a rank-2 tensor; not
//   `{7,0}`, `{1,1}` or `{0}`).
// - Tuples: each element, nested at most kMaxTupleDepth deep.
// Torch-free; pure functions (any thread).
#pragma once

#include <cstdint>
#include <string>

#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

inline constexpr int64_t kMaxShapeElements = int64_t{1} << 62;
inline constexpr int kMaxTupleDepth = 32;

// Empty when the shape is fine; else what is wrong, naming the shape as HLO text
// prints it (e.g. "layout {7,0} of f32[2,3] is not a permutation of its 2 dimensions").
std::string ShapeProblem(const tgraph::xla::ShapeProto& shape);

}  // namespace tgraph::hlo
