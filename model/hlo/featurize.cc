#include "model/hlo/featurize.h"

#include "model/core/opcodes.h"
#include "model/hlo/canonical_order.h"
#include "model/hlo/hlo_text.h"
#include "model/hlo/shape_check.h"
#include "model/hlo/wire_scan.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tgraph::hlo {
namespace {

using xla::HloComputationProto;
using xla::HloInstructionProto;
using xla::HloModuleProto;

// node_feat[2:21]: the one-hot order of the element types (xla.PrimitiveType values).
constexpr std::array<int, 19> kElementTypeOrder = {
    xla::PRIMITIVE_TYPE_INVALID, xla::PRED, xla::S8,  xla::S16,  xla::S32,   xla::S64,
    xla::U8,                     xla::U16,  xla::U32, xla::U64,  xla::F16,   xla::F32,
    xla::F64,                    xla::BF16, xla::C64, xla::C128, xla::TUPLE, xla::OPAQUE_TYPE,
    xla::TOKEN};

constexpr int kMaxDims = 6;

// Appends values to a node's feature row, in the encoder's field order.
class Row {
 public:
  explicit Row(float* out) : out_(out) {}
  void Put(double v) { out_[pos_++] = static_cast<float>(v); }
  void PutInt(int64_t v) { out_[pos_++] = static_cast<float>(v); }
  // The first `lead` values zero-padded; with `aggregates`, then the sum and the product
  // of all values (integer arithmetic, as the encoder's int64; the product of none is
  // `empty_product`).
  template <typename Seq, typename Get>
  void Sequence(const Seq& seq, int lead, bool aggregates, Get get, int64_t empty_product = 1) {
    uint64_t sum = 0, product = 1;  // unsigned: wraps like two's complement, never UB
    int i = 0;
    for (const auto& x : seq) {
      const int64_t v = get(x);
      sum += static_cast<uint64_t>(v);
      product *= static_cast<uint64_t>(v);
      if (i < lead) PutInt(v);
      ++i;
    }
    for (; i < lead; ++i) Put(0);
    if (!aggregates) return;
    PutInt(static_cast<int64_t>(sum));
    PutInt(seq.empty() ? empty_product : static_cast<int64_t>(product));
  }
  template <typename Seq>
  void Ints(const Seq& seq, int lead, bool aggregates, int64_t empty_product = 1) {
    Sequence(seq, lead, aggregates, [](int64_t v) { return v; }, empty_product);
  }
  int pos() const { return pos_; }

