#include "model/tile/xla_gemm_baselines.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/core/eval_report.h"

namespace tgraph {
namespace {

constexpr double kUnknown = std::numeric_limits<double>::max();

double Log2Distance(const XlaGemmProblem& a, const XlaGemmProblem& b) {
  const auto d = [](int64_t x, int64_t y) {
    return std::abs(std::log2(static_cast<double>(x)) - std::log2(static_cast<double>(y)));
  };
  return d(a.batch * a.m, b.batch * b.m) + d(a.n, b.n) + d(a.k, b.k);
}

double Fastest(const KnownXlaFusion& f) { return *std::min_element(f.runtime.begin(), f.runtime.end()); }

}  // namespace

KnownXlaFusion KnownXlaFusionOf(const TileGraph& g, const XlaFusionRecord& record) {
  KnownXlaFusion k;
  k.name = g.name;
  k.problem = record.problem;
  k.chosen = record.chosen;
  const std::vector<double> targets = TileTargets(g);
  for (int64_t c = 0; c < g.num_configs; ++c) {
    k.configs.push_back(XlaGemmConfigOfRow(g.config_feat.data() + c * kTileConfigDim));
    k.runtime.push_back(targets[static_cast<size_t>(c)]);
  }
  return k;
}

int XlaGemmKinship(const XlaGemmProblem& q, const XlaGemmProblem& p) {
  if (q.lhs_dtype != p.lhs_dtype || q.rhs_dtype != p.rhs_dtype) return 0;
  return q.lhs_transposed == p.lhs_transposed && q.rhs_transposed == p.rhs_transposed ? 2 : 1;
}

XlaGemmBaselines::XlaGemmBaselines(std::vector<KnownXlaFusion> known) {
  for (KnownXlaFusion& k : known)
    if (k.Measured()) known_.push_back(std::move(k));
}

int XlaGemmBaselines::Kinship(const XlaGemmProblem& p) const {
  int kin = 0;
  for (const KnownXlaFusion& k : known_) kin = std::max(kin, XlaGemmKinship(k.problem, p));
  return kin;
}

const KnownXlaFusion* XlaGemmBaselines::Nearest(const XlaGemmProblem& p) const {
  const int kin = Kinship(p);
  const KnownXlaFusion* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const KnownXlaFusion& k : known_) {
    if (XlaGemmKinship(k.problem, p) != kin) continue;
    const double d = Log2Distance(k.problem, p);
    if (d < best_d || (d == best_d && best != nullptr && k.name < best->name)) best = &k, best_d = d;
  }
  return best;
}

std::vector<double> XlaGemmBaselines::MeanSlowdown(const KnownXlaFusion& f) const {
  const int kin = Kinship(f.problem);
  std::map<XlaGemmConfig, std::pair<double, int64_t>> sums;  // configuration -> (sum of log slowdowns, fusions)
  for (const KnownXlaFusion& k : known_) {
    if (XlaGemmKinship(k.problem, f.problem) != kin) continue;
    const double fastest = Fastest(k);
    std::map<XlaGemmConfig, double> seen;  // a configuration listed twice counts once, at its first time
    for (size_t i = 0; i < k.configs.size(); ++i) seen.emplace(k.configs[i], k.runtime[i]);
    for (const auto& [config, runtime] : seen) {
      auto& [sum, n] = sums[config];
      sum += std::log(runtime / fastest);
      ++n;
    }
  }
  std::vector<double> scores(f.configs.size(), kUnknown);
  for (size_t i = 0; i < f.configs.size(); ++i)
    if (const auto it = sums.find(f.configs[i]); it != sums.end())
      scores[i] = it->second.first / static_cast<double>(it->second.second);
  return scores;
}

std::vector<double> XlaGemmBaselines::Scores(XlaGemmBaseline b, const KnownXlaFusion& f) const {
  if (known_.empty()) {
    std::vector<double> scores(f.configs.size(), 0.0);
    if (b == XlaGemmBaseline::kXlaChoice && f.chosen)
      for (size_t i = 0; i < f.configs.size(); ++i)
        if (f.configs[i] == *f.chosen) scores[i] = -1;
    return scores;
  }
  if (b == XlaGemmBaseline::kNearestProblem) {
    const KnownXlaFusion* near = Nearest(f.problem);
    std::map<XlaGemmConfig, double> runtime;
    if (near != nullptr)
        for (size_t i = 0; i < near->configs.size(); ++i) runtime.emplace(near->configs[i], near->runtime[i]);
    std::vector<double> scores(f.configs.size(), kUnknown);
    for (size_t i = 0; i < f.configs.size(); ++i)
      if (const auto it = runtime.find(f.configs[i]); it != runtime.end()) scores[i] = it->second;
    return scores;
  }
  std::vector<double> scores = MeanSlowdown(f);
  if (b == XlaGemmBaseline::kXlaChoice && f.chosen)
    for (size_t i = 0; i < f.configs.size(); ++i)
      if (f.configs[i] == *f.chosen) scores[i] = -1;  // mean log slowdowns are >= 0
  return scores;
}

std::vector<MethodReport> XlaGemmBaselineReports(const XlaGemmBaselines& baselines,
                                                 const std::vector<KnownXlaFusion>& fusions,
                                                 const std::string& collection, const std::string& split) {
  std::vector<const KnownXlaFusion*> measured;
  int64_t chosen_measured = 0;
  for (const KnownXlaFusion& f : fusions) {
    if (!f.Measured()) continue;
    measured.push_back(&f);
    if (f.chosen && std::find(f.configs.begin(), f.configs.end(), *f.chosen) != f.configs.end()) ++chosen_measured;
  }
  EvalReport empty;
  empty.collection = collection;
  empty.split = split;
  empty.tile = true;
  std::vector<MethodReport> out;
  for (XlaGemmBaseline b : kAllXlaGemmBaselines) {
    std::string name = b == XlaGemmBaseline::kNearestProblem ? "nearest problem"
                       : b == XlaGemmBaseline::kMeanSlowdown
                           ? "mean slowdown"
                           : absl::StrCat("XLA's choice (measured in ", chosen_measured, " of ", measured.size(),
                                          "), then mean slowdown");
    MethodReport m{std::move(name), empty};
    for (const KnownXlaFusion* f : measured)
      m.report.graphs.push_back(EvaluateScores(f->name, 0, 0, baselines.Scores(b, *f), f->runtime, /*tile=*/true));
    m.report.ComputeMean();
    out.push_back(std::move(m));
  }
  MethodReport random{"random order (expected)", empty};
  for (const KnownXlaFusion* f : measured) random.report.graphs.push_back(RandomOrderEval(f->name, f->runtime));
  random.report.ComputeMean();
  out.push_back(std::move(random));
  return out;
}

}  // namespace tgraph
