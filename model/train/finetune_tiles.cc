#include "model/train/finetune_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/core/rank_metrics.h"
#include "model/core/utc_time.h"
#include "model/store/measurement_store.h"
#include "model/tile/tile_prior.h"

namespace tgraph {
namespace fs = std::filesystem;

namespace {

// The kernel to learn from: o.kernel (on the model's GPU when it names none), or the
// store's only one of the model's GPU. Other GPUs' timings never join this model.
absl::StatusOr<std::string> ChooseKernel(const FinetuneOptions& o, const Collection& c, const std::string& gpu,
                                         const std::vector<std::string>& all) {
  std::vector<std::string> kernels, elsewhere;
  for (const std::string& k : all) {
    absl::StatusOr<TileKernelId> id = ParseTileKernelKey(k, "kernel");
    (id.ok() && id->gpu == gpu ? kernels : elsewhere).push_back(k);
  }
  const std::string others =
      elsewhere.empty() ? "" : absl::StrCat("; of other GPUs, never joined: ", absl::StrJoin(elsewhere, ", "));
  if (kernels.empty())
    return absl::NotFoundError(absl::StrCat(o.measurements, ": no tile measurements of ", c.name(), " on its GPU '", gpu,
                                            "' (ReportMeasurements with a kernel; tgraph.triton reports them)", others));
  if (o.kernel.empty()) {
    if (kernels.size() == 1) return kernels[0];
    return absl::InvalidArgumentError(absl::StrCat(
        o.measurements, " holds measurements of ", kernels.size(), " kernels of ", c.name(), " (",
        absl::StrJoin(kernels, ", "), "); a prior learns from one: give --kernel NAME@HASH"));
  }
  const std::string wanted = KernelKeyOnGpu(o.kernel, gpu);
  if (std::find(kernels.begin(), kernels.end(), wanted) == kernels.end())
    return absl::NotFoundError(absl::StrCat("--kernel ", o.kernel, ": ", o.measurements, " has no measurements of it on ",
                                            c.name(), "'s GPU (it has: ", absl::StrJoin(kernels, ", "), others, ")"));
  return wanted;
}

// Mean Kendall tau over `problems` of the prior with `table`, each problem ranked with
// the measured problems of its own shape left out (as had it never been measured).
double LeaveShapeOutTau(const TilePrior& prior, const MeasuredSlowdowns& table,
                        const std::vector<KnownTileProblem>& problems) {
  TilePrior p = prior;
  p.measured = table;
  double sum = 0;
  int64_t n = 0;
  for (const KnownTileProblem& k : problems) {
    const TilePriorValues v = p.For(k.problem, /*leave_shape_out=*/true);
    std::vector<double> scores;
    for (const TritonTile& t : k.tiles) scores.push_back(v.Of(t));
    const double tau = KendallTau(scores, k.runtime);
    if (std::isfinite(tau)) {
      sum += tau;
      ++n;
    }
  }
  return n > 0 ? sum / static_cast<double>(n) : std::nan("");
}

// `table` within a manifest's kMaxTilePriorProblems: a farm's problems the store no longer
// holds go first, then the least recently reported (`table` ends with the store's, newest
// first); values at the 1e-4 steps a manifest keeps.
MeasuredSlowdowns Bounded(const MeasuredSlowdowns& table, const std::set<std::string>& in_store) {
  std::vector<MeasuredSlowdowns::Problem> ps = table.problems();
  for (auto it = ps.end(); static_cast<int64_t>(ps.size()) > kMaxTilePriorProblems && it != ps.begin();) {
    --it;
    if (!it->kernel.empty() && in_store.count(it->stored) == 0) it = ps.erase(it);
  }
  while (static_cast<int64_t>(ps.size()) > kMaxTilePriorProblems) ps.pop_back();
  for (MeasuredSlowdowns::Problem& q : ps)
    for (double& v : q.log_slowdown)
      if (!std::isnan(v)) v = std::round(v * 1e4) / 1e4;
  return MeasuredSlowdowns(table.tiles(), std::move(ps));
}

// The problems the model serves, which alone judge it and join it: one of a dtype or
// kernel variant its space never measured is refused at search time whatever the prior
// says, so a gain measured on it would publish a version for nothing. The others are
// counted in `result`.
std::vector<KnownTileProblem> Served(const Manifest& m, std::vector<KnownTileProblem> problems, FinetuneResult* result) {
  std::vector<KnownTileProblem> served;
  std::set<std::string> unserved;
  for (KnownTileProblem& k : problems) {
    if (m.tile_space && !m.tile_space->CheckProblem(k.problem).ok()) {
      ++result->unserved;
      unserved.insert(k.problem.Variant());
      continue;
    }
    served.push_back(std::move(k));
  }
  result->unserved_variants.assign(unserved.begin(), unserved.end());
  return served;
}

}  // namespace

absl::StatusOr<FinetuneResult> FinetuneTilePrior(const FinetuneOptions& o, const Collection& c,
                                                 const Registry& registry, LoadedModel parent, FinetuneResult result) {
  const Manifest& pm = parent.manifest;
  if (!pm.tile_prior || pm.tile_prior->measured.problems().empty())
    return absl::FailedPreconditionError(absl::StrCat(
        result.parent_collection, " version ", result.parent_version,
        " has no prior of measured problems (a fixed table, or none) for the measurements to join: train it with "
        "tgraph-train on its tile collection"));
  MeasurementStore store(o.measurements);
  const std::string gpu = pm.tile_space ? pm.tile_space->gpu : "";
  absl::StatusOr<std::vector<std::string>> skipped = store.LoadKernelIndex({{c.name(), gpu}});
  if (!skipped.ok()) return skipped.status();
  result.skipped_shards = std::move(*skipped);
  absl::StatusOr<std::string> kernel = ChooseKernel(o, c, gpu, store.Kernels(c.name()));
  if (!kernel.ok()) return kernel.status();
  const std::vector<KnownTileProblem> stored = Served(pm, *store.KernelProblems(c.name(), *kernel), &result);
  const std::string unserved_note =
      result.unserved == 0 ? ""
                           : absl::StrCat(" (", result.unserved, " more of kernel variants this model refuses, ",
                                          absl::StrJoin(result.unserved_variants, ", "), ", left out)");
  result.graphs = static_cast<int64_t>(stored.size());
  for (const KnownTileProblem& k : stored) result.heldout_configs += static_cast<int64_t>(k.tiles.size());
  if (stored.size() < 2 || result.heldout_configs < o.min_heldout_configs) {
    result.not_published = absl::StrCat(
        "not published: too little evidence: ", stored.size(), " measured problems of kernel ", *kernel, " with ",
        result.heldout_configs, " configurations", unserved_note, " (at least 2 problems and --min_heldout_configs ",
        o.min_heldout_configs, "); nothing was changed (report more measurements)");
    return result;
  }
  std::set<std::string> in_store;
  for (const KnownTileProblem& k : stored) in_store.insert(k.name);
  const TilePrior& prior = *pm.tile_prior;
  // The child's table: the parent's, this kernel's problems the store holds again
  // replaced by the store's (newer), within a manifest's bound.
  std::vector<MeasuredSlowdowns::Problem> kept;
  for (const MeasuredSlowdowns::Problem& q : prior.measured.problems())
    if (!(q.kernel == *kernel && in_store.count(q.stored) > 0)) kept.push_back(q);
  const MeasuredSlowdowns table =
      Bounded(MeasuredSlowdowns(prior.measured.tiles(), std::move(kept)).With(stored, &prior.bandwidth), in_store);
  const MeasuredSlowdowns before = prior.measured.ForKernel(*kernel, {});
  const MeasuredSlowdowns after = table.ForKernel(*kernel, {});
  result.parent_score = LeaveShapeOutTau(prior, before, stored);
  result.child_score = LeaveShapeOutTau(prior, after, stored);
  result.trained = true;
  if (o.progress)
    std::fprintf(stderr, "finetune %s: kernel %s: %zu measured problems%s, each ranked without its shape: tau %.4f -> %.4f\n",
                 c.name().c_str(), kernel->c_str(), stored.size(), unserved_note.c_str(), result.parent_score,
                 result.child_score);
  if (!(std::isfinite(result.child_score) && result.child_score >= result.parent_score)) {
    result.not_published = "worse than its parent on the measured problems: not published";
    return result;
  }

  Manifest child = pm;
  child.collection = c.name();
  child.tile_prior->measured = table;
  child.tile_prior->problems = static_cast<int64_t>(child.tile_prior->measured.problems().size());
  std::error_code ec;
  fs::create_directories(o.work_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(o.work_dir, ": cannot create: ", ec.message()));
  for (size_t f = 0; f < parent.folds.size(); ++f) {  // the network as it was
    const std::string path = absl::StrCat(o.work_dir, "/fold_", f, ".npz");
    if (absl::Status st = SaveWeights(*parent.folds[f], path); !st.ok()) return st;
    child.folds[f].weights = path;
  }
  child.training["finetune_parent_version"] = absl::StrCat(result.parent_version);
  if (result.parent_collection != child.collection) child.training["finetune_parent_collection"] = result.parent_collection;
  child.training["finetune_measurements"] = o.measurements;
  child.training["finetune_kernel"] = *kernel;
  child.training["finetune_tile_problems"] = absl::StrCat(stored.size());
  child.training["finetune_heldout_tau_parent"] = absl::StrCat(result.parent_score);
  child.training["finetune_heldout_tau"] = absl::StrCat(result.child_score);
  child.provenance.finetunes.push_back({result.parent_version,
                                        result.parent_collection == child.collection ? "" : result.parent_collection,
                                        result.graphs, result.heldout_configs, UtcNow()});
  absl::StatusOr<int64_t> v = PublishLoadable(registry, child);
  if (!v.ok()) return v.status();
  result.published_version = *v;
  return result;
}

}  // namespace tgraph
