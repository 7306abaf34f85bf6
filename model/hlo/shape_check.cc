#include "model/hlo/shape_check.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/hlo/hlo_print.h"
#include "model/hlo/hlo_text.h"

namespace tgraph::hlo {

namespace {

// The shape as HLO text prints it, cut short: a message names it, never quotes a tuple
// of thousands of elements.
std::string Shown(const xla::ShapeProto& shape) {
  std::string s = PrintShape(shape);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

std::string ArrayProblem(const xla::ShapeProto& shape) {
  int64_t elements = 1;
  for (int i = 0; i < shape.dimensions_size(); ++i) {
    const int64_t d = shape.dimensions(i);
    if (d < -1) return absl::StrCat("dimension ", i, " of ", Shown(shape), " is ", d, "; expected a size >= 0 or -1 (dynamic)");
    if (d <= 0) continue;
    if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxShapeElements)
      return absl::StrCat(Shown(shape), " has more than 2^62 elements");
  }
  if (!shape.has_layout() || shape.layout().minor_to_major_size() == 0) return "";
  const auto& order = shape.layout().minor_to_major();
  const int rank = shape.dimensions_size();
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool permutation = order.size() == rank;
  for (int i = 0; permutation && i < order.size(); ++i) {
    const int64_t d = order.Get(i);
    permutation = d >= 0 && d < rank && !seen[static_cast<size_t>(d)];
    if (permutation) seen[static_cast<size_t>(d)] = true;
  }
  if (permutation) return "";
  std::vector<int64_t> listed(order.begin(), order.end());
  if (listed.size() > 8) listed.resize(8);
  return absl::StrCat("layout {", absl::StrJoin(listed, ","), order.size() > 8 ? ",..." : "", "} of ", Shown(shape),
                      " is not a permutation of its ", rank, " dimensions (0..", rank - 1, ", each once)");
}

std::string Problem(const xla::ShapeProto& shape, int depth) {
  if (shape.element_type() != xla::TUPLE) return ArrayProblem(shape);
  if (depth >= kMaxTupleDepth) return absl::StrCat("tuple shapes nested more than ", kMaxTupleDepth, " deep");
  for (int i = 0; i < shape.tuple_shapes_size(); ++i)
    if (std::string p = Problem(shape.tuple_shapes(i), depth + 1); !p.empty()) return p;
  return "";
}

}  // namespace

std::string ShapeProblem(const xla::ShapeProto& shape) { return Problem(shape, 0); }

}  // namespace tgraph::hlo
