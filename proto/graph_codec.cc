#include "proto/graph_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/core/opcodes.h"
#include "model/hlo/apply_layouts.h"

namespace tgraph {

absl::StatusOr<WireGraph> DecodeGraph(const v1::Graph& g, int64_t max_nodes) {
  const int64_t n = g.num_nodes();
  if (n <= 0) return absl::InvalidArgumentError(absl::StrCat("graph.num_nodes must be positive, got ", n));
  if (n > max_nodes)
    return absl::ResourceExhaustedError(
        absl::StrCat("graph.num_nodes is ", n, ", over this server's limit of ", max_nodes, " nodes"));
  const size_t feat_bytes = static_cast<size_t>(n) * kNodeFeatDim * sizeof(float);
  if (g.node_feat().size() != feat_bytes)
    return absl::InvalidArgumentError(absl::StrCat("graph.node_feat has ", g.node_feat().size(), " bytes, expected ",
                                                   feat_bytes, " (num_nodes x 140 float32)"));
  if (g.node_opcode().size() != static_cast<size_t>(n))
    return absl::InvalidArgumentError(absl::StrCat("graph.node_opcode has ", g.node_opcode().size(),
                                                   " bytes, expected ", n, " (one byte per node)"));
  if (g.edge_index().size() % (2 * sizeof(int64_t)) != 0)
    return absl::InvalidArgumentError(absl::StrCat("graph.edge_index has ", g.edge_index().size(),
                                                   " bytes, not a multiple of 16 (pairs of int64)"));
  WireGraph w;
  w.graph.num_nodes = n;
  w.graph.node_feat.resize(static_cast<size_t>(n) * kNodeFeatDim);
  std::memcpy(w.graph.node_feat.data(), g.node_feat().data(), feat_bytes);
  w.graph.node_opcode.assign(g.node_opcode().begin(), g.node_opcode().end());
  for (int32_t& o : w.graph.node_opcode) o = static_cast<uint8_t>(o);
  w.graph.edge_index.resize(g.edge_index().size() / sizeof(int64_t));
  std::memcpy(w.graph.edge_index.data(), g.edge_index().data(), g.edge_index().size());
  w.node_config_ids.assign(g.node_config_ids().begin(), g.node_config_ids().end());
  if (absl::Status s = ValidateNodeGraph(w.graph, "graph"); !s.ok()) return s;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (size_t i = 0; i < w.node_config_ids.size(); ++i) {
    const int64_t id = w.node_config_ids[i];
    if (id < 0 || id >= n)
      return absl::InvalidArgumentError(
          absl::StrCat("graph.node_config_ids[", i, "] is ", id, ", expected 0..", n - 1));
    if (seen[id]) return absl::InvalidArgumentError(absl::StrCat("graph.node_config_ids lists node ", id, " twice"));
    seen[id] = true;
  }
  return w;
}

int64_t GraphBytes(const NodeGraph& graph) {
  return static_cast<int64_t>(graph.node_feat.size() * sizeof(float) + graph.node_opcode.size() * sizeof(int32_t) +
                              graph.edge_index.size() * sizeof(int64_t));
}

absl::StatusOr<WireGraph> DecodeHloModule(absl::string_view bytes, const hlo::Limits& limits, absl::string_view what) {
  absl::StatusOr<hlo::ModuleGraph> m;
  {  // the parsed module is freed before the graph goes on
    absl::StatusOr<xla::HloModuleProto> module = hlo::ParseModule(bytes, what, limits);
    if (!module.ok()) return module.status();
    m = hlo::FeaturizeModule(*module, what, limits);
  }
  if (!m.ok()) return m.status();
  WireGraph w;
  w.module_name = std::move(m->module_name);
  w.graph = std::move(m->graph);
  w.node_config_ids = std::move(m->default_config_nodes);
  w.sources = std::move(m->nodes);
  w.warnings = std::move(m->warnings);
  w.first_operands = std::move(m->first_operands);
  return w;
}

absl::StatusOr<WireGraph> DecodeRegistration(const v1::RegisterGraphRequest& request, const hlo::Limits& limits) {
  switch (request.source_case()) {
    case v1::RegisterGraphRequest::kGraph:
      if (request.as_kernel())
        return absl::InvalidArgumentError("as_kernel: for hlo_module only (a graph's arrays say themselves whether "
                                          "they have configurable nodes)");
      return DecodeGraph(request.graph(), limits.max_instructions);
    case v1::RegisterGraphRequest::kHloModule: {
      absl::StatusOr<WireGraph> g = DecodeHloModule(request.hlo_module(), limits);
      if (g.ok() && request.as_kernel()) {  // one kernel: the whole graph, nothing configurable
        g->node_config_ids.clear();
        g->first_operands.clear();
      }
      return g;
    }
    default: return absl::InvalidArgumentError("give the graph: graph (TpuGraphs arrays) or hlo_module");
  }
}

void EncodeLayoutSpace(const LayoutSpace& space, v1::RegisterGraphResponse* out) {
  for (int j = 0; j < out->configurable_nodes_size() && j < static_cast<int>(space.nodes.size()); ++j) {
    v1::ConfigurableNode* c = out->mutable_configurable_nodes(j);
    c->clear_groups();
    for (const GroupSpace& gs : space.nodes[static_cast<size_t>(j)].groups) {
      v1::LayoutGroup* lg = c->add_groups();
      lg->set_rank(gs.rank);
      lg->set_candidates(reinterpret_cast<const char*>(gs.candidates.data()), gs.candidates.size() * kLayoutSlots);
    }
  }
}

void EncodeConfigurableNodes(const WireGraph& g, v1::RegisterGraphResponse* out) {
  for (int64_t id : g.node_config_ids) {
    v1::ConfigurableNode* c = out->add_configurable_nodes();
    c->set_node(id);
    c->set_opcode(std::string(OpcodeName(g.graph.node_opcode[static_cast<size_t>(id)])));
    if (!g.sources.empty()) {
      const hlo::NodeSource& s = g.sources[static_cast<size_t>(id)];
      c->set_instruction(s.instruction);
      c->set_computation(s.computation);
    }
  }
  for (const std::string& w : g.warnings) out->add_warnings(w);
}

absl::Status ApplyLayouts(const v1::ApplyLayoutsRequest& request, const hlo::Limits& limits,
                          v1::ApplyLayoutsResponse* out) {
  const std::string& bytes = request.layout_config();
  const std::vector<int8_t> row(bytes.begin(), bytes.end());
  absl::StatusOr<hlo::AppliedLayouts> a = hlo::ApplyLayoutRow(request.hlo_text(), row, "hlo_text", limits);
  if (!a.ok()) return a.status();
  out->set_hlo_text(std::move(a->text));
  out->set_layouts_written(a->layouts_written);
  out->set_copies(a->copies);
  for (std::string& c : a->changes) out->add_changes(std::move(c));
  for (const hlo::EntryLayout& e : a->entry_layouts) {
    v1::EntryLayout* entry = out->add_entry_layouts();
    entry->set_result(e.result);
    entry->set_index(e.index);
    entry->set_name(e.name);
    entry->set_shape(e.shape);
    entry->mutable_minor_to_major()->Assign(e.minor_to_major.begin(), e.minor_to_major.end());
    entry->set_asked_by(e.asked_by);
    entry->set_jax(e.jax);
  }
  for (std::string& h : a->needs_hook) out->add_needs_hook(std::move(h));
  return absl::OkStatus();
}

absl::StatusOr<LayoutSpace> DecodeLayoutSpace(const v1::RegisterGraphResponse& response) {
  LayoutSpace space;
  for (int j = 0; j < response.configurable_nodes_size(); ++j) {
    const v1::ConfigurableNode& c = response.configurable_nodes(j);
    if (c.groups_size() == 0) continue;  // a tile graph, or an older server
    if (c.groups_size() != kConfigGroups)
      return absl::InvalidArgumentError(absl::StrCat("configurable_nodes[", j, "].groups: ", c.groups_size(),
                                                     " groups, expected 3 (output, input, kernel)"));
    NodeSpace n;
    n.node = c.node();
    for (int g = 0; g < kConfigGroups; ++g) {
      const v1::LayoutGroup& lg = c.groups(g);
      const std::string& bytes = lg.candidates();
      if (lg.rank() < 0 || lg.rank() > kLayoutSlots || bytes.size() % kLayoutSlots != 0)
        return absl::InvalidArgumentError(absl::StrCat("configurable_nodes[", j, "].groups[", g,
                                                       "]: rank 0..6 and k x 6 candidate bytes expected"));
      n.groups[g].rank = lg.rank();
      n.groups[g].candidates.resize(bytes.size() / kLayoutSlots);
      std::memcpy(n.groups[g].candidates.data(), bytes.data(), bytes.size());
    }
    space.nodes.push_back(std::move(n));
  }
  return space;
}

void EncodeGraph(const NodeGraph& graph, const std::vector<int64_t>& ids, v1::Graph* out) {
  out->set_num_nodes(graph.num_nodes);
  out->set_node_feat(graph.node_feat.data(), graph.node_feat.size() * sizeof(float));
  std::string opc(graph.node_opcode.size(), '\0');
  for (size_t i = 0; i < opc.size(); ++i) opc[i] = static_cast<char>(static_cast<uint8_t>(graph.node_opcode[i]));
  out->set_node_opcode(std::move(opc));
  out->set_edge_index(graph.edge_index.data(), graph.edge_index.size() * sizeof(int64_t));
  out->mutable_node_config_ids()->Assign(ids.begin(), ids.end());
}

}  // namespace tgraph
