// Network weights as .npz (one float32 array per named parameter) and loading a
// published registry version into ready-to-score fold networks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/registry.h"
#include "model/tgraph_net.h"

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

// Reads and verifies a registry version (checksums), then LoadFolds.
absl::StatusOr<LoadedModel> LoadModel(const Registry& registry, const std::string& collection, int64_t version);

}  // namespace tgraph
