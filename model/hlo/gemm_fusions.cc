#include "model/hlo/gemm_fusions.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/hlo/featurize.h"
#include "model/hlo/fusion_tiling.h"
#include "model/hlo/hlo_print.h"
#include "model/tile/xla_fusion_table.h"
#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"
#include "tgraph/hlo/autotuning.pb.h"

namespace tgraph::hlo {

namespace {

using nlohmann::json;
using tgraph::xla::HloComputationProto;
using tgraph::xla::HloInstructionProto;

constexpr char kNestedKind[] = "__triton_nested_gemm_fusion";
constexpr char kGemmKind[] = "__triton_gemm";

// The matrix product of a GEMM fusion: a dot, or a block-scaled one (scaled-dot: the
// product of operands 0 and 1, each scaled by a tensor of its own, operands 2 and 3).
bool IsProduct(const std::string& opcode) { return opcode == "dot" || opcode == "scaled-dot"; }

// A JSON integer as XLA writes one: a number, or (int64 fields of its protos) a string.
absl::StatusOr<int64_t> Int(const json& object, const char* key, absl::string_view where) {
  const auto it = object.find(key);
  if (it == object.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": no '", key, "'"));
  int64_t v = 0;
  if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (!it->is_string() || !absl::SimpleAtoi(it->get<std::string>(), &v)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' is ", it->dump(), ", expected an integer"));
  }
  if (v < 0 || v > (int64_t{1} << 20))
    return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' is ", v, ", expected 0..2^20"));
  return v;
}

// The integers of a JSON list (numbers or strings).
absl::StatusOr<std::vector<int64_t>> Ints(const json& list, absl::string_view where) {
  if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat(where, " is ", list.dump(), ", expected a list"));
  std::vector<int64_t> out;
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<int64_t> v = Int(json{{"v", list[i]}}, "v", absl::StrCat(where, "[", i, "]"));
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

// XLA reads backend configs with protobuf's JSON parser, which also takes keys left
// unquoted (`{fusion_backend_config:{kind:"..."}}`, as XLA's own tests write them): such
// keys are quoted before a strict parse.
std::string QuoteBareKeys(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {  // a string, copied whole
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      out.append(text, i, j - i);
      i = j;
      continue;
    }
    if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < text.size() && (absl::ascii_isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      size_t k = j;
      while (k < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[k]))) ++k;
      const bool key = k < text.size() && text[k] == ':';
      out.append(key ? absl::StrCat("\"", text.substr(i, j - i), "\"") : text.substr(i, j - i));
      i = j;
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

json ParseJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json::parse(QuoteBareKeys(text), nullptr, /*allow_exceptions=*/false) : j;
}

// The block-level tile of a nested fusion (today's XLA nests each dot operand in a fusion
// of its own, its tile over the operand's dimensions); nullopt when it has none.
std::optional<std::vector<int64_t>> OperandTile(const HloInstructionProto& operand) {
  if (operand.opcode() != "fusion") return std::nullopt;
  const json config = ParseJson(operand.backend_config());
  if (!config.is_object()) return std::nullopt;
  const json& fbc = config.contains("fusion_backend_config") ? config["fusion_backend_config"] : config;
  if (!fbc.is_object() || !fbc.contains("block_level_fusion_config")) return std::nullopt;
  const json& tiles = fbc["block_level_fusion_config"].value("output_tiles", json());
  if (!tiles.is_array() || tiles.empty() || !tiles[0].is_object() || !tiles[0].contains("sizes")) return std::nullopt;
  absl::StatusOr<std::vector<int64_t>> sizes = Ints(tiles[0]["sizes"], "operand tile");
  if (!sizes.ok() || static_cast<int>(sizes->size()) != operand.shape().dimensions_size()) return std::nullopt;
  return *sizes;
}

int64_t Product(const xla::ShapeProto& s, const google::protobuf::RepeatedField<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= s.dimensions(static_cast<int>(d));
  return p;
}

// The operand's minor-most dimension (its layout's first; the last one without a layout).
int64_t Minor(const xla::ShapeProto& s) {
  if (s.layout().minor_to_major_size() > 0) return s.layout().minor_to_major(0);
  return s.dimensions_size() - 1;
}

