#include "model/hlo/apply_layouts.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/core/layout_space.h"
#include "model/hlo/featurize.h"
#include "model/hlo/hlo_print.h"
#include "model/hlo/hlo_text.h"

namespace tgraph::hlo {
namespace {

using xla::HloInstructionProto;
using Layout = std::vector<int64_t>;  // minor to major

// A module's text, parsed with where each instruction stands, and its graph.
struct ParsedText {
  xla::HloModuleProto module;
  TextMap map;
  ModuleGraph graph;
  std::vector<const HloInstructionProto*> by_node;  // the featurizer's node order
  std::unordered_map<int64_t, const HloInstructionProto*> by_id;
};

// What ApplyLayoutRow holds beside the parsed module and graph (which their readers
// reserve): per instruction its name in a set, its pointers by node and by id, an edit
// and a change line at most; the text edited, and the edits' insertions.
int64_t ApplyBytes(absl::string_view text, int64_t instructions) {
  return instructions * (96 + 8 + 64 + 2 * 48 + 160) + 3 * static_cast<int64_t>(text.size());
}

absl::StatusOr<ParsedText> Read(absl::string_view text, absl::string_view what, const Limits& limits) {
  if (!LooksLikeHloText(text))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not HLO text (a module starts with 'HloModule'); layouts are written into a module's text, so "
              "that nothing else in it changes: dump the module as text (XLA_FLAGS=--xla_dump_to=DIR, or JAX's "
              "as_hlo_text()) and apply the row to that"));
  ParsedText p;
  absl::StatusOr<xla::HloModuleProto> module = ParseHloText(text, what, limits, &p.map);
  if (!module.ok()) return module.status();
  p.module = std::move(*module);
  absl::StatusOr<ModuleGraph> graph = FeaturizeModule(p.module, what, limits);
  if (!graph.ok()) return graph.status();
  p.graph = std::move(*graph);
  WorkingMemory memory(limits, what);
  if (absl::Status s = memory.Reserve(ApplyBytes(text, p.graph.graph.num_nodes)); !s.ok()) return s;
  for (const xla::HloComputationProto& c : p.module.computations())
    for (const HloInstructionProto& inst : c.instructions()) {
      p.by_node.push_back(&inst);
      p.by_id[inst.id()] = &inst;
    }
  if (p.graph.default_config_nodes.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": module ", p.graph.module_name, " has no convolution, dot or reshape instruction: no layout to set"));
  return p;
}

// The layout written on an instruction (empty when none, or a tuple). One the text leaves
// out is XLA's default in the proto the reader made, but is no constraint: XLA's layout
// assignment chooses it, and so may the row.
Layout Written(const TextMap& map, const HloInstructionProto& inst) {
  if (const auto it = map.find(inst.id()); it != map.end() && it->second.layout.begin == it->second.layout.end)
    return {};
  const xla::ShapeProto& s = inst.shape();
  if (s.element_type() == xla::TUPLE || !s.has_layout() || s.layout().minor_to_major_size() != s.dimensions_size())
    return {};
  return Layout(s.layout().minor_to_major().begin(), s.layout().minor_to_major().end());
}

// A group's fixed dimensions: its values up to the first -1.
Layout Prefix(const int8_t* group) {
  Layout p;
  for (int d = 0; d < kLayoutSlots && group[d] >= 0; ++d) p.push_back(group[d]);
  return p;
}

bool StartsWith(const Layout& layout, const Layout& prefix) {
  return layout.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), layout.begin());
}

// `prefix`, then the other dimensions in their order in `before` (descending when empty).
Layout Complete(const Layout& prefix, const Layout& before, int64_t rank) {
  Layout order = before;
  if (order.empty())
    for (int64_t d = rank - 1; d >= 0; --d) order.push_back(d);
  Layout full = prefix;
  for (int64_t d : order)
    if (std::find(prefix.begin(), prefix.end(), d) == prefix.end()) full.push_back(d);
  return full;
}

std::string LayoutText(const Layout& l) { return absl::StrCat("{", absl::StrJoin(l, ","), "}"); }

// One edit of the text: `erase` bytes at `at` replaced by `insert`.
struct Edit {
  size_t at = 0, erase = 0;
  std::string insert;
};

