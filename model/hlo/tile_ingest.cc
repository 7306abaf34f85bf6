#include "model/hlo/tile_ingest.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/rng.h"
#include "model/hlo/featurize.h"

namespace tgraph::hlo {

namespace fs = std::filesystem;

namespace {

using Shape = std::tuple<int64_t, int64_t, int64_t>;

}  // namespace

std::string ProblemStem(const GemmProblem& p) { return absl::StrCat("gemm_", p.dtype, "_", p.m, "x", p.n, "x", p.k); }

std::string GemmHloText(const GemmProblem& p) {
  const std::string& t = p.dtype;
  const auto shape = [&](int64_t rows, int64_t cols) { return absl::StrCat(t, "[", rows, ",", cols, "]{1,0}"); };
  return absl::StrCat("HloModule jit_dot, entry_computation_layout={(", shape(p.m, p.k), ", ", shape(p.k, p.n), ")->",
                      shape(p.m, p.n), "}\n\nENTRY main.1 {\n  a.1 = ", shape(p.m, p.k), " parameter(0)\n  b.1 = ",
                      shape(p.k, p.n), " parameter(1)\n  ROOT dot_general.1 = ", shape(p.m, p.n),
                      " dot(a.1, b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n\n");
}

namespace {

void Shuffle(std::vector<Shape>& v, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(rng.Int(0, int64_t(i) - 1))]);
}

using ProblemKey = std::tuple<std::string, int64_t, int64_t, int64_t>;  // dtype, M, N, K

ProblemKey KeyOf(const GemmProblem& p) { return {p.dtype, p.m, p.n, p.k}; }

// The split of each problem (docs in TileIngestOptions::hold_out).
absl::StatusOr<std::map<ProblemKey, std::string>> SplitProblems(const std::vector<MeasuredProblem>& problems,
                                                               const TileIngestOptions& o) {
  std::set<Shape> all_shapes;
  std::set<std::string> dtypes;
  for (const MeasuredProblem& p : problems) {
    all_shapes.insert({p.problem.m, p.problem.n, p.problem.k});
    dtypes.insert(p.problem.dtype);
  }
  const bool by_dtype = o.hold_out != "shape" && o.hold_out != "largest";
  if (by_dtype && !dtypes.count(o.hold_out))
    return absl::InvalidArgumentError(absl::StrCat("hold_out '", o.hold_out, "': expected shape, largest or a dtype of ",
                                                   o.csv, " (", absl::StrJoin(dtypes, ", "), ")"));
  std::set<Shape> test;
  std::vector<Shape> rest;  // the shapes left to train on, in the order valid is taken from
  if (by_dtype) {
    std::set<Shape> other;  // the other dtypes' shapes
    for (const MeasuredProblem& p : problems)
      if (p.problem.dtype != o.hold_out) other.insert({p.problem.m, p.problem.n, p.problem.k});
    rest.assign(other.begin(), other.end());
    Shuffle(rest, o.split_seed);
  } else {
    std::vector<Shape> shapes(all_shapes.begin(), all_shapes.end());
    if (o.hold_out == "largest") {
      std::stable_sort(shapes.begin(), shapes.end(), [](const Shape& a, const Shape& b) {
        return double(std::get<0>(a)) * double(std::get<1>(a)) * double(std::get<2>(a)) >
               double(std::get<0>(b)) * double(std::get<1>(b)) * double(std::get<2>(b));
      });
    } else {
      Shuffle(shapes, o.split_seed);
    }
    const size_t t = std::min(shapes.size(), static_cast<size_t>(o.test_shapes));
    test.insert(shapes.begin(), shapes.begin() + static_cast<std::ptrdiff_t>(t));
    rest.assign(shapes.begin() + static_cast<std::ptrdiff_t>(t), shapes.end());
    if (o.hold_out == "largest") Shuffle(rest, o.split_seed);
  }
  if (static_cast<int64_t>(rest.size()) <= o.valid_shapes)
    return absl::InvalidArgumentError(absl::StrCat(o.csv, ": ", rest.size(), " shapes outside the test split; valid_shapes (",
                                                   o.valid_shapes, ") must leave some to train on"));
  std::set<Shape> valid(rest.begin(), rest.begin() + o.valid_shapes);
  std::map<ProblemKey, std::string> split;
  for (const MeasuredProblem& p : problems) {
    const Shape s{p.problem.m, p.problem.n, p.problem.k};
    const bool is_test = by_dtype ? p.problem.dtype == o.hold_out : test.count(s) > 0;
    split[KeyOf(p.problem)] = is_test ? "test" : valid.count(s) ? "valid" : "train";
  }
  return split;
}