bool Has(const google::protobuf::RepeatedField<int64_t>& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// The problem a dot (or scaled-dot) of `comp` computes (its operands are instructions of `comp`).
absl::StatusOr<XlaGemmProblem> ProblemOf(const HloInstructionProto& dot, const std::map<int64_t, const HloInstructionProto*>& by_id,
                                         absl::string_view where) {
  const int want = dot.opcode() == "scaled-dot" ? 4 : 2;  // a scaled-dot's scales are operands 2 and 3
  if (dot.operand_ids_size() != want)
    return absl::InvalidArgumentError(absl::StrCat(where, ": the ", dot.opcode(), " has ", dot.operand_ids_size(),
                                                   " operands, expected ", want));
  const auto a = by_id.find(dot.operand_ids(0)), b = by_id.find(dot.operand_ids(1));
  if (a == by_id.end() || b == by_id.end())
    return absl::InvalidArgumentError(absl::StrCat(where, ": an operand of the dot is not in its computation"));
  const xla::ShapeProto& lhs = a->second->shape();
  const xla::ShapeProto& rhs = b->second->shape();
  const xla::DotDimensionNumbers& d = dot.dot_dimension_numbers();
  for (const auto& [shape, dims] : {std::pair{&lhs, &d.lhs_contracting_dimensions()}, {&lhs, &d.lhs_batch_dimensions()},
                                    {&rhs, &d.rhs_contracting_dimensions()}, {&rhs, &d.rhs_batch_dimensions()}})
    for (int64_t x : *dims)
      if (x < 0 || x >= shape->dimensions_size())
        return absl::InvalidArgumentError(absl::StrCat(where, ": dot dimension ", x, " is not one of its operand's ",
                                                       shape->dimensions_size()));
  if (d.lhs_contracting_dimensions_size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(where, ": the dot contracts no dimension (lhs_contracting_dims)"));
  XlaGemmProblem p;
  p.lhs_dtype = ElementTypeName(lhs.element_type());
  p.rhs_dtype = ElementTypeName(rhs.element_type());
  p.out_dtype = ElementTypeName(dot.shape().element_type());
  p.batch = Product(lhs, d.lhs_batch_dimensions());
  p.k = Product(lhs, d.lhs_contracting_dimensions());
  p.m = p.n = 1;
  for (int i = 0; i < lhs.dimensions_size(); ++i)
    if (!Has(d.lhs_batch_dimensions(), i) && !Has(d.lhs_contracting_dimensions(), i)) p.m *= lhs.dimensions(i);
  for (int i = 0; i < rhs.dimensions_size(); ++i)
    if (!Has(d.rhs_batch_dimensions(), i) && !Has(d.rhs_contracting_dimensions(), i)) p.n *= rhs.dimensions(i);
  p.lhs_transposed = !Has(d.lhs_contracting_dimensions(), Minor(lhs));
  p.rhs_transposed = Has(d.rhs_contracting_dimensions(), Minor(rhs));
  return p;
}

// A nested GEMM fusion's configuration: the output tile, read back over the dot's result
// dimensions (batch, then lhs's free ones: M, then rhs's: N; fusion_tiling.h), warps,
// stages and CTAs of `config`, BLOCK_K from the dot's contracting tile (its backend
// config's "sizes").
absl::StatusOr<XlaGemmConfig> NestedConfig(const json& config, const HloComputationProto& fused,
                                           const HloInstructionProto& dot, const HloInstructionProto& lhs,
                                           absl::string_view where) {
  const int lhs_rank = lhs.shape().dimensions_size();
  const std::string at = absl::StrCat(where, ": block_level_fusion_config");
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": no block_level_fusion_config"));
  const auto tiles = config.find("output_tiles");
  if (tiles == config.end() || !tiles->is_array() || tiles->empty() || !(*tiles)[0].is_object() ||
      !(*tiles)[0].contains("sizes"))
    return absl::InvalidArgumentError(absl::StrCat(at, ": no output_tiles[0].sizes"));
  absl::StatusOr<std::vector<int64_t>> root_sizes = Ints((*tiles)[0]["sizes"], at + ".output_tiles[0].sizes");
  if (!root_sizes.ok()) return root_sizes.status();
  absl::StatusOr<std::vector<int64_t>> sizes = TileOverDot(fused, dot, *root_sizes, at);
  if (!sizes.ok()) return sizes.status();
  const xla::DotDimensionNumbers& d = dot.dot_dimension_numbers();
  const int batch = d.lhs_batch_dimensions_size();
  const int m_end = lhs_rank - d.lhs_contracting_dimensions_size();  // batch + lhs's free dimensions
  XlaGemmConfig c;
  c.block_m = c.block_n = 1;
  for (int i = batch; i < static_cast<int>(sizes->size()); ++i) (i < m_end ? c.block_m : c.block_n) *= (*sizes)[i];
  // BLOCK_K: the dot's contracting tile ("sizes"), or else the tile of its lhs operand's
  // own nested fusion over the contracting dimensions.
  const json dot_config = ParseJson(dot.backend_config());
  c.block_k = 1;
  if (dot_config.is_object() && dot_config.contains("sizes")) {
    absl::StatusOr<std::vector<int64_t>> k =
        Ints(dot_config["sizes"], absl::StrCat(where, ": dot ", ShownName(dot.name()), " sizes"));
    if (!k.ok()) return k.status();
    for (int64_t v : *k) c.block_k *= v;
  } else if (std::optional<std::vector<int64_t>> tile = OperandTile(lhs)) {
    for (int64_t dim : d.lhs_contracting_dimensions()) c.block_k *= (*tile)[static_cast<size_t>(dim)];
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": its dot ", ShownName(dot.name()),
        " has no contracting tile (backend_config \"sizes\": BLOCK_K), nor a nested lhs fusion with a tile"));
  }
  absl::StatusOr<int64_t> warps = Int(config, "num_warps", at), stages = Int(config, "num_stages", at);
  if (!warps.ok()) return warps.status();
  if (!stages.ok()) return stages.status();
  c.num_warps = *warps;
  c.num_stages = *stages;
  if (config.contains("num_ctas")) {
    absl::StatusOr<int64_t> ctas = Int(config, "num_ctas", at);
    if (!ctas.ok()) return ctas.status();
    c.num_ctas = std::max<int64_t>(*ctas, 1);
  }
  return c;
}

