// The one order in which tgraph featurizes a module's computations and instructions,
// whatever order its file had, so that the same program gives the same graph, content
// hash and configuration rows from its HLO text and from its proto. The order a file
// holds is not a property of the program: XLA writes a proto's computations by id and
// its text's in call order, a scheduled module's text lists instructions in schedule
// order and its proto in dependency order, and text hides get-tuple-element
// instructions (`%x#0`) that the proto spells out.
//
// The order, defined by the module's structure alone (names only break ties):
// - Instructions of a computation: a depth-first post order from the instructions no
//   other instruction uses, visiting operands in operand order, each instruction once.
//   The walks start from unused parameters (by parameter number), then other unused
//   instructions (by name), then the root. This is the order XLA itself writes a proto
//   in (MakeInstructionPostOrder), so a proto XLA wrote keeps its instruction order:
//   every computation of the real unet_3d module does.
// - Computations: a depth-first post order of the call graph from the computations
//   nothing calls (others by name first, the entry last), visiting each computation's
//   instructions in the order above and each instruction's called computations in
//   their listed order; so callees come before their callers and the entry is last.
// Operands and callees that do not exist, and cycles, are left for the featurizer to
// report (featurize.h): they are skipped here, and what a walk never reached keeps its
// place after what it did. Nothing else of the module changes (ids, names, fields).
//
// Tuning data (a ModuleTuningData's module) is NOT put in this order: its
// config_index_to_node indexes its own order, and the TpuGraphs files were made in it.
// Torch-free; a pure function of its argument (any thread).
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/hlo/working_memory.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

// Reorders `module`'s computations and each computation's instructions into the order
// above, in place (the messages are moved, not copied). Charges its working memory to
// `memory` first (RESOURCE_EXHAUSTED, prefixed as `memory` says, when refused).
absl::Status CanonicalizeOrder(tgraph::xla::HloModuleProto* module, WorkingMemory* memory);

}  // namespace tgraph::hlo
