#include "model/hlo/hlo_text.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/core/opcodes.h"
#include "model/hlo/canonical_order.h"
#include "model/hlo/hlo_text_cursor.h"
#include "model/hlo/hlo_text_values.h"
#include "model/hlo/shape_check.h"

namespace tgraph::hlo {
namespace {

using xla::HloComputationProto;
using xla::HloInstructionProto;
using xla::HloModuleProto;
using xla::ShapeProto;
using text_internal::Cursor;
using text_internal::kAlloc;
using text_internal::kSlot;
using text_internal::kStringField;
using text_internal::HeapChars;
using text_internal::kMapEntry;
using text_internal::kShapeBytes;
using text_internal::kAttributeCharBytes;
using text_internal::kAttributePieceBytes;
using text_internal::ParseShape;
using text_internal::ParseArrayShape;
using text_internal::IsDotDimensions;
using text_internal::ParseBackendConfig;
using text_internal::ParseDotDimensions;
using text_internal::ParseInts;
using text_internal::StripBraces;
using text_internal::ParseWindow;
using text_internal::ParseDimLabels;
using text_internal::ParseSlice;
using text_internal::ParsePadding;

struct PendingCalls {
  std::vector<std::string> names;
  int64_t line = 0, col = 0;
};

struct ParsedComputation {
  HloComputationProto proto;
  std::vector<PendingCalls> calls;  // per instruction
  bool entry = false;
  int64_t line = 0;
  int64_t first_id = 0;  // instruction ids are first_id.. in list order
  std::unordered_map<std::string, int64_t> defined;  // instruction name -> id
  // Tuple elements used directly as operands (`%x#1`), by (tuple's id, index): the id of
  // the get-tuple-element instruction made for them, which the proto of the same module
  // spells out.
  std::map<std::pair<int64_t, int64_t>, int64_t> elements;
};

// What one instruction costs while parsed and in the module: the instruction, its
// shape, its name (in the proto and as a key of `defined`), its opcode and its
// PendingCalls.
constexpr int64_t kInstructionBytes = static_cast<int64_t>(sizeof(HloInstructionProto)) + kAlloc + kSlot +
                                      kShapeBytes + 2 * kStringField + kMapEntry +
                                      3 * static_cast<int64_t>(sizeof(PendingCalls));

bool IsCallAttribute(absl::string_view key) {
  static const char* const kKeys[] = {"to_apply", "calls", "body", "condition", "select", "scatter",
                                      "true_computation", "false_computation", "branch_computations",
                                      "called_computations"};
  return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys);
}

absl::Status ParseAttribute(Cursor& c, HloInstructionProto* inst, PendingCalls* calls) {
  const int64_t line = c.line(), col = c.col();
  const std::string key = c.Name();
  if (key.empty() || !c.Consume('=')) return c.Error("an attribute (name=value)");
  const int64_t vline = c.line(), vcol = c.col();
  const absl::string_view value = c.RawValue();
  if (key == "dimensions" || key == "dynamic_slice_sizes" || key == "window" || key == "dim_labels" || key == "slice" ||
      key == "padding") {
    int64_t pieces = 1;
    for (char ch : value) pieces += ch == ',' || ch == 'x' || ch == '_' || ch == ' ';
    if (absl::Status s = c.Charge(static_cast<int64_t>(value.size()) * kAttributeCharBytes + pieces * kAttributePieceBytes);
        !s.ok())
      return s;
  }
  if (IsCallAttribute(key)) {  // per name: a string in PendingCalls, a called id, a callee slot
    const int64_t names = 1 + std::count(value.begin(), value.end(), ',');
    if (absl::Status s = c.Charge(names * (kStringField + 3 * kSlot) + 2 * static_cast<int64_t>(value.size())); !s.ok())
      return s;
  }
  std::vector<int64_t> ints;
  if (key == "dimensions" || key == "dynamic_slice_sizes") {
    if (absl::Status s = ParseInts(c, vline, vcol, StripBraces(value), key, &ints); !s.ok()) return s;
    for (int64_t v : ints) (key == "dimensions" ? inst->add_dimensions(v) : inst->add_dynamic_slice_sizes(v));
  } else if (IsDotDimensions(key)) {
    return ParseDotDimensions(c, vline, vcol, key, value, inst);
  } else if (key == "backend_config") {
    return ParseBackendConfig(c, value, inst);
  } else if (key == "window") {
    return ParseWindow(c, vline, vcol, value, inst);
  } else if (key == "dim_labels") {
    return ParseDimLabels(c, vline, vcol, value, inst);
  } else if (key == "slice") {
    return ParseSlice(c, vline, vcol, value, inst);
  } else if (key == "padding") {
    return ParsePadding(c, vline, vcol, value, inst);
  } else if (key == "feature_group_count" || key == "batch_group_count") {
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v))
      return c.ErrorAt(vline, vcol, absl::StrCat(key, ": expected an integer, got '", Cursor::Printable(value), "'"));
    (key == "feature_group_count" ? inst->set_feature_group_count(v) : inst->set_batch_group_count(v));
  } else if (key == "iota_dimension") {  // the proto keeps it as the one entry of dimensions
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < 0)
      return c.ErrorAt(vline, vcol, absl::StrCat("iota_dimension: expected a dimension, got '", Cursor::Printable(value), "'"));
    inst->add_dimensions(v);
  } else if (key == "is_stable") {
    inst->set_is_stable(value == "true");
  } else if (key == "custom_call_target" || (key == "kind" && inst->opcode() == "fusion")) {
    absl::string_view v = value;
    std::string text(v);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
      text = std::string(v.substr(1, v.size() - 2));
      std::string unescaped;
      if (absl::CUnescape(text, &unescaped)) text = std::move(unescaped);
    }
    if (absl::Status s = c.Charge(kStringField + 2 * HeapChars(text.size())); !s.ok()) return s;
    (key == "kind" ? inst->set_fusion_kind(std::move(text)) : inst->set_custom_call_target(std::move(text)));
  } else if (key == "index" && inst->opcode() == "get-tuple-element") {
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < 0)
      return c.ErrorAt(vline, vcol, absl::StrCat("index: expected a tuple index, got '", Cursor::Printable(value), "'"));
    inst->set_tuple_index(v);
  } else if (IsCallAttribute(key)) {
    calls->line = line;
    calls->col = col;
    // The proto lists a while's body before its condition, a select-and-scatter's select
    // before its scatter and a conditional's true branch before its false one, in
    // whichever order the text writes them (XLA prints `condition=..., body=...`).
    const bool first = key == "body" || key == "select" || key == "true_computation";
    const size_t at = first ? 0 : calls->names.size();
    size_t k = 0;
    for (absl::string_view name : absl::StrSplit(StripBraces(value), ',', absl::SkipWhitespace())) {
      name = absl::StripAsciiWhitespace(name);
      if (!name.empty() && name.front() == '%') name.remove_prefix(1);
      calls->names.emplace(calls->names.begin() + static_cast<std::ptrdiff_t>(at + k++), name);
    }
  }
  return absl::OkStatus();
}

