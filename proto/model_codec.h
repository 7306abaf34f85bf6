// ListModels' one codec: a loaded model as tgraph.v1.ModelInfo (the server) and a
// tgraph.v1.ModelInfo as ModelInfo (the client library), so that the two sides cannot
// drift apart field by field. Pure functions: any thread; results are the caller's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/tile/tile_prior.h"
#include "model/store/registry.h"
#include "tgraph/v1/ranker.pb.h"

namespace tgraph {

// A loaded model as a client sees it.
struct ModelInfo {
  std::string collection;
  int64_t version = 0;                  // what model_version 0 ranks with
  std::vector<int64_t> loaded_versions;  // newest first; any may be pinned
  std::string architecture;
  int64_t hidden = 0, folds = 0;
  double mean_valid_score = 0;          // the folds' mean validation Kendall tau at training
  std::string created;
  int64_t batch_size = 0;
  int64_t reference_configs = 0;        // the default reference's size
  // What it was trained on (tgraph.v1.Provenance): "synthetic", "real" or "" (unknown).
  std::string data, dataset, data_fingerprint;
  int64_t graphs = 0, configurations = 0;
  int64_t finetunes = 0, finetune_graphs = 0, finetune_measurements = 0;
  bool synthetic_only = false;
  std::string provenance;  // the one-line summary
  std::string tile_space;  // a tile collection's configuration space (TileSpace JSON), or ""
  // A tile model's prior (tgraph.v1.TilePriorInfo): weight, network share and measured
  // problems, without the tables; none for the network alone.
  std::optional<TilePrior> tile_prior;
};

// A collection's newest loaded version (its manifest) and every loaded version, newest first.
void EncodeModelInfo(const std::string& collection, int64_t version, const Manifest& manifest,
                     const std::vector<int64_t>& loaded_versions, v1::ModelInfo* out);

ModelInfo DecodeModelInfo(const v1::ModelInfo& m);

}  // namespace tgraph
