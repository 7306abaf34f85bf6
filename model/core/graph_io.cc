#include "model/core/graph_io.h"

#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/core/file_util.h"

namespace tgraph {
namespace {

absl::Status KeyError(absl::string_view what, absl::string_view key, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "': ", msg));
}

// Looks up `key`, checks its rank and dtype. Returns nullptr (and sets *status) on error,
// or nullptr with OK status when the key is optional and absent.
const NpyArray* Find(const NpzArchive& npz, absl::string_view what, const std::string& key,
                     std::initializer_list<DType> dtypes, std::initializer_list<size_t> ranks, bool required,
                     absl::Status* status) {
  auto it = npz.find(key);
  if (it == npz.end()) {
    if (required) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : npz) keys.push_back(k);
      *status = KeyError(what, key, absl::StrCat("missing (the file has: ", absl::StrJoin(keys, ", "), ")"));
    }
    return nullptr;
  }
  const NpyArray& a = it->second;
  bool dtype_ok = false;
  std::vector<std::string> names;
  for (DType t : dtypes) {
    dtype_ok |= (a.dtype == t);
    names.push_back(DTypeName(t));
  }
  if (!dtype_ok) {
    *status = KeyError(what, key, absl::StrCat("has dtype ", DTypeName(a.dtype), ", expected ",
                                               absl::StrJoin(names, " or ")));
    return nullptr;
  }
  bool rank_ok = false;
  for (size_t r : ranks) rank_ok |= (a.shape.size() == r);
  if (!rank_ok) {
    *status = KeyError(what, key, absl::StrCat("has shape ", a.ShapeString(), ", expected rank ",
                                               absl::StrJoin(ranks, " or ")));
    return nullptr;
  }
  return &a;
}

template <typename Out>
std::vector<Out> ToVector(const NpyArray& a) {
  const int64_t n = a.numel();
  std::vector<Out> out(n);
  switch (a.dtype) {
    case DType::kFloat32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(a.data<float>()[i]); break;
    case DType::kFloat64: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(a.data<double>()[i]); break;
    case DType::kInt32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(a.data<int32_t>()[i]); break;
    case DType::kInt64: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(a.data<int64_t>()[i]); break;
    case DType::kUint8: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(a.data<uint8_t>()[i]); break;
    case DType::kInt8: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(a.data<int8_t>()[i]); break;
  }
  return out;
}

