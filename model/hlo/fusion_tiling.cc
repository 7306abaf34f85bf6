#include "model/hlo/fusion_tiling.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/hlo/featurize.h"
#include "model/hlo/hlo_print.h"

namespace tgraph::hlo {

using tgraph::xla::HloComputationProto;
using tgraph::xla::HloInstructionProto;
using tgraph::xla::ShapeProto;

std::vector<int64_t> ReshapeTile(const std::vector<int64_t>& from, const std::vector<int64_t>& tile,
                                 const std::vector<int64_t>& to) {
  std::vector<int64_t> out(to.size(), 1);
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    if (i < from.size() && from[i] == 1) {  // a size-1 dimension: its own group, tile 1
      ++i;
      continue;
    }
    if (j < to.size() && to[j] == 1) {
      ++j;
      continue;
    }
    if (i >= from.size() || j >= to.size()) return {};  // element counts differ
    int64_t pf = from[i], pt = to[j], t = std::max<int64_t>(1, tile[i]);
    size_t i2 = i + 1, j2 = j + 1;
    while (pf != pt) {  // sizes are positive and their products bounded, or there is no match
      if (pf <= 0 || pt <= 0) return {};
      if (pf < pt) {
        if (i2 >= from.size() || __builtin_mul_overflow(pf, from[i2], &pf) ||
            __builtin_mul_overflow(t, std::max<int64_t>(1, tile[i2]), &t))
          return {};
        ++i2;
      } else {
        if (j2 >= to.size() || __builtin_mul_overflow(pt, to[j2], &pt)) return {};
        ++j2;
      }
    }
    // The group's tile elements, laid out from its minor dimension out.
    for (size_t k = j2; k-- > j;) {
      out[k] = std::min(t, to[k]);
      t = (t + to[k] - 1) / to[k];
    }
    i = i2;
    j = j2;
  }
  return out;
}

namespace {

std::vector<int64_t> Dims(const ShapeProto& s) { return {s.dimensions().begin(), s.dimensions().end()}; }

// The shape's dimensions major to minor in memory (its layout reversed; the logical order
// without one).
std::vector<int64_t> MajorToMinor(const ShapeProto& s) {
  const int rank = s.dimensions_size();
  std::vector<int64_t> order;
  if (s.has_layout() && s.layout().minor_to_major_size() == rank) {
    order.assign(s.layout().minor_to_major().rbegin(), s.layout().minor_to_major().rend());
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < rank; ++i)
      if (sorted[static_cast<size_t>(i)] != i) order.clear();  // not a permutation: the logical order
  }
  if (order.empty())
    for (int i = 0; i < rank; ++i) order.push_back(i);
  return order;
}

// Whether every value of `dims` is a dimension of a shape of `rank`, each once.
bool IsPermutationOf(const google::protobuf::RepeatedField<int64_t>& dims, int rank, bool each_once) {
  std::vector<bool> seen(static_cast<size_t>(std::max(rank, 0)), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || (each_once && seen[static_cast<size_t>(d)])) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

// A bitcast's tile: the elements keep their place in memory, so the tile is reshaped over
// both shapes' dimensions in their physical order.
std::vector<int64_t> BitcastTile(const ShapeProto& out, const std::vector<int64_t>& tile, const ShapeProto& in) {
  const std::vector<int64_t> out_order = MajorToMinor(out), in_order = MajorToMinor(in);
  std::vector<int64_t> sizes_out, tile_out, sizes_in;
  for (int64_t d : out_order) {
    sizes_out.push_back(out.dimensions(static_cast<int>(d)));
    tile_out.push_back(tile[static_cast<size_t>(d)]);
  }
  for (int64_t d : in_order) sizes_in.push_back(in.dimensions(static_cast<int>(d)));
  const std::vector<int64_t> physical = ReshapeTile(sizes_out, tile_out, sizes_in);
  if (physical.size() != in_order.size()) return {};
  std::vector<int64_t> logical(in_order.size());
  for (size_t k = 0; k < in_order.size(); ++k) logical[static_cast<size_t>(in_order[k])] = physical[k];
  return logical;
}

std::string Tile(const std::vector<int64_t>& t) { return absl::StrCat("[", absl::StrJoin(t, ","), "]"); }

}  // namespace