// An older GEMM fusion's triton_gemm_config: all seven parameters.
absl::StatusOr<XlaGemmConfig> GemmConfig(const json& config, absl::string_view where) {
  const std::string at = absl::StrCat(where, ": triton_gemm_config");
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": no triton_gemm_config"));
  XlaGemmConfig c;
  for (auto [key, field] : {std::pair{"block_m", &c.block_m}, {"block_n", &c.block_n}, {"block_k", &c.block_k},
                            {"split_k", &c.split_k}, {"num_stages", &c.num_stages}, {"num_warps", &c.num_warps},
                            {"num_ctas", &c.num_ctas}}) {
    const bool optional = field == &c.split_k || field == &c.num_ctas;  // 1 when left out, as XLA reads them
    if (optional && !config.contains(key)) continue;
    absl::StatusOr<int64_t> v = Int(config, key, at);
    if (!v.ok()) return v.status();
    *field = *v;
  }
  c.split_k = std::max<int64_t>(c.split_k, 1);
  c.num_ctas = std::max<int64_t>(c.num_ctas, 1);
  return c;
}

// The fused computation as a module of its own: it and what it calls, transitively, in
// the module's order (callees first, as the canonical order keeps them).
tgraph::xla::HloModuleProto Submodule(const tgraph::xla::HloModuleProto& module, const HloComputationProto& fused,
                                      const std::string& name) {
  std::map<int64_t, const HloComputationProto*> by_id;
  for (const HloComputationProto& c : module.computations()) by_id[c.id()] = &c;
  std::set<int64_t> reached;
  std::vector<int64_t> stack = {fused.id()};
  while (!stack.empty()) {
    const int64_t id = stack.back();
    stack.pop_back();
    const auto it = by_id.find(id);
    if (it == by_id.end() || !reached.insert(id).second) continue;
    for (const HloInstructionProto& inst : it->second->instructions())
      for (int64_t callee : inst.called_computation_ids()) stack.push_back(callee);
  }
  tgraph::xla::HloModuleProto out;
  out.set_name(name);
  out.set_id(module.id());
  for (const HloComputationProto& c : module.computations())
    if (reached.count(c.id()) && c.id() != fused.id()) *out.add_computations() = c;
  *out.add_computations() = fused;  // the entry last, as every module has it
  out.set_entry_computation_name(fused.name());
  out.set_entry_computation_id(fused.id());
  return out;
}

