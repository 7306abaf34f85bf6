#include "model/tile/tile_baselines.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "model/core/rank_metrics.h"

namespace tgraph {

namespace {

double Log2Distance(const GemmProblem& a, const GemmProblem& b) {
  const auto d = [](int64_t x, int64_t y) { return std::fabs(std::log2(double(x) / double(y))); };
  return d(a.m, b.m) + d(a.n, b.n) + d(a.k, b.k);
}

std::string Ratio(double error) { return std::isfinite(error) ? absl::StrFormat("%.3f", 1.0 + error) : "-"; }
// `decimals` as an argument: absl::StrFormat checks its format string at compile time.
std::string Num(double v, int decimals) { return std::isfinite(v) ? absl::StrFormat("%.*f", decimals, v) : "-"; }

}  // namespace

ShapeBandwidth ShapeBandwidth::Isotropic(double b) {
  // (dM + dN)^2 / 2 + (dM - dN)^2 / 2 = dM^2 + dN^2.
  return {b * std::sqrt(2.0), b, b * std::sqrt(2.0)};
}

double ShapeBandwidth::DistanceSquared(const GemmProblem& a, const GemmProblem& b) const {
  if (AllAlike()) return 0;
  const auto d = [](int64_t x, int64_t y) { return std::log2(double(x) / double(y)); };
  const double dm = d(a.m, b.m), dn = d(a.n, b.n);
  const double o = (dm + dn) / output, kk = d(a.k, b.k) / k, r = (dm - dn) / aspect;
  return o * o + kk * kk + r * r;
}

bool ShapeBandwidth::Valid() const {
  for (double b : {output, k, aspect})
    if (!(std::isfinite(b) && b >= 0 && b <= 16)) return false;
  return AllAlike() || (output > 0 && k > 0 && aspect > 0);
}

std::string ShapeBandwidth::ToString() const { return absl::StrCat(output, ",", k, ",", aspect); }

absl::StatusOr<ShapeBandwidth> ParseShapeBandwidth(absl::string_view text, absl::string_view what) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text,
                                                   "': expected OUTPUT,K,ASPECT (log2 bandwidths of M N, K and M / N) or "
                                                   "one bandwidth along log2 M, N, K; each finite and at most 16, either "
                                                   "all 0 or all > 0"));
  };
  std::vector<double> v;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double x = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &x)) return bad();
    v.push_back(x);
  }
  ShapeBandwidth b;
  if (v.size() == 1) {
    b = ShapeBandwidth::Isotropic(v[0]);
  } else if (v.size() == 3) {
    b = {v[0], v[1], v[2]};
  } else {
    return bad();
  }
  if (!b.Valid()) return bad();
  return b;
}

absl::StatusOr<KnownTileProblem> KnownProblemOf(const TileGraph& g, absl::string_view what) {
  absl::StatusOr<GemmProblem> p = GemmProblemOfGraph(g.graph, what);
  if (!p.ok()) return p.status();
  KnownTileProblem k;
  k.name = g.name;
  k.problem = *p;
  const std::vector<double> targets = TileTargets(g);
  for (int64_t c = 0; c < g.num_configs; ++c) {
    k.tiles.push_back(TritonTileOfRow(g.config_feat.data() + c * kTileConfigDim));
    k.runtime.push_back(targets[static_cast<size_t>(c)]);
  }
  return k;
}

std::string TileBaselineName(TileBaseline b) {
  switch (b) {
    case TileBaseline::kNearestProblem: return "nearest problem";
    case TileBaseline::kMeanSlowdown: return "mean slowdown";
    case TileBaseline::kNearbySlowdown: return "nearby problems' slowdown";
    case TileBaseline::kFixedDefault: return absl::StrCat("fixed ", kFixedDefaultTile.Name(), ", then mean slowdown");
  }
  return "";
}

