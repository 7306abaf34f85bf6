#include "model/hlo/hlo_text_values.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/hlo/shape_check.h"

namespace tgraph::hlo::text_internal {

using xla::HloInstructionProto;
using xla::ShapeProto;

namespace {

int ElementType(absl::string_view name, bool* known) {
  static const std::map<std::string, int, std::less<>> kTypes = {
      {"pred", xla::PRED}, {"s8", xla::S8},   {"s16", xla::S16}, {"s32", xla::S32},   {"s64", xla::S64},
      {"u8", xla::U8},     {"u16", xla::U16}, {"u32", xla::U32}, {"u64", xla::U64},   {"f16", xla::F16},
      {"f32", xla::F32},   {"f64", xla::F64}, {"bf16", xla::BF16}, {"c64", xla::C64}, {"c128", xla::C128},
      {"token", xla::TOKEN}, {"opaque", xla::OPAQUE_TYPE},
      {"s1", xla::S1},
      {"s2", xla::S2},
      {"s4", xla::S4},
      {"u1", xla::U1},
      {"u2", xla::U2},
      {"u4", xla::U4},
      {"f8e5m2", xla::F8E5M2},
      {"f8e4m3", xla::F8E4M3},
      {"f8e4m3fn", xla::F8E4M3FN},
      {"f8e4m3b11fnuz", xla::F8E4M3B11FNUZ},
      {"f8e3m4", xla::F8E3M4},
      {"f8e5m2fnuz", xla::F8E5M2FNUZ},
      {"f8e4m3fnuz", xla::F8E4M3FNUZ},
      {"f4e2m1fn", xla::F4E2M1FN},
      {"f8e8m0fnu", xla::F8E8M0FNU},
      {"f6e3m2fn", xla::F6E3M2FN},
      {"f6e2m3fn", xla::F6E2M3FN},};
  const auto it = kTypes.find(name);
  *known = it != kTypes.end();
  return *known ? it->second : kOtherElementType;
}

}  // namespace

absl::Status ParseArrayShape(Cursor& c, const std::string& type, ShapeProto* shape) {
  bool known = false;
  shape->set_element_type(static_cast<xla::PrimitiveType>(ElementType(type, &known)));
  if (!c.Consume('[')) return c.Error(absl::StrCat("'[' after the element type '", type, "'"));
  if (!c.Consume(']')) {
    do {
      c.Consume('<');  // "<=N": a dynamic dimension of at most N
      c.Consume('=');
      if (absl::Status s = c.Charge(kSlot); !s.ok()) return s;
      if (c.Consume('?')) {
        shape->add_dimensions(-1);
        continue;
      }
      const int64_t line = c.line(), col = c.col();
      const std::string digits = c.Name();
      int64_t d = 0;
      if (!absl::SimpleAtoi(digits, &d) || d < 0)
        return c.ErrorAt(line, col, absl::StrCat("expected a dimension size, got '", Cursor::Printable(digits), "'"));
      shape->add_dimensions(d);
    } while (c.Consume(','));
    if (!c.Consume(']')) return c.Error("',' or ']' in the shape's dimensions");
  }
  c.last_layout = {c.RawOffset(), c.RawOffset()};
  if (c.LayoutFollows()) {  // the layout: minor_to_major, then tiling and memory space after ':'
    c.last_layout.begin = c.Offset();
    c.Consume('{');
    if (absl::Status s = c.Charge(kLayoutBytes); !s.ok()) return s;
    shape->mutable_layout();
    while (c.Peek() != '}' && c.Peek() != ':' && !c.AtEnd()) {
      const int64_t line = c.line(), col = c.col();
      const std::string digits = c.Name();
      int64_t d = 0;
      if (!absl::SimpleAtoi(digits, &d))
        return c.ErrorAt(line, col, absl::StrCat("expected a layout dimension, got '", Cursor::Printable(digits), "'"));
      if (absl::Status s = c.Charge(kSlot); !s.ok()) return s;
      shape->mutable_layout()->add_minor_to_major(d);
      if (!c.Consume(',')) break;
    }
    if (c.Peek() == ':') {
      while (!c.AtEnd() && c.Peek() != '}') {
        if (c.Peek() == '(') {
          if (!c.SkipGroup()) return c.Error("')' closing the layout's tiling");
        } else {
          c.Consume(c.Peek());
        }
      }
    }
    if (!c.Consume('}')) return c.Error("'}' closing the layout");
    c.last_layout.end = c.RawOffset();
  } else if (shape->element_type() != xla::TOKEN && shape->element_type() != xla::OPAQUE_TYPE) {
    // XLA's parser gives an array written without a layout the default one (dimensions
    // major to minor), and so does the proto of the module it parsed.
    if (absl::Status s = c.Charge(kLayoutBytes + shape->dimensions_size() * kSlot); !s.ok()) return s;
    for (int d = shape->dimensions_size() - 1; d >= 0; --d) shape->mutable_layout()->add_minor_to_major(d);
    shape->mutable_layout();
  }
  return absl::OkStatus();
}

absl::Status ParseShape(Cursor& c, ShapeProto* shape, int depth) {
  if (depth > kMaxTupleDepth) return c.Error(absl::StrCat("tuple shapes nested at most ", kMaxTupleDepth, " deep"));
  if (c.Consume('(')) {
    shape->set_element_type(xla::TUPLE);
    if (c.Consume(')')) return absl::OkStatus();
    do {
      if (absl::Status s = c.Charge(kShapeBytes); !s.ok()) return s;
      if (absl::Status s = ParseShape(c, shape->add_tuple_shapes(), depth + 1); !s.ok()) return s;
    } while (c.Consume(','));
    if (!c.Consume(')')) return c.Error("',' or ')' in a tuple shape");
    return absl::OkStatus();
  }
  const int64_t line = c.line(), col = c.col();
  const std::string type = c.Name();
  if (type.empty()) return c.Error("a shape (such as f32[8,128] or a tuple (...))");
  if (!absl::ascii_isalpha(static_cast<unsigned char>(type[0])))
    return c.ErrorAt(line, col, absl::StrCat("expected an element type, got '", Cursor::Printable(type), "'"));
  return ParseArrayShape(c, type, shape);
}

// "1,2,3" (braces already stripped) as integers.
absl::Status ParseInts(Cursor& c, int64_t line, int64_t col, absl::string_view text, absl::string_view what,
                       std::vector<int64_t>* out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v))
      return c.ErrorAt(line, col, absl::StrCat(what, ": expected integers, got '", Cursor::Printable(part), "'"));
    out->push_back(v);
  }
  return absl::OkStatus();
}