// The get-tuple-element instruction for element `index` of instruction `tuple` (an id
// of `comp`), written `%name#index` at line:col: made on first use, one per element.
absl::StatusOr<int64_t> TupleElement(Cursor& c, int64_t line, int64_t col, int64_t tuple, int64_t index,
                                     ParsedComputation* comp, int64_t* next_id) {
  if (const auto it = comp->elements.find({tuple, index}); it != comp->elements.end()) return it->second;
  const HloInstructionProto& t = comp->proto.instructions(static_cast<int>(tuple - comp->first_id));
  if (t.shape().element_type() != xla::TUPLE || index >= t.shape().tuple_shapes_size())
    return c.ErrorAt(line, col, absl::StrCat("operand '", Cursor::Printable(t.name()), "#", index, "': ",
                                             t.shape().element_type() != xla::TUPLE
                                                 ? "the instruction is not a tuple"
                                                 : absl::StrCat("its tuple has ", t.shape().tuple_shapes_size(),
                                                                " elements")));
  const std::string name = absl::StrCat(t.name(), "#", index);
  if (absl::Status s = c.CountInstruction(line); !s.ok()) return s;
  if (absl::Status s = c.Charge(kInstructionBytes + kMapEntry + 2 * HeapChars(name.size())); !s.ok()) return s;
  const xla::ShapeProto element = t.shape().tuple_shapes(static_cast<int>(index));
  HloInstructionProto* gte = comp->proto.add_instructions();
  comp->calls.emplace_back();
  gte->set_id((*next_id)++);
  gte->set_name(name);
  gte->set_opcode("get-tuple-element");
  *gte->mutable_shape() = element;
  gte->set_tuple_index(index);
  gte->add_operand_ids(tuple);
  comp->elements.emplace(std::make_pair(tuple, index), gte->id());
  return gte->id();
}