absl::StatusOr<std::string> ApplyEdits(absl::string_view text, std::vector<Edit> edits) {
  // By offset; at one offset, insertions (in the order made) before a replacement.
  std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
    return a.at != b.at ? a.at < b.at : (a.erase == 0) > (b.erase == 0);
  });
  std::string out;
  out.reserve(text.size() + 64 * edits.size());
  size_t pos = 0;
  for (const Edit& e : edits) {
    if (e.at < pos || e.at + e.erase > text.size())
      return absl::InternalError(absl::StrCat("overlapping edits at byte ", e.at, ": a bug of apply_layouts.cc"));
    absl::StrAppend(&out, text.substr(pos, e.at - pos));
    out += e.insert;
    pos = e.at + e.erase;
  }
  absl::StrAppend(&out, text.substr(pos));
  return out;
}

// The text's line ending, for the lines an edit adds: "\r\n" when its first line ends so
// (a file saved on Windows keeps one kind of line ending), else "\n".
const char* LineEnd(absl::string_view text) {
  const size_t nl = text.find('\n');
  return nl != absl::string_view::npos && nl > 0 && text[nl - 1] == '\r' ? "\r\n" : "\n";
}

// The /* ... */ comments inside a span an edit replaces, each after a space, to be
// written after what replaces it: an edit changes layouts and operands, never what the
// author wrote beside them.
std::string CommentsIn(absl::string_view span) {
  std::string out;
  for (size_t at = span.find("/*"); at != absl::string_view::npos; at = span.find("/*", at)) {
    const size_t end = span.find("*/", at + 2);
    if (end == absl::string_view::npos) break;  // the reader refuses an unclosed comment
    absl::StrAppend(&out, " ", span.substr(at, end + 2 - at));
    at = end + 2;
  }
  return out;
}

// The whitespace that indents the line `at` stands on, when only whitespace precedes it.
std::string IndentAt(absl::string_view text, size_t at) {
  size_t begin = at;
  while (begin > 0 && text[begin - 1] != '\n') --begin;
  const absl::string_view before = text.substr(begin, at - begin);
  for (char c : before)
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) return " ";
  return std::string(before);
}

// `base`, or `base.2`, `base.3`, ... : the first not in `names` (then added to it). A
// '#' (of a tuple element's name, `t#0`) becomes '.', as a name cannot hold it.
std::string UniqueName(std::string base, std::unordered_set<std::string>* names) {
  std::replace(base.begin(), base.end(), '#', '.');
  std::string name = base;
  for (int n = 2; names->count(name); ++n) name = absl::StrCat(base, ".", n);
  names->insert(name);
  return name;
}

// An array instruction's shape as written, without its layout: "f32[8,128]". A tuple
// element the text uses as `%x#k` has no line of its own: its shape as the tuple has it.
std::string ShapeText(absl::string_view text, const InstructionText* t, const HloInstructionProto& inst) {
  if (t) return std::string(absl::StripTrailingAsciiWhitespace(text.substr(t->shape_begin, t->layout.begin - t->shape_begin)));
  xla::ShapeProto shape = inst.shape();
  shape.clear_layout();
  return PrintShape(shape);
}

// The name a parameter has in the program (its metadata op_name, e.g. "x" or "p[0][0]"),
// else its instruction's name.
std::string ParameterName(absl::string_view text, const InstructionText& t, const HloInstructionProto& inst) {
  const absl::string_view line = text.substr(t.start, t.end - t.start);
  const size_t at = line.find("op_name=\"");
  if (at == absl::string_view::npos) return inst.name();
  const size_t begin = at + 9, end = line.find('"', begin);
  if (end == absl::string_view::npos || end == begin) return inst.name();
  std::string name(line.substr(begin, std::min<size_t>(end - begin, 200)));
  for (char& c : name)  // it goes into messages and UTF-8 fields
    if (c < 0x20 || c > 0x7e) c = '?';
  return name;
}

// The id of the entry computation's root instruction.
int64_t EntryRoot(const xla::HloModuleProto& module) {
  for (const xla::HloComputationProto& c : module.computations())
    if (c.id() == module.entry_computation_id()) return c.root_id();
  return -1;
}

absl::Status Illegal(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": the row: ", why));
}

// The row's choices that a stock XLA honours as written (apply_layouts.h): each asks
// for a layout of an entry parameter or of the entry result. The first choice of a
// tensor wins; a later, different one needs a compiler hook like any other.
class Handoff {
 public:
  Handoff(absl::string_view text, const ParsedText& p, AppliedLayouts* out) : text_(text), p_(p), out_(out) {
    for (const xla::HloComputationProto& c : p.module.computations()) {
      if (c.id() != p.module.entry_computation_id()) continue;
      for (const HloInstructionProto& inst : c.instructions()) entry_.insert(inst.id());
      root_ = p.by_id.count(c.root_id()) ? p.by_id.at(c.root_id()) : nullptr;
    }
  }