MeasuredSlowdowns::MeasuredSlowdowns(const std::vector<KnownTileProblem>& known) {
  for (const KnownTileProblem& k : known) tiles_.insert(tiles_.end(), k.tiles.begin(), k.tiles.end());
  std::sort(tiles_.begin(), tiles_.end());
  tiles_.erase(std::unique(tiles_.begin(), tiles_.end()), tiles_.end());
  for (const KnownTileProblem& k : known) {
    if (k.runtime.empty()) continue;
    const double fastest = *std::min_element(k.runtime.begin(), k.runtime.end());
    if (!(fastest > 0)) continue;  // hidden runtimes say nothing
    Problem p{k.problem, std::vector<double>(tiles_.size(), std::nan("")), k.kernel,
              k.kernel.empty() ? "" : k.name};
    for (size_t i = 0; i < k.tiles.size(); ++i) {
      const size_t at = static_cast<size_t>(std::lower_bound(tiles_.begin(), tiles_.end(), k.tiles[i]) - tiles_.begin());
      p.log_slowdown[at] = std::log(k.runtime[i] / fastest);
    }
    problems_.push_back(std::move(p));
  }
}

std::optional<MeasuredSlowdowns::Problem> MeasuredSlowdowns::Anchored(const KnownTileProblem& k,
                                                                      const ShapeBandwidth& anchor) const {
  if (problems_.empty() || 2 * k.tiles.size() >= tiles_.size()) return std::nullopt;
  const std::vector<double> near = Near(k.problem, anchor);
  double excess = 0;
  int64_t n = 0;
  for (size_t i = 0; i < k.tiles.size(); ++i) {
    const auto at = std::lower_bound(tiles_.begin(), tiles_.end(), k.tiles[i]);
    if (!(k.runtime[i] > 0) || at == tiles_.end() || !(*at == k.tiles[i])) continue;
    const double e = near[static_cast<size_t>(at - tiles_.begin())];
    if (std::isnan(e)) continue;
    excess += std::log(k.runtime[i]) - e;
    ++n;
  }
  if (n == 0) return std::nullopt;
  const double offset = excess / static_cast<double>(n);
  Problem p{k.problem, std::vector<double>(k.tiles.size()), k.kernel, k.kernel.empty() ? "" : k.name};
  for (size_t i = 0; i < k.tiles.size(); ++i) p.log_slowdown[i] = std::max(0.0, std::log(k.runtime[i]) - offset);
  return p;  // aligned with k.tiles: With realigns it
}

MeasuredSlowdowns MeasuredSlowdowns::With(const std::vector<KnownTileProblem>& more,
                                          const ShapeBandwidth* anchor) const {
  MeasuredSlowdowns added(more);
  if (anchor != nullptr) {
    // Realigned to added.tiles_ as its own problems are; hidden runtimes were left out there too.
    size_t next = 0;
    for (const KnownTileProblem& k : more) {
      if (k.runtime.empty() || !(*std::min_element(k.runtime.begin(), k.runtime.end()) > 0)) continue;
      Problem& q = added.problems_[next++];
      const std::optional<Problem> a = Anchored(k, *anchor);
      if (!a) continue;
      for (size_t i = 0; i < k.tiles.size(); ++i) {
        const auto at = std::lower_bound(added.tiles_.begin(), added.tiles_.end(), k.tiles[i]) - added.tiles_.begin();
        q.log_slowdown[static_cast<size_t>(at)] = a->log_slowdown[i];
      }
    }
  }
  std::vector<TritonTile> tiles = tiles_;
  tiles.insert(tiles.end(), added.tiles_.begin(), added.tiles_.end());
  std::sort(tiles.begin(), tiles.end());
  tiles.erase(std::unique(tiles.begin(), tiles.end()), tiles.end());
  std::vector<Problem> problems;
  for (const MeasuredSlowdowns* from : {this, static_cast<const MeasuredSlowdowns*>(&added)})
    for (const Problem& q : from->problems_) {
      Problem p{q.problem, std::vector<double>(tiles.size(), std::nan("")), q.kernel, q.stored};
      for (size_t i = 0; i < from->tiles_.size(); ++i) {
        const auto at = std::lower_bound(tiles.begin(), tiles.end(), from->tiles_[i]) - tiles.begin();
        p.log_slowdown[static_cast<size_t>(at)] = q.log_slowdown[i];
      }
      problems.push_back(std::move(p));
    }
  return MeasuredSlowdowns(std::move(tiles), std::move(problems));
}