 private:
  float* out_;
  int pos_ = 0;
};

// node_feat of docs/format.md, 140 values.
void InstructionFeatures(const HloInstructionProto& inst, const HloComputationProto& comp, float* out) {
  Row r(out);
  r.Put(inst.id() == comp.root_id() ? 1 : 0);  // 0 is_root
  r.Put(0);                                     // 1 element_size_in_bits: always 0
  const xla::ShapeProto& shape = inst.shape();
  for (int t : kElementTypeOrder) r.Put(shape.element_type() == t ? 1 : 0);  // 2-20
  r.Ints(shape.dimensions(), 6, true);          // 21-28
  r.PutInt(shape.tuple_shapes_size());          // 29
  r.PutInt(inst.parameter_number());            // 30
  r.Ints(inst.dimensions(), 6, false);          // 31-36
  const auto& win = inst.window().dimensions();  // 37-92
  r.Sequence(win, 6, true, [](const xla::WindowDimension& d) { return d.size(); });
  r.Sequence(win, 6, true, [](const xla::WindowDimension& d) { return d.stride(); });
  r.Sequence(win, 6, true, [](const xla::WindowDimension& d) { return d.padding_low(); });
  r.Sequence(win, 6, true, [](const xla::WindowDimension& d) { return d.padding_high(); });
  r.Sequence(win, 6, true, [](const xla::WindowDimension& d) { return d.window_dilation(); });
  r.Sequence(win, 6, true, [](const xla::WindowDimension& d) { return d.base_dilation(); });
  int64_t reversed = 0;
  for (int i = 0; i < kMaxDims; ++i) r.Put(i < win.size() && win.Get(i).window_reversal() ? 1 : 0);
  for (const auto& d : win) reversed += d.window_reversal() ? 1 : 0;
  r.PutInt(reversed);
  r.PutInt(win.size() - reversed);
  const xla::ConvolutionDimensionNumbers& cd = inst.convolution_dimension_numbers();  // 93-106
  r.PutInt(cd.input_batch_dimension());
  r.PutInt(cd.input_feature_dimension());
  r.Ints(cd.input_spatial_dimensions(), 4, false);
  r.PutInt(cd.kernel_input_feature_dimension());
  r.PutInt(cd.kernel_output_feature_dimension());
  r.Ints(cd.kernel_spatial_dimensions(), 4, false);
  r.PutInt(cd.output_batch_dimension());
  r.PutInt(cd.output_feature_dimension());
  r.PutInt(inst.feature_group_count());  // 107
  r.PutInt(inst.batch_group_count());    // 108
  const auto& sl = inst.slice_dimensions();  // 109-120
  using Slice = HloInstructionProto::SliceDimensions;
  r.Sequence(sl, 2, true, [](const Slice& s) { return s.start(); });
  r.Sequence(sl, 2, true, [](const Slice& s) { return s.stride(); });
  r.Sequence(sl, 2, true, [](const Slice& s) { return s.limit(); });
  r.Ints(inst.dynamic_slice_sizes(), 2, true);  // 121-124
  const auto& pad = inst.padding_config().dimensions();  // 125-132
  using PadDim = xla::PaddingConfig::PaddingConfigDimension;
  r.Sequence(pad, 2, true, [](const PadDim& p) { return p.edge_padding_low(); });
  r.Sequence(pad, 2, true, [](const PadDim& p) { return p.edge_padding_high(); });
  r.Put(inst.is_stable() ? 1 : 0);                         // 133
  r.Ints(shape.layout().minor_to_major(), 6, false);       // 134-139
}

// Names as they leave the featurizer (node sources, warnings, errors, responses): HLO
// names are identifiers, but a corrupt or hostile module may hold any bytes, which
// must not reach UTF-8 string fields or logs: anything outside printable ASCII
// becomes '?'.
std::string Printable(absl::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

absl::Status Invalid(absl::string_view what, const HloComputationProto& comp, const HloInstructionProto* inst,
                     absl::string_view msg) {
  std::string where = absl::StrCat(what, ": computation '", ShownName(comp.name()), "'");
  if (inst) absl::StrAppend(&where, ", instruction '", ShownName(inst->name()), "' (id ", inst->id(), ")");
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}

bool IsDefaultConfigurable(int opcode) {
  return opcode == op::kConvolution || opcode == op::kDot || opcode == op::kReshape;
}

}  // namespace

std::string ShownName(absl::string_view name) {
  constexpr size_t kMax = 120;
  if (name.size() <= kMax) return Printable(name);
  return absl::StrCat(Printable(name.substr(0, kMax)), "...(", name.size(), " bytes)");
}

std::string FileSafeName(absl::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}


namespace {

// A module has computations, each with instructions; another message read as one
// (e.g. a tpu_graphs.TuningData) has neither.
bool LooksLikeModule(const HloModuleProto& m) {
  if (m.computations_size() == 0) return false;
  for (const HloComputationProto& c : m.computations())
    if (c.instructions_size() == 0) return false;
  return true;
}

// Parses `bytes` as a message of `T` after scanning them (wire_scan.h): nullopt when
// they are not one; RESOURCE_EXHAUSTED when over the instruction limit or refused
// the working memory.
template <typename T>
absl::StatusOr<std::optional<T>> ScanAndParse(absl::string_view bytes, absl::string_view what, const Limits& limits,
                                              WorkingMemory* memory) {
  const std::optional<WireScan> scan = ScanWire(bytes, T::descriptor());
  if (!scan) return std::optional<T>();
  if (scan->instructions > limits.max_instructions)
    return absl::ResourceExhaustedError(absl::StrCat(what, ": the module has ", scan->instructions,
                                                     " instructions, over the limit of ", limits.max_instructions));
  if (absl::Status s = memory->Reserve(scan->kept_bytes + scan->parse_bytes); !s.ok()) return s;
  const std::string kept = KeepDeclaredFields(bytes, T::descriptor());
  T message;
  if (!message.ParseFromString(kept)) return std::optional<T>();
  return std::optional<T>(std::move(message));
}

}  // namespace

std::vector<std::string> InstructionNames(const std::vector<NodeSource>& nodes, const std::vector<int64_t>& ids) {
  std::vector<std::string> names;
  names.reserve(ids.size());
  for (int64_t id : ids)
    names.push_back(id >= 0 && id < static_cast<int64_t>(nodes.size()) ? nodes[static_cast<size_t>(id)].instruction : "");
  return names;
}

namespace {

// XLA writes an unbounded dynamic dimension ('?' in the text) into a proto as the
// smallest int64; the text reader keeps it as -1. Both become -1, so that a dump's text
// and proto give one graph and one hash.
void UnboundedAsText(xla::ShapeProto* shape) {
  for (int i = 0; i < shape->dimensions_size(); ++i)
    if (shape->dimensions(i) == std::numeric_limits<int64_t>::min()) shape->set_dimensions(i, -1);
  for (int i = 0; i < shape->tuple_shapes_size(); ++i) UnboundedAsText(shape->mutable_tuple_shapes(i));
}

absl::Status FromProto(HloModuleProto* module, WorkingMemory* memory) {
  for (xla::HloComputationProto& comp : *module->mutable_computations())
    for (xla::HloInstructionProto& inst : *comp.mutable_instructions()) UnboundedAsText(inst.mutable_shape());
  return CanonicalizeOrder(module, memory);
}

}  // namespace

absl::StatusOr<HloModuleProto> ParseModule(absl::string_view bytes, absl::string_view what, const Limits& limits) {
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty; expected an HLO module"));
  if (LooksLikeHloText(bytes)) return ParseHloText(bytes, what, limits);
  if (bytes.size() > static_cast<size_t>(INT32_MAX))  // protobuf's limit for one message
    return absl::ResourceExhaustedError(absl::StrCat(what, ": ", bytes.size(), " bytes, over protobuf's 2 GiB limit"));
  WorkingMemory memory(limits, what);
  // An xla.HloProto (XLA's *.hlo.pb dumps) holds the module in field 1; a bare
  // HloModuleProto has its name there, which does not parse as a module with
  // computations. So: HloProto if that gives a module with computations.
  absl::StatusOr<std::optional<xla::HloProto>> wrapped = ScanAndParse<xla::HloProto>(bytes, what, limits, &memory);
  if (!wrapped.ok()) return wrapped.status();
  if (*wrapped && (*wrapped)->has_hlo_module() && LooksLikeModule((*wrapped)->hlo_module())) {
    HloModuleProto module = std::move(*(*wrapped)->mutable_hlo_module());
    if (absl::Status s = FromProto(&module, &memory); !s.ok()) return s;
    return module;
  }
  wrapped->reset();
  absl::StatusOr<std::optional<HloModuleProto>> module = ScanAndParse<HloModuleProto>(bytes, what, limits, &memory);
  if (!module.ok()) return module.status();
  if (!*module)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not a serialized xla.HloProto or xla.HloModuleProto (protobuf parsing failed: truncated or "
              "another kind of file)"));
  if (!LooksLikeModule(**module))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not an HLO module: it parses, but has no computations with instructions (expected an "
              "xla.HloProto, e.g. an XLA dump *.hlo.pb, or an xla.HloModuleProto; tile tuning data, a "
              "tpu_graphs.TuningData, is read by tgraph-featurize tile)"));
  if (absl::Status s = FromProto(&**module, &memory); !s.ok()) return s;
  return std::move(**module);
}