  // `producer` asked for `layout` by `asked_by` (the input or kernel group of a
  // configurable instruction).
  void Operand(const HloInstructionProto& producer, const Layout& layout, const std::string& asked_by) {
    if (producer.opcode() == "parameter" && entry_.count(producer.id())) {
      const InstructionText& t = p_.map.at(producer.id());
      Add(false, producer.parameter_number(), ParameterName(text_, t, producer), producer, layout, asked_by);
    } else {
      Hook(asked_by, layout);
    }
  }
  // `inst` asked for `layout` of its own output.
  void Output(const HloInstructionProto& inst, const Layout& layout, const std::string& asked_by) {
    if (root_ && root_->id() == inst.id()) return Add(true, -1, inst.name(), inst, layout, asked_by);
    if (root_ && root_->opcode() == "tuple" && entry_.count(inst.id()))
      for (int i = 0; i < root_->operand_ids_size(); ++i)
        if (root_->operand_ids(i) == inst.id()) return Add(true, i, inst.name(), inst, layout, asked_by);
    Hook(asked_by, layout);
  }

 private:
  void Add(bool result, int64_t index, const std::string& name, const HloInstructionProto& inst, const Layout& layout,
           const std::string& asked_by) {
    for (const EntryLayout& e : out_->entry_layouts)
      if (e.result == result && e.index == index) {
        if (e.minor_to_major != layout)
          Hook(absl::StrCat(asked_by, " (", result ? "the result" : absl::StrCat("argument ", index), " is already asked for ",
                            LayoutText(e.minor_to_major), " by ", e.asked_by, ")"),
               layout);
        return;
      }
    EntryLayout e;
    e.result = result;
    e.index = index;
    e.name = name;
    const auto t = p_.map.find(inst.id());
    e.shape = ShapeText(text_, t == p_.map.end() ? nullptr : &t->second, inst);
    e.minor_to_major = layout;
    e.asked_by = asked_by;
    e.jax = absl::StrCat("Format(Layout(major_to_minor=", MajorToMinorTuple(layout), "), sharding)");
    out_->entry_layouts.push_back(std::move(e));
  }
  void Hook(const std::string& asked_by, const Layout& layout) {
    out_->needs_hook.push_back(absl::StrCat(asked_by, " ", LayoutText(layout)));
  }

  absl::string_view text_;
  const ParsedText& p_;
  AppliedLayouts* out_;
  std::unordered_set<int64_t> entry_;
  const HloInstructionProto* root_ = nullptr;
};

}  // namespace

std::string MajorToMinorTuple(const std::vector<int64_t>& minor_to_major) {
  std::vector<int64_t> major(minor_to_major.rbegin(), minor_to_major.rend());
  return major.size() == 1 ? absl::StrCat("(", major[0], ",)") : absl::StrCat("(", absl::StrJoin(major, ", "), ")");
}

namespace {

// Checks `row` against the module: its size, its values, its legality (the layout space).
absl::Status CheckRow(const ParsedText& p, const std::vector<int8_t>& row, absl::string_view what) {
  const std::vector<int64_t>& ids = p.graph.default_config_nodes;
  const size_t nc = ids.size();
  if (row.size() != nc * kConfigFeatDim)
    return Illegal(what, absl::StrCat(row.size(), " values; the module has ", nc, " configurable nodes, so a row has ",
                                      nc, " x ", kConfigFeatDim, " = ", nc * kConfigFeatDim));
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] < -1 || row[i] >= kLayoutSlots) {
      const hlo::NodeSource& n = p.graph.nodes[static_cast<size_t>(ids[i / kConfigFeatDim])];
      return Illegal(what, absl::StrCat("configurable node ", i / kConfigFeatDim, " (", n.opcode, " '", n.instruction,
                                        "'), slot ", i % kConfigFeatDim, " is ", row[i], ", expected -1..5"));
    }
  const std::vector<std::string> configurable = InstructionNames(p.graph.nodes, ids);
  const LayoutSpace space = LayoutSpaceOf(p.graph.graph, ids, &p.graph.first_operands, &configurable);
  if (const std::string bad = FirstIllegalLayoutRow(space, row.data(), 1); !bad.empty()) return Illegal(what, bad);
  return absl::OkStatus();
}

