#include "model/tile/tile_space.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/core/file_util.h"

namespace tgraph {

using nlohmann::json;

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* const kColumnNames[kTileConfigDim] = {
    "BLOCK_M", "BLOCK_N", "BLOCK_K", "tile slot 3", "tile slot 4", "tile slot 5", "tile sum", "tile product",
    "programs along M", "programs along N", "K steps", "waves", "output tile fill", "last wave fill", "grid sum",
    "grid product", "warps", "stages", "shared memory KiB", "schedule slot 3", "schedule slot 4",
    "schedule slot 5", "schedule sum", "schedule product"};

// The second feature set's names where they differ from the first's.
const char* ColumnName(int feature_set, int i) {
  if (feature_set >= 2) switch (i) {
      case 3: return "CTAs";
      case 4: return "padded work %";
      case 5: return "bytes per kFLOP";
      case 19: return "CTAs resident per SM";
      case 20: return "waves of resident CTAs";
      case 21: return "their last wave's fill";
      default: break;
    }
  return kColumnNames[i];
}

bool Contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

absl::Status CheckList(const std::vector<int64_t>& v, absl::string_view key, absl::string_view what) {
  if (v.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " has no candidate values"));
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] <= 0 || v[i] > 65536 || (i > 0 && v[i] <= v[i - 1]))
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", key, " must list values in 1..65536 in ascending order without repeats"));
  return absl::OkStatus();
}

}  // namespace

void TileValueGroup(const std::array<double, 6>& v, float* out) {
  double sum = 0, product = 1;
  for (int i = 0; i < 6; ++i) {
    out[i] = static_cast<float>(v[i]);
    sum += v[i];
    if (v[i] != 0) product *= v[i];
  }
  out[6] = static_cast<float>(sum);
  out[7] = static_cast<float>(product);
}

std::string GemmProblem::Name() const { return absl::StrCat(dtype, " ", m, "x", n, "x", k); }

std::string GemmProblem::Variant() const {
  std::string off;
  if (n % 16 != 0) off += 'N';
  if (k % 16 != 0) off += 'K';
  return off.empty() ? dtype : absl::StrCat(dtype, "/", off);
}

std::string VariantDtype(absl::string_view variant) {
  return std::string(variant.substr(0, variant.find('/')));
}

std::string DescribeVariant(absl::string_view variant) {
  const size_t slash = variant.find('/');
  if (slash == absl::string_view::npos) return "N and K multiples of 16";
  std::vector<std::string> sizes;
  for (char c : variant.substr(slash + 1)) sizes.push_back(std::string(1, c));
  if (sizes.size() == 1) return absl::StrCat(sizes[0], " not a multiple of 16");
  return absl::StrCat(absl::StrJoin(sizes, " and "), " not multiples of 16");
}

namespace {

// "bf16" or "bf16/" and one or both of N, K in that order.
bool WellFormedVariant(absl::string_view v) {
  const size_t slash = v.find('/');
  if (slash == absl::string_view::npos) return true;
  const absl::string_view sizes = v.substr(slash + 1);
  if (sizes.empty()) return false;
  std::string seen;
  for (char c : sizes) {
    if (c != 'N' && c != 'K') return false;
    if (!seen.empty() && std::string("NK").find(c) <= std::string("NK").find(seen.back())) return false;
    seen += c;
  }
  return true;
}

}  // namespace

std::string TritonTile::Name() const {
  return absl::StrCat(block_m, "x", block_n, "x", block_k, " w", num_warps, " s", num_stages);
}

absl::StatusOr<TritonTile> ParseTritonTile(absl::string_view text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a tile configuration: expected BLOCK_MxBLOCK_NxBLOCK_K wWARPS sSTAGES, "
                                "e.g. 128x128x64 w4 s3"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(text, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || parts[1].size() < 2 || parts[1][0] != 'w' || parts[2].size() < 2 || parts[2][0] != 's')
    return bad();
  std::vector<absl::string_view> dims = absl::StrSplit(parts[0], 'x');
  TritonTile t;
  if (dims.size() != 3 || !absl::SimpleAtoi(dims[0], &t.block_m) || !absl::SimpleAtoi(dims[1], &t.block_n) ||
      !absl::SimpleAtoi(dims[2], &t.block_k) || !absl::SimpleAtoi(parts[1].substr(1), &t.num_warps) ||
      !absl::SimpleAtoi(parts[2].substr(1), &t.num_stages))
    return bad();
  return t;
}