MeasuredSlowdowns MeasuredSlowdowns::ForKernel(const std::string& kernel, const std::vector<KnownTileProblem>& more,
                                               const ShapeBandwidth* anchor) const {
  std::set<std::string> again;
  for (const KnownTileProblem& k : more)
    if (k.kernel == kernel) again.insert(k.name);
  MeasuredSlowdowns kept;
  kept.tiles_ = tiles_;
  for (const Problem& q : problems_)
    if (q.kernel.empty() || (!kernel.empty() && q.kernel == kernel && again.count(q.stored) == 0))
      kept.problems_.push_back(q);
  return more.empty() ? kept : kept.With(more, anchor);
}

bool MeasuredSlowdowns::HasKernelProblems() const {
  return std::any_of(problems_.begin(), problems_.end(), [](const Problem& q) { return !q.kernel.empty(); });
}

int TileKinship(const GemmProblem& q, const GemmProblem& p) {
  if (q.dtype != p.dtype) return 0;
  return q.Variant() == p.Variant() ? 2 : 1;
}

std::vector<std::pair<const MeasuredSlowdowns::Problem*, double>> MeasuredSlowdowns::Weighted(
    const GemmProblem& p, const ShapeBandwidth& bandwidth, bool leave_shape_out) const {
  const auto same_shape = [&](const GemmProblem& q) { return q.m == p.m && q.n == p.n && q.k == p.k; };
  int kin = 0;
  for (const Problem& q : problems_)
    if (!(leave_shape_out && same_shape(q.problem))) kin = std::max(kin, TileKinship(q.problem, p));
  std::vector<std::pair<const Problem*, double>> use;
  for (const Problem& q : problems_) {
    if (TileKinship(q.problem, p) != kin || (leave_shape_out && same_shape(q.problem))) continue;
    use.emplace_back(&q, bandwidth.DistanceSquared(p, q.problem));
  }
  // Weights relative to the nearest problem's, so that a narrow bandwidth far from every
  // measured shape still weighs the nearest ones instead of underflowing to nothing.
  double nearest = std::numeric_limits<double>::infinity();
  for (const auto& [q, d2] : use) nearest = std::min(nearest, d2);
  for (auto& [q, w] : use) w = std::exp(-(w - nearest) / 2);
  return use;
}

std::vector<double> MeasuredSlowdowns::Near(const GemmProblem& p, const ShapeBandwidth& bandwidth,
                                             bool leave_shape_out) const {
  std::vector<double> sum(tiles_.size(), 0.0), weight(tiles_.size(), 0.0);
  for (const auto& [q, w] : Weighted(p, bandwidth, leave_shape_out))
    for (size_t t = 0; t < tiles_.size(); ++t) {
      const double v = q->log_slowdown[t];
      if (std::isnan(v)) continue;
      sum[t] += w * v;
      weight[t] += w;
    }
  std::vector<double> out(tiles_.size(), std::nan(""));
  for (size_t t = 0; t < tiles_.size(); ++t)
    if (weight[t] > 0) out[t] = sum[t] / weight[t];
  return out;
}

std::vector<double> MeasuredSlowdowns::NearEnd(const GemmProblem& p, const ShapeBandwidth& bandwidth, double excess,
                                                double guard, bool leave_shape_out) const {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> sum(tiles_.size(), 0.0), weight(tiles_.size(), 0.0);
  std::vector<double> worst_near(tiles_.size(), -inf), worst_any(tiles_.size(), -inf);
  for (const auto& [q, w] : Weighted(p, bandwidth, leave_shape_out))
    for (size_t t = 0; t < tiles_.size(); ++t) {
      const double v = q->log_slowdown[t];
      if (std::isnan(v)) continue;
      sum[t] += w * std::log(std::expm1(v) + excess);  // log(s - 1 + excess), s = e^v
      weight[t] += w;
      worst_any[t] = std::max(worst_any[t], v);
      if (w >= 0.1) worst_near[t] = std::max(worst_near[t], v);
    }
  std::vector<double> out(tiles_.size(), std::nan(""));
  for (size_t t = 0; t < tiles_.size(); ++t)
    if (weight[t] > 0) out[t] = sum[t] / weight[t] + guard * (worst_near[t] > -inf ? worst_near[t] : worst_any[t]);
  return out;
}

