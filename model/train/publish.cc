#include "model/train/publish.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/nn/model_io.h"
#include "model/train/run_dir.h"

namespace tgraph {

absl::StatusOr<Manifest> RunManifest(const std::string& run_dir, int keep, double network_share) {
  absl::StatusOr<RunInfo> info = ReadRunInfo(run_dir);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::vector<FoldResult>> results = ReadFoldResults(run_dir);
  if (!results.ok()) return results.status();
  if (results->empty()) return absl::FailedPreconditionError(absl::StrCat(run_dir, ": no fold has finished training"));
  Manifest m;
  m.collection = info->collection;
  m.spec = info->spec;
  m.stats = info->stats;
  m.data_fingerprint = info->fingerprint;
  m.training = info->flags;
  m.batch_size = info->valid_batch;
  m.reference_configs = info->reference_configs;
  m.reference_groups = info->reference_groups;
  m.provenance = info->provenance;
  m.tile_space = info->tile_space;
  m.tile_prior = info->tile_prior;
  std::vector<std::map<double, double>> share_scores;
  for (const FoldResult& r : *results) {
    if (static_cast<int>(m.folds.size()) >= keep) break;
    m.folds.push_back({r.fold, r.valid_score, absl::StrCat("fold_", r.fold, "/best.npz"), ""});
    share_scores.push_back(r.share_scores);
  }
  // The kept folds' validation problems choose what the network counts beside the prior;
  // a run whose folds did not validate the shares keeps 1, as it trained.
  if (network_share != -1) {
    if (!(network_share >= 0 && network_share <= 1))
      return absl::InvalidArgumentError(absl::StrCat("--tile_network_share ", network_share, ": expected 0..1"));
    if (!m.tile_prior || !m.tile_prior->residual)
      return absl::FailedPreconditionError(absl::StrCat(
          "--tile_network_share: run ", run_dir, " has no prior its network trained beside (a tile collection's, "
          "trained with it) to share with"));
    m.tile_prior->network_share = network_share;
    m.training["tile_network_share"] = absl::StrCat(network_share);
  } else if (m.tile_prior && m.tile_prior->residual) {
    m.tile_prior->network_share = ChooseNetworkShare(share_scores);
  }
  return m;
}

absl::StatusOr<int64_t> PublishRun(const std::string& run_dir, const Registry& registry, int keep,
                                   int require_folds, bool* already_published, double network_share) {
  if (require_folds > 0) {
    absl::StatusOr<std::vector<FoldResult>> done = ReadFoldResults(run_dir);
    if (!done.ok()) return done.status();
    if (static_cast<int>(done->size()) < require_folds) {
      std::vector<int> folds;
      for (const FoldResult& r : *done) folds.push_back(r.fold);
      std::sort(folds.begin(), folds.end());
      return absl::FailedPreconditionError(absl::StrCat(run_dir, ": ", done->size(), " of the ", require_folds,
                                                        " required folds have finished training (done: ",
                                                        folds.empty() ? "none" : absl::StrJoin(folds, ", "),
                                                        "); nothing was published"));
    }
  }
  absl::StatusOr<Manifest> m = RunManifest(run_dir, keep, network_share);
  if (!m.ok()) return m.status();
  for (FoldEntry& f : m->folds) f.weights = absl::StrCat(run_dir, "/", f.weights);  // the source files
  return PublishLoadable(registry, *m, already_published);
}

}  // namespace tgraph
