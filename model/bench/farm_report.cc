#include "model/bench/farm_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tgraph {
namespace {

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string Measurements(double n) { return std::isinf(n) ? "never" : absl::StrCat(static_cast<int64_t>(n)); }

// The farm's figure of merit: each other strategy's measurements to within --within on
// the median graph over the genetic search's (a model-guided loop earns its keep below a
// tenth). A side that never came within on the median graph is bounded by its budget:
// a strategy that never did needs more than --budget (">", and the line says which budget
// would settle whether it reaches a third); a genetic search that never did needs more
// than --genetic_budget, so the ratio is at most ("<") what the budget gives. Only when
// neither came within is there no figure; where the compiler default itself is within,
// the line says the graph had nothing to find.
void PrintRatiosToGenetic(const Gaps& gaps, const FarmOptions& o) {
  const auto genetic = gaps.to_within.find("genetic");
  if (genetic == gaps.to_within.end()) return;
  const double g = Quantile(genetic->second, 0.5);
  const bool genetic_never = std::isinf(g);
  const double within = 100 * o.within;
  for (const char* name : kFarmStrategies) {
    const auto it = gaps.to_within.find(name);
    if (it == gaps.to_within.end() || it == genetic || std::string(name) == "default") continue;
    const double n = Quantile(it->second, 0.5);
    const bool never = std::isinf(n);
    if (never && genetic_never) {
      std::printf("ratio to the genetic search, median graph: %-9s never / never (neither within %g%% on the median "
                  "graph: raise --budget and --genetic_budget)\n",
                  name, within);
      continue;
    }
    const double bounded = never ? static_cast<double>(o.Budget()) : n;
    const double g_bounded = genetic_never ? static_cast<double>(o.GeneticBudget()) : g;
    std::string hint;
    if (!genetic_never && g <= 1) {
      // Every strategy but random measures the default first: the figure says nothing.
      hint = absl::StrFormat(
          " (the compiler default, the genetic search's first measurement, is within %g%% on the median graph: "
          "nothing to find)",
          within);
    } else if (never) {
      hint = absl::StrFormat(" (never within %g%% in --budget %d; a third of the genetic search's is %d)", within,
                             o.Budget(), static_cast<int64_t>(std::ceil(g / 3)));
    } else if (genetic_never) {
      hint = absl::StrFormat(" (the genetic search never within %g%% in --genetic_budget %d)", within, o.GeneticBudget());
    }
    std::printf("ratio to the genetic search, median graph: %-9s %s%s / %s%s = %s%.3f%s\n", name, never ? ">" : "",
                Measurements(bounded).c_str(), genetic_never ? ">" : "", Measurements(g_bounded).c_str(),
                never ? ">" : genetic_never ? "<" : "", bounded / g_bounded, hint.c_str());
  }
}

}  // namespace

std::vector<int64_t> Columns(const FarmOptions& o) {
  std::vector<int64_t> c;
  const int64_t max = std::max(o.Budget(), o.GeneticBudget());
  for (int64_t decade = 10; decade <= max; decade *= 10)
    for (int64_t m : {1, 2, 5})
      if (decade * m <= max) c.push_back(decade * m);
  return c;
}

void AddGaps(const std::map<std::string, Trace>& traces, double best_known, const FarmOptions& o, Gaps* gaps) {
  const std::vector<int64_t> columns = Columns(o);
  for (const auto& [name, trace] : traces) {
    auto& per_column = gaps->at_column[name];
    per_column.resize(columns.size());
    for (size_t b = 0; b < columns.size(); ++b) {
      // The compiler default is one measurement: its figure holds at every budget.
      const bool reached = name == "default" || static_cast<int64_t>(trace.size()) >= columns[b];
      double best = trace.front();
      for (size_t i = 0; i < trace.size() && static_cast<int64_t>(i) < columns[b]; ++i) best = std::min(best, trace[i]);
      per_column[b].push_back(reached ? best / best_known - 1 : std::nan(""));
    }
    double needed = std::numeric_limits<double>::infinity();
    double best = trace.front();
    for (size_t i = 0; i < trace.size(); ++i) {
      best = std::min(best, trace[i]);
      if (best / best_known - 1 <= o.within) {
        needed = static_cast<double>(i + 1);
        break;
      }
    }
    gaps->to_within[name].push_back(needed);
  }
}

// Appends every strategy's curve of one graph and repeat to `csv` (the --csv format).
void WriteCurves(const std::map<std::string, Trace>& traces, const std::string& graph, int repeat, double best_known,
                 std::FILE* csv) {
  for (const auto& [name, trace] : traces) {
    double best = trace.front();
    for (size_t i = 0; i < trace.size(); ++i) {
      best = std::min(best, trace[i]);
      std::fprintf(csv, "%s,%s,%d,%zu,%.6g\n", name.c_str(), graph.c_str(), repeat, i + 1, best / best_known - 1);
    }
  }
}

void PrintGaps(const Gaps& gaps, const FarmOptions& o) {
  std::printf("best runtime found over the best known, minus 1 (%%): median [min, max] over graphs and repeats\n");
  std::printf("%-10s", "strategy");
  for (int64_t b : Columns(o)) std::printf(" %20s", absl::StrCat(b, " measured").c_str());
  std::printf(" %26s\n", absl::StrFormat("measured to within %g%%", 100 * o.within).c_str());
  for (const char* name : kFarmStrategies) {
    const auto it = gaps.at_column.find(name);
    if (it == gaps.at_column.end()) continue;
    std::printf("%-10s", name);
    for (const std::vector<double>& v : it->second) {
      if (std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) {
        std::printf(" %20s", "-");
        continue;
      }
      std::printf(" %20s", absl::StrFormat("%.2f [%.2f, %.2f]", 100 * Quantile(v, 0.5), 100 * Quantile(v, 0),
                                           100 * Quantile(v, 1)).c_str());
    }
    const std::vector<double>& n = gaps.to_within.at(name);
    std::printf(" %26s\n", absl::StrFormat("%s [%s, %s]", Measurements(Quantile(n, 0.5)), Measurements(Quantile(n, 0)),
                                           Measurements(Quantile(n, 1))).c_str());
  }
  PrintRatiosToGenetic(gaps, o);
}

}  // namespace tgraph