// What a test file (TileIngestOptions::test_csv) must share with the training file.
absl::Status CheckTestFile(const TileMeasurements& train, const TileMeasurements& test, const TileIngestOptions& o) {
  const TileSpace& a = train.space;
  const TileSpace& b = test.space;
  const auto list = [](const std::vector<int64_t>& v) { return absl::StrJoin(v, ", "); };
  for (const auto& [name, x, y] : std::vector<std::tuple<const char*, const std::vector<int64_t>*, const std::vector<int64_t>*>>{
           {"block_m", &a.block_m, &b.block_m},
           {"block_n", &a.block_n, &b.block_n},
           {"block_k", &a.block_k, &b.block_k},
           {"num_warps", &a.num_warps, &b.num_warps},
           {"num_stages", &a.num_stages, &b.num_stages}})
    if (*x != *y)
      return absl::InvalidArgumentError(absl::StrCat(o.test_csv, ": ", name, " takes ", list(*y), ", where ", o.csv, " has ",
                                                     list(*x), ": a test file measures the same kernel's candidates"));
  for (const std::string& dtype : b.dtypes)
    if (!a.dtypes.count(dtype))
      return absl::InvalidArgumentError(absl::StrCat(o.test_csv, ": dtype ", dtype, " has no problem in ", o.csv, " (",
                                                     absl::StrJoin(a.dtypes, ", "),
                                                     "): a model learns no dtype from another's problems"));
  for (const std::string& variant : b.variants) {
    if (!a.variants.count(variant))
      return absl::InvalidArgumentError(absl::StrCat(
          o.test_csv, ": kernel variant ", variant, " (", DescribeVariant(variant), ") has no problem in ", o.csv, " (",
          absl::StrJoin(a.variants, ", "), "): the compiler builds another kernel for it, which no problem there measured"));
    const auto refused = [](const TileSpace& s, const std::string& d) {
      const auto it = s.refused.find(d);
      return it == s.refused.end() ? std::set<TritonTile>{} : it->second;
    };
    const std::set<TritonTile> ra = refused(a, variant), rb = refused(b, variant);
    for (const TritonTile& t : a.Candidates())
      if (ra.count(t) != rb.count(t))
        return absl::InvalidArgumentError(absl::StrCat(o.test_csv, ": ", t.Name(), " of ", variant, " is ",
                                                       rb.count(t) ? "refused" : "timed", " here but ",
                                                       ra.count(t) ? "refused" : "timed", " in ", o.csv,
                                                       ": a test file measures the same kernel on the same GPU"));
  }
  std::set<ProblemKey> trained;
  for (const MeasuredProblem& p : train.problems) trained.insert(KeyOf(p.problem));
  for (const MeasuredProblem& p : test.problems)
    if (trained.count(KeyOf(p.problem)))
      return absl::InvalidArgumentError(absl::StrCat(o.test_csv, ": ", p.problem.Name(), " is measured in ", o.csv,
                                                     " too: a problem is never in two splits"));
  return absl::OkStatus();
}

absl::StatusOr<TileGraph> ProblemGraph(const MeasuredProblem& p, const TileSpace& space, const std::string& hlo_dir) {
  const std::string stem = ProblemStem(p.problem);
  const std::string path =
      hlo_dir.empty() ? absl::StrCat("the HLO written for ", stem) : (fs::path(hlo_dir) / (stem + ".hlo")).string();
  absl::StatusOr<std::string> text = hlo_dir.empty() ? absl::StatusOr<std::string>(GemmHloText(p.problem)) : ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<xla::HloModuleProto> module = ParseModule(*text, path);
  if (!module.ok()) return module.status();
  absl::StatusOr<ModuleGraph> m = FeaturizeModule(*module, path);
  if (!m.ok()) return m.status();
  absl::StatusOr<GemmProblem> computed = GemmProblemOfGraph(m->graph, path);
  if (!computed.ok()) return computed.status();
  if (computed->Name() != p.problem.Name())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the module computes ", computed->Name(), ", but its measurements are of ", p.problem.Name()));
  TileGraph g;
  g.name = stem;
  g.graph = std::move(m->graph);
  int64_t fastest = INT64_MAX;
  for (const TritonTile& t : space.Legal(p.problem.Variant())) {
    const auto it = p.runtime_ns.find(t);
    if (it == p.runtime_ns.end()) continue;
    const std::array<float, kTileConfigDim> row = space.Row(p.problem, t);
    g.config_feat.insert(g.config_feat.end(), row.begin(), row.end());
    g.config_runtime.push_back(it->second);
    fastest = std::min(fastest, it->second);
  }
  g.num_configs = static_cast<int64_t>(g.config_runtime.size());
  g.config_runtime_normalizers.assign(g.config_runtime.size(), p.library_ns > 0 ? p.library_ns : fastest);
  return g;
}

}  // namespace