// Reads the node part shared by layout and tile graphs.
absl::Status ReadNodeGraph(const NpzArchive& npz, absl::string_view what, NodeGraph* g) {
  absl::Status st;
  const NpyArray* feat = Find(npz, what, "node_feat", {DType::kFloat32}, {2}, true, &st);
  if (!feat) return st;
  if (feat->shape[1] != kNodeFeatDim)
    return KeyError(what, "node_feat", absl::StrCat("has shape ", feat->ShapeString(), ", expected (n, 140)"));
  const NpyArray* opc =
      Find(npz, what, "node_opcode", {DType::kUint8, DType::kInt32, DType::kInt64}, {1}, true, &st);
  if (!opc) return st;
  const NpyArray* edges = Find(npz, what, "edge_index", {DType::kInt64, DType::kInt32}, {2, 1}, true, &st);
  if (!edges) return st;
  // An edgeless graph may be stored as shape (0,) or (0, 2).
  if (!(edges->shape.size() == 2 && edges->shape[1] == 2) && !(edges->shape.size() == 1 && edges->shape[0] == 0))
    return KeyError(what, "edge_index", absl::StrCat("has shape ", edges->ShapeString(), ", expected (m, 2)"));
  g->num_nodes = feat->shape[0];
  g->node_feat = ToVector<float>(*feat);
  g->node_opcode = ToVector<int32_t>(*opc);
  if (opc->dtype == DType::kInt64)
    for (int64_t i = 0; i < opc->numel(); ++i)
      if (opc->data<int64_t>()[i] != g->node_opcode[i])
        return KeyError(what, "node_opcode", absl::StrCat("entry ", i, " is out of range"));
  g->edge_index = ToVector<int64_t>(*edges);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> ReadRuntimes(const NpzArchive& npz, absl::string_view what,
                                                  const std::string& key) {
  absl::Status st;
  const NpyArray* a = Find(npz, what, key, {DType::kInt64, DType::kInt32}, {1}, true, &st);
  if (!a) return st;
  return ToVector<int64_t>(*a);
}

// Layout config values of any numeric dtype as int8, each checked to be an integer in
// -1..5 (read in place: a real file's node_config_feat has 15 million values).
// `first`: v[0]'s index in the whole array (for the error's position).
template <typename T>
absl::Status ConvertConfigValues(const T* v, size_t n, absl::string_view what, absl::string_view key, int64_t nc,
                                 int8_t* out, size_t first = 0) {
  for (size_t k = 0; k < n; ++k) {
    const double x = static_cast<double>(v[k]);
    if (!(x >= -1.0 && x <= 5.0) || x != std::floor(x)) {
      const size_t i = first + k;
      return KeyError(what, key,
                      absl::StrCat("config ", i / (nc * kConfigFeatDim), ", configurable node ", (i / kConfigFeatDim) % nc,
                                   ", slot ", i % kConfigFeatDim, " is ", x, ", expected an integer in -1..5"));
    }
    out[k] = static_cast<int8_t>(x);
  }
  return absl::OkStatus();
}

// Values [first, first + n) of the array (all of it by default).
absl::StatusOr<std::vector<int8_t>> LayoutConfigValues(const NpyArray& a, absl::string_view what,
                                                       absl::string_view key, int64_t nc, size_t first = 0,
                                                       size_t n = SIZE_MAX) {
  n = std::min(n, static_cast<size_t>(a.numel()) - first);
  std::vector<int8_t> out(n);
  absl::Status s;
  switch (a.dtype) {
    case DType::kFloat32: s = ConvertConfigValues(a.data<float>() + first, n, what, key, nc, out.data(), first); break;
    case DType::kFloat64: s = ConvertConfigValues(a.data<double>() + first, n, what, key, nc, out.data(), first); break;
    case DType::kInt32: s = ConvertConfigValues(a.data<int32_t>() + first, n, what, key, nc, out.data(), first); break;
    case DType::kInt64: s = ConvertConfigValues(a.data<int64_t>() + first, n, what, key, nc, out.data(), first); break;
    case DType::kInt8: s = ConvertConfigValues(a.data<int8_t>() + first, n, what, key, nc, out.data(), first); break;
    case DType::kUint8: s = ConvertConfigValues(a.data<uint8_t>() + first, n, what, key, nc, out.data(), first); break;
  }
  if (!s.ok()) return s;
  return out;
}

}  // namespace

absl::StatusOr<LayoutConfigRows> LoadLayoutConfigRows(const std::string& path, int64_t nc, int64_t only_row) {
  const bool npy = path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
  NpyArray a;
  std::string key = "node_config_feat";
  if (npy) {
    absl::StatusOr<std::string> bytes = ReadFile(path);
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<NpyArray> parsed = ParseNpy(*bytes, path);
    if (!parsed.ok()) return parsed.status();
    a = std::move(*parsed);
    key = "(array)";
  } else {
    absl::StatusOr<NpzArchive> npz = ReadNpz(path);
    if (!npz.ok()) return npz.status();
    auto it = npz->find(key);
    if (it == npz->end() && npz->size() == 1) it = npz->begin();
    if (it == npz->end())
      return KeyError(path, key, "missing: give the rows as node_config_feat (c, nc, 18), or the file's only array");
    key = it->first;
    a = std::move(it->second);
  }
  // (c, nc, 18), or one row as (nc, 18).
  const bool one = a.shape.size() == 2;
  if (!(a.shape.size() == 3 || one) || a.shape[a.shape.size() - 1] != kConfigFeatDim ||
      a.shape[a.shape.size() - 2] != nc)
    return KeyError(path, key, absl::StrCat("has shape ", a.ShapeString(), ", expected (c, ", nc, ", 18) or (", nc,
                                            ", 18): one 18-value group per configurable node"));
  if (a.dtype != DType::kFloat32 && a.dtype != DType::kFloat64 && a.dtype != DType::kInt8 &&
      a.dtype != DType::kInt32 && a.dtype != DType::kInt64)
    return KeyError(path, key, absl::StrCat("has dtype ", DTypeName(a.dtype), ", expected a signed or float type"));
  LayoutConfigRows out;
  out.count = one ? 1 : a.shape[0];
  if (only_row >= out.count) return out;
  const size_t row = static_cast<size_t>(nc) * kConfigFeatDim;
  absl::StatusOr<std::vector<int8_t>> values =
      only_row < 0 ? LayoutConfigValues(a, path, key, nc)
                   : LayoutConfigValues(a, path, key, nc, static_cast<size_t>(only_row) * row, row);
  if (!values.ok()) return values.status();
  out.values = std::move(*values);
  return out;
}