// The operands of `inst` (after its '('), by name among the computation's instructions;
// `%name#k` is element k of a tuple (TupleElement).
absl::Status ParseOperands(Cursor& c, ParsedComputation* comp, int64_t* next_id, HloInstructionProto* inst,
                           InstructionText* where) {
  if (c.Consume(')')) return absl::OkStatus();
  do {
    const size_t begin = c.Offset();
    if (c.Peek() == '(') {  // an operand written with its (tuple) shape
      ShapeProto ignored;
      if (absl::Status s = ParseShape(c, &ignored, 0); !s.ok()) return s;
    }
    const int64_t line = c.line(), col = c.col();
    std::string name = c.Name();
    if (c.Peek() == '[') {  // that was the element type of the operand's shape
      ShapeProto ignored;
      if (absl::Status s = ParseArrayShape(c, name, &ignored); !s.ok()) return s;
      name = c.Name();
    }
    if (name.empty()) return c.Error("an operand name");
    if (c.Peek() == '(')  // `(shape) tuple(a, b)` as an operand: an instruction nested in another's operands
      return c.ErrorAt(line, col, absl::StrCat("operand '", Cursor::Printable(name), "(...)' is an instruction written ",
                                               "inside another's operands, which tgraph does not read: define it on a ",
                                               "line of its own and name it here"));
    if (absl::Status s = c.Charge(kSlot); !s.ok()) return s;
    const auto it = comp->defined.find(name);
    if (it == comp->defined.end())
      return c.ErrorAt(line, col, absl::StrCat("operand '", Cursor::Printable(name), "' is not an instruction ",
                                               "defined before it in computation '", comp->proto.name(), "'"));
    int64_t id = it->second;
    if (c.PeekRaw() == '#') {
      c.Consume('#');
      const int64_t iline = c.line(), icol = c.col();
      const std::string digits = c.Name();
      int64_t index = 0;
      if (!absl::SimpleAtoi(digits, &index) || index < 0)
        return c.ErrorAt(iline, icol, absl::StrCat("expected a tuple index after '", Cursor::Printable(name), "#', got '",
                                                   Cursor::Printable(digits), "'"));
      absl::StatusOr<int64_t> element = TupleElement(c, line, col, id, index, comp, next_id);
      if (!element.ok()) return element.status();
      id = *element;
    }
    inst->add_operand_ids(id);
    if (where) where->operands.push_back({begin, c.RawOffset()});
  } while (c.Consume(','));
  if (!c.Consume(')')) return c.Error("',' or ')' after an operand");
  return absl::OkStatus();
}

// One instruction line: [ROOT] %name = shape opcode(operands), attr=value, ...
// A tuple whose shape the text left out has its operands' shapes, in order (what XLA's
// shape inference gives it).
absl::Status InferTupleShape(const HloComputationProto& comp, HloInstructionProto* inst) {
  ShapeProto shape;
  shape.set_element_type(xla::TUPLE);
  for (int64_t operand : inst->operand_ids()) {
    const HloInstructionProto* found = nullptr;
    for (int k = comp.instructions_size() - 1; k >= 0 && !found; --k)
      if (comp.instructions(k).id() == operand) found = &comp.instructions(k);
    if (!found) return absl::InternalError(absl::StrCat("operand id ", operand, " not found"));  // resolved above
    *shape.add_tuple_shapes() = found->shape();
  }
  if (std::string problem = ShapeProblem(shape); !problem.empty()) return absl::InvalidArgumentError(problem);
  *inst->mutable_shape() = std::move(shape);
  return absl::OkStatus();
}

