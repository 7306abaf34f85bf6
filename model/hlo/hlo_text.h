// HLO text, as XLA prints it (`XLA_FLAGS=--xla_dump_to=DIR`: module_*.txt; JAX's
// `lowered.compiler_ir("hlo").as_hlo_text()`, `compiled.as_text()`), read into the same
// HloModuleProto subset the binary path reads (proto/tgraph/hlo/hlo.proto), so that one
// featurizer (featurize.h) makes the graph either way.
//
// The syntax read: `HloModule name, attributes`; computations `[ENTRY] %name (params) ->
// shape { ... }` (the signature optional, `%` prefixes optional, computations in any
// order: callees are put first); instructions `[ROOT] %name = shape opcode(operands),
// attr=value, ...` with shapes such as `f32[8,128]{1,0:T(8,128)}`, `(f32[2], s32[])`,
// `token[]`, `f32[<=10]`; operands written with or without their shapes; /*...*/
// comments anywhere. Attributes that set features are read: dimensions, window (size,
// stride, pad, lhs_dilate, rhs_dilate, rhs_reversal), dim_labels, feature_group_count,
// batch_group_count, slice, dynamic_slice_sizes, padding, is_stable, and the called
// computations (to_apply, calls, body, condition, select, scatter, true_computation,
// false_computation, branch_computations, called_computations). Every other attribute
// (metadata, backend_config, sharding, frontend_attributes, control-predecessors,
// custom_call_target, dot dimension numbers, ...) and constants' literals are skipped.
//
// Instruction ids are assigned in text order from 1 (text has none). Malformed text is
// INVALID_ARGUMENT "WHAT: line L, column C: expected ..., got ..."; nothing here
// crashes or recurses without bound on any input. Torch-free; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/hlo/working_memory.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

// True when `bytes` is HLO text: after whitespace and comments (of any length), the word
// `HloModule`, or a computation ([ENTRY] %name followed by '(' or '{'): XLA's parser
// takes text without the HloModule line too.
bool LooksLikeHloText(absl::string_view bytes);

// Where an instruction stands in the text: byte offsets, for edits that keep every
// other byte as it was (apply_layouts.h).
struct TextSpan {
  size_t begin = 0, end = 0;
};
struct InstructionText {
  size_t start = 0, end = 0;     // its first character ('ROOT' or its name), and just past its last
  bool root = false;             // written with ROOT
  size_t shape_begin = 0;        // its shape's first character
  bool array_shape = false;      // false for a tuple shape
  TextSpan layout;               // its '{...}'; empty, just after the ']', when none is written
  std::vector<TextSpan> operands;  // each operand as written, its shape included when written
};
using TextMap = std::unordered_map<int64_t, InstructionText>;  // by instruction id

// The module `text` describes; errors name `what`, the line and the column. Refused
// besides syntax: an instruction's shape that shape_check.h refuses (a layout that is not
// a permutation of its dimensions, more than 2^62 elements), no ENTRY computation or two,
// a '/*' never closed (at the line it opens, whatever the rest parsed as). Charges
// what it builds to `limits.reserve` as it goes (working_memory.h) and stops with
// RESOURCE_EXHAUSTED, naming the line, at instruction max_instructions + 1. With `map`,
// also where each instruction stands (not charged: for tools, not request paths).
absl::StatusOr<tgraph::xla::HloModuleProto> ParseHloText(absl::string_view text, absl::string_view what,
                                                         const Limits& limits = {}, TextMap* map = nullptr);

// Whether instructions of this opcode carry feature_group_count and batch_group_count,
// which XLA's parser (and ours) takes as 1 where the text omits them.
bool HasGroupCounts(absl::string_view opcode);

}  // namespace tgraph::hlo