namespace {

// What FeaturizeModule gathers over the computations in order.
struct ModuleBuild {
  std::unordered_map<int64_t, int> comp_pos;  // computation id -> position
  std::vector<int64_t> root_node;             // per computation: its root's node, for call edges
  // One instruction's edge targets, each once: an operand listed a million times is
  // one edge (mark[v] == the node whose targets hold v).
  std::vector<int64_t> targets, mark;
  std::set<std::string> unknown_opcodes;
  // Signs of a module dumped after XLA's optimization passes: fusion instructions, and
  // custom calls to the compiler's library kernels (targets "__cudnn$...",
  // "__cublas$...", "__triton...", "__onednn$...": XLA names its own with "__"; a
  // program's own custom calls, such as JAX's "Sharding" or a "lapack_..." kernel, do
  // not begin so).
  int64_t fusions = 0, library_calls = 0;
  std::string library_example;
};

// The warning for a module dumped after XLA's optimization passes, or "".
std::string AfterOptimizationWarning(const ModuleBuild& b, const ModuleGraph& g) {
  if (b.fusions == 0 && b.library_calls == 0) return "";
  std::vector<std::string> signs;
  if (b.fusions > 0) signs.push_back(absl::StrCat(b.fusions, " fusion instructions"));
  if (b.library_calls > 0)
    signs.push_back(absl::StrCat(b.library_calls, " custom calls to library kernels such as ", b.library_example));
  return absl::StrCat(
      "module ", g.module_name, " was dumped after XLA's optimization passes (", absl::StrJoin(signs, ", "),
      "): its convolutions and dots sit inside fusions", b.library_calls > 0 ? " and library calls" : "",
      ", so only ", g.default_config_nodes.size(),
      " of its ", g.graph.num_nodes,
      " instructions are configurable, and tgraph's models learn from modules before optimization. Register the "
      "dump XLA writes before its passes instead: *.before_optimizations.txt or .hlo.pb beside this file "
      "(XLA_FLAGS=--xla_dump_to=DIR), or JAX's jax.jit(f).lower(...).as_text(dialect=\"hlo\")");
}

// The edges of instruction `ii` of computation `ci` (node `node`): to its operands, which
// must come before it in the computation, and to the roots of the computations it
// calls, which must come before its own; its operands 0 and 1 into *first_operands.
// Appended to `edge_index` once each, ascending (so rows stay sorted).
absl::Status InstructionEdges(const HloModuleProto& module, int ci, int ii, int64_t node, int64_t base,
                              const std::unordered_map<int64_t, int64_t>& local, absl::string_view what,
                              ModuleBuild* b, std::array<int64_t, 2>* first_operands, std::vector<int64_t>* edge_index) {
  b->targets.clear();
  auto add = [&](int64_t v) {
    if (b->mark[static_cast<size_t>(v)] == node) return;
    b->mark[static_cast<size_t>(v)] = node;
    b->targets.push_back(v);
  };
  const HloComputationProto& comp = module.computations(ci);
  const HloInstructionProto& inst = comp.instructions(ii);
  for (int k = 0; k < inst.operand_ids_size(); ++k) {
    const int64_t operand = inst.operand_ids(k);
    auto it = local.find(operand);
    if (it == local.end())
      return Invalid(what, comp, &inst, absl::StrCat("operand id ", operand, " is not an instruction of this computation"));
    if (it->second >= node)
      return Invalid(what, comp, &inst,
                     absl::StrCat("operand id ", operand, " ('", ShownName(comp.instructions(it->second - base).name()),
                                  "') does not come before it: a cycle, or instructions out of dependency order"));
    add(it->second);
    if (k < 2) (*first_operands)[static_cast<size_t>(k)] = it->second;
  }
  for (int64_t called : inst.called_computation_ids()) {
    auto it = b->comp_pos.find(called);
    if (it != b->comp_pos.end() && it->second == ci)
      return Invalid(what, comp, &inst, absl::StrCat("calls computation id ", called, ", its own: a cycle of calls"));
    if (it == b->comp_pos.end()) {
      bool later = false;
      for (int cj = ci; cj < module.computations_size(); ++cj) later |= module.computations(cj).id() == called;
      return Invalid(what, comp, &inst,
                     later ? absl::StrCat("calls computation id ", called,
                                          ", which does not come before its caller: a cycle of calls, or "
                                          "computations out of dependency order")
                           : absl::StrCat("calls computation id ", called, ", which the module does not have"));
    }
    add(b->root_node[static_cast<size_t>(it->second)]);
  }
  std::sort(b->targets.begin(), b->targets.end());
  for (int64_t v : b->targets) {
    edge_index->push_back(node);
    edge_index->push_back(v);
  }
  return absl::OkStatus();
}

// Computation `ci`'s instructions as nodes base.., with their features and edges.
absl::Status FeaturizeComputation(const HloModuleProto& module, int ci, int64_t base, absl::string_view what,
                                  ModuleBuild* b, ModuleGraph* out) {
  const HloComputationProto& comp = module.computations(ci);
  if (!b->comp_pos.emplace(comp.id(), ci).second)
    return Invalid(what, comp, nullptr, absl::StrCat("computation id ", comp.id(), " is used twice"));
  if (comp.instructions_size() == 0) return Invalid(what, comp, nullptr, "has no instructions");
  // Instruction id -> node, within the computation (operands live in the same one).
  std::unordered_map<int64_t, int64_t> local;
  for (int ii = 0; ii < comp.instructions_size(); ++ii) {
    const HloInstructionProto& inst = comp.instructions(ii);
    if (!local.emplace(inst.id(), base + ii).second)
      return Invalid(what, comp, &inst, "its id is used by another instruction of the computation");
  }
  auto root = local.find(comp.root_id());
  if (root == local.end())
    return Invalid(what, comp, nullptr,
                   absl::StrCat("root_id ", comp.root_id(), " is not the id of one of its instructions"));
  b->root_node[static_cast<size_t>(ci)] = root->second;
  for (int ii = 0; ii < comp.instructions_size(); ++ii) {
    const HloInstructionProto& inst = comp.instructions(ii);
    const int64_t node = base + ii;
    if (inst.shape().dimensions_size() > kMaxDims)
      return Invalid(what, comp, &inst,
                     absl::StrCat("its shape has ", inst.shape().dimensions_size(),
                                  " dimensions; the TpuGraphs features describe at most ", kMaxDims));
    if (std::string problem = ShapeProblem(inst.shape()); !problem.empty()) return Invalid(what, comp, &inst, problem);
    if (!IsXlaOpcode(inst.opcode()))
      return Invalid(what, comp, &inst,
                     absl::StrCat("unknown opcode '", ShownName(inst.opcode()),
                                  "': not one of XLA's (docs/format.md, HLO opcode ids)"));
    const int opcode = OpcodeId(inst.opcode());
    if (opcode == 0 && b->unknown_opcodes.size() < 20) b->unknown_opcodes.insert(ShownName(inst.opcode()));
    if (opcode == op::kFusion) ++b->fusions;
    if (opcode == op::kCustomCall && absl::StartsWith(inst.custom_call_target(), "__")) {
      if (b->library_calls++ == 0) b->library_example = ShownName(inst.custom_call_target());
    }
    out->graph.node_opcode[static_cast<size_t>(node)] = opcode;
    out->nodes[static_cast<size_t>(node)] = {Printable(comp.name()), Printable(inst.name()), Printable(inst.opcode()),
                                             inst.id()};
    InstructionFeatures(inst, comp, out->graph.node_feat.data() + node * kNodeFeatDim);
    if (IsDefaultConfigurable(opcode)) out->default_config_nodes.push_back(node);
    if (absl::Status s = InstructionEdges(module, ci, ii, node, base, local, what, b,
                                         &out->first_operands[static_cast<size_t>(node)], &out->graph.edge_index);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

// What FeaturizeModule allocates for `module` (n instructions), bounded from above:
// the graph it returns (140 floats per node, the names of NodeSource, the edges) and
// its working maps. An instruction's edges go to distinct nodes: at most one per
// operand and per earlier instruction of its computation, plus one per called
// computation and per computation.
int64_t FeaturizeBytes(const HloModuleProto& module, int64_t n) {
  constexpr int64_t kAlloc = 16, kMapEntry = 64;
  auto heap = [](size_t len) -> int64_t { return len > 15 ? static_cast<int64_t>(len) + 1 + kAlloc : 0; };
  int64_t names = 0, largest = 0, edges = 0, most_edges = 0;
  for (const HloComputationProto& comp : module.computations()) {
    largest = std::max<int64_t>(largest, comp.instructions_size());
    for (int ii = 0; ii < comp.instructions_size(); ++ii) {
      const HloInstructionProto& inst = comp.instructions(ii);
      const int64_t e = std::min<int64_t>(inst.operand_ids_size(), ii) +
                        std::min<int64_t>(inst.called_computation_ids_size(), module.computations_size());
      edges += e;
      most_edges = std::max(most_edges, e);
      names += heap(comp.name().size()) + heap(inst.name().size()) + heap(inst.opcode().size());
    }
  }
  const int64_t per_node = kNodeFeatDim * static_cast<int64_t>(sizeof(float)) + static_cast<int64_t>(sizeof(int32_t)) +
                           static_cast<int64_t>(sizeof(NodeSource)) + 16 /* first operands */ + 8 /* mark */ +
                           24 /* default_config_nodes, with growth */;
  // Edges: two int64 each, three times while edge_index grows; one instruction's
  // targets at a time in a scratch vector.
  constexpr int64_t kEdge = 3 * 2 * static_cast<int64_t>(sizeof(int64_t));
  return n * per_node + names + edges * kEdge + most_edges * 3 * 8 + largest * kMapEntry +
         module.computations_size() * (kMapEntry + 8) + (int64_t{64} << 10);
}

}  // namespace

absl::StatusOr<ModuleGraph> FeaturizeModule(const HloModuleProto& module, absl::string_view what,
                                            const Limits& limits) {
  if (module.computations_size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(what, ": the module has no computations"));
  int64_t n = 0;
  for (const HloComputationProto& c : module.computations()) n += c.instructions_size();
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": the module has no instructions"));
  if (n > limits.max_instructions)
    return absl::ResourceExhaustedError(absl::StrCat(what, ": the module has ", n,
                                                     " instructions, over the limit of ", limits.max_instructions));
  WorkingMemory memory(limits, what);
  if (absl::Status s = memory.Reserve(FeaturizeBytes(module, n)); !s.ok()) return s;
  ModuleGraph out;
  out.module_name = Printable(module.name());
  out.graph.num_nodes = n;
  out.graph.node_feat.assign(static_cast<size_t>(n) * kNodeFeatDim, 0.0f);
  out.graph.node_opcode.assign(static_cast<size_t>(n), 0);
  out.nodes.resize(static_cast<size_t>(n));
  out.first_operands.assign(static_cast<size_t>(n), {-1, -1});
  out.node_splits = {0};
  ModuleBuild b;
  b.root_node.assign(static_cast<size_t>(module.computations_size()), -1);
  b.mark.assign(static_cast<size_t>(n), -1);
  int64_t base = 0;
  for (int ci = 0; ci < module.computations_size(); ++ci) {
    if (absl::Status s = FeaturizeComputation(module, ci, base, what, &b, &out); !s.ok()) return s;
    const HloComputationProto& comp = module.computations(ci);
    base += comp.instructions_size();
    if (absl::StrContains(comp.name(), "cluster") || absl::StrContains(comp.name(), "while") ||
        absl::StrContains(comp.name(), "cond"))
      out.node_splits.push_back(base);
  }
  if (out.node_splits.back() < n) out.node_splits.push_back(n);
  for (const std::string& name : b.unknown_opcodes)
    out.warnings.push_back(absl::StrCat("opcode '", name, "' is not in the opcode table (docs/format.md): encoded as id 0"));
  if (std::string w = AfterOptimizationWarning(b, out); !w.empty()) {
    out.after_optimizations = true;
    out.warnings.push_back(std::move(w));
  }
  return out;
}

absl::Status NodeLayoutValues(const TensorLayouts& tensors, int8_t* out) {
  std::fill(out, out + kConfigFeatDim, int8_t{-1});
  if (tensors.size() > static_cast<size_t>(kConfigGroups))
    return absl::InvalidArgumentError(
        absl::StrCat(tensors.size(), " tensor layouts; at most 3 (output, input, kernel)"));
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].size() > static_cast<size_t>(kLayoutSlots))
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " has ", tensors[t].size(), " dimensions; at most 6"));
    for (size_t d = 0; d < tensors[t].size(); ++d) {
      const int64_t v = tensors[t][d];
      if (v < 0 || v >= kLayoutSlots)
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t, ", position ", d, " is ", v, "; a dimension index 0..5"));
      out[t * kLayoutSlots + d] = static_cast<int8_t>(v);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int8_t>> LayoutConfigRow(const std::vector<TensorLayouts>& per_node) {
  std::vector<int8_t> row(per_node.size() * kConfigFeatDim);
  for (size_t i = 0; i < per_node.size(); ++i)
    if (absl::Status s = NodeLayoutValues(per_node[i], row.data() + i * kConfigFeatDim); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("configurable node ", i, ": ", s.message()));
  return row;
}