MeasuredSlowdowns MeasuredSlowdowns::Shifted(const std::vector<double>& shift) const {
  MeasuredSlowdowns out = *this;
  for (Problem& q : out.problems_) {
    double fastest = std::numeric_limits<double>::infinity();
    for (size_t t = 0; t < tiles_.size(); ++t)
      if (!std::isnan(q.log_slowdown[t])) {
        q.log_slowdown[t] += shift[t];
        fastest = std::min(fastest, q.log_slowdown[t]);
      }
    for (double& v : q.log_slowdown)
      if (!std::isnan(v)) v -= fastest;
  }
  return out;
}

TileBaselines::TileBaselines(std::vector<KnownTileProblem> known) : known_(std::move(known)), slowdowns_(known_) {}

const KnownTileProblem* TileBaselines::Nearest(const GemmProblem& p) const {
  const auto usable = [](const KnownTileProblem& k) { return !k.runtime.empty() && k.runtime[0] > 0; };
  int kin = 0;
  for (const KnownTileProblem& k : known_)
    if (usable(k)) kin = std::max(kin, TileKinship(k.problem, p));
  const KnownTileProblem* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const KnownTileProblem& k : known_) {
    if (!usable(k) || TileKinship(k.problem, p) != kin) continue;
    const double d = Log2Distance(k.problem, p);
    if (d < best_d || (d == best_d && best != nullptr && k.name < best->name)) best = &k, best_d = d;
  }
  return best;
}

std::vector<double> TileBaselines::Scores(TileBaseline b, const GemmProblem& p,
                                          const std::vector<TritonTile>& tiles) const {
  constexpr double kUnknown = std::numeric_limits<double>::max();
  std::vector<double> scores(tiles.size(), 0.0);
  if (slowdowns_.problems().empty()) return scores;
  const std::vector<double> mean =
      slowdowns_.Near(p, b == TileBaseline::kNearbySlowdown ? ShapeBandwidth{} : ShapeBandwidth{0, 0, 0});
  const std::vector<TritonTile>& known = slowdowns_.tiles();
  for (size_t i = 0; i < tiles.size(); ++i) {
    const auto it = std::lower_bound(known.begin(), known.end(), tiles[i]);
    const double v = it != known.end() && *it == tiles[i] ? mean[static_cast<size_t>(it - known.begin())] : std::nan("");
    scores[i] = std::isnan(v) ? kUnknown : v;
  }
  if (b == TileBaseline::kFixedDefault) {
    for (size_t i = 0; i < tiles.size(); ++i)
      if (tiles[i] == kFixedDefaultTile) scores[i] = -1;  // mean log slowdowns are >= 0
  } else if (b == TileBaseline::kNearestProblem) {
    const KnownTileProblem* near = Nearest(p);
    if (near == nullptr) return scores;
    std::map<TritonTile, double> runtime;
    for (size_t i = 0; i < near->tiles.size(); ++i) runtime[near->tiles[i]] = near->runtime[i];
    for (size_t i = 0; i < tiles.size(); ++i) {
      const auto it = runtime.find(tiles[i]);
      scores[i] = it == runtime.end() ? kUnknown : it->second;
    }
  }
  return scores;
}

GraphEval RandomOrderEval(const std::string& name, const std::vector<double>& runtime) {
  GraphEval e;
  e.name = name;
  e.configs = static_cast<int64_t>(runtime.size());
  e.tau = 0;
  e.opa = 0.5;
  const int64_t k[3] = {1, 5, 10};
  for (int i = 0; i < 3; ++i) e.top_error[i] = ExpectedRandomTopKError(runtime, k[i]);
  e.targets = runtime;  // no scores: TileComparisonTable's other K are expected ones too
  e.tile_score = 1.0 - e.top_error[1];
  e.to_within = ExpectedRandomMeasurementsToWithin(runtime, 0.01);
  return e;
}

