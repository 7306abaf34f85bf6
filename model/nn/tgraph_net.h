// The ranking networks in LibTorch: TGraph (TGraph paper 2.3, with the ablation
// switches of table 3 and the tile collection's late fusion) and the TpuGraphs
// baseline (GraphSAGE with residuals, no attention). Lower score = predicted faster.
//
// Threads: Score and Precompute may run on several threads at once on one network in
// eval mode under torch::NoGradGuard (the server's workers share a loaded model's
// folds): they read the weights and build the inference weights per call. The Set*
// calls, train() and optimiser steps must not overlap with them: the ModelManager calls
// the setters once, before a model reaches any request. Outputs are the caller's.
//
// The TGraph block is written three times; change them together:
//   tgraph_net.cc    the plain LibTorch form, the one training differentiates;
//   chunked_block.cc the inference form, chunk by chunk in bounded memory;
//   block_kernels.cc the fused loops the chunked form calls (no LibTorch).
// tests/net_test.cc binds them: "the fused inference path, folded or not, computes what
// the training path computes" and "a configuration scored against a recorded reference
// is what training computes for it beside that reference" (tests/chunked_block_test.cc
// checks each kernel alone).
#pragma once

#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/container/modulelist.h>

#include "model/nn/features.h"
#include "model/core/model_spec.h"
#include "model/nn/chunked_block.h"  // CrossStats

namespace tgraph {

// What a forward pass needs beyond the graph: for layout collections the
// configurations [C, nc, 18] (MakeLayoutConfigTensor); for tile, [C, 24] config_feat.
struct ConfigBatch {
  torch::Tensor layout;  // int64 [C, nc, 18], or undefined
  torch::Tensor tile;    // float [C, 24], or undefined
  int64_t size() const { return layout.defined() ? layout.size(0) : tile.size(0); }
};

// The part of a forward pass that does not depend on the configurations, computed
// once per graph and model (fold) and reusable for every batch of that graph.
struct StaticEncoding {
  torch::Tensor node_in;    // [N, H] f_in output for nodes with the all-default config
  torch::Tensor config_h0;  // [nc, H] first f_in layer of the configurable nodes, before config terms
  torch::Tensor graph_emb;  // tile only: [1, H] pooled encoder output
};

// A reference's cross-attention statistics for every graph block of one network and
// graph (model/nn/chunked_block.h, CrossStats; model/nn/scoring.h says what the reference is).
struct CrossReference {
  std::vector<CrossStats> blocks;
  int64_t count = 0;  // configurations in the reference
};

// How a batch's configurations meet TGraph's cross-attention (ignored by networks
// without it). By default the batch is its own reference: the paper's softmax over the
// batch. `members`: only the batch's first `members` configurations are the reference,
// and each other one joins the reference's softmax alone (training takes this path to
// train as inference scores). Inference only: `use` scores every configuration against
// a recorded reference; `record` receives the statistics of the batch's own reference.
// `groups`: the reference is cut into that many near-equal groups, each its own softmax,
// and every configuration's attention weights are averaged over them (a recorded
// reference keeps the groups it was recorded with).
struct ScoreMode {
  int64_t members = -1;
  int64_t groups = 1;
  const CrossReference* use = nullptr;
  CrossReference* record = nullptr;
};

class RankingNet : public torch::nn::Module {
 public:
  virtual ~RankingNet() = default;
  virtual StaticEncoding Precompute(const GraphTensors& g) = 0;
  // Scores [C] for a batch. With `cached` from Precompute of the same graph the result
  // equals the uncached one (tested to 1e-5); without, Precompute runs first.
  torch::Tensor Score(const GraphTensors& g, const ConfigBatch& batch, const StaticEncoding* cached = nullptr,
                      const ScoreMode& mode = {}) {
    if (cached) return ScoreCached(g, batch, *cached, mode);
    return ScoreCached(g, batch, Precompute(g), mode);
  }
  // Whether the scores of this network depend on the other configurations of a batch
  // (TGraph with cross-attention on layout graphs).
  virtual bool UsesReference() const { return false; }
  const ModelSpec& spec() const { return spec_; }
  // Inference only (no autograd): whether TGraph folds f1 into the neighbour half of
  // f2, which are linear with nothing between them (on by default; the same function,
  // half the matmul work of the graph blocks). Training always runs the layers as
  // specified. The baseline ignores it.
  virtual void SetInferenceFolding(bool fold) {}
  virtual bool InferenceFolding() const { return false; }
  // Inference only: the precision of TGraph's graph-block matmuls (the dominant cost).
  // kBFloat16 runs them on bf16 copies of their inputs and weights and reads their
  // outputs in the chunked block's SAGE pass; the residual stream, normalisations,
  // attention and pooling stay fp32, and weights stay fp32. The baseline ignores it.
  virtual void SetInferencePrecision(Precision p) {}
  virtual Precision InferencePrecision() const { return Precision::kFloat32; }
  // Inference only: rows (nodes x configurations) per chunk of TGraph's chunked graph
  // blocks (model/nn/chunked_block.h; default kDefaultChunkRows). A tuning knob: any value
  // gives the same scores up to summation order. The baseline ignores it.
  virtual void SetInferenceChunkRows(int64_t rows) {}

 protected:
  explicit RankingNet(ModelSpec spec) : spec_(std::move(spec)) {}
  virtual torch::Tensor ScoreCached(const GraphTensors& g, const ConfigBatch& batch, const StaticEncoding& cached,
                                    const ScoreMode& mode) = 0;
  ModelSpec spec_;
};

// Builds the network a spec describes, with freshly initialised weights.
std::shared_ptr<RankingNet> MakeRankingNet(const ModelSpec& spec);

// FLOPs (2 x multiply-adds of the matmuls) of one forward pass, for benchmarks: N
// pruned nodes, nc configurable, E edges, C configs; `folded`: as the inference path
// executes them with SetInferenceFolding(true), else the architecture as specified.
double ForwardFlops(const ModelSpec& spec, int64_t n, int64_t nc, int64_t e, int64_t c, bool folded = false);

}  // namespace tgraph