// Whether the computation a fusion calls holds a dot (a nested GEMM fusion's operands are
// nested fusions of that kind too, each only the operand's prologue and its tile).
bool CallsDot(const HloInstructionProto& fusion, const std::map<int64_t, const HloComputationProto*>& computations) {
  if (fusion.called_computation_ids_size() != 1) return true;  // ReadFusion says what is wrong
  const auto it = computations.find(fusion.called_computation_ids(0));
  if (it == computations.end()) return true;
  for (const HloInstructionProto& inst : it->second->instructions())
    if (IsProduct(inst.opcode())) return true;
  return false;
}

// One fusion instruction whose backend config names a Triton GEMM kind.
absl::StatusOr<GemmFusion> ReadFusion(const tgraph::xla::HloModuleProto& module, const HloInstructionProto& fusion,
                                      const std::string& kind, const json& fbc,
                                      const std::map<int64_t, const HloComputationProto*>& computations,
                                      absl::string_view what) {
  const std::string where = absl::StrCat(what, ": fusion ", ShownName(fusion.name()));
  if (fusion.called_computation_ids_size() != 1 || !computations.count(fusion.called_computation_ids(0)))
    return absl::InvalidArgumentError(absl::StrCat(where, ": it calls no fused computation"));
  const HloComputationProto& fused = *computations.at(fusion.called_computation_ids(0));
  std::map<int64_t, const HloInstructionProto*> by_id;
  const HloInstructionProto* dot = nullptr;
  int dots = 0;
  for (const HloInstructionProto& inst : fused.instructions()) {
    by_id[inst.id()] = &inst;
    if (IsProduct(inst.opcode())) dot = &inst, ++dots;
  }
  if (dots != 1)
    return absl::InvalidArgumentError(absl::StrCat(where, ": its computation ", ShownName(fused.name()), " has ", dots,
                                                   " matrix products (dot or scaled-dot), expected one"));  // none: see FindGemmFusions
  const auto root = by_id.find(fused.root_id());
  if (root == by_id.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": its computation has no root"));
  absl::StatusOr<XlaGemmProblem> problem = ProblemOf(*dot, by_id, where);
  if (!problem.ok()) return problem.status();
  absl::StatusOr<XlaGemmConfig> chosen =
      kind == kNestedKind
          ? NestedConfig(fbc.value("block_level_fusion_config", json()), fused, *dot, *by_id.at(dot->operand_ids(0)),
                         where)
          : GemmConfig(fbc.value("triton_gemm_config", json()), where);
  if (!chosen.ok()) return chosen.status();
  GemmFusion f;
  f.name = ShownName(fusion.name());
  f.computation = ShownName(fused.name());
  f.kind = kind;
  f.dot = ShownName(dot->name());
  f.problem = *problem;
  f.chosen = *chosen;
  f.module = Submodule(module, fused, fusion.name());
  return f;
}

}  // namespace

absl::StatusOr<std::vector<GemmFusion>> FindGemmFusions(const tgraph::xla::HloModuleProto& module,
                                                        absl::string_view what, std::vector<RefusedFusion>* refused) {
  absl::Status first_refusal;
  std::map<int64_t, const HloComputationProto*> computations;
  for (const HloComputationProto& c : module.computations()) computations[c.id()] = &c;
  std::vector<GemmFusion> out;
  for (const HloComputationProto& c : module.computations())
    for (const HloInstructionProto& inst : c.instructions()) {
      if (inst.opcode() != "fusion" || inst.backend_config().empty()) continue;
      const json backend = ParseJson(inst.backend_config());
      if (backend.is_discarded()) {
        const absl::Status s = absl::InvalidArgumentError(
            absl::StrCat(what, ": fusion ", ShownName(inst.name()), ": its backend_config is not JSON"));
        if (refused == nullptr) return s;
        refused->push_back({ShownName(inst.name()), std::string(s.message())});
        if (first_refusal.ok()) first_refusal = s;
        continue;
      }
      // Today's XLA wraps the fusion's config (a GpuBackendConfig's fusion_backend_config);
      // older dumps and XLA's tests write the FusionBackendConfig itself.
      if (!backend.is_object()) continue;
      const json& fbc = backend.contains("fusion_backend_config") ? backend["fusion_backend_config"] : backend;
      if (!fbc.is_object()) continue;
      const std::string kind = fbc.value("kind", std::string());
      if (kind != kNestedKind && kind != kGemmKind) continue;
      if (kind == kNestedKind && !CallsDot(inst, computations)) continue;  // a dot operand's own nested fusion
      absl::StatusOr<GemmFusion> f = ReadFusion(module, inst, kind, fbc, computations, what);
      if (!f.ok()) {
        if (refused == nullptr) return f.status();
        refused->push_back({ShownName(inst.name()), std::string(f.status().message())});
        if (first_refusal.ok()) first_refusal = f.status();
        continue;
      }
      out.push_back(std::move(*f));
    }
  if (out.empty() && !first_refusal.ok()) return first_refusal;
  if (out.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": module ", ShownName(module.name()), " has no Triton matrix-product fusion (backend_config kind ",
        kNestedKind, " or ", kGemmKind, "): a module has them after XLA's GPU passes, where they gave a matrix "
        "product to Triton (XLA_FLAGS=--xla_dump_to=DIR writes it as *.sm_*_gpu_after_optimizations.txt or .hlo.pb); "
        "before those passes, or where every product went to a library or none is left, there are none"));
  return out;
}