absl::string_view StripBraces(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  if (v.size() >= 2 && v.front() == '{' && v.back() == '}') v = v.substr(1, v.size() - 2);
  return v;
}

// window={size=3x3 stride=1x2 pad=1_2x1_2 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}
absl::Status ParseWindow(Cursor& c, int64_t line, int64_t col, absl::string_view value, HloInstructionProto* inst) {
  std::map<std::string, std::vector<std::string>> fields;
  size_t dims = 0;
  for (absl::string_view item : absl::StrSplit(StripBraces(value), ' ', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::vector<std::string> parts = absl::StrSplit(kv.second, 'x');
    dims = std::max(dims, parts.size());
    fields[std::string(kv.first)] = std::move(parts);
  }
  auto value_of = [&](const std::string& key, size_t d, int part, int64_t dflt, int64_t* out) -> absl::Status {
    const auto it = fields.find(key);
    if (it == fields.end() || d >= it->second.size()) {
      *out = dflt;
      return absl::OkStatus();
    }
    const std::vector<std::string> pieces = absl::StrSplit(it->second[d], '_');
    if (static_cast<size_t>(part) >= pieces.size() || !absl::SimpleAtoi(pieces[static_cast<size_t>(part)], out))
      return c.ErrorAt(line, col, absl::StrCat("window: ", key, " of dimension ", d, ": expected a number, got '",
                                               Cursor::Printable(it->second[d]), "'"));
    return absl::OkStatus();
  };
  for (size_t d = 0; d < dims; ++d) {
    xla::WindowDimension* w = inst->mutable_window()->add_dimensions();
    int64_t v[7];
    for (auto [key, part, dflt, at] : std::vector<std::tuple<const char*, int, int64_t, int>>{
             {"size", 0, 1, 0}, {"stride", 0, 1, 1}, {"pad", 0, 0, 2}, {"pad", 1, 0, 3},
             {"rhs_dilate", 0, 1, 4}, {"lhs_dilate", 0, 1, 5}, {"rhs_reversal", 0, 0, 6}})
      if (absl::Status s = value_of(key, d, part, dflt, &v[at]); !s.ok()) return s;
    w->set_size(v[0]);
    w->set_stride(v[1]);
    w->set_padding_low(v[2]);
    w->set_padding_high(v[3]);
    w->set_window_dilation(v[4]);
    w->set_base_dilation(v[5]);
    w->set_window_reversal(v[6] != 0);
  }
  return absl::OkStatus();
}

// dim_labels=b01f_01io->b01f: each letter's position is that dimension's index.
absl::Status ParseDimLabels(Cursor& c, int64_t line, int64_t col, absl::string_view value, HloInstructionProto* inst) {
  const std::vector<std::string> io = absl::StrSplit(value, "->");
  std::vector<std::string> in;
  if (io.size() == 2) in = absl::StrSplit(io[0], '_');
  if (in.size() != 2)
    return c.ErrorAt(line, col, absl::StrCat("dim_labels: expected INPUT_KERNEL->OUTPUT such as b01f_01io->b01f, got '",
                                             Cursor::Printable(value), "'"));
  xla::ConvolutionDimensionNumbers* n = inst->mutable_convolution_dimension_numbers();
  auto spatial = [](const std::string& labels) {
    std::vector<std::pair<int, int64_t>> s;  // (digit, position)
    for (size_t i = 0; i < labels.size(); ++i)
      if (absl::ascii_isdigit(static_cast<unsigned char>(labels[i]))) s.emplace_back(labels[i] - '0', i);
    std::sort(s.begin(), s.end());
    return s;
  };
  for (size_t i = 0; i < in[0].size(); ++i) {
    if (in[0][i] == 'b') n->set_input_batch_dimension(static_cast<int64_t>(i));
    if (in[0][i] == 'f') n->set_input_feature_dimension(static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < in[1].size(); ++i) {
    if (in[1][i] == 'i') n->set_kernel_input_feature_dimension(static_cast<int64_t>(i));
    if (in[1][i] == 'o') n->set_kernel_output_feature_dimension(static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < io[1].size(); ++i) {
    if (io[1][i] == 'b') n->set_output_batch_dimension(static_cast<int64_t>(i));
    if (io[1][i] == 'f') n->set_output_feature_dimension(static_cast<int64_t>(i));
  }
  for (auto [d, p] : spatial(in[0])) n->add_input_spatial_dimensions(p);
  for (auto [d, p] : spatial(in[1])) n->add_kernel_spatial_dimensions(p);
  for (auto [d, p] : spatial(io[1])) n->add_output_spatial_dimensions(p);
  return absl::OkStatus();
}

// slice={[0:4], [1:5:2]}
absl::Status ParseSlice(Cursor& c, int64_t line, int64_t col, absl::string_view value, HloInstructionProto* inst) {
  for (absl::string_view dim : absl::StrSplit(StripBraces(value), ',', absl::SkipWhitespace())) {
    dim = absl::StripAsciiWhitespace(dim);
    if (dim.size() < 2 || dim.front() != '[' || dim.back() != ']')
      return c.ErrorAt(line, col, absl::StrCat("slice: expected [start:limit] or [start:limit:stride], got '",
                                               Cursor::Printable(dim), "'"));
    const std::vector<absl::string_view> p = absl::StrSplit(dim.substr(1, dim.size() - 2), ':');
    int64_t v[3] = {0, 0, 1};
    if (p.size() < 2 || p.size() > 3)
      return c.ErrorAt(line, col, absl::StrCat("slice: expected [start:limit(:stride)], got '", Cursor::Printable(dim), "'"));
    for (size_t i = 0; i < p.size(); ++i)
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(p[i]), &v[i]))
        return c.ErrorAt(line, col, absl::StrCat("slice: expected numbers, got '", Cursor::Printable(dim), "'"));
    auto* s = inst->add_slice_dimensions();
    s->set_start(v[0]);
    s->set_limit(v[1]);
    s->set_stride(v[2]);
  }
  return absl::OkStatus();
}

// padding=0_0x1_2 (low_high[_interior] per dimension)
absl::Status ParsePadding(Cursor& c, int64_t line, int64_t col, absl::string_view value, HloInstructionProto* inst) {
  for (absl::string_view dim : absl::StrSplit(value, 'x')) {
    const std::vector<absl::string_view> p = absl::StrSplit(dim, '_');
    int64_t v[3] = {0, 0, 0};
    if (p.size() < 2 || p.size() > 3)
      return c.ErrorAt(line, col, absl::StrCat("padding: expected LOW_HIGH(_INTERIOR) per dimension, got '",
                                               Cursor::Printable(dim), "'"));
    for (size_t i = 0; i < p.size(); ++i)
      if (!absl::SimpleAtoi(p[i], &v[i]))
        return c.ErrorAt(line, col, absl::StrCat("padding: expected numbers, got '", Cursor::Printable(dim), "'"));
    auto* d = inst->mutable_padding_config()->add_dimensions();
    d->set_edge_padding_low(v[0]);
    d->set_edge_padding_high(v[1]);
    d->set_interior_padding(v[2]);
  }
  return absl::OkStatus();
}

// What a parsed instruction calls, by name, for the second pass.

bool IsDotDimensions(absl::string_view key) {
  return key == "lhs_contracting_dims" || key == "rhs_contracting_dims" || key == "lhs_batch_dims" ||
         key == "rhs_batch_dims";
}

absl::Status ParseDotDimensions(Cursor& c, int64_t line, int64_t col, absl::string_view key, absl::string_view value,
                                xla::HloInstructionProto* inst) {
  if (absl::Status s = c.Charge(static_cast<int64_t>(value.size()) * kAttributeCharBytes); !s.ok()) return s;
  std::vector<int64_t> ints;
  if (absl::Status s = ParseInts(c, line, col, StripBraces(value), key, &ints); !s.ok()) return s;
  xla::DotDimensionNumbers* d = inst->mutable_dot_dimension_numbers();
  for (int64_t v : ints) {
    if (key == "lhs_contracting_dims") d->add_lhs_contracting_dimensions(v);
    if (key == "rhs_contracting_dims") d->add_rhs_contracting_dimensions(v);
    if (key == "lhs_batch_dims") d->add_lhs_batch_dimensions(v);
    if (key == "rhs_batch_dims") d->add_rhs_batch_dimensions(v);
  }
  return absl::OkStatus();
}

absl::Status ParseBackendConfig(Cursor& c, absl::string_view value, xla::HloInstructionProto* inst) {
  std::string text(value);
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    const absl::string_view inner = value.substr(1, value.size() - 2);
    std::string unescaped;
    text = absl::CUnescape(inner, &unescaped) ? std::move(unescaped) : std::string(inner);
  }
  if (absl::Status s = c.Charge(kStringField + 2 * HeapChars(text.size())); !s.ok()) return s;
  inst->set_backend_config(std::move(text));
  return absl::OkStatus();
}

}  // namespace tgraph::hlo::text_internal