// The instruction's shape, or *omitted where the text leaves it out (`t = tuple(a, b)`:
// the opcode where the shape goes; no element type is followed by '('), which XLA's
// parser infers (InferOmittedShape, once the operands are known).
absl::Status ParseInstructionShape(Cursor& c, const std::string& name, HloInstructionProto* inst, bool* omitted) {
  const size_t at = c.Offset();
  const int64_t line = c.line(), col = c.col();
  *omitted = !c.Name().empty() && c.Peek() == '(';
  c.Rewind(at, line, col);
  if (*omitted) return absl::OkStatus();
  if (absl::Status s = ParseShape(c, inst->mutable_shape(), 0); !s.ok()) return s;
  if (std::string problem = ShapeProblem(inst->shape()); !problem.empty())
    return c.ErrorAt(line, col, absl::StrCat("instruction '", Cursor::Printable(name), "': ", problem));
  return absl::OkStatus();
}

// An omitted shape: a tuple's is its operands' (InferTupleShape); the rest are refused,
// as ours infers no other opcode's.
absl::Status InferOmittedShape(const HloComputationProto& comp, const std::string& opcode, HloInstructionProto* inst) {
  if (opcode == "tuple") return InferTupleShape(comp, inst);
  return absl::InvalidArgumentError(absl::StrCat("its shape is omitted; tgraph infers a tuple's only (its operands'): "
                                                 "write the shape of this ", Cursor::Printable(opcode)));
}

absl::Status ParseInstruction(Cursor& c, int64_t* next_id, ParsedComputation* comp, bool* root) {
  InstructionText where;
  where.start = c.Offset();
  *root = c.ConsumeWord("ROOT");
  const int64_t line = c.line(), col = c.col();
  const std::string name = c.Name();
  if (name.empty()) return c.Error("an instruction ([ROOT] %name = shape opcode(operands)) or '}'");
  if (!c.Consume('=')) return c.Error(absl::StrCat("'=' after the instruction name '", Cursor::Printable(name), "'"));
  if (absl::Status s = c.CountInstruction(line); !s.ok()) return s;
  if (absl::Status s = c.Charge(kInstructionBytes + 2 * HeapChars(name.size())); !s.ok()) return s;
  const int64_t id = (*next_id)++;
  const size_t index = static_cast<size_t>(comp->proto.instructions_size());
  HloInstructionProto* inst = comp->proto.add_instructions();
  comp->calls.emplace_back();  // its slot; tuple elements its operands make come after it
  inst->set_name(name);
  inst->set_id(id);
  where.shape_begin = c.Offset();
  const int64_t shape_line = c.line(), shape_col = c.col();
  bool omitted = false;
  if (absl::Status s = ParseInstructionShape(c, name, inst, &omitted); !s.ok()) return s;
  where.array_shape = !omitted && inst->shape().element_type() != xla::TUPLE;
  if (where.array_shape) where.layout = c.last_layout;
  const std::string opcode = c.Name();
  if (opcode.empty()) return c.Error("an opcode");
  if (!IsXlaOpcode(opcode))
    return c.ErrorAt(c.line(), c.col() - static_cast<int64_t>(opcode.size()),
                     absl::StrCat("unknown opcode '", Cursor::Printable(opcode), "' (instruction '",
                                  Cursor::Printable(name), "'): not one of XLA's (docs/format.md, HLO opcode ids)"));
  if (absl::Status s = c.Charge(HeapChars(opcode.size())); !s.ok()) return s;
  inst->set_opcode(opcode);
  if (!c.Consume('(')) return c.Error(absl::StrCat("'(' after the opcode '", Cursor::Printable(opcode), "'"));
  if (opcode == "constant") {  // a literal, skipped to its closing ')'
    int depth = 1;
    while (depth > 0 && !c.AtEnd()) {
      const char ch = c.Peek();
      if (ch == '(' || ch == '{' || ch == '[') {
        if (!c.SkipGroup()) break;
        continue;
      }
      if (ch == ')') --depth;
      c.Consume(ch);
    }
    if (depth > 0) return c.Error("')' closing the constant's literal");
  } else if (opcode == "parameter") {
    const int64_t pline = c.line(), pcol = c.col();
    const std::string n = c.Name();
    int64_t number = 0;
    if (!absl::SimpleAtoi(n, &number) || number < 0)
      return c.ErrorAt(pline, pcol, absl::StrCat("expected the parameter's number, got '", Cursor::Printable(n), "'"));
    inst->set_parameter_number(number);
    if (!c.Consume(')')) return c.Error("')' after the parameter's number");
  } else if (absl::Status s = ParseOperands(c, comp, next_id, inst, c.map ? &where : nullptr); !s.ok()) {
    return s;
  }
  if (omitted) {
    if (absl::Status s = InferOmittedShape(comp->proto, opcode, inst); !s.ok())
      return c.ErrorAt(shape_line, shape_col, absl::StrCat("instruction '", Cursor::Printable(name), "': ", s.message()));
  }
  // XLA's parser takes an absent group count of these as 1, and XLA's protos (the real
  // TpuGraphs files too) carry the 1: the text must give the graph its proto gives.
  if (HasGroupCounts(opcode)) {
    inst->set_feature_group_count(1);
    inst->set_batch_group_count(1);
  }
  PendingCalls calls;
  where.end = c.RawOffset();
  while (c.Consume(',')) {
    if (absl::Status s = ParseAttribute(c, inst, &calls); !s.ok()) return s;
    where.end = c.RawOffset();
  }
  where.root = *root;
  comp->calls[index] = std::move(calls);
  if (!comp->defined.emplace(name, id).second)
    return c.ErrorAt(line, col, absl::StrCat("instruction name '", Cursor::Printable(name), "' is used twice in '",
                                             comp->proto.name(), "'"));
  if (c.map) (*c.map)[id] = std::move(where);
  return absl::OkStatus();
}

