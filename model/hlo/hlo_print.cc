#include "model/hlo/hlo_print.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/hlo/hlo_text.h"
#include "model/hlo/shape_check.h"

namespace tgraph::hlo {

const char* ElementTypeName(int type) {
  switch (type) {
    case xla::PRED: return "pred";
    case xla::S8: return "s8";
    case xla::S16: return "s16";
    case xla::S32: return "s32";
    case xla::S64: return "s64";
    case xla::U8: return "u8";
    case xla::U16: return "u16";
    case xla::U32: return "u32";
    case xla::U64: return "u64";
    case xla::F16: return "f16";
    case xla::F32: return "f32";
    case xla::F64: return "f64";
    case xla::BF16: return "bf16";
    case xla::C64: return "c64";
    case xla::C128: return "c128";
    case xla::TOKEN: return "token";
    case xla::OPAQUE_TYPE: return "opaque";
    case xla::S1: return "s1";
    case xla::S2: return "s2";
    case xla::S4: return "s4";
    case xla::U1: return "u1";
    case xla::U2: return "u2";
    case xla::U4: return "u4";
    case xla::F8E5M2: return "f8e5m2";
    case xla::F8E4M3: return "f8e4m3";
    case xla::F8E4M3FN: return "f8e4m3fn";
    case xla::F8E4M3B11FNUZ: return "f8e4m3b11fnuz";
    case xla::F8E3M4: return "f8e3m4";
    case xla::F8E5M2FNUZ: return "f8e5m2fnuz";
    case xla::F8E4M3FNUZ: return "f8e4m3fnuz";
    case xla::F4E2M1FN: return "f4e2m1fn";
    case xla::F8E8M0FNU: return "f8e8m0fnu";
    case xla::F6E3M2FN: return "f6e3m2fn";
    case xla::F6E2M3FN: return "f6e2m3fn";
    default: return "other";  // read back as a type outside the feature table, as it was
  }
}

namespace {

using xla::HloComputationProto;
using xla::HloInstructionProto;
using xla::HloModuleProto;
using xla::ShapeProto;

// A word the text cannot quote, with anything but printable ASCII as '?'.
std::string AsciiOnly(absl::string_view s) {
  std::string out;
  for (char c : s) out.push_back(c >= 32 && c < 127 ? c : '?');
  return out;
}


void PrintShape(const ShapeProto& s, std::string* out, int depth = 0) {
  if (s.element_type() == xla::TUPLE && depth < kMaxTupleDepth) {
    out->push_back('(');
    for (int i = 0; i < s.tuple_shapes_size(); ++i) {
      if (i) out->append(", ");
      PrintShape(s.tuple_shapes(i), out, depth + 1);
    }
    out->push_back(')');
    return;
  }
  absl::StrAppend(out, ElementTypeName(s.element_type()), "[", absl::StrJoin(s.dimensions(), ","), "]");
  if (s.has_layout()) absl::StrAppend(out, "{", absl::StrJoin(s.layout().minor_to_major(), ","), "}");
}

// The dim_labels of convolution numbers: each dimension's letter at its index.
std::string DimLabels(const xla::ConvolutionDimensionNumbers& n) {
  auto labels = [](int64_t batch, char b, int64_t feature, char f, const auto& spatial) {
    std::string s(static_cast<size_t>(2 + spatial.size()), '?');
    auto put = [&](int64_t at, char c) {
      if (at >= 0 && at < static_cast<int64_t>(s.size())) s[static_cast<size_t>(at)] = c;
    };
    put(batch, b);
    put(feature, f);
    for (int i = 0; i < spatial.size(); ++i) put(spatial[i], static_cast<char>('0' + i % 10));
    return s;
  };
  return absl::StrCat(labels(n.input_batch_dimension(), 'b', n.input_feature_dimension(), 'f', n.input_spatial_dimensions()),
                      "_",
                      labels(n.kernel_input_feature_dimension(), 'i', n.kernel_output_feature_dimension(), 'o',
                             n.kernel_spatial_dimensions()),
                      "->",
                      labels(n.output_batch_dimension(), 'b', n.output_feature_dimension(), 'f',
                             n.output_spatial_dimensions()));
}

std::string WindowText(const xla::Window& w) {
  std::vector<std::string> size, stride, pad, lhs, rhs, rev;
  for (const xla::WindowDimension& d : w.dimensions()) {
    size.push_back(absl::StrCat(d.size()));
    stride.push_back(absl::StrCat(d.stride()));
    pad.push_back(absl::StrCat(d.padding_low(), "_", d.padding_high()));
    lhs.push_back(absl::StrCat(d.base_dilation()));
    rhs.push_back(absl::StrCat(d.window_dilation()));
    rev.push_back(d.window_reversal() ? "1" : "0");
  }
  return absl::StrCat("{size=", absl::StrJoin(size, "x"), " stride=", absl::StrJoin(stride, "x"), " pad=",
                      absl::StrJoin(pad, "x"), " lhs_dilate=", absl::StrJoin(lhs, "x"), " rhs_dilate=",
                      absl::StrJoin(rhs, "x"), " rhs_reversal=", absl::StrJoin(rev, "x"), "}");
}

// One instruction's attributes after its operands.
std::string Attributes(const HloInstructionProto& inst, const std::unordered_map<int64_t, std::string>& computation_names) {
  std::string out;
  if (inst.dimensions_size()) absl::StrAppend(&out, ", dimensions={", absl::StrJoin(inst.dimensions(), ","), "}");
  if (inst.window().dimensions_size()) absl::StrAppend(&out, ", window=", WindowText(inst.window()));
  if (inst.has_convolution_dimension_numbers())
    absl::StrAppend(&out, ", dim_labels=", DimLabels(inst.convolution_dimension_numbers()));
  // 1 is what XLA's parser (and ours) takes for an absent count, so XLA prints none.
  const int64_t absent = HasGroupCounts(inst.opcode()) ? 1 : 0;
  if (inst.feature_group_count() != absent && inst.feature_group_count() != 0)
    absl::StrAppend(&out, ", feature_group_count=", inst.feature_group_count());
  if (inst.batch_group_count() != absent && inst.batch_group_count() != 0)
    absl::StrAppend(&out, ", batch_group_count=", inst.batch_group_count());
  if (inst.slice_dimensions_size()) {
    std::vector<std::string> dims;
    for (const auto& d : inst.slice_dimensions()) dims.push_back(absl::StrCat("[", d.start(), ":", d.limit(), ":", d.stride(), "]"));
    absl::StrAppend(&out, ", slice={", absl::StrJoin(dims, ", "), "}");
  }
  if (inst.dynamic_slice_sizes_size())
    absl::StrAppend(&out, ", dynamic_slice_sizes={", absl::StrJoin(inst.dynamic_slice_sizes(), ","), "}");
  if (inst.has_padding_config() && inst.padding_config().dimensions_size()) {
    std::vector<std::string> dims;
    for (const auto& d : inst.padding_config().dimensions())
      dims.push_back(absl::StrCat(d.edge_padding_low(), "_", d.edge_padding_high(), "_", d.interior_padding()));
    absl::StrAppend(&out, ", padding=", absl::StrJoin(dims, "x"));
  }
  if (inst.is_stable()) absl::StrAppend(&out, ", is_stable=true");
  if (inst.opcode() == "get-tuple-element") absl::StrAppend(&out, ", index=", inst.tuple_index());
  if (!inst.fusion_kind().empty()) absl::StrAppend(&out, ", kind=", AsciiOnly(inst.fusion_kind()));
  if (!inst.custom_call_target().empty())
    absl::StrAppend(&out, ", custom_call_target=\"", absl::CEscape(inst.custom_call_target()), "\"");
  if (inst.called_computation_ids_size()) {
    std::vector<std::string> names;
    for (int64_t id : inst.called_computation_ids()) {
      const auto it = computation_names.find(id);
      names.push_back(absl::StrCat("%", it == computation_names.end() ? absl::StrCat("missing.", id) : it->second));
    }
    absl::StrAppend(&out, ", calls={", absl::StrJoin(names, ", "), "}");
  }
  return out;
}


}  // namespace

std::string PrintShape(const ShapeProto& shape) {
  std::string out;
  PrintShape(shape, &out);
  return out;
}

std::string PrintHloText(const HloModuleProto& module) {
  std::string out = absl::StrCat("HloModule ", module.name(), "\n");
  std::unordered_map<int64_t, std::string> computation_names;
  for (const HloComputationProto& c : module.computations()) computation_names[c.id()] = c.name();
  for (int ci = 0; ci < module.computations_size(); ++ci) {
    const HloComputationProto& c = module.computations(ci);
    const bool entry = module.entry_computation_id() != 0 ? c.id() == module.entry_computation_id()
                                                          : ci + 1 == module.computations_size();
    absl::StrAppend(&out, "\n", entry ? "ENTRY " : "", "%", c.name(), " {\n");
    std::unordered_map<int64_t, std::string> names;  // instruction id -> name
    for (const HloInstructionProto& inst : c.instructions()) names[inst.id()] = inst.name();
    // Tuple elements read from `%x#k` operands print so again, not as instructions.
    std::unordered_set<int64_t> inline_elements;
    for (const HloInstructionProto& inst : c.instructions()) {
      if (inst.opcode() != "get-tuple-element" || inst.operand_ids_size() != 1 || inst.id() == c.root_id()) continue;
      const auto tuple = names.find(inst.operand_ids(0));
      if (tuple != names.end() && inst.name() == absl::StrCat(tuple->second, "#", inst.tuple_index()))
        inline_elements.insert(inst.id());
    }
    for (const HloInstructionProto& inst : c.instructions()) {
      if (inline_elements.count(inst.id())) continue;
      absl::StrAppend(&out, "  ", inst.id() == c.root_id() ? "ROOT " : "", "%", inst.name(), " = ");
      PrintShape(inst.shape(), &out);
      absl::StrAppend(&out, " ", inst.opcode(), "(");
      if (inst.opcode() == "parameter") {
        absl::StrAppend(&out, inst.parameter_number());
      } else if (inst.opcode() == "constant") {
        out.push_back('0');
      } else {
        std::vector<std::string> operands;
        for (int64_t id : inst.operand_ids()) {
          const auto it = names.find(id);
          operands.push_back(absl::StrCat("%", it == names.end() ? absl::StrCat("missing.", id) : it->second));
        }
        out += absl::StrJoin(operands, ", ");
      }
      absl::StrAppend(&out, ")", Attributes(inst, computation_names), "\n");
    }
    out += "}\n";
  }
  return out;
}

}  // namespace tgraph::hlo
