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
absl::StatusOr<int64_t> PublishRun(const std::string& run_dir, const Registry& registry, int keep,
                                   int require_folds = 0, bool* already_published = nullptr);

// The manifest a run would publish, fold weights relative to the run dir
// ("fold_3/best.npz"): LoadFolds(manifest, run_dir) scores with an unpublished run.
absl::StatusOr<Manifest> RunManifest(const std::string& run_dir, int keep);

}  // namespace tgraph