// [ENTRY] %name [(params) -> shape] { instructions }
absl::Status ParseComputation(Cursor& c, int64_t* next_id, ParsedComputation* comp) {
  comp->line = c.line();
  comp->entry = c.ConsumeWord("ENTRY");
  const std::string name = c.Name();
  if (name.empty()) return c.Error("a computation ([ENTRY] %name (parameters) -> shape {)");
  if (absl::Status s = c.Charge(3 * HeapChars(name.size())); !s.ok()) return s;
  comp->proto.set_name(name);
  if (c.Peek() == '(') {
    if (!c.SkipGroup()) return c.Error("')' closing the computation's parameters");
    if (!c.Consume('-') || !c.Consume('>')) return c.Error("'->' and the computation's result shape");
    ShapeProto ignored;
    if (absl::Status s = ParseShape(c, &ignored, 0); !s.ok()) return s;
  }
  while (c.Consume(',')) {  // e.g. execution_thread="main"
    c.Name();
    if (!c.Consume('=')) return c.Error("'=' in a computation attribute");
    c.RawValue();
  }
  if (!c.Consume('{')) return c.Error(absl::StrCat("'{' opening computation '", Cursor::Printable(name), "'"));
  comp->first_id = *next_id;
  int64_t root = -1, last = -1;
  while (!c.Consume('}')) {
    if (c.AtEnd()) return c.Error(absl::StrCat("'}' closing computation '", Cursor::Printable(name), "'"));
    bool is_root = false;
    const int64_t id = *next_id;
    if (absl::Status s = ParseInstruction(c, next_id, comp, &is_root); !s.ok()) return s;
    if (is_root) root = id;
    last = id;
  }
  if (comp->proto.instructions_size() == 0)
    return c.ErrorAt(comp->line, 1, absl::StrCat("computation '", Cursor::Printable(name), "' has no instructions"));
  comp->defined = {};  // not needed past here
  comp->elements = {};
  comp->proto.set_root_id(root >= 0 ? root : last);
  return absl::OkStatus();
}

