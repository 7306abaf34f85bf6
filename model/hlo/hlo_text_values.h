// The values of HLO text the reader parses beyond names and operands: shapes (arrays
// with their layouts and tiles, tuples, tokens) and the attributes that set features
// (window, dim_labels, slice, padding, integer lists). Errors name the line and column
// through the Cursor (hlo_text_cursor.h). Internal to the text reader (hlo_text.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/hlo/hlo_text_cursor.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo::text_internal {

// A shape at the cursor: `type[dims]{layout}` or a tuple `(shape, ...)` nested at most
// kMaxTupleDepth (shape_check.h) deep; `depth` is the tuples already open.
absl::Status ParseShape(Cursor& c, xla::ShapeProto* shape, int depth);
// The rest of an array shape whose element type `type` was just read.
absl::Status ParseArrayShape(Cursor& c, const std::string& type, xla::ShapeProto* shape);
// "1,2,3" (braces already stripped) as integers; errors at (line, col) name `what`.
absl::Status ParseInts(Cursor& c, int64_t line, int64_t col, absl::string_view text, absl::string_view what,
                       std::vector<int64_t>* out);
// `v` without surrounding whitespace and one pair of braces.
absl::string_view StripBraces(absl::string_view v);
// The attributes' values read into `inst`, errors at (line, col):
// window={size=3x3 stride=1x2 pad=1_2x1_2 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1},
// dim_labels=b01f_01io->b01f, slice={[0:8:1], ...}, padding=0_0_0x1_1_1.
absl::Status ParseWindow(Cursor& c, int64_t line, int64_t col, absl::string_view value, xla::HloInstructionProto* inst);
absl::Status ParseDimLabels(Cursor& c, int64_t line, int64_t col, absl::string_view value,
                            xla::HloInstructionProto* inst);
absl::Status ParseSlice(Cursor& c, int64_t line, int64_t col, absl::string_view value, xla::HloInstructionProto* inst);
absl::Status ParsePadding(Cursor& c, int64_t line, int64_t col, absl::string_view value, xla::HloInstructionProto* inst);
// A dot's lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_batch_dims={...},
// rhs_batch_dims={...}: IsDotDimensions(key) says which keys.
bool IsDotDimensions(absl::string_view key);
absl::Status ParseDotDimensions(Cursor& c, int64_t line, int64_t col, absl::string_view key, absl::string_view value,
                                xla::HloInstructionProto* inst);
// backend_config={...} (JSON, printed as it is) or backend_config="..." (any other text,
// quoted and escaped): the text itself, as the proto holds it.
absl::Status ParseBackendConfig(Cursor& c, absl::string_view value, xla::HloInstructionProto* inst);

}  // namespace tgraph::hlo::text_internal
