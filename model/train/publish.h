// Publishing a training run's best folds to the model registry, as a manifest the
// server loads. Stateless: any thread (the registry makes concurrent publishes safe).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/store/registry.h"

namespace tgraph {

// Publishes the best `keep` completed folds of a run as a new version. With
// require_folds > 0, fails (FAILED_PRECONDITION, nothing published) until at least that
// many folds have completed: a publish step scheduled after parallel fold jobs. Every
// fold is loaded before anything is published (PublishLoadable); publishing the same
// run again returns the version that already holds it (*already_published).
// network_share: -1, the kept folds' validation chooses what a tile model's network
// counts beside its prior; 0..1, this share (one chosen on shapes unlike the training
// grid, `tgraph-eval --tile_network_share`), recorded in the manifest's training flags.
// A share given to a run without a prior trained beside its network is
// FAILED_PRECONDITION.
absl::StatusOr<int64_t> PublishRun(const std::string& run_dir, const Registry& registry, int keep,
                                   int require_folds = 0, bool* already_published = nullptr,
                                   double network_share = -1);

// The manifest a run would publish, fold weights relative to the run dir
// ("fold_3/best.npz"): LoadFolds(manifest, run_dir) scores with an unpublished run.
absl::StatusOr<Manifest> RunManifest(const std::string& run_dir, int keep, double network_share = -1);

}  // namespace tgraph