// A legal row's edits of the text, made in two steps: the configurable instructions'
// own layouts (Outputs), then the layouts their operands arrive in (Operands), which
// see the outputs set first.
class RowWriter {
 public:
  RowWriter(absl::string_view text, const ParsedText& p, const std::vector<int8_t>& row, absl::string_view what)
      : text_(text), eol_(LineEnd(text)), p_(p), row_(row), what_(what), handoff_(text, p, &out_) {
    for (const auto& [id, inst] : p.by_id) names_.insert(inst->name());
  }

  absl::Status Outputs();
  absl::Status Operands();
  absl::StatusOr<AppliedLayouts> Finish() {
    absl::StatusOr<std::string> edited = ApplyEdits(text_, std::move(edits_));
    if (!edited.ok()) return edited.status();
    out_.text = std::move(*edited);
    return std::move(out_);
  }

 private:
  Layout Current(const HloInstructionProto& inst) const {
    const auto it = set_.find(inst.id());
    return it != set_.end() ? it->second : Written(p_.map, inst);
  }
  void WriteLayout(const HloInstructionProto& inst, const Layout& l, absl::string_view why) {
    const InstructionText& t = p_.map.at(inst.id());
    const absl::string_view old = text_.substr(t.layout.begin, t.layout.end - t.layout.begin);
    edits_.push_back({t.layout.begin, old.size(), absl::StrCat(LayoutText(l), CommentsIn(old))});
    set_[inst.id()] = l;
    ++out_.layouts_written;
    out_.changes.push_back(absl::StrCat(inst.name(), ": ", why, " layout ", LayoutText(l)));
  }
  // The entry's root changed layout: a copy back to the program's result layout.
  void KeepResultLayout(const HloInstructionProto& inst, const Layout& before);
  const HloInstructionProto& Configurable(size_t j) const {
    return *p_.by_node[static_cast<size_t>(p_.graph.default_config_nodes[j])];
  }
  const int8_t* Group(size_t j, int g) const { return row_.data() + j * kConfigFeatDim + g * kLayoutSlots; }

  absl::string_view text_;
  const char* eol_;  // the text's line ending
  const ParsedText& p_;
  const std::vector<int8_t>& row_;
  absl::string_view what_;
  AppliedLayouts out_;
  Handoff handoff_;
  std::vector<Edit> edits_;
  std::unordered_set<std::string> names_;  // every instruction name, for the copies' names
  std::unordered_map<int64_t, Layout> set_;  // instruction id -> the layout this apply gave it
};

absl::Status RowWriter::Outputs() {
  const int64_t entry_root = EntryRoot(p_.module);
  for (size_t j = 0; j < p_.graph.default_config_nodes.size(); ++j) {
    const HloInstructionProto& inst = Configurable(j);
    const Layout prefix = Prefix(Group(j, 0));
    const Layout cur = Current(inst);
    if (prefix.empty() || StartsWith(cur, prefix)) continue;
    if (!p_.map.at(inst.id()).array_shape)  // the space gives a tuple no rank: unreachable, kept as a guard
      return Illegal(what_, absl::StrCat("output group of ", inst.name(), ": its shape is a tuple"));
    const Layout full = Complete(prefix, cur, inst.shape().dimensions_size());
    WriteLayout(inst, full, "output");
    handoff_.Output(inst, full, absl::StrCat(inst.name(), " output"));
    if (inst.id() == entry_root && p_.map.at(inst.id()).root) KeepResultLayout(inst, cur);
  }
  return absl::OkStatus();
}

void RowWriter::KeepResultLayout(const HloInstructionProto& inst, const Layout& before) {
  const InstructionText& t = p_.map.at(inst.id());
  const Layout result = Complete({}, before, inst.shape().dimensions_size());
  const std::string name = UniqueName(absl::StrCat(inst.name(), ".result"), &names_);
  size_t root_word = 4;  // "ROOT" and the spaces after it
  while (t.start + root_word < text_.size() && text_[t.start + root_word] == ' ') ++root_word;
  edits_.push_back({t.start, root_word, ""});
  edits_.push_back({t.end, 0,
                    absl::StrCat(eol_, IndentAt(text_, t.start), "ROOT %", name, " = ", ShapeText(text_, &t, inst),
                                 LayoutText(result), " copy(%", inst.name(), ")")});
  ++out_.copies;
  out_.changes.push_back(absl::StrCat(inst.name(), ": the program's result, kept in layout ", LayoutText(result),
                                      " by a copy ", name, " (the new ROOT)"));
}

