// HLO opcode names and the TpuGraphs opcode ids (docs/format.md "HLO opcode ids"):
// 1..120 for the names of the table, 0 for any other, as the TpuGraphs encoder does.
// Used wherever an opcode is read (the featurizer) or shown (messages, responses), so
// that messages name "convolution", not 26. Pure functions; any thread.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace tgraph {

// The id of an opcode name; 0 for a name outside the table.
int OpcodeId(absl::string_view name);
// The name of an opcode id; "" for 0 or out of range.
absl::string_view OpcodeName(int id);
// The name, or "opcode ID" when the id has none (0: an opcode outside the table).
std::string OpcodeLabel(int id);

// Whether XLA knows the name as an opcode: the table's names, and those XLA added after
// it (erf, topk, ragged-dot, ...), which are encoded as id 0, and an asynchronous form
// ("all-to-all-start"). A name it does not know is refused, as XLA's own parser refuses
// it ("dto", "paramter").
bool IsXlaOpcode(absl::string_view name);

}  // namespace tgraph
