#include "model/train/eval_baselines.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/core/graph_io.h"
#include "model/tile/tile_orders.h"
#include "model/tile/tile_space.h"
#include "model/tile/xla_gemm_baselines.h"

namespace tgraph {
namespace {

// The measured problems of `splits` (tile files with a tile space's rows).
absl::StatusOr<std::vector<KnownTileProblem>> KnownProblems(const std::string& root, const Collection& c,
                                                            const std::vector<std::string>& splits) {
  std::vector<KnownTileProblem> out;
  for (const std::string& split : splits) {
    absl::StatusOr<std::vector<GraphFile>> files = ListSplit(root, c, split);
    if (!files.ok()) return files.status();
    for (const GraphFile& f : *files) {
      absl::StatusOr<TileGraph> g = LoadTileGraph(f.path);
      if (!g.ok()) return g.status();
      absl::StatusOr<KnownTileProblem> k = KnownProblemOf(*g, f.path);
      if (!k.ok()) return k.status();
      out.push_back(std::move(*k));
    }
  }
  return out;
}

// The fusions of `splits`, each with its folder's fusion table's record. A split that
// is not there has none (a collection of a few programs may have no valid split).
absl::StatusOr<std::vector<KnownXlaFusion>> KnownFusions(const std::string& root, const Collection& c,
                                                         const std::vector<std::string>& splits, bool missing_ok) {
  std::vector<KnownXlaFusion> out;
  for (const std::string& split : splits) {
    absl::StatusOr<std::vector<GraphFile>> files = ListSplit(root, c, split);
    if (absl::IsNotFound(files.status()) && missing_ok) continue;
    if (!files.ok()) return files.status();
    absl::StatusOr<std::map<std::string, XlaFusionRecord>> records = ReadXlaFusionTables(SplitDir(root, c, split));
    if (!records.ok()) return records.status();
    for (const GraphFile& f : *files) {
      const auto record = records->find(std::filesystem::path(f.path).filename().string());
      if (record == records->end())
        return absl::FailedPreconditionError(
            absl::StrCat(f.path, ": no fusion table of its folder lists it (tgraph-featurize fusions writes a "
                                 "<program>.fusions.tsv beside its graphs)"));
      absl::StatusOr<TileGraph> g = LoadTileGraph(f.path);
      if (!g.ok()) return g.status();
      out.push_back(KnownXlaFusionOf(*g, record->second));
    }
  }
  return out;
}

// Whether the evaluated split's folder holds fusion tables.
bool HasFusionTables(const std::string& root, const Collection& c, const std::string& split) {
  absl::StatusOr<std::map<std::string, XlaFusionRecord>> records = ReadXlaFusionTables(SplitDir(root, c, split));
  return records.ok() ? !records->empty() : !absl::IsInternal(records.status());
}

}  // namespace

absl::StatusOr<std::vector<MethodReport>> BaselineReports(const std::string& root, const Collection& c,
                                                          const std::string& split,
                                                          const std::vector<std::string>& order_files) {
  if (c.kind != CollectionKind::kTile)
    return absl::FailedPreconditionError(
        "--baselines: only tile collections have them (tgraph-featurize tiles or tgraph-featurize fusions makes one)");
  if (HasFusionTables(root, c, split)) {
    if (!order_files.empty())
      return absl::FailedPreconditionError(absl::StrCat(
          "--baseline_orders ", order_files[0], ": orders of Triton tile configurations; ", c.name(), " ", split,
          " holds XLA's fusions, whose configurations are XLA's"));
    absl::StatusOr<std::vector<KnownXlaFusion>> known = KnownFusions(root, c, {"train", "valid"}, true);
    if (!known.ok()) return known.status();
    absl::StatusOr<std::vector<KnownXlaFusion>> evaluated = KnownFusions(root, c, {split}, false);
    if (!evaluated.ok()) return evaluated.status();
    return XlaGemmBaselineReports(XlaGemmBaselines(std::move(*known)), *evaluated, c.name(), split);
  }
  const std::string dir = std::filesystem::path(SplitDir(root, c, "train")).parent_path();
  if (absl::StatusOr<TileSpace> space = LoadTileSpace(dir); !space.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("--baselines needs a collection with a tile space (tgraph-featurize tiles writes it) or fusion "
                     "tables (tgraph-featurize fusions writes them): ",
                     space.status().message()));
  absl::StatusOr<std::vector<KnownTileProblem>> known = KnownProblems(root, c, {"train", "valid"});
  if (!known.ok()) return known.status();
  absl::StatusOr<std::vector<KnownTileProblem>> evaluated = KnownProblems(root, c, {split});
  if (!evaluated.ok()) return evaluated.status();
  std::vector<MethodReport> reports = TileBaselineReports(TileBaselines(std::move(*known)), *evaluated, c.name(), split);
  for (const std::string& file : order_files) {
    absl::StatusOr<ExternalTileOrders> orders = ReadTileOrders(file);
    if (!orders.ok()) return orders.status();
    absl::StatusOr<MethodReport> m = ExternalOrderReport(*orders, *evaluated, c.name(), split, file);
    if (!m.ok()) return m.status();
    reports.insert(reports.end() - 1, std::move(*m));  // before random order's expectation
  }
  return reports;
}

}  // namespace tgraph