std::array<float, kTileConfigDim> TritonTileFeatures(const GemmProblem& p, const TritonTile& t, int64_t sm_count) {
  std::array<float, kTileConfigDim> f{};
  const int64_t pm = CeilDiv(p.m, t.block_m), pn = CeilDiv(p.n, t.block_n), ks = CeilDiv(p.k, t.block_k);
  const int64_t programs = pm * pn, waves = CeilDiv(programs, sm_count);
  const double tile_fill = static_cast<double>(p.m) * static_cast<double>(p.n) /
                           (static_cast<double>(pm * t.block_m) * static_cast<double>(pn * t.block_n));
  const double wave_fill = static_cast<double>(programs) / static_cast<double>(waves * sm_count);
  const double smem_kib = static_cast<double>(t.num_stages * (t.block_m + t.block_n) * t.block_k * p.ElementBytes()) / 1024.0;
  TileValueGroup({double(t.block_m), double(t.block_n), double(t.block_k), 0, 0, 0}, f.data());
  TileValueGroup({double(pm), double(pn), double(ks), double(waves), tile_fill, wave_fill}, f.data() + 8);
  TileValueGroup({double(t.num_warps), double(t.num_stages), smem_kib, 0, 0, 0}, f.data() + 16);
  return f;
}

std::array<float, kTileConfigDim> TritonTileFeatures(const GemmProblem& p, const TritonTile& t, const GpuSpec& gpu) {
  std::array<float, kTileConfigDim> f = TritonTileFeatures(p, t, gpu.sm_count);
  const int64_t pm = CeilDiv(p.m, t.block_m), pn = CeilDiv(p.n, t.block_n), ks = CeilDiv(p.k, t.block_k);
  const int64_t ctas = pm * pn;
  const double covered = static_cast<double>(pm * t.block_m) * static_cast<double>(pn * t.block_n) *
                         static_cast<double>(ks * t.block_k);
  const double padded = 100.0 * (1.0 - static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) / covered);
  const double bytes_per_kflop = 1000.0 * static_cast<double>(p.ElementBytes() * (t.block_m + t.block_n)) /
                                 (2.0 * static_cast<double>(t.block_m * t.block_n));
  const CtaOccupancy o = OccupancyOf(gpu, t.block_m, t.block_n, t.block_k, t.num_warps, t.num_stages, p.ElementBytes());
  const int64_t slots = gpu.sm_count * o.resident, waves = CeilDiv(ctas, slots);
  const double fill = static_cast<double>(ctas) / static_cast<double>(waves * slots);
  TileValueGroup({double(t.block_m), double(t.block_n), double(t.block_k), double(ctas), padded, bytes_per_kflop},
                 f.data());
  TileValueGroup({double(t.num_warps), double(t.num_stages), f[18], double(o.resident), double(waves), fill},
                 f.data() + 16);
  return f;
}

std::array<float, kTileConfigDim> TileSpace::Row(const GemmProblem& p, const TritonTile& t) const {
  return feature_set >= 2 ? TritonTileFeatures(p, t, gpu_spec) : TritonTileFeatures(p, t, sm_count);
}

TritonTile TritonTileOfRow(const float* row) {
  const auto v = [&](int i) { return static_cast<int64_t>(std::llround(row[i])); };
  return {v(0), v(1), v(2), v(16), v(17)};
}

std::vector<TritonTile> TileSpace::Candidates() const {
  std::vector<TritonTile> out;
  for (int64_t bm : block_m)
    for (int64_t bn : block_n)
      for (int64_t bk : block_k)
        for (int64_t w : num_warps)
          for (int64_t s : num_stages) out.push_back({bm, bn, bk, w, s});
  return out;
}