namespace {

absl::Status BadRuntime(const std::string& path, size_t i, absl::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": runtime ", i, " is ", value,
                                                 "; expected a measured runtime in nanoseconds, a whole number > 0"));
}

// One runtime: whole, > 0, within int64.
absl::StatusOr<int64_t> Runtime(double x, const std::string& path, size_t i) {
  if (!(x > 0 && x < 9.2e18) || x != std::floor(x)) return BadRuntime(path, i, absl::StrCat(x));
  return static_cast<int64_t>(x);
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> LoadRuntimes(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  std::vector<int64_t> out;
  if (bytes->rfind("\x93NUMPY", 0) == 0) {
    absl::StatusOr<NpyArray> a = ParseNpy(*bytes, path);
    if (!a.ok()) return a.status();
    if (a->shape.size() != 1)
      return absl::InvalidArgumentError(absl::StrCat(path, ": has shape ", a->ShapeString(), ", expected (c,): one runtime per row"));
    const size_t n = static_cast<size_t>(a->numel());
    for (size_t i = 0; i < n; ++i) {
      int64_t v = 0;
      switch (a->dtype) {
        case DType::kInt64: v = a->data<int64_t>()[i]; break;
        case DType::kInt32: v = a->data<int32_t>()[i]; break;
        case DType::kFloat64: case DType::kFloat32: {
          absl::StatusOr<int64_t> r = Runtime(a->dtype == DType::kFloat64 ? a->data<double>()[i] : a->data<float>()[i], path, i);
          if (!r.ok()) return r.status();
          v = *r;
          break;
        }
        default:
          return absl::InvalidArgumentError(absl::StrCat(path, ": has dtype ", DTypeName(a->dtype),
                                                         ", expected integers or floats"));
      }
      if (v <= 0) return BadRuntime(path, i, absl::StrCat(v));
      out.push_back(v);
    }
    return out;
  }
  size_t line = 1;
  for (absl::string_view rest = *bytes; !rest.empty();) {
    const size_t end = rest.find('\n');
    absl::string_view text = rest.substr(0, end);
    rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end + 1);
    if (const size_t hash = text.find('#'); hash != absl::string_view::npos) text = text.substr(0, hash);
    for (absl::string_view token : absl::StrSplit(text, absl::ByAnyChar(" ,\t\r"), absl::SkipEmpty())) {
      double x = 0;
      if (!absl::SimpleAtod(token, &x))
        return absl::InvalidArgumentError(absl::StrCat(path, ": line ", line, ": '", token.substr(0, 40),
                                                       "' is not a number (runtime ", out.size(), ")"));
      absl::StatusOr<int64_t> r = Runtime(x, path, out.size());
      if (!r.ok()) return r.status();
      out.push_back(*r);
    }
    ++line;
  }
  return out;
}