// Resolves the called computations' names to ids and refuses cycles of calls; the
// computations stay in text order (canonical_order.h orders them).
absl::Status Link(Cursor& c, std::vector<ParsedComputation>* comps, HloModuleProto* module) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < comps->size(); ++i) {
    (*comps)[i].proto.set_id(static_cast<int64_t>(i) + 1);
    if (!index.emplace((*comps)[i].proto.name(), i).second)
      return c.ErrorAt((*comps)[i].line, 1, absl::StrCat("computation name '", (*comps)[i].proto.name(), "' is used twice"));
  }
  std::vector<std::vector<size_t>> callees(comps->size());
  for (size_t i = 0; i < comps->size(); ++i) {
    ParsedComputation& comp = (*comps)[i];
    for (int k = 0; k < comp.proto.instructions_size(); ++k)
      for (const std::string& name : comp.calls[static_cast<size_t>(k)].names) {
        const auto it = index.find(name);
        if (it == index.end())
          return c.ErrorAt(comp.calls[static_cast<size_t>(k)].line, comp.calls[static_cast<size_t>(k)].col,
                           absl::StrCat("calls computation '", Cursor::Printable(name), "', which the module does not have"));
        comp.proto.mutable_instructions(k)->add_called_computation_ids(static_cast<int64_t>(it->second) + 1);
        callees[i].push_back(it->second);
      }
  }
  // Depth-first from each computation in text order (iterative: no recursion), to find
  // a cycle where it starts.
  std::vector<int> state(comps->size(), 0);  // 0 new, 1 on the stack, 2 done
  for (size_t start = 0; start < comps->size(); ++start) {
    if (state[start]) continue;
    std::vector<std::pair<size_t, size_t>> stack = {{start, 0}};
    state[start] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < callees[node].size()) {
        const size_t callee = callees[node][next++];
        if (state[callee] == 1)
          return c.ErrorAt((*comps)[node].line, 1, absl::StrCat("computation '", (*comps)[node].proto.name(),
                                                                 "' is part of a cycle of calls"));
        if (state[callee] == 0) {
          state[callee] = 1;
          stack.emplace_back(callee, 0);
        }
      } else {
        state[node] = 2;
        stack.pop_back();
      }
    }
  }
  // Exactly one ENTRY: the program XLA runs is never a guess.
  const ParsedComputation* entry_comp = nullptr;
  for (const ParsedComputation& comp : *comps) {
    if (!comp.entry) continue;
    if (entry_comp)
      return c.ErrorAt(comp.line, 1, absl::StrCat("computation '", Cursor::Printable(comp.proto.name()),
                                                  "' is a second ENTRY (the first: '",
                                                  Cursor::Printable(entry_comp->proto.name()), "', line ",
                                                  entry_comp->line, "); a module has exactly one"));
    entry_comp = &comp;
  }
  if (!entry_comp) entry_comp = &comps->back();  // XLA's rule: the last computation is the entry
  const int64_t entry = entry_comp->proto.id();
  for (ParsedComputation& comp : *comps) *module->add_computations() = std::move(comp.proto);
  module->set_entry_computation_id(entry);
  for (const HloComputationProto& comp : module->computations())
    if (comp.id() == entry) module->set_entry_computation_name(comp.name());
  return absl::OkStatus();
}

// The source tables today's XLA prints after the HloModule line (FileNames,
// FunctionNames, FileLocations, StackFrames: where each instruction's metadata points
// into the program's source), skipped: tgraph keeps no source locations. A table is its
// name on a line of its own, then rows of a number and a string or a {...} group. A
// computation may bear one of these names: then '(' or '{' follows it, not a row.
absl::Status SkipSourceTables(Cursor& c) {
  static const char* const kTables[] = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
  while (true) {
    const size_t at = c.Offset();
    const int64_t line = c.line(), col = c.col();
    const char* table = nullptr;
    for (const char* name : kTables)
      if (c.ConsumeWord(name)) table = name;
    if (!table) return absl::OkStatus();
    if (c.Peek() == '(' || c.Peek() == '{' || c.Peek() == ',') {  // a computation of that name
      c.Rewind(at, line, col);
      return absl::OkStatus();
    }
    while (absl::ascii_isdigit(static_cast<unsigned char>(c.Peek()))) {
      const int64_t rline = c.line(), rcol = c.col();
      const std::string number = c.Name();
      int64_t n = 0;
      if (!absl::SimpleAtoi(number, &n))
        return c.ErrorAt(rline, rcol, absl::StrCat("expected a row number in the ", table, " table, got '",
                                                   Cursor::Printable(number), "'"));
      if (c.Peek() == '"') {
        if (!c.SkipStringLiteral()) return c.Error(absl::StrCat("'\"' closing a string of the ", table, " table"));
      } else if (c.Peek() == '{') {
        if (!c.SkipGroup()) return c.Error(absl::StrCat("'}' closing a row of the ", table, " table"));
      } else {
        return c.Error(absl::StrCat("a string or {...} after row ", n, " of the ", table, " table"));
      }
    }
  }
}

}  // namespace