absl::StatusOr<tgraph::xla::HloModuleProto> LoneDotModule(const GemmFusion& f, absl::string_view what) {
  const std::string where = absl::StrCat(what, ": fusion ", f.name);
  const HloComputationProto* fused = nullptr;
  for (const HloComputationProto& c : f.module.computations())
    if (c.id() == f.module.entry_computation_id()) fused = &c;
  if (fused == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": its module has no entry computation"));
  std::map<int64_t, const HloInstructionProto*> by_id;
  const HloInstructionProto* dot = nullptr;
  for (const HloInstructionProto& inst : fused->instructions()) {
    by_id[inst.id()] = &inst;
    if (IsProduct(inst.opcode()) && ShownName(inst.name()) == f.dot) dot = &inst;
  }
  bool operands_known = dot != nullptr && dot->operand_ids_size() >= 2;
  for (int i = 0; operands_known && i < dot->operand_ids_size(); ++i) operands_known = by_id.count(dot->operand_ids(i)) > 0;
  if (!operands_known)
    return absl::InvalidArgumentError(absl::StrCat(where, ": its computation has no product ", f.dot, " of known operands"));
  HloComputationProto lone;
  lone.set_name(fused->name());
  lone.set_id(1);
  const int operands = dot->operand_ids_size();
  for (int i = 0; i < operands; ++i) {
    HloInstructionProto* p = lone.add_instructions();
    p->set_name(absl::StrCat(i == 0 ? "lhs" : i == 1 ? "rhs" : absl::StrCat("operand", i), ".lone_dot"));
    p->set_opcode("parameter");
    *p->mutable_shape() = by_id.at(dot->operand_ids(i))->shape();
    p->set_parameter_number(i);
    p->set_id(2 + i);
  }
  HloInstructionProto* d = lone.add_instructions();
  *d = *dot;
  d->set_id(2 + operands);
  d->clear_operand_ids();
  for (int i = 0; i < operands; ++i) d->add_operand_ids(2 + i);
  lone.set_root_id(2 + operands);
  tgraph::xla::HloModuleProto out;
  out.set_name(f.module.name());
  out.set_id(f.module.id());
  *out.add_computations() = std::move(lone);
  out.set_entry_computation_name(fused->name());
  out.set_entry_computation_id(1);
  return out;
}

std::vector<std::string> AttachLogs(const std::vector<FusionLog>& logs, std::vector<GemmFusion>* fusions) {
  std::map<std::string, GemmFusion*> by_name;
  for (GemmFusion& f : *fusions) by_name[f.name] = &f;
  std::vector<std::string> unmatched;
  for (const FusionLog& log : logs) {
    const auto it = by_name.find(log.fusion);
    if (it == by_name.end()) {
      unmatched.push_back(log.fusion);
      continue;
    }
    GemmFusion& f = *it->second;
    std::set<XlaGemmConfig> seen;
    for (const TriedConfig& c : f.measured) seen.insert(c.config);
    for (const TriedConfig& c : log.triton)
      if (seen.insert(c.config).second) f.measured.push_back(c);
    if (log.library_ns) f.library_ns = f.library_ns ? std::min(*f.library_ns, *log.library_ns) : *log.library_ns;
    f.failed += log.failed;
  }
  return unmatched;
}

// The fastest measured Triton time (none when nothing was measured).
std::optional<int64_t> Fastest(const GemmFusion& f) {
  if (f.measured.empty()) return std::nullopt;
  int64_t best = f.measured[0].run_time_ns;
  for (const TriedConfig& c : f.measured) best = std::min(best, c.run_time_ns);
  return best;
}