std::vector<MethodReport> TileBaselineReports(const TileBaselines& baselines, const std::vector<KnownTileProblem>& problems,
                                              const std::string& collection, const std::string& split) {
  std::vector<MethodReport> out;
  const auto empty_report = [&] {
    EvalReport r;
    r.collection = collection;
    r.split = split;
    r.tile = true;
    return r;
  };
  for (TileBaseline b : kAllTileBaselines) {
    MethodReport m{TileBaselineName(b), empty_report()};
    for (const KnownTileProblem& p : problems)
      m.report.graphs.push_back(
          EvaluateScores(p.name, 0, 0, baselines.Scores(b, p.problem, p.tiles), p.runtime, /*tile=*/true));
    m.report.ComputeMean();
    out.push_back(std::move(m));
  }
  MethodReport random{"random order (expected)", empty_report()};
  for (const KnownTileProblem& p : problems) random.report.graphs.push_back(RandomOrderEval(p.name, p.runtime));
  random.report.ComputeMean();
  out.push_back(std::move(random));
  return out;
}

namespace {

// A problem's best of the top k over its fastest, minus 1: from its scores, or, for the
// random order (targets without scores), the expected one. NaN for hidden runtimes.
double TopKOf(const GraphEval& e, int64_t k) {
  if (e.targets.empty() || std::all_of(e.targets.begin(), e.targets.end(), [](double t) { return t <= 0; }))
    return std::nan("");
  return e.scores.empty() ? ExpectedRandomTopKError(e.targets, k) : TopKError(e.scores, e.targets, k);
}

// The median (worst = false) or the largest of `get` over the report's problems, NaN skipped.
template <typename Get>
double OverProblems(const EvalReport& r, bool worst, Get get) {
  std::vector<double> v;
  for (const GraphEval& e : r.graphs)
    if (const double x = get(e); std::isfinite(x)) v.push_back(x);
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  if (worst) return v.back();
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::string TileComparisonTable(const std::vector<MethodReport>& methods) {
  // The methods' column: as wide as the longest name up to 60 (a model's long description
  // runs past it rather than pushing every line's figures away).
  int width = 44;
  for (const MethodReport& m : methods) width = std::max(width, std::min(60, static_cast<int>(m.method.size())));
  const auto top = [](int64_t k) { return [k](const GraphEval& e) { return TopKOf(e, k); }; };
  const auto to_1 = [](const GraphEval& e) { return e.to_within; };
  std::string out = absl::StrFormat("%-*s %7s %7s %7s %7s %7s %9s %9s\n", width, "method (medians over problems)", "tau",
                                    "top-1", "top-3", "top-5", "top-10", "to 1%", "mean 1%");
  for (const MethodReport& m : methods) {
    const GraphEval& e = m.report.median;
    absl::StrAppend(&out, absl::StrFormat("%-*s %7s %7s %7s %7s %7s %9s %9s\n", width, m.method, Num(e.tau, 3),
                                          Ratio(e.top_error[0]), Ratio(OverProblems(m.report, false, top(3))),
                                          Ratio(e.top_error[1]), Ratio(e.top_error[2]), Num(e.to_within, 1),
                                          Num(m.report.mean.to_within, 1)));
  }
  absl::StrAppend(&out, absl::StrFormat("%-*s %7s %7s %7s %9s\n", width, "method (the worst problem)", "top-1",
                                        "top-3", "top-5", "to 1%"));
  for (const MethodReport& m : methods)
    absl::StrAppend(&out, absl::StrFormat("%-*s %7s %7s %7s %9s\n", width, m.method,
                                          Ratio(OverProblems(m.report, true, top(1))),
                                          Ratio(OverProblems(m.report, true, top(3))),
                                          Ratio(OverProblems(m.report, true, top(5))),
                                          Num(OverProblems(m.report, true, to_1), 1)));
  return out;
}

std::string MethodsJson(const std::vector<MethodReport>& methods) {
  nlohmann::json j = {{"methods", nlohmann::json::array()}};
  for (const MethodReport& m : methods)
    j["methods"].push_back({{"method", m.method}, {"report", nlohmann::json::parse(m.report.Json())}});
  return j.dump(1);
}

}  // namespace tgraph
