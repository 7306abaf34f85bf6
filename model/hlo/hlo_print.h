// HLO text written from the proto subset the readers fill (hlo_text.h reads it back).
// Torch-free; pure functions.
#pragma once

#include <string>

#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

// `module` as HLO text in the syntax ParseHloText reads, with what the proto subset holds:
// shapes and layouts, operands, parameter numbers, the attributes that set features and
// the called computations (as `calls={...}`). Constants print as `constant(0)` (literals
// are not kept). ParseHloText of the result featurizes as `module` does (tested on the
// real unet_3d module). Names are printed as they are: a name with characters outside
// [A-Za-z0-9_.$-] does not read back.
std::string PrintHloText(const tgraph::xla::HloModuleProto& module);

// An element type as HLO text names it ("bf16", "f32", "f8e4m3fn"); "other" for a number
// XLA's PrimitiveType does not have (a text type name no XLA type has reads as one).
const char* ElementTypeName(int type);

// A shape as HLO text writes it: "f32[8,128]{1,0}", "(f32[2], s32[])".
std::string PrintShape(const tgraph::xla::ShapeProto& shape);

}  // namespace tgraph::hlo
