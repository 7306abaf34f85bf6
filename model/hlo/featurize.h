// XLA HLO modules and TpuGraphs tuning data -> graphs in the TpuGraphs format, built
// exactly as the TpuGraphs encoder builds them (docs/format.md, "From an XLA HLO module"): node order,
// the 140 node features, opcode ids, edges, node_splits, configurable nodes, layout
// configurations (18 values per configurable node) and tile configurations (24 values).
// Every structural problem of the input is an INVALID_ARGUMENT naming the computation
// and the instruction; nothing here crashes on bad input. Torch-free; used by
// tgraph-featurize, the server (RegisterGraph with an HLO module) and the client.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/graph.h"
#include "model/core/layout_space.h"
#include "model/hlo/working_memory.h"
#include "tgraph/hlo/tuning.pb.h"

namespace tgraph::hlo {

// What one node of a featurized module came from. Names are printable ASCII (any other
// byte of a corrupt module reads '?').
struct NodeSource {
  std::string computation;  // the computation's name
  std::string instruction;  // the instruction's name
  std::string opcode;       // the instruction's opcode as written in the module
  int64_t instruction_id = 0;
};

// A module as a TpuGraphs graph.
struct ModuleGraph {
  std::string module_name;
  NodeGraph graph;                       // node_feat, node_opcode, edge_index (rows sorted, u > v)
  std::vector<int64_t> node_splits;      // 0, ..., n (docs/format.md)
  std::vector<NodeSource> nodes;         // one per node, in node order
  std::vector<int64_t> default_config_nodes;  // convolution, dot and reshape nodes, ascending
  FirstOperands first_operands;          // per node: operands 0 and 1 in operand order (-1: none)
  std::vector<std::string> warnings;     // e.g. unknown opcode names (encoded as id 0)
  // Dumped after XLA's optimization passes (fusions, library custom calls): registered
  // all the same, with a warning naming the dump to send instead.
  bool after_optimizations = false;
};

// A name inside an error or warning message: printable ASCII (any other byte '?') and at
// most 120 characters, so that a hostile module cannot make a message of any size.
std::string ShownName(absl::string_view name);
// A name usable as a file name: letters, digits, '.', '_' and '-'; anything else '_'.
std::string FileSafeName(absl::string_view name);

// The instruction names of `ids` (e.g. a graph's configurable nodes) among `nodes`;
// "" for an id out of range.
std::vector<std::string> InstructionNames(const std::vector<NodeSource>& nodes, const std::vector<int64_t>& ids);

// Parses `bytes` as HLO text (starting with `HloModule`: hlo_text.h), an xla.HloProto
// (what XLA dumps as protos: the module in field 1), or else an xla.HloModuleProto.
// INVALID_ARGUMENT, prefixed with `what`, when it is neither (a truncated file, another
// message, a module without computations). Binary modules are scanned first
// (wire_scan.h): over `limits.max_instructions`, or refused the working memory their
// parse needs (working_memory.h), is RESOURCE_EXHAUSTED before anything is parsed; the
// fields the featurizer never reads (metadata, literals, ...) are not kept.
absl::StatusOr<tgraph::xla::HloModuleProto> ParseModule(absl::string_view bytes, absl::string_view what,
                                                        const Limits& limits = {});

// Featurizes a module. Errors name `what`, the computation and the instruction:
// an operand or called computation that does not exist, or does not come before its
// user (a cycle, or an order that is not topological), duplicate ids, a missing root,
// shapes of more than 6 dimensions or that shape_check.h refuses. Reserves (limits.reserve) an upper bound of what
// it allocates, the result included, before allocating it.
absl::StatusOr<ModuleGraph> FeaturizeModule(const tgraph::xla::HloModuleProto& module, absl::string_view what,
                                            const Limits& limits = {});

// Counts of what happened to the runs of tuning data.
struct RunStats {
  int64_t runs = 0, kept = 0, errors = 0, without_config = 0, without_profile = 0, nonpositive_time = 0;
};

// A tpu_graphs.ModuleTuningData of layout runs -> a layout graph whose configurable
// nodes are config_index_to_node and whose configurations are the runs kept (a module
// config, no error, a profile; docs/format.md), in the order of the file, runtime =
// compute_time_ns. FAILED_PRECONDITION when the data has no default run (upstream
// drops such modules) or no run is kept.
struct LayoutTuning {
  ModuleGraph module;
  LayoutGraph graph;
  RunStats stats;
};
absl::StatusOr<LayoutTuning> FeaturizeLayoutTuning(const tgraph::xla::ModuleTuningData& data, absl::string_view what,
                                                   const Limits& limits = {});

// A tpu_graphs.TuningData of tile-size runs -> one tile graph per kernel (module).
// Kernels with at most one run, without a module, or with a run that has no tile size
// config are skipped (reason in `skipped`); runs with an error or compute time <= 1 are
// dropped; the normalizer is the kernel's default run's time (a kernel without one is
// skipped). Graph names (file names): the module name (letters, digits, '.', '_', '-';
// anything else '_') and its fingerprint in hex.
struct TileTuning {
  std::vector<TileGraph> graphs;
  std::vector<RunStats> stats;        // per kept kernel
  std::vector<std::string> skipped;   // "kernel 3 (fusion.12): ..." per skipped kernel
};
absl::StatusOr<TileTuning> FeaturizeTileTuning(const tgraph::xla::TuningData& data, absl::string_view what,
                                               const Limits& limits = {});

// The 24 tile config features of docs/format.md: kernel, output and input bounds, each the
// first 6 values zero-padded, then their sum and product (product of none = 0).
std::vector<float> TileConfigFeatures(const tgraph::xla::TileSizeConfig& config);

// One layout configuration row (nc x 18 values) from per-node tensor layouts: for each
// configurable node, up to 3 tensors (output, then operands), each its dimensions
// minor-to-major (at most 6), padded with -1. An empty list (or a node without tensors)
// means the compiler default (all -1). INVALID_ARGUMENT for more than 3 tensors, more
// than 6 dimensions or a value outside 0..5.
using TensorLayouts = std::vector<std::vector<int64_t>>;  // per tensor: minor-to-major
absl::StatusOr<std::vector<int8_t>> LayoutConfigRow(const std::vector<TensorLayouts>& per_node);
// One node's 18 values into `out` (the same rules; errors without a node prefix).
absl::Status NodeLayoutValues(const TensorLayouts& tensors, int8_t* out);

}  // namespace tgraph::hlo