bool HasGroupCounts(absl::string_view opcode) { return opcode == "convolution" || opcode == "custom-call"; }

bool LooksLikeHloText(absl::string_view bytes) {
  static const Limits kUnlimited;
  // The whole text: comments before the module may be any length. A protobuf's bytes
  // fail at their first one that is neither space nor a name's.
  Cursor c(bytes, "", kUnlimited);
  if (c.ConsumeWord("HloModule")) return true;
  // A sequence of computations without the HloModule line (XLA's test tools take it):
  // [ENTRY] %name then its parameters or its body.
  c.ConsumeWord("ENTRY");
  if (c.Name().empty()) return false;
  const char next = c.Peek();
  return next == '(' || next == '{';
}

namespace {

absl::StatusOr<HloModuleProto> ParseModuleText(Cursor& c) {
  HloModuleProto module;
  const int64_t module_line = c.line();
  if (c.ConsumeWord("HloModule")) {
    const std::string name = c.Name();
    if (name.empty()) return c.Error("the module's name after 'HloModule'");
    module.set_name(name);
    while (c.Consume(',')) {  // module attributes (entry_computation_layout, ...), skipped
      c.Name();
      if (!c.Consume('=')) return c.Error("'=' in a module attribute");
      c.RawValue();
    }
    if (absl::Status s = SkipSourceTables(c); !s.ok()) return s;
  } else {
    // Computations without the HloModule line, as XLA's test tools take them; the text
    // names no module, so it gets the name our clients give an unnamed one.
    module.set_name("hlo_module");
  }
  std::vector<ParsedComputation> comps;
  int64_t next_id = 1;
  while (!c.AtEnd()) {
    const int64_t line = c.line(), col = c.col();
    if (c.ConsumeWord("HloModule"))
      return c.ErrorAt(line, col, absl::StrCat("a second 'HloModule' (the first module starts at line ", module_line,
                                               "): one module per file"));
    // The computation while parsed and in the module, its name three times (proto, the
    // name index, the entry name), the index entry, its callees and its order slots.
    constexpr int64_t kComputationBytes = 3 * static_cast<int64_t>(sizeof(ParsedComputation)) +
                                          2 * (static_cast<int64_t>(sizeof(HloComputationProto)) + kAlloc) +
                                          3 * kStringField + kMapEntry + 2 * kSlot + 16;
    if (absl::Status s = c.Charge(kComputationBytes); !s.ok()) return s;
    comps.emplace_back();
    if (absl::Status s = ParseComputation(c, &next_id, &comps.back()); !s.ok()) return s;
  }
  if (comps.empty()) return c.Error("at least one computation");
  if (absl::Status s = Link(c, &comps, &module); !s.ok()) return s;
  comps = {};
  if (absl::Status s = CanonicalizeOrder(&module, c.memory()); !s.ok()) return s;
  return module;
}

}  // namespace

absl::StatusOr<HloModuleProto> ParseHloText(absl::string_view text, absl::string_view what, const Limits& limits,
                                            TextMap* map) {
  Cursor c(text, what, limits);
  c.map = map;
  absl::StatusOr<HloModuleProto> module = ParseModuleText(c);
  if (absl::Status s = c.UnclosedComment(); !s.ok()) return s;
  return module;
}

}  // namespace tgraph::hlo

