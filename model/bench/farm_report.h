// The simulated farm's report (tgraph-bench-search): each strategy's best runtime found
// over the best known after 10, 20, 50, ... measurements, the measurements it took to
// come within FarmOptions::within of it, its ratio to the genetic search's on the median
// graph, and the curves as CSV for scripts/plot-search. Plain functions; any thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/bench/farm.h"

namespace tgraph {

// Per strategy: for each column, (best true runtime found / best known - 1), one per graph
// and repeat (NaN where the strategy stopped before that many measurements); and the
// measurements it took to come within --within of the best known (infinity: never).
struct Gaps {
  std::map<std::string, std::vector<std::vector<double>>> at_column;
  std::map<std::string, std::vector<double>> to_within;
};

// The table's columns: 10, 20, 50, 100, 200, 500, 1000, ... up to the larger budget.
std::vector<int64_t> Columns(const FarmOptions& o);

// One graph and repeat's traces, judged against `best_known`, added to `gaps`.
void AddGaps(const std::map<std::string, Trace>& traces, double best_known, const FarmOptions& o, Gaps* gaps);

// Appends every strategy's curve of one graph and repeat to `csv` (the --csv format).
void WriteCurves(const std::map<std::string, Trace>& traces, const std::string& graph, int repeat, double best_known,
                 std::FILE* csv);

// The table (stdout), then each strategy's measurements to within o.within on the median
// graph over the genetic search's: a side that never came within is bounded by its
// budget (">" or "<"), neither within is "never / never", and a graph whose compiler
// default is already within has nothing to find.
void PrintGaps(const Gaps& gaps, const FarmOptions& o);

}  // namespace tgraph
