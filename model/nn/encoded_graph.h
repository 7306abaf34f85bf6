// One graph as every fold of a model sees it: the graph's tensors and each fold's
// configuration-independent encoding of them (RankingNet::Precompute), computed once and
// shared by every scoring of that graph with that model: the server's tensor cache, the
// benches and the tests.
//
// Threads: EncodeGraph runs the folds' Precompute on the calling thread (under no-grad);
// an EncodedGraph is immutable afterwards and may be read by any number of threads at
// once. Folds() borrows it: the FoldModels point into it and into the networks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/nn/features.h"
#include "model/nn/scoring.h"

namespace tgraph {

struct EncodedGraph {
  GraphTensors tensors;
  std::vector<StaticEncoding> encodings;  // one per fold, in the model's order
  int64_t bytes = 0;                      // tensors and encodings, for cache accounting

  // The folds to score with over these encodings: `which` (indices into `nets`, already
  // validated) or, when empty, every fold, each with its index in the model.
  std::vector<FoldModel> Folds(const std::vector<std::shared_ptr<RankingNet>>& nets,
                               const std::vector<int>& which = {}) const;
};

// `tensors` encoded by every one of `nets` (in the mode each is in: eval for inference).
EncodedGraph EncodeGraph(GraphTensors tensors, const std::vector<std::shared_ptr<RankingNet>>& nets);

}  // namespace tgraph