std::string GraphNameFromPath(absl::string_view path) {
  size_t slash = path.find_last_of('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (base.size() > 4 && base.substr(base.size() - 4) == ".npz") base.remove_suffix(4);
  return std::string(base);
}

absl::StatusOr<LayoutGraph> LayoutGraphFromNpz(const NpzArchive& npz, absl::string_view what,
                                               bool allow_no_configs) {
  LayoutGraph g;
  g.name = GraphNameFromPath(what);
  if (absl::Status s = ReadNodeGraph(npz, what, &g.graph); !s.ok()) return s;
  absl::Status st;
  const NpyArray* ids = Find(npz, what, "node_config_ids", {DType::kInt64, DType::kInt32}, {1}, true, &st);
  if (!ids) return st;
  g.node_config_ids = ToVector<int64_t>(*ids);
  // float32 in the dataset's files; int8 in measurement shards (model/store).
  const NpyArray* cfg = Find(npz, what, "node_config_feat", {DType::kFloat32, DType::kInt8}, {3}, true, &st);
  if (!cfg) return st;
  if (cfg->shape[1] != ids->shape[0] || cfg->shape[2] != kConfigFeatDim)
    return KeyError(what, "node_config_feat", absl::StrCat("has shape ", cfg->ShapeString(), ", expected (c, ",
                                                           ids->shape[0], ", 18) to match node_config_ids"));
  g.num_configs = cfg->shape[0];
  absl::StatusOr<std::vector<int8_t>> values = LayoutConfigValues(*cfg, what, "node_config_feat", ids->shape[0]);
  if (!values.ok()) return values.status();
  g.config_feat = std::move(*values);
  absl::StatusOr<std::vector<int64_t>> rt = ReadRuntimes(npz, what, "config_runtime");
  if (!rt.ok()) return rt.status();
  g.config_runtime = std::move(*rt);
  if (const NpyArray* sp = Find(npz, what, "node_splits", {DType::kInt64, DType::kInt32}, {1, 2}, false, &st))
    g.node_splits = ToVector<int64_t>(*sp);
  else if (!st.ok())
    return st;
  if (absl::Status s = ValidateLayoutGraph(g, what, allow_no_configs); !s.ok()) return s;
  return g;
}

absl::StatusOr<TileGraph> TileGraphFromNpz(const NpzArchive& npz, absl::string_view what) {
  TileGraph g;
  g.name = GraphNameFromPath(what);
  if (absl::Status s = ReadNodeGraph(npz, what, &g.graph); !s.ok()) return s;
  absl::Status st;
  const NpyArray* cfg = Find(npz, what, "config_feat", {DType::kFloat32}, {2}, true, &st);
  if (!cfg) return st;
  if (cfg->shape[1] != kTileConfigDim)
    return KeyError(what, "config_feat", absl::StrCat("has shape ", cfg->ShapeString(), ", expected (c, 24)"));
  g.num_configs = cfg->shape[0];
  g.config_feat = ToVector<float>(*cfg);
  absl::StatusOr<std::vector<int64_t>> rt = ReadRuntimes(npz, what, "config_runtime");
  if (!rt.ok()) return rt.status();
  g.config_runtime = std::move(*rt);
  absl::StatusOr<std::vector<int64_t>> norm = ReadRuntimes(npz, what, "config_runtime_normalizers");
  if (!norm.ok()) return norm.status();
  g.config_runtime_normalizers = std::move(*norm);
  if (absl::Status s = ValidateTileGraph(g, what); !s.ok()) return s;
  return g;
}

absl::StatusOr<LayoutGraph> LoadLayoutGraph(const std::string& path, bool allow_no_configs) {
  // node_config_feat read as int8 piece by piece, checked as LayoutConfigValues checks.
  NpzNarrowing narrow;
  narrow.member = "node_config_feat";
  narrow.wants = [](const std::vector<int64_t>& shape) { return shape.size() == 3 && shape[2] == kConfigFeatDim; };
  narrow.convert = [&path](const float* v, size_t n, size_t first, const std::vector<int64_t>& shape, int8_t* out) {
    return ConvertConfigValues(v, n, path, "node_config_feat", shape[1], out, first);
  };
  absl::StatusOr<NpzArchive> npz = ReadNpz(path, &narrow);
  if (!npz.ok()) return npz.status();
  return LayoutGraphFromNpz(*npz, path, allow_no_configs);
}

absl::StatusOr<TileGraph> LoadTileGraph(const std::string& path) {
  absl::StatusOr<NpzArchive> npz = ReadNpz(path);
  if (!npz.ok()) return npz.status();
  return TileGraphFromNpz(*npz, path);
}

namespace {

// Real layout files store edge_index in Fortran order, real tile files in C order:
// each collection is written as its real files are.
void AddNodeGraph(const NodeGraph& g, bool fortran_edges, NpzArchive* out) {
  (*out)["node_feat"] = NpyArray::From<float>({g.num_nodes, kNodeFeatDim}, g.node_feat);
  std::vector<uint8_t> opc(g.node_opcode.begin(), g.node_opcode.end());
  (*out)["node_opcode"] = NpyArray::From<uint8_t>({g.num_nodes}, opc);
  NpyArray edges = NpyArray::From<int64_t>({g.num_edges(), 2}, g.edge_index);
  edges.fortran_order = fortran_edges;
  (*out)["edge_index"] = std::move(edges);
}

}  // namespace

NpzArchive LayoutToNpz(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids, int64_t num_configs,
                       const std::vector<int8_t>& config_feat, const std::vector<int64_t>& config_runtime,
                       const std::vector<int64_t>& node_splits, DType config_dtype) {
  NpzArchive out;
  AddNodeGraph(graph, /*fortran_edges=*/true, &out);
  const int64_t nc = static_cast<int64_t>(node_config_ids.size());
  out["node_config_ids"] = NpyArray::From<int64_t>({nc}, node_config_ids);
  NpyArray cfg;  // converted in place (no float copy)
  cfg.dtype = config_dtype;
  cfg.shape = {num_configs, nc, kConfigFeatDim};
  if (config_dtype == DType::kInt8) {
    cfg.bytes.assign(reinterpret_cast<const uint8_t*>(config_feat.data()),
                     reinterpret_cast<const uint8_t*>(config_feat.data()) + config_feat.size());
  } else {
    cfg.dtype = DType::kFloat32;
    cfg.bytes.resize(config_feat.size() * sizeof(float));
    float* values = reinterpret_cast<float*>(cfg.bytes.data());
    for (size_t i = 0; i < config_feat.size(); ++i) values[i] = static_cast<float>(config_feat[i]);
  }
  out["node_config_feat"] = std::move(cfg);
  out["config_runtime"] = NpyArray::From<int64_t>({num_configs}, config_runtime);
  if (!node_splits.empty())
    out["node_splits"] = NpyArray::From<int64_t>({1, static_cast<int64_t>(node_splits.size())}, node_splits);
  return out;
}

NpzArchive LayoutGraphToNpz(const LayoutGraph& g) {
  return LayoutToNpz(g.graph, g.node_config_ids, g.num_configs, g.config_feat, g.config_runtime, g.node_splits,
                     DType::kFloat32);
}

NpzArchive TileGraphToNpz(const TileGraph& g) {
  NpzArchive out;
  AddNodeGraph(g.graph, /*fortran_edges=*/false, &out);
  out["config_feat"] = NpyArray::From<float>({g.num_configs, kTileConfigDim}, g.config_feat);
  out["config_runtime"] = NpyArray::From<int64_t>({g.num_configs}, g.config_runtime);
  out["config_runtime_normalizers"] = NpyArray::From<int64_t>({g.num_configs}, g.config_runtime_normalizers);
  return out;
}

absl::Status SaveLayoutGraph(const std::string& path, const LayoutGraph& g, bool allow_no_configs) {
  if (absl::Status s = ValidateLayoutGraph(g, path, allow_no_configs); !s.ok()) return s;
  return WriteNpz(path, LayoutGraphToNpz(g));
}

absl::Status SaveTileGraph(const std::string& path, const TileGraph& g) {
  if (absl::Status s = ValidateTileGraph(g, path); !s.ok()) return s;
  return WriteNpz(path, TileGraphToNpz(g));
}

}  // namespace tgraph