std::vector<TritonTile> TileSpace::Legal(absl::string_view dtype) const {
  std::vector<TritonTile> out;
  const auto it = refused.find(std::string(dtype));
  for (const TritonTile& t : Candidates())
    if (it == refused.end() || !it->second.count(t)) out.push_back(t);
  return out;
}

absl::Status TileSpace::CheckProblem(const GemmProblem& p) const {
  if (!dtypes.count(p.dtype))
    return absl::FailedPreconditionError(absl::StrCat(
        "the problem is ", p.Name(), ", but this ", kernel, " space was measured on ", gpu, " for ",
        absl::StrJoin(dtypes, " and "), " problems only: which ", p.dtype,
        " configurations the compiler accepts, and how fast they run, are unknown to it (measure them and "
        "publish a model of your own: tgraph-featurize tiles, tgraph-train)"));
  const std::string variant = p.Variant();
  if (variants.count(variant)) return absl::OkStatus();
  std::vector<std::string> measured;
  for (const std::string& v : variants)
    if (VariantDtype(v) == p.dtype) measured.push_back(absl::StrCat(v, " (", DescribeVariant(v), ")"));
  return absl::FailedPreconditionError(absl::StrCat(
      "the problem is ", p.Name(), ", with ", DescribeVariant(variant), " (kernel variant ", variant,
      "), but this ", kernel, " space was measured on ", gpu, " for ", absl::StrJoin(measured, ", "),
      " only: the compiler builds another kernel for such sizes, which accepts other configurations and is "
      "fastest with others (measure problems like it and publish a model of your own: tgraph-featurize tiles, "
      "tgraph-train)"));
}

absl::Status TileSpace::CheckRow(const GemmProblem& p, const float* row, absl::string_view what) const {
  const TritonTile t = TritonTileOfRow(row);
  if (!Contains(block_m, t.block_m) || !Contains(block_n, t.block_n) || !Contains(block_k, t.block_k) ||
      !Contains(num_warps, t.num_warps) || !Contains(num_stages, t.num_stages))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", t.Name(), " is not a candidate of this ", kernel, " space (columns 0-2: BLOCK_M, BLOCK_N, BLOCK_K; ",
        "16-17: warps, stages; see the model's tile space in ListModels)"));
  if (const auto it = refused.find(p.Variant()); it != refused.end() && it->second.count(t))
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.Name(), " is illegal for ", p.Variant(), " on ", gpu,
                                                   ": the compiler refused it when the space was measured (its shared "
                                                   "memory or registers exceed the GPU's)"));
  const std::array<float, kTileConfigDim> want = Row(p, t);
  for (int i = 0; i < kTileConfigDim; ++i) {
    const float tolerance = 1e-5f * std::max(1.0f, std::fabs(want[i]));
    if (!(std::fabs(row[i] - want[i]) <= tolerance))
      return absl::InvalidArgumentError(absl::StrCat(what, ": column ", i, " (", ColumnName(feature_set, i), ") is ", row[i],
                                                     ", but ", t.Name(), " on ", p.Name(), " gives ", want[i]));
  }
  return absl::OkStatus();
}

