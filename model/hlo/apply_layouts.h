// The way back from a ranked configuration to a program: a layout row (nc x 18 values,
// configurable nodes in the order featurize.h gives them) written into the HLO text it
// was made from, every other byte of the text kept as it was. Used by
// `tgraph-featurize apply`; torch-free; pure functions (any thread).
//
// What a row's groups become (docs/api.md, "Applying a chosen configuration"):
// - output: the configurable instruction's own layout;
// - input and kernel: the layout its operand 0 and operand 1 arrive in. When the
//   operand's producer has no layout written and no earlier group set one, the producer
//   gets it; when its layout already begins with the group's dimensions, nothing
//   changes; otherwise a `copy` into the requested layout is inserted just before the
//   configurable instruction and becomes its operand (as XLA's layout assignment inserts
//   copies where a producer's layout and a user's constraint differ). Parameters are
//   never changed (their layouts are the program's interface): they get a copy.
// - A group fixes the most minor dimensions (a minor-to-major prefix, as the real files'
//   rows do); the dimensions it leaves free keep their order in the layout written before
//   (the default, descending, where none was), so a written layout is always complete.
// - A changed layout is written as `{minor_to_major}`: a tiling or memory space written
//   on it before is dropped (the compiler assigns tiling after layouts).
// - Groups that are the compiler default (all -1) change nothing.
// Rows are checked against the module's layout search space first (layout_space.h): a
// row no compiler could apply is INVALID_ARGUMENT naming the configurable node and group.
//
// The hand-off to a stock XLA (no compiler change): XLA's layout assignment honours the
// layouts of the entry computation's parameters and result as given
// (entry_computation_layout; in JAX, a Format per argument and result of jax.jit). A
// row's choices on those tensors are listed as such, in the form JAX takes them; every
// other choice needs a compiler that honours per-instruction layouts (docs/api.md,
// "Handing a row to XLA"), and is listed as such. The text written holds all of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/hlo/working_memory.h"

namespace tgraph::hlo {

// A row's choice that a stock XLA takes as written: a layout of the entry computation's
// parameter or result.
struct EntryLayout {
  bool result = false;    // the program's result; else a parameter (argument)
  int64_t index = 0;      // the parameter's number, or the result's tuple element (-1: the whole result)
  std::string name;       // a parameter's name in the program (its metadata op_name, e.g. "x" or
                          // "p[0][0]"), else its instruction's name; the result's producer
  std::string shape;      // e.g. "f32[128,784]"
  std::vector<int64_t> minor_to_major;
  std::string asked_by;   // the configurable instruction and group, e.g. "dot_general.5 input"
  std::string jax;        // as jax.jit takes it: "Format(Layout(major_to_minor=(0, 1)), sharding)"
};

struct AppliedLayouts {
  std::string text;              // the module with the row's layouts
  int64_t layouts_written = 0;   // instructions whose own layout changed
  int64_t copies = 0;            // copies inserted
  std::vector<std::string> changes;  // one line per change, e.g. "convolution.3: output layout {4,0,3,2,1}"
  std::vector<EntryLayout> entry_layouts;  // the changes a stock XLA honours as written
  std::vector<std::string> needs_hook;     // the others, e.g. "convolution.3 output {4,0,3,2,1}"
};

// `row` (nc x 18 values in -1..5) written into the HLO module `text`; errors name `what`.
// INVALID_ARGUMENT for text that does not parse (line, column), a binary module (this
// edits text), a row whose size is not the module's configurable nodes x 18, or an
// illegal group. Reserves its working memory through `limits` (working_memory.h):
// RESOURCE_EXHAUSTED when refused, or over limits.max_instructions.
absl::StatusOr<AppliedLayouts> ApplyLayoutRow(absl::string_view text, const std::vector<int8_t>& row,
                                              absl::string_view what, const Limits& limits = {});

// The layouts a module's text has written for its configurable nodes, as a row of
// complete minor-to-major orders (nc x 18, -1 where a tensor has no layout written or the
// node has no such operand): what `tgraph-featurize apply` wrote, read back.
absl::StatusOr<std::vector<int8_t>> WrittenLayoutRow(absl::string_view text, absl::string_view what);

// "(0, 1)": a minor-to-major order as JAX's major_to_minor tuple.
std::string MajorToMinorTuple(const std::vector<int64_t>& minor_to_major);

}  // namespace tgraph::hlo