absl::Status RowWriter::Operands() {
  for (size_t j = 0; j < p_.graph.default_config_nodes.size(); ++j) {
    const HloInstructionProto& user = Configurable(j);
    for (int g = 1; g < kConfigGroups; ++g) {
      const Layout prefix = Prefix(Group(j, g));
      if (prefix.empty()) continue;
      const int k = g - 1;  // input: operand 0, kernel: operand 1
      const HloInstructionProto& producer = *p_.by_id.at(user.operand_ids(k));  // the space checked it exists
      // A tuple element used as `%x#k` has no line of its own (hlo_text.h): like a
      // parameter, it is never edited; a copy takes the layout.
      const auto line = p_.map.find(producer.id());
      const InstructionText* pt = line == p_.map.end() ? nullptr : &line->second;
      if (producer.shape().element_type() == xla::TUPLE)
        return Illegal(what_, absl::StrCat(LayoutGroupName(g), " group of ", user.name(), ": its operand ",
                                           producer.name(), " is a tuple"));
      const Layout cur = Current(producer);
      if (StartsWith(cur, prefix)) continue;
      const Layout full = Complete(prefix, cur, producer.shape().dimensions_size());
      handoff_.Operand(producer, full, absl::StrCat(user.name(), " ", LayoutGroupName(g)));
      if (cur.empty() && producer.opcode() != "parameter" && pt) {
        WriteLayout(producer, full, absl::StrCat(LayoutGroupName(g), " of ", user.name(), ":"));
        continue;
      }
      // A copy into the layout the user asks for, just before the user.
      const std::string name =
          UniqueName(absl::StrCat(producer.name(), ".", LayoutGroupName(g), ".", user.name()), &names_);
      const std::string shape = absl::StrCat(ShapeText(text_, pt, producer), LayoutText(full));
      const InstructionText& ut = p_.map.at(user.id());
      edits_.push_back({ut.start, 0, absl::StrCat("%", name, " = ", shape, " copy(%", producer.name(), ")", eol_,
                                                  IndentAt(text_, ut.start))});
      const TextSpan operand = ut.operands.at(static_cast<size_t>(k));
      const bool shape_written =
          text_.substr(operand.begin, operand.end - operand.begin).find('[') != absl::string_view::npos;
      edits_.push_back({operand.begin, operand.end - operand.begin,
                        absl::StrCat(shape_written ? shape + " " : "", "%", name,
                                     CommentsIn(text_.substr(operand.begin, operand.end - operand.begin)))});
      ++out_.copies;
      out_.changes.push_back(absl::StrCat(user.name(), ": ", LayoutGroupName(g), " (operand ", k, ", ",
                                          producer.name(), ") through a copy ", name, " with layout ",
                                          LayoutText(full)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AppliedLayouts> ApplyLayoutRow(absl::string_view text, const std::vector<int8_t>& row,
                                              absl::string_view what, const Limits& limits) {
  absl::StatusOr<ParsedText> parsed = Read(text, what, limits);
  if (!parsed.ok()) return parsed.status();
  if (absl::Status s = CheckRow(*parsed, row, what); !s.ok()) return s;
  RowWriter writer(text, *parsed, row, what);
  if (absl::Status s = writer.Outputs(); !s.ok()) return s;
  if (absl::Status s = writer.Operands(); !s.ok()) return s;
  return writer.Finish();
}

absl::StatusOr<std::vector<int8_t>> WrittenLayoutRow(absl::string_view text, absl::string_view what) {
  absl::StatusOr<ParsedText> parsed = Read(text, what, Limits{});
  if (!parsed.ok()) return parsed.status();
  const ParsedText& p = *parsed;
  const std::vector<int64_t>& ids = p.graph.default_config_nodes;
  std::vector<int8_t> row(ids.size() * kConfigFeatDim, -1);
  for (size_t j = 0; j < ids.size(); ++j) {
    const HloInstructionProto& inst = *p.by_node[static_cast<size_t>(ids[j])];
    for (int g = 0; g < kConfigGroups; ++g) {
      const int k = g - 1;
      if (k >= inst.operand_ids_size()) continue;
      const Layout l = Written(p.map, k < 0 ? inst : *p.by_id.at(inst.operand_ids(k)));
      for (size_t d = 0; d < l.size() && d < static_cast<size_t>(kLayoutSlots); ++d)
        row[j * kConfigFeatDim + static_cast<size_t>(g * kLayoutSlots) + d] = static_cast<int8_t>(l[d]);
    }
  }
  return row;
}

}  // namespace tgraph::hlo