absl::Status TileSpace::Validate(absl::string_view what) const {
  if (kernel != "triton-gemm")
    return absl::InvalidArgumentError(absl::StrCat(what, ": kernel is '", kernel, "', expected 'triton-gemm'"));
  if (sm_count <= 0 || sm_count > 100000)
    return absl::InvalidArgumentError(absl::StrCat(what, ": sm_count must be in 1..100000"));
  for (const auto& [key, list] : {std::pair<const char*, const std::vector<int64_t>*>{"block_m", &block_m},
                                  {"block_n", &block_n},
                                  {"block_k", &block_k},
                                  {"num_warps", &num_warps},
                                  {"num_stages", &num_stages}})
    if (absl::Status s = CheckList(*list, key, what); !s.ok()) return s;
  if (feature_set != 1 && feature_set != 2)
    return absl::InvalidArgumentError(absl::StrCat(what, ": feature_set is ", feature_set, ", expected 1 or 2"));
  if (feature_set == 2) {
    if (absl::Status g = gpu_spec.Validate(what); !g.ok()) return g;
    if (gpu_spec.name != gpu || gpu_spec.sm_count != sm_count)
      return absl::InvalidArgumentError(absl::StrCat(what, ": gpu_spec describes ", gpu_spec.name, " (",
                                                     gpu_spec.sm_count, " SMs), but the space was measured on ", gpu,
                                                     " (", sm_count, " SMs)"));
  }
  if (dtypes.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": dtypes: no measured dtype"));
  for (const std::string& dtype : dtypes)
    if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
      return absl::InvalidArgumentError(absl::StrCat(what, ": dtypes: '", dtype, "' is not bf16, f16 or f32"));
  if (variants.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": variants: no measured kernel variant"));
  for (const std::string& v : variants)
    if (!WellFormedVariant(v) || !dtypes.count(VariantDtype(v)))
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": variants: '", v, "' is not a measured dtype (", absl::StrJoin(dtypes, ", "),
          ") alone or followed by '/' and which of N and K are not multiples of 16 (e.g. bf16/NK)"));
  for (const auto& [dtype, tiles] : refused) {
    if (!variants.count(dtype))
      return absl::InvalidArgumentError(absl::StrCat(what, ": refused: '", dtype, "' is not one of the measured variants (",
                                                     absl::StrJoin(variants, ", "), ")"));
    for (const TritonTile& t : tiles)
      if (!Contains(block_m, t.block_m) || !Contains(block_n, t.block_n) || !Contains(block_k, t.block_k) ||
          !Contains(num_warps, t.num_warps) || !Contains(num_stages, t.num_stages))
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": refused ", dtype, ": ", t.Name(), " is not one of the candidates"));
  }
  return absl::OkStatus();
}

std::string TileSpace::Summary() const {
  std::string refusals;
  for (const auto& [dtype, tiles] : refused) absl::StrAppend(&refusals, refusals.empty() ? "" : ", ", dtype, " ", tiles.size());
  return absl::StrCat(kernel, " measured on ", gpu, " (", sm_count, " SMs) for ", absl::StrJoin(variants, ", "), ": ",
                      Candidates().size(),
                      " candidates; refused by the compiler: ", refusals.empty() ? "none" : refusals);
}

std::string TileSpace::ToJson() const {
  json j = {{"kernel", kernel},         {"gpu", gpu},         {"sm_count", sm_count},
            {"block_m", block_m},       {"block_n", block_n}, {"block_k", block_k},
            {"num_warps", num_warps},   {"num_stages", num_stages}};
  json r = json::object();
  for (const auto& [dtype, tiles] : refused) {
    json names = json::array();
    for (const TritonTile& t : tiles) names.push_back(t.Name());
    r[dtype] = names;
  }
  j["refused"] = r;
  j["dtypes"] = std::vector<std::string>(dtypes.begin(), dtypes.end());
  j["variants"] = std::vector<std::string>(variants.begin(), variants.end());
  if (feature_set >= 2) {
    j["feature_set"] = feature_set;
    j["gpu_spec"] = {{"name", gpu_spec.name},
                     {"compute_capability", gpu_spec.compute_capability},
                     {"sm_count", gpu_spec.sm_count},
                     {"shared_memory_per_sm", gpu_spec.shared_memory_per_sm},
                     {"shared_memory_per_cta", gpu_spec.shared_memory_per_cta},
                     {"shared_memory_reserved", gpu_spec.shared_memory_reserved},
                     {"registers_per_sm", gpu_spec.registers_per_sm},
                     {"max_ctas_per_sm", gpu_spec.max_ctas_per_sm},
                     {"max_warps_per_sm", gpu_spec.max_warps_per_sm}};
  }
  return j.dump(1);
}