// A fusion's rows: XLA's choice unmeasured, or every measured configuration.
void FillRows(const GemmFusion& f, int64_t sm_count, TileGraph* g) {
  std::vector<TriedConfig> rows = f.measured;
  if (rows.empty()) rows.push_back({f.chosen, 0});
  int64_t fastest = 0;
  for (const TriedConfig& c : f.measured) fastest = fastest == 0 ? c.run_time_ns : std::min(fastest, c.run_time_ns);
  const int64_t normalizer = f.measured.empty() ? 1 : (f.library_ns && *f.library_ns > 0 ? *f.library_ns : std::max<int64_t>(fastest, 1));
  g->num_configs = static_cast<int64_t>(rows.size());
  for (const TriedConfig& c : rows) {
    const std::array<float, kTileConfigDim> row = XlaGemmFeatures(f.problem, c.config, sm_count);
    g->config_feat.insert(g->config_feat.end(), row.begin(), row.end());
    g->config_runtime.push_back(c.run_time_ns);
    g->config_runtime_normalizers.push_back(normalizer);
  }
}

absl::StatusOr<std::vector<std::string>> WriteGemmFusions(const std::vector<GemmFusion>& fusions,
                                                          const std::string& dir, int64_t sm_count, bool force,
                                                          const Limits& limits, const std::string& prefix,
                                                          const std::vector<RefusedFusion>& refused) {
  namespace fs = std::filesystem;
  const std::string tsv_path = (fs::path(dir) / (prefix + "fusions.tsv")).string();
  if (absl::Status s = CheckOutputFile(tsv_path, "--out_dir", force); !s.ok()) return s;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  std::string tsv = XlaFusionTableHeader() + "\n";
  std::vector<std::string> lines;
  for (const GemmFusion& f : fusions) {
    absl::StatusOr<ModuleGraph> m = FeaturizeModule(f.module, absl::StrCat(dir, ": fusion ", f.name), limits);
    if (!m.ok()) return m.status();
    int64_t dot_node = -1;
    for (size_t i = 0; i < m->nodes.size(); ++i)
      if (m->nodes[i].instruction == f.dot && m->nodes[i].computation == f.computation) dot_node = static_cast<int64_t>(i);
    TileGraph g;
    g.name = prefix + FileSafeName(f.name);
    g.graph = std::move(m->graph);
    FillRows(f, sm_count, &g);
    const std::string file = g.name + ".npz";
    if (absl::Status s = SaveTileGraph((fs::path(dir) / file).string(), g); !s.ok()) return s;
    XlaFusionRecord r{f.name, f.computation, f.kind, f.dot, dot_node, g.graph.num_nodes, f.problem, f.chosen,
                      static_cast<int64_t>(f.measured.size()), f.failed, Fastest(f), f.library_ns, file};
    absl::StrAppend(&tsv, XlaFusionTableLine(r), "\n");
    const XlaGemmProblem& p = f.problem;
    const XlaGemmConfig& c = f.chosen;
    lines.push_back(absl::StrCat(f.name, ": ", p.Name(), ", chosen ", c.Name(), ", ", g.graph.num_nodes, " nodes",
                                 f.measured.empty() ? "" : absl::StrCat(", ", f.measured.size(), " measured")));
  }
  for (const RefusedFusion& r : refused) {  // a reason is one line: tabs and newlines as spaces
    std::string reason = r.reason;
    std::replace_if(reason.begin(), reason.end(), [](char ch) { return ch == '\t' || ch == '\n' || ch == '\r'; }, ' ');
    absl::StrAppend(&tsv, "# refused\t", r.name, "\t", reason, "\n");
  }
  if (absl::Status s = WriteFileAtomic(tsv_path, tsv); !s.ok()) return s;
  return lines;
}

std::string OverrideFileText(const std::vector<XlaGemmConfig>& configs) {
  tgraph::xla::TritonGemmConfigsProto list;
  for (const XlaGemmConfig& c : configs) {
    tgraph::xla::TritonGemmKey* k = list.add_config();
    k->set_block_m(c.block_m);
    k->set_block_n(c.block_n);
    k->set_block_k(c.block_k);
    k->set_split_k(c.split_k);
    k->set_num_stages(c.num_stages);
    k->set_num_warps(c.num_warps);
    k->set_num_ctas(c.num_ctas);
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(list, &text);
  return text;
}

}  // namespace tgraph::hlo
