#include "model/nn/encoded_graph.h"

#include <torch/torch.h>

namespace tgraph {

EncodedGraph EncodeGraph(GraphTensors tensors, const std::vector<std::shared_ptr<RankingNet>>& nets) {
  torch::NoGradGuard no_grad;
  EncodedGraph g;
  g.tensors = std::move(tensors);
  g.bytes = g.tensors.bytes();
  g.encodings.reserve(nets.size());
  for (const auto& net : nets) {
    g.encodings.push_back(net->Precompute(g.tensors));
    const StaticEncoding& e = g.encodings.back();
    g.bytes += HeldBytes(e.node_in) + HeldBytes(e.config_h0) + HeldBytes(e.graph_emb);
  }
  return g;
}

std::vector<FoldModel> EncodedGraph::Folds(const std::vector<std::shared_ptr<RankingNet>>& nets,
                                           const std::vector<int>& which) const {
  std::vector<FoldModel> folds;
  if (which.empty()) {
    for (size_t f = 0; f < nets.size(); ++f) folds.push_back({nets[f].get(), &encodings[f], static_cast<int>(f)});
  } else {
    for (int f : which) folds.push_back({nets[static_cast<size_t>(f)].get(), &encodings[static_cast<size_t>(f)], f});
  }
  return folds;
}

}  // namespace tgraph
