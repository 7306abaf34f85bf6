#include "model/tile/tile_csv.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tgraph {
namespace {

constexpr char kHeader[] = "dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms";
constexpr const char* kColumns[] = {"dtype", "M", "N", "K", "block_m", "block_n", "block_k", "num_warps", "num_stages", "ms"};

// Builds the candidate lists and refusals while the CSV is read.
struct CsvReader {
  std::string what;
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, size_t> index;  // problem -> problems[]
  std::vector<MeasuredProblem> problems;
  // Per kernel variant (GemmProblem::Variant): what compiles depends on it.
  std::map<std::string, std::map<TritonTile, int64_t>> refused_at;   // variant -> tile -> line
  std::map<std::string, std::map<TritonTile, int64_t>> measured_at;  // variant -> tile -> line
  std::set<int64_t> bm, bn, bk, warps, stages;
  std::map<size_t, std::set<TritonTile>> refused_of;  // problem -> its refused tiles
  std::map<size_t, std::map<TritonTile, std::vector<int64_t>>> timings;  // problem -> tile -> every timing

  absl::Status Error(int64_t line, absl::string_view column, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(what, ":", line, ": ", column, ": ", message));
  }

  absl::StatusOr<int64_t> Positive(const std::vector<absl::string_view>& f, int col, int64_t line) const {
    int64_t v = 0;
    if (!absl::SimpleAtoi(f[static_cast<size_t>(col)], &v) || v <= 0 || v > (int64_t{1} << 32))
      return Error(line, kColumns[col], absl::StrCat("'", f[static_cast<size_t>(col)], "' is not a positive integer"));
    return v;
  }

  absl::Status Row(absl::string_view text, int64_t line) {
    std::vector<absl::string_view> f = absl::StrSplit(text, ',');
    if (f.size() != 10)
      return Error(line, "row", absl::StrCat("has ", f.size(), " fields, expected 10 (", kHeader, ")"));
    const std::string dtype(f[0]);
    if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
      return Error(line, "dtype", absl::StrCat("'", f[0], "' is not bf16, f16 or f32"));
    int64_t dims[3];
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<int64_t> v = Positive(f, 1 + i, line);
      if (!v.ok()) return v.status();
      dims[i] = *v;
    }
    const auto key = std::make_tuple(dtype, dims[0], dims[1], dims[2]);
    auto [it, added] = index.emplace(key, problems.size());
    if (added) problems.push_back({GemmProblem{dtype, dims[0], dims[1], dims[2]}, {}, 0});
    MeasuredProblem& p = problems[it->second];
    if (f[4] == "cublas") {
      if (p.library_ns != 0) return Error(line, "block_m", absl::StrCat("a second cublas row for ", p.problem.Name()));
      absl::StatusOr<int64_t> ns = Nanoseconds(f[9], line);
      if (!ns.ok()) return ns.status();
      p.library_ns = *ns;
      return absl::OkStatus();
    }
    int64_t t[5];
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<int64_t> v = Positive(f, 4 + i, line);
      if (!v.ok()) return v.status();
      t[i] = *v;
    }
    const TritonTile tile{t[0], t[1], t[2], t[3], t[4]};
    bm.insert(t[0]), bn.insert(t[1]), bk.insert(t[2]), warps.insert(t[3]), stages.insert(t[4]);
    // A timed configuration may be timed again (repeats: its median is kept); a refused
    // one is refused once.
    if (refused_of[it->second].count(tile) || (f[9] == "refused" && timings[it->second].count(tile)))
      return Error(line, "row", absl::StrCat(tile.Name(), " of ", p.problem.Name(), " appears twice"));
    const std::string variant = p.problem.Variant();
    const std::string whole = absl::StrCat(": a configuration is legal or illegal for the whole kernel variant (",
                                           variant, ": ", dtype, ", ", DescribeVariant(variant), ")");
    if (f[9] == "refused") {
      if (auto m = measured_at[variant].find(tile); m != measured_at[variant].end())
        return Error(line, "ms", absl::StrCat(tile.Name(), " is refused here but timed on line ", m->second, whole));
      refused_at[variant].emplace(tile, line);
      refused_of[it->second].insert(tile);
      return absl::OkStatus();
    }
    if (auto r = refused_at[variant].find(tile); r != refused_at[variant].end())
      return Error(line, "ms", absl::StrCat(tile.Name(), " is timed here but refused on line ", r->second, whole));
    absl::StatusOr<int64_t> ns = Nanoseconds(f[9], line);
    if (!ns.ok()) return ns.status();
    measured_at[variant].emplace(tile, line);
    timings[it->second][tile].push_back(*ns);
    return absl::OkStatus();
  }

  // Each timed configuration's runtime: the median of its timings (of an even count, the
  // mean of the middle two, rounded).
  void Finish() {
    for (auto& [i, tiles] : timings) {
      MeasuredProblem& p = problems[i];
      for (auto& [tile, ns] : tiles) {
        std::sort(ns.begin(), ns.end());
        const size_t n = ns.size();
        p.runtime_ns[tile] = n % 2 ? ns[n / 2] : std::llround((static_cast<double>(ns[n / 2 - 1]) + ns[n / 2]) / 2);
        if (n > 1) ++p.repeated;
      }
    }
  }

  absl::StatusOr<int64_t> Nanoseconds(absl::string_view ms, int64_t line) const {
    double v = 0;
    if (!absl::SimpleAtod(ms, &v) || !std::isfinite(v) || v <= 0 || v > 1e6)
      return Error(line, "ms", absl::StrCat("'", ms, "' is not a time in milliseconds (0 < ms <= 1e6) or 'refused'"));
    return std::max<int64_t>(1, std::llround(v * 1e6));
  }
};