absl::StatusOr<std::vector<int64_t>> TileOverDot(const HloComputationProto& comp, const HloInstructionProto& dot,
                                                 const std::vector<int64_t>& root_tile, absl::string_view where) {
  std::map<int64_t, const HloInstructionProto*> by_id;
  for (const HloInstructionProto& inst : comp.instructions()) by_id[inst.id()] = &inst;
  // Which instructions the dot flows into (operands come before their users).
  std::map<int64_t, bool> reaches;
  for (const HloInstructionProto& inst : comp.instructions()) {
    bool r = inst.id() == dot.id();
    for (int64_t op : inst.operand_ids()) r = r || reaches[op];
    reaches[inst.id()] = r;
  }
  const auto bad = [&](const HloInstructionProto& at, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the output tile ", Tile(root_tile), " at ",
                                                   at.opcode(), " ", ShownName(at.name()), " ",
                                                   PrintShape(at.shape()), ": ", why));
  };
  const auto root_it = by_id.find(comp.root_id());
  if (root_it == by_id.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": the computation has no root"));
  const HloInstructionProto* cur = root_it->second;
  if (cur->shape().tuple_shapes_size() > 0) {  // several outputs: the tile is the first's
    if (cur->opcode() != "tuple" || cur->operand_ids_size() == 0 || !reaches[cur->operand_ids(0)] ||
        by_id.count(cur->operand_ids(0)) == 0)
      return bad(*cur, "the fusion's first output does not come from its dot");
    cur = by_id.at(cur->operand_ids(0));
  }
  std::vector<int64_t> tile = root_tile;
  if (static_cast<int>(tile.size()) != cur->shape().dimensions_size())
    return bad(*cur, absl::StrCat("a tile of ", tile.size(), " sizes for ", cur->shape().dimensions_size(),
                                  " dimensions"));
  while (cur->id() != dot.id()) {
    const HloInstructionProto* op = nullptr;
    for (int64_t id : cur->operand_ids())
      if (const auto it = by_id.find(id); it != by_id.end() && reaches[id]) {
        op = it->second;
        break;
      }
    if (op == nullptr) return bad(*cur, "no operand of it comes from the dot");
    const ShapeProto &out = cur->shape(), &in = op->shape();
    std::vector<int64_t> next;
    const std::string& opcode = cur->opcode();
    if (opcode == "transpose" && cur->dimensions_size() == out.dimensions_size() &&
        out.dimensions_size() == in.dimensions_size() && IsPermutationOf(cur->dimensions(), in.dimensions_size(), true)) {
      next.assign(tile.size(), 1);
      for (int i = 0; i < cur->dimensions_size(); ++i) next[static_cast<size_t>(cur->dimensions(i))] = tile[i];
    } else if (opcode == "broadcast" && cur->dimensions_size() == in.dimensions_size() &&
               IsPermutationOf(cur->dimensions(), out.dimensions_size(), true)) {
      for (int j = 0; j < cur->dimensions_size(); ++j) next.push_back(tile[static_cast<size_t>(cur->dimensions(j))]);
    } else if (opcode == "bitcast") {
      next = BitcastTile(out, tile, in);
    } else if (opcode == "reshape") {
      next = ReshapeTile(Dims(out), tile, Dims(in));
    } else if (Dims(out) == Dims(in)) {  // elementwise, convert, copy: the same dimensions
      next = tile;
    } else {
      return bad(*cur, "a tile is followed through elementwise operations, transposes, broadcasts, bitcasts and "
                       "reshapes only");
    }
    if (static_cast<int>(next.size()) != in.dimensions_size())
      return bad(*cur, absl::StrCat("its operand ", PrintShape(in), " does not hold the same elements"));
    tile = std::move(next);
    cur = op;
  }
  return tile;
}

}  // namespace tgraph::hlo