absl::StatusOr<LayoutTuning> FeaturizeLayoutTuning(const xla::ModuleTuningData& data, absl::string_view what,
                                                   const Limits& limits) {
  if (!data.has_module())
    return absl::InvalidArgumentError(absl::StrCat(what, ": the tuning data has no module (field 1)"));
  absl::StatusOr<ModuleGraph> module = FeaturizeModule(data.module(), what, limits);
  if (!module.ok()) return module.status();
  LayoutTuning out;
  const int64_t n = module->graph.num_nodes;
  const int nc = data.config_index_to_node_size();
  if (nc == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": config_index_to_node is empty: not layout tuning data (tile data is a TuningData)"));
  std::vector<int64_t> ids;
  std::set<int64_t> seen;
  for (int i = 0; i < nc; ++i) {
    const uint64_t id = data.config_index_to_node(i);
    if (id >= static_cast<uint64_t>(n))
      return absl::InvalidArgumentError(absl::StrCat(what, ": config_index_to_node[", i, "] is ", id,
                                                     ", expected a node index 0..", n - 1));
    if (!seen.insert(static_cast<int64_t>(id)).second)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": config_index_to_node lists node ", id, " twice (entries up to ", i, ")"));
    ids.push_back(static_cast<int64_t>(id));
  }
  bool has_default = false;
  std::vector<int8_t> configs;
  std::vector<int64_t> runtimes;
  for (int r = 0; r < data.runs_size(); ++r) {
    const xla::ConfigProfile& run = data.runs(r);
    ++out.stats.runs;
    if (!run.has_module_config()) { ++out.stats.without_config; continue; }
    if (run.error()) { ++out.stats.errors; continue; }
    if (!run.has_profile()) { ++out.stats.without_profile; continue; }
    if (run.profile().compute_time_ns() <= 0) { ++out.stats.nonpositive_time; continue; }
    const auto& nodes = run.module_config().layout_config().nodes();
    if (nodes.size() != nc)
      return absl::InvalidArgumentError(absl::StrCat(what, ": run ", r, " configures ", nodes.size(),
                                                     " nodes, config_index_to_node has ", nc));
    std::vector<TensorLayouts> per_node(static_cast<size_t>(nc));
    for (int i = 0; i < nc; ++i)
      for (const auto& tensor : nodes.Get(i).tensors()) {
        // Upstream keeps the first 6 dimensions of each tensor.
        const int keep = std::min(tensor.dims_size(), kLayoutSlots);
        per_node[static_cast<size_t>(i)].emplace_back(tensor.dims().begin(), tensor.dims().begin() + keep);
      }
    absl::StatusOr<std::vector<int8_t>> row = LayoutConfigRow(per_node);
    if (!row.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": run ", r, ": ", row.status().message()));
    configs.insert(configs.end(), row->begin(), row->end());
    runtimes.push_back(run.profile().compute_time_ns());
    has_default |= run.is_default();
    ++out.stats.kept;
  }
  if (!has_default)
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": no kept run is the default configuration (is_default); the TpuGraphs encoder drops such modules"));
  out.graph.name = module->module_name;
  out.graph.graph = module->graph;
  out.graph.node_config_ids = std::move(ids);
  out.graph.num_configs = static_cast<int64_t>(runtimes.size());
  out.graph.config_feat = std::move(configs);
  out.graph.config_runtime = std::move(runtimes);
  out.graph.node_splits = module->node_splits;
  out.module = std::move(*module);
  if (absl::Status s = ValidateLayoutGraph(out.graph, what); !s.ok()) return s;
  return out;
}

