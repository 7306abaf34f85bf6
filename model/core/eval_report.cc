#include "model/core/eval_report.h"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/rank_metrics.h"

namespace tgraph {
namespace {

// A finite value with `decimals` digits after the point, else "-". The precision is an
// argument, not a runtime format string: absl::StrFormat checks its format at compile time.
std::string Num(double v, int decimals = 4) {
  return std::isfinite(v) ? absl::StrFormat("%.*f", decimals, v) : std::string("-");
}

nlohmann::json JsonNum(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

GraphEval EvaluateScores(const std::string& name, int64_t nodes, int64_t pruned_nodes,
                         const std::vector<double>& scores, const std::vector<double>& target, bool tile,
                         const std::vector<int64_t>& rows, const std::vector<double>& spread) {
  static constexpr int64_t kTopK[2][3] = {{1, 10, 100}, {1, 5, 10}};
  GraphEval e;
  e.name = name;
  e.nodes = nodes;
  e.pruned_nodes = pruned_nodes;
  e.configs = static_cast<int64_t>(scores.size());
  // Hidden runtimes (all zero, as in the public test split) say nothing: no metric.
  const double nan = std::nan("");
  const bool hidden = std::all_of(target.begin(), target.end(), [](double t) { return t <= 0; });
  e.tau = hidden ? nan : KendallTau(scores, target);
  e.opa = hidden ? nan : OrderedPairAccuracy(scores, target);
  for (int k = 0; k < 3; ++k) e.top_error[k] = hidden ? nan : TopKError(scores, target, kTopK[tile][k]);
  e.tile_score = tile && !hidden ? TileScore(scores, target) : nan;
  e.to_within = tile && !hidden ? MeasurementsToWithin(scores, target, 0.01) : nan;
  if (!hidden && !spread.empty()) {
    const SpreadQuartiles q = RankErrorBySpread(scores, spread, target);
    std::copy(std::begin(q.rank_error), std::end(q.rank_error), e.spread_error);
  }
  e.ranking = RankByScore(scores);
  e.rows = rows;
  if (e.rows.empty()) {
    e.rows.resize(scores.size());
    std::iota(e.rows.begin(), e.rows.end(), 0);
  }
  for (int64_t& r : e.ranking) r = e.rows[static_cast<size_t>(r)];
  e.scores = scores;
  e.spread = spread;
  e.targets = target;
  return e;
}

void EvalReport::ComputeMean() {
  mean = GraphEval();
  auto values = [&](auto get) {
    std::vector<double> v;
    for (const GraphEval& e : graphs) v.push_back(get(e));
    return v;
  };
  auto mean_of = [&](auto get) { return FiniteMean(values(get)); };
  auto median_of = [&](auto get) { return FiniteMedian(values(get)); };
  median = GraphEval();
  median.name = "median";
  median.tau = median_of([](const GraphEval& e) { return e.tau; });
  median.opa = median_of([](const GraphEval& e) { return e.opa; });
  for (int k = 0; k < 3; ++k) median.top_error[k] = median_of([k](const GraphEval& e) { return e.top_error[k]; });
  median.tile_score = median_of([](const GraphEval& e) { return e.tile_score; });
  median.to_within = median_of([](const GraphEval& e) { return e.to_within; });
  mean.name = "mean";
  mean.to_within = mean_of([](const GraphEval& e) { return e.to_within; });
  mean.tau = mean_of([](const GraphEval& e) { return e.tau; });
  mean.opa = mean_of([](const GraphEval& e) { return e.opa; });
  for (int k = 0; k < 3; ++k) mean.top_error[k] = mean_of([k](const GraphEval& e) { return e.top_error[k]; });
  mean.tile_score = mean_of([](const GraphEval& e) { return e.tile_score; });
  mean.cascade_recall = mean_of([](const GraphEval& e) { return e.cascade_recall; });
  for (int q = 0; q < 4; ++q) mean.spread_error[q] = mean_of([q](const GraphEval& e) { return e.spread_error[q]; });
  for (const GraphEval& e : graphs) {
    mean.nodes += e.nodes;
    mean.pruned_nodes += e.pruned_nodes;
    mean.configs += e.configs;
  }
  if (!graphs.empty()) {
    const int64_t n = static_cast<int64_t>(graphs.size());
    mean.nodes /= n;
    mean.pruned_nodes /= n;
    mean.configs /= n;
  }
}

std::string EvalReport::Table() const {
  const char* k = tile ? "top1/5/10 err" : "top1/10/100 err";
  std::string out = absl::StrFormat("%-36s %7s %7s %7s %8s %8s %26s%s\n", "graph", "nodes", "pruned", "configs", "tau",
                                    "OPA", k, tile ? "   M_tile   to 1%" : "");
  auto row = [&](const GraphEval& e) {
    return absl::StrFormat("%-36s %7d %7d %7d %8s %8s %8s %8s %8s%s\n", e.name, e.nodes, e.pruned_nodes, e.configs,
                           Num(e.tau), Num(e.opa), Num(e.top_error[0]), Num(e.top_error[1]), Num(e.top_error[2]),
                           tile ? absl::StrFormat(" %8s %7s", Num(e.tile_score), Num(e.to_within, 1)) : "");
  };
  for (const GraphEval& e : graphs) out += row(e);
  out += row(mean);
  if (tile) {
    GraphEval m = median;
    m.nodes = mean.nodes, m.pruned_nodes = mean.pruned_nodes, m.configs = mean.configs;
    out += row(m);
  }
  return out;
}

std::string EvalReport::RankingsCsv() const {
  std::string out = "collection,graph,ranking\n";
  for (const GraphEval& e : graphs) {
    absl::StrAppend(&out, collection, ",", e.name, ",");
    for (size_t i = 0; i < e.ranking.size(); ++i) absl::StrAppend(&out, i ? ";" : "", e.ranking[i]);
    out += "\n";
  }
  return out;
}

std::string EvalReport::ScoresCsv() const {
  std::string out = "collection,graph,config,score,spread,runtime\n";
  for (const GraphEval& e : graphs)
    for (size_t i = 0; i < e.scores.size(); ++i)
      absl::StrAppend(&out, collection, ",", e.name, ",", e.rows[i], ",", absl::StrFormat("%.17g", e.scores[i]), ",",
                      i < e.spread.size() ? absl::StrFormat("%.17g", e.spread[i]) : std::string(), ",",
                      absl::StrFormat("%.17g", e.targets[i]), "\n");
  return out;
}

std::string EvalReport::Json() const {
  nlohmann::json j;
  j["collection"] = collection;
  j["split"] = split;
  auto obj = [&](const GraphEval& e) {
    nlohmann::json g = {{"graph", e.name}, {"nodes", e.nodes}, {"pruned_nodes", e.pruned_nodes}, {"configs", e.configs},
                        {"kendall_tau", JsonNum(e.tau)}, {"opa", JsonNum(e.opa)}};
    const char* names[2][3] = {{"top1_error", "top10_error", "top100_error"}, {"top1_error", "top5_error", "top10_error"}};
    for (int k = 0; k < 3; ++k) g[names[tile][k]] = JsonNum(e.top_error[k]);
    if (tile) g["m_tile"] = JsonNum(e.tile_score);
    if (tile) g["measurements_to_within_1pct"] = JsonNum(e.to_within);
    if (std::isfinite(e.cascade_recall)) g["cascade_recall"] = e.cascade_recall;
    if (std::isfinite(e.spread_error[0]))
      g["rank_error_by_spread_quartile"] = {e.spread_error[0], e.spread_error[1], e.spread_error[2], e.spread_error[3]};
    return g;
  };
  j["graphs"] = nlohmann::json::array();
  for (const GraphEval& e : graphs) j["graphs"].push_back(obj(e));
  j["mean"] = obj(mean);
  if (tile) j["median"] = obj(median);
  return j.dump(1);
}

}  // namespace tgraph
