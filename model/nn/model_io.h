// Network weights as .npz (one float32 array per named parameter) and loading a
// published registry version into ready-to-score fold networks.
// Stateless: any thread. A LoadedModel is immutable once returned; the server shares it
// between requests (shared_ptr, model/nn/tgraph_net.h says what may run concurrently).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tile/tile_space.h"
#include "model/nn/scoring.h"
#include "model/nn/tgraph_net.h"
#include "model/store/registry.h"

namespace tgraph {

absl::Status SaveWeights(RankingNet& net, const std::string& path);
// Every parameter must be present with its exact shape, and nothing else: errors
// name the file and the parameter.
absl::Status LoadWeights(RankingNet& net, const std::string& path);

struct LoadedModel {
  Manifest manifest;
  std::vector<std::shared_ptr<RankingNet>> folds;  // in eval mode
};

// Builds the networks of a manifest's spec and loads every fold's weights; weight
// paths are relative to `dir` unless absolute.
absl::StatusOr<LoadedModel> LoadFolds(const Manifest& manifest, const std::string& dir);

// Publishes `manifest` (FoldEntry::weights are the source files) after loading every
// fold as a server will: a weight file that is truncated, does not fit the architecture
// or holds NaN is an error and nothing is published. Registry::Publish's idempotency
// applies (*already_published).
absl::StatusOr<int64_t> PublishLoadable(const Registry& registry, const Manifest& manifest,
                                        bool* already_published = nullptr);

// Scoring a tile problem with a published model: its prior's values for `problem` in
// `so` (ScoringOptions::tile_prior), following the problem's measured configurations
// `own` when given (TilePrior::For). `kernel`: the kernel searched for (TileKernelId::Key;
// "" none): a prior's problems fine-tuned from a farm's measurements count for their own
// kernel only. `more`: other measured problems of that kernel (the measurement store's)
// that join the prior's before it is read; they count only in a prior of measured
// problems (not a fixed table). Returns how many of `more` joined. Nothing when the model
// has no prior.
inline int64_t UseTilePrior(const Manifest& m, const GemmProblem& problem, ScoringOptions* so,
                            const std::vector<MeasuredTile>& own = {},
                            const std::vector<KnownTileProblem>* more = nullptr, const std::string& kernel = "") {
  if (!m.tile_prior) return 0;
  const bool joins = more != nullptr && !more->empty() && !m.tile_prior->measured.problems().empty();
  if (!joins && !m.tile_prior->measured.HasKernelProblems()) {
    so->tile_prior = std::make_shared<const TilePriorValues>(m.tile_prior->For(problem, own));
    return 0;
  }
  TilePrior with = *m.tile_prior;
  static const std::vector<KnownTileProblem> kNone;
  with.measured = with.measured.ForKernel(kernel, joins ? *more : kNone, &with.bandwidth);
  with.problems = static_cast<int64_t>(with.measured.problems().size());
  so->tile_prior = std::make_shared<const TilePriorValues>(with.For(problem, own));
  return joins ? static_cast<int64_t>(more->size()) : 0;
}

// Reads and verifies a registry version (checksums), then LoadFolds.
absl::StatusOr<LoadedModel> LoadModel(const Registry& registry, const std::string& collection, int64_t version);

// The same with version 0 meaning the newest published one (the tools' --version 0);
// *loaded (optional) gets the version loaded.
absl::StatusOr<LoadedModel> LoadModelOrLatest(const Registry& registry, const std::string& collection,
                                              int64_t version, int64_t* loaded = nullptr);

}  // namespace tgraph