std::vector<int64_t> Sorted(const std::set<int64_t>& s) { return {s.begin(), s.end()}; }

}  // namespace

absl::StatusOr<TileMeasurements> ParseTileCsv(absl::string_view text, absl::string_view what, const std::string& gpu,
                                              int64_t sm_count) {
  CsvReader r;
  r.what = std::string(what);
  int64_t line = 0;
  for (absl::string_view row : absl::StrSplit(text, '\n')) {
    ++line;
    row = absl::StripSuffix(row, "\r");
    if (line == 1) {
      if (row != kHeader)
        return r.Error(1, "header", absl::StrCat("is '", row.substr(0, 200), "', expected '", kHeader, "'"));
      continue;
    }
    if (row.empty()) continue;
    if (absl::Status s = r.Row(row, line); !s.ok()) return s;
  }
  if (r.problems.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no measurements after the header"));
  r.Finish();
  TileMeasurements out;
  TileSpace& s = out.space;
  s.gpu = gpu;
  s.sm_count = sm_count;
  s.block_m = Sorted(r.bm), s.block_n = Sorted(r.bn), s.block_k = Sorted(r.bk);
  s.num_warps = Sorted(r.warps), s.num_stages = Sorted(r.stages);
  for (const auto& [variant, tiles] : r.refused_at)
    for (const auto& [tile, line_no] : tiles) s.refused[variant].insert(tile);
  for (const MeasuredProblem& p : r.problems) s.dtypes.insert(p.problem.dtype), s.variants.insert(p.problem.Variant());
  const size_t candidates = s.Candidates().size();
  for (size_t i = 0; i < r.problems.size(); ++i) {
    const MeasuredProblem& p = r.problems[i];
    const size_t seen = p.runtime_ns.size() + r.refused_of[i].size();
    if (seen != candidates)
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", p.problem.Name(), " has ", seen, " of the ", candidates,
                                                     " candidate configurations (timed or refused); every candidate "
                                                     "must be one or the other"));
    if (p.runtime_ns.size() < 2)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", p.problem.Name(), " has ", p.runtime_ns.size(), " timed configuration(s); at least 2"));
  }
  if (absl::Status v = s.Validate(what); !v.ok()) return v;
  out.problems = std::move(r.problems);
  return out;
}

}  // namespace tgraph