namespace {

// A space's "gpu_spec" (feature set 2); errors name `what` and the key.
absl::StatusOr<GpuSpec> GpuSpecFromJson(const json& j, absl::string_view what) {
  const auto missing = [&](const std::string& key, const char* type) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' missing or not ", type));
  };
  if (!j.contains("gpu_spec") || !j["gpu_spec"].is_object()) return missing("gpu_spec", "an object");
  const json& g = j["gpu_spec"];
  GpuSpec spec;
  for (const auto& [key, field] : {std::pair<const char*, std::string*>{"name", &spec.name},
                                   {"compute_capability", &spec.compute_capability}}) {
    if (!g.contains(key) || !g[key].is_string()) return missing(absl::StrCat("gpu_spec.", key), "a string");
    *field = g[key].get<std::string>();
  }
  for (const auto& [key, field] : {std::pair<const char*, int64_t*>{"sm_count", &spec.sm_count},
                                   {"shared_memory_per_sm", &spec.shared_memory_per_sm},
                                   {"shared_memory_per_cta", &spec.shared_memory_per_cta},
                                   {"shared_memory_reserved", &spec.shared_memory_reserved},
                                   {"registers_per_sm", &spec.registers_per_sm},
                                   {"max_ctas_per_sm", &spec.max_ctas_per_sm},
                                   {"max_warps_per_sm", &spec.max_warps_per_sm}}) {
    if (!g.contains(key) || !g[key].is_number_integer()) return missing(absl::StrCat("gpu_spec.", key), "an integer");
    *field = g[key].get<int64_t>();
  }
  const absl::StatusOr<GpuSpec> known = FindGpu(spec.name);
  spec.measured = known.ok() && known->measured;
  return spec;
}

}  // namespace

absl::StatusOr<TileSpace> TileSpace::FromJson(const std::string& text, absl::string_view what) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  const auto missing = [&](const char* key, const char* type) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' missing or not ", type));
  };
  TileSpace s;
  if (!j.contains("kernel") || !j["kernel"].is_string()) return missing("kernel", "a string");
  if (!j.contains("gpu") || !j["gpu"].is_string()) return missing("gpu", "a string");
  if (!j.contains("sm_count") || !j["sm_count"].is_number_integer()) return missing("sm_count", "an integer");
  s.kernel = j["kernel"].get<std::string>();
  s.gpu = j["gpu"].get<std::string>();
  s.sm_count = j["sm_count"].get<int64_t>();
  for (const auto& [key, list] : {std::pair<const char*, std::vector<int64_t>*>{"block_m", &s.block_m},
                                  {"block_n", &s.block_n},
                                  {"block_k", &s.block_k},
                                  {"num_warps", &s.num_warps},
                                  {"num_stages", &s.num_stages}}) {
    if (!j.contains(key) || !j[key].is_array()) return missing(key, "a list of integers");
    for (const json& v : j[key]) {
      if (!v.is_number_integer()) return missing(key, "a list of integers");
      list->push_back(v.get<int64_t>());
    }
  }
  if (j.contains("refused")) {
    if (!j["refused"].is_object()) return missing("refused", "an object of kernel variant: [configurations]");
    for (const auto& [dtype, names] : j["refused"].items()) {
      if (!names.is_array()) return missing("refused", "an object of kernel variant: [configurations]");
      std::set<TritonTile>& tiles = s.refused[dtype];
      for (const json& n : names) {
        if (!n.is_string()) return missing("refused", "an object of kernel variant: [configurations]");
        absl::StatusOr<TritonTile> t = ParseTritonTile(n.get<std::string>());
        if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": refused ", dtype, ": ", t.status().message()));
        tiles.insert(*t);
      }
    }
  }
  // A list of names under `key`, when the file has one: false when it has none.
  const auto names = [&](const char* key, const char* type, std::set<std::string>& out) -> absl::StatusOr<bool> {
    if (!j.contains(key)) return false;
    if (!j[key].is_array()) return missing(key, type);
    for (const json& v : j[key]) {
      if (!v.is_string()) return missing(key, type);
      out.insert(v.get<std::string>());
    }
    return true;
  };
  absl::StatusOr<bool> has = names("dtypes", "a list of dtype names", s.dtypes);
  if (!has.ok()) return has.status();
  // Written before the measured dtypes were kept: every measured dtype then had refusals.
  if (!*has)
    for (const auto& [dtype, tiles] : s.refused) s.dtypes.insert(dtype);
  has = names("variants", "a list of kernel variants", s.variants);
  if (!has.ok()) return has.status();
  // Written before the variants were kept: every problem measured had N and K
  // multiples of 16, the dtype's variant.
  if (!*has) s.variants = s.dtypes;
  // Written before the GPU's table: the first feature set.
  if (j.contains("feature_set")) {
    if (!j["feature_set"].is_number_integer()) return missing("feature_set", "an integer");
    s.feature_set = j["feature_set"].get<int>();
  }
  if (s.feature_set == 2) {
    absl::StatusOr<GpuSpec> g = GpuSpecFromJson(j, what);
    if (!g.ok()) return g.status();
    s.gpu_spec = std::move(*g);
  }
  if (absl::Status v = s.Validate(what); !v.ok()) return v;
  return s;
}