std::vector<float> TileConfigFeatures(const xla::TileSizeConfig& config) {
  std::vector<float> f(kTileConfigDim, 0.0f);
  Row r(f.data());
  r.Ints(config.kernel_bounds(), 6, true, /*empty_product=*/0);
  r.Ints(config.output_bounds(), 6, true, /*empty_product=*/0);
  r.Ints(config.input_bounds(), 6, true, /*empty_product=*/0);
  return f;
}

absl::StatusOr<TileTuning> FeaturizeTileTuning(const xla::TuningData& data, absl::string_view what,
                                               const Limits& limits) {
  TileTuning out;
  for (int k = 0; k < data.modules_size(); ++k) {
    const xla::ModuleTuningData& m = data.modules(k);
    const std::string label = absl::StrCat("kernel ", k, " (", ShownName(m.module().name()), ")");
    if (m.runs_size() <= 1) {
      out.skipped.push_back(absl::StrCat(label, ": ", m.runs_size(), " run(s); at least 2 are needed"));
      continue;
    }
    if (!m.has_module()) {
      out.skipped.push_back(absl::StrCat(label, ": no module"));
      continue;
    }
    bool all_tiled = true;
    for (const xla::ConfigProfile& run : m.runs()) all_tiled &= run.op_config().has_tile_size_config();
    if (!all_tiled) {
      out.skipped.push_back(absl::StrCat(label, ": a run has no tile size config"));
      continue;
    }
    absl::StatusOr<ModuleGraph> module = FeaturizeModule(m.module(), absl::StrCat(what, ": ", label), limits);
    if (!module.ok()) return module.status();
    TileGraph g;
    RunStats stats;
    int64_t normalizer = 0;
    for (const xla::ConfigProfile& run : m.runs()) {
      ++stats.runs;
      if (run.error()) { ++stats.errors; continue; }
      if (run.profile().compute_time_ns() <= 1) { ++stats.nonpositive_time; continue; }
      if (run.is_default() && normalizer == 0) normalizer = run.profile().compute_time_ns();
      const std::vector<float> f = TileConfigFeatures(run.op_config().tile_size_config());
      g.config_feat.insert(g.config_feat.end(), f.begin(), f.end());
      g.config_runtime.push_back(run.profile().compute_time_ns());
      ++stats.kept;
    }
    if (normalizer == 0) {
      out.skipped.push_back(absl::StrCat(label, ": no kept run is the default (is_default), so no normalizer"));
      continue;
    }
    char fp[17];
    std::snprintf(fp, sizeof(fp), "%016llx", static_cast<unsigned long long>(m.fingerprint()));
    g.name = absl::StrCat(FileSafeName(m.module().name().substr(0, 120)), "_", fp);
    g.graph = std::move(module->graph);
    g.num_configs = static_cast<int64_t>(g.config_runtime.size());
    g.config_runtime_normalizers.assign(g.config_runtime.size(), normalizer);
    if (absl::Status s = ValidateTileGraph(g, absl::StrCat(what, ": ", label)); !s.ok()) return s;
    out.graphs.push_back(std::move(g));
    out.stats.push_back(stats);
  }
  return out;
}

}  // namespace tgraph::hlo
