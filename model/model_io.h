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

// Reads and verifies the version (checksums), builds the networks of its spec and
// loads every fold.
absl::StatusOr<LoadedModel> LoadModel(const Registry& registry, const std::string& collection, int64_t version);

}  // namespace tgraph
