// Orders of an XLA Triton GEMM fusion's measured configurations that need no model, built
// from measured fusions (the train and valid splits of a collection that
// tgraph-featurize fusions made from XLA's autotuning logs): what a learned ranking of
// fusions has to beat, reported beside it by tgraph-eval --baselines.
//
//   nearest problem  the configurations in the runtime order of the measured fusion
//                    nearest in log2 (batch M, N, K) (summed distance; ties by name);
//   mean slowdown    by their mean log slowdown (runtime / that fusion's fastest) over
//                    the measured fusions;
//   XLA's choice     the configuration XLA's compiler put in the fusion (fusions.tsv's
//                    `chosen`) first, then mean slowdown. From a module compiled with
//                    autotuning on, that is the autotuner's pick: what XLA's own
//                    measuring found, so its top-1 says how far XLA's re-measured winner
//                    is from the logged fastest; from a module compiled with autotuning
//                    off, XLA's heuristic's pick.
// Each counts the fusions of the same operand types and transposition, or, when none
// has them, of the same operand types, or else every fusion (XlaGemmKinship). A
// configuration none of them measured scores last. Random order's expectation is
// tile_baselines.h's.
//
// Torch-free; values only, any thread.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/graph.h"
#include "model/tile/tile_baselines.h"
#include "model/tile/xla_fusion_table.h"
#include "model/tile/xla_gemm.h"

namespace tgraph {

// One fusion's graph rows with their runtimes (or ratios: only ratios matter), its
// problem and XLA's choice.
struct KnownXlaFusion {
  std::string name;
  XlaGemmProblem problem;
  std::optional<XlaGemmConfig> chosen;
  std::vector<XlaGemmConfig> configs;  // the graph's rows, in order (XlaGemmConfigOfRow)
  std::vector<double> runtime;         // per row; all 0 when not measured
  // Rows whose runtimes are all known (> 0).
  bool Measured() const {
    return !runtime.empty() && *std::min_element(runtime.begin(), runtime.end()) > 0;
  }
};

// A fusion graph's rows and targets with its table record's problem and choice.
KnownXlaFusion KnownXlaFusionOf(const TileGraph& g, const XlaFusionRecord& record);

// How much measured fusion q says of p: 2 the same operand types and transposition, 1
// the same operand types only, 0 otherwise.
int XlaGemmKinship(const XlaGemmProblem& q, const XlaGemmProblem& p);

enum class XlaGemmBaseline { kNearestProblem, kMeanSlowdown, kXlaChoice };
inline constexpr XlaGemmBaseline kAllXlaGemmBaselines[] = {XlaGemmBaseline::kNearestProblem,
                                                           XlaGemmBaseline::kMeanSlowdown, XlaGemmBaseline::kXlaChoice};

class XlaGemmBaselines {
 public:
  // Fusions without measurements are left out.
  explicit XlaGemmBaselines(std::vector<KnownXlaFusion> known);
  // Scores (lower = measure first) of f's rows. With no measured fusion every score is 0
  // (XLA's choice still first).
  std::vector<double> Scores(XlaGemmBaseline b, const KnownXlaFusion& f) const;
  // The measured fusion of the highest kinship with p nearest to it, or nullptr.
  const KnownXlaFusion* Nearest(const XlaGemmProblem& p) const;
  size_t size() const { return known_.size(); }

 private:
  std::vector<double> MeanSlowdown(const KnownXlaFusion& f) const;
  int Kinship(const XlaGemmProblem& p) const;  // the highest any measured fusion has with p

  std::vector<KnownXlaFusion> known_;
};

// The baselines' reports over the measured fusions of `fusions` (the evaluated split), in
// kAllXlaGemmBaselines order, then random order's expectation. XLA's choice's name says
// of how many of them XLA's choice was among the measured rows.
std::vector<MethodReport> XlaGemmBaselineReports(const XlaGemmBaselines& baselines,
                                                 const std::vector<KnownXlaFusion>& fusions,
                                                 const std::string& collection, const std::string& split);

}  // namespace tgraph