absl::StatusOr<GemmProblem> GemmProblemOfGraph(const NodeGraph& g, absl::string_view what) {
  std::vector<int64_t> dots;
  for (int64_t i = 0; i < g.num_nodes; ++i)
    if (g.node_opcode[static_cast<size_t>(i)] == op::kDot) dots.push_back(i);
  if (dots.size() != 1)
    return absl::InvalidArgumentError(absl::StrCat(what, ": a Triton matrix-product kernel graph has one dot; this one has ",
                                                   dots.size()));
  const auto dims = [&](int64_t node) {
    std::vector<int64_t> d;
    for (int i = 0; i < 6; ++i)
      if (const float v = g.feat(node)[kShapeDimsBegin + i]; v > 0) d.push_back(static_cast<int64_t>(v));
    return d;
  };
  const int64_t dot = dots[0];
  const std::vector<int64_t> out = dims(dot);
  if (out.size() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the dot (node ", dot, ") has ", out.size(), " dimensions; expected C[M, N]"));
  GemmProblem p;
  p.m = out[0];
  p.n = out[1];
  // The measured kernel reads A as M x K and B as K x N; an operand stored the other way
  // round is another kernel (where M = K or K = N the graph cannot tell, and is taken as
  // this one).
  int64_t a_node = -1;
  std::vector<int64_t> a, b;
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    const int64_t u = g.edge_index[static_cast<size_t>(2 * e)], v = g.edge_index[static_cast<size_t>(2 * e + 1)];
    if (u != dot || g.node_opcode[static_cast<size_t>(v)] != op::kParameter) continue;
    if (g.feat(v)[30] == 0) a = dims(v), a_node = v;
    if (g.feat(v)[30] == 1) b = dims(v);
  }
  if (a_node < 0 || a.size() != 2 || b.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the dot's operands are not two matrices, parameters 0 and 1 (a Triton matrix-product kernel graph)"));
  if (a[0] != p.m)
    return absl::InvalidArgumentError(absl::StrCat(what, ": the dot's operand A (parameter 0) is ", a[0], " x ", a[1],
                                                   "; this kernel reads A as M x K with M = ", p.m,
                                                   " (A stored transposed is another kernel)"));
  p.k = a[1];
  if (b[0] != p.k || b[1] != p.n)
    return absl::InvalidArgumentError(absl::StrCat(what, ": the dot's operand B (parameter 1) is ", b[0], " x ", b[1],
                                                   "; this kernel reads B as K x N = ", p.k, " x ", p.n,
                                                   " (B stored transposed is another kernel)"));
  // The inputs' element type decides the kernel (its tiles' shared memory, the tensor
  // cores' rate), not the dot's result: bf16 inputs accumulated into an f32 result
  // (JAX's preferred_element_type) are a bf16 problem. Element type one-hot (node_feat
  // 2-20): f16 is index 10, f32 11, bf16 13.
  const float* f = g.feat(a_node);
  p.dtype = f[2 + 13] > 0 ? "bf16" : f[2 + 11] > 0 ? "f32" : f[2 + 10] > 0 ? "f16" : "";
  if (p.dtype.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the dot's operand A (node ", a_node, ") is not bf16, f16 or f32"));
  return p;
}

absl::StatusOr<TileSpace> LoadTileSpace(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kTileSpaceFile).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": no tile space here"));
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return TileSpace::FromJson(*text, path);
}

}  // namespace tgraph