absl::StatusOr<TileIngestSummary> IngestTileMeasurements(const TileIngestOptions& o) {
  absl::StatusOr<Collection> c = ParseCollection(absl::StrCat("tile@", o.name));
  if (!c.ok()) return c.status();
  if (o.test_shapes < 0 || o.valid_shapes < 0)
    return absl::InvalidArgumentError("test_shapes and valid_shapes must be at least 0 (test_shapes 0: every "
                                      "problem is trained or validated on; nothing is held out for testing)");
  if (o.feature_set != 1 && o.feature_set != 2)
    return absl::InvalidArgumentError(absl::StrCat("feature_set is ", o.feature_set, ", expected 1 or 2"));
  absl::StatusOr<GpuSpec> gpu = FindGpu(o.gpu);
  if (!gpu.ok()) return gpu.status();
  absl::StatusOr<std::string> text = ReadFile(o.csv);
  if (!text.ok()) return text.status();
  absl::StatusOr<TileMeasurements> m = ParseTileCsv(*text, o.csv, o.gpu, gpu->sm_count);
  if (!m.ok()) return m.status();
  m->space.feature_set = o.feature_set;
  if (o.feature_set == 2) m->space.gpu_spec = *gpu;
  // Each problem with the folder its HLO is in.
  std::vector<std::pair<const MeasuredProblem*, std::string>> problems;
  for (const MeasuredProblem& p : m->problems) problems.emplace_back(&p, o.hlo_dir);
  absl::StatusOr<std::map<ProblemKey, std::string>> split;
  TileMeasurements test;
  if (o.test_csv.empty()) {
    split = SplitProblems(m->problems, o);
  } else {
    if (o.hold_out != "shape")
      return absl::InvalidArgumentError(absl::StrCat("hold_out '", o.hold_out, "' and test_csv ", o.test_csv,
                                                     ": the test split is the test file's problems; hold out nothing else"));
    absl::StatusOr<std::string> test_text = ReadFile(o.test_csv);
    if (!test_text.ok()) return test_text.status();
    absl::StatusOr<TileMeasurements> t = ParseTileCsv(*test_text, o.test_csv, o.gpu, gpu->sm_count);
    if (!t.ok()) return t.status();
    test = std::move(*t);
    if (absl::Status st = CheckTestFile(*m, test, o); !st.ok()) return st;
    TileIngestOptions none = o;
    none.test_shapes = 0;
    split = SplitProblems(m->problems, none);
    if (split.ok())
      for (const MeasuredProblem& p : test.problems) {
        (*split)[KeyOf(p.problem)] = "test";
        problems.emplace_back(&p, o.test_hlo_dir.empty() ? o.hlo_dir : o.test_hlo_dir);
      }
  }
  if (!split.ok()) return split.status();
  TileIngestSummary out;
  out.collection_dir = fs::path(SplitDir(o.out_root, *c, "train")).parent_path().string();
  std::error_code ec;
  if (fs::exists(out.collection_dir, ec))
    return absl::AlreadyExistsError(absl::StrCat(out.collection_dir, " exists; ingest into a new data root, or remove it"));
  // Everything is built before anything is written: a bad module leaves no partial collection.
  std::vector<std::pair<std::string, TileGraph>> graphs;
  for (const auto& [p, hlo_dir] : problems) {
    absl::StatusOr<TileGraph> g = ProblemGraph(*p, m->space, hlo_dir);
    if (!g.ok()) return g.status();
    const std::string& s = split->at(KeyOf(p->problem));
    out.problems[s] += 1;
    out.configs[s] += g->num_configs;
    out.lines.push_back(absl::StrCat(s, ": ", g->name, " (", g->num_configs, " configurations",
                                     p->repeated > 0 ? absl::StrCat(", ", p->repeated, " timed again: their median")
                                                     : std::string(),
                                     ")"));
    graphs.emplace_back(s, std::move(*g));
  }
  for (const std::string& s : AllSplits())
    if (fs::create_directories(SplitDir(o.out_root, *c, s), ec); ec)
      return absl::InternalError(absl::StrCat(SplitDir(o.out_root, *c, s), ": ", ec.message()));
  for (const auto& [s, g] : graphs)
    if (absl::Status st = SaveTileGraph((fs::path(SplitDir(o.out_root, *c, s)) / (g.name + ".npz")).string(), g); !st.ok())
      return st;
  if (absl::Status st = WriteFileAtomic((fs::path(out.collection_dir) / kTileSpaceFile).string(), m->space.ToJson() + "\n");
      !st.ok())
    return st;
  for (const auto& [dtype, tiles] : m->space.refused) out.refused[dtype] = static_cast<int64_t>(tiles.size());
  return out;
}

}  // namespace tgraph::hlo
