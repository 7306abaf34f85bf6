// Graph families of the synthetic dataset (docs/synthetic-data.md): vision-style `xla` programs,
// BERT-style `nlp` encoders, and the fused kernels of the tile collection.
#pragma once

#include <string>
#include <vector>

#include "model/synth/hlo_builder.h"
#include "model/core/rng.h"

namespace tgraph::synth {

using tgraph::Rng;

struct BuiltGraph {
  std::string kind;  // short description used in the file name, e.g. "resnet_b8_c64"
  std::vector<SynthNode> nodes;
};

// Convolution stacks (conv, bias, batch-norm as multiply/add, relu as maximum, residual
// adds, reduce-window pooling), a reshape to 2-D and dense layers; sometimes an
// attention block. Aims at about target_nodes nodes.
BuiltGraph MakeXlaGraph(Rng& rng, int target_nodes);

// BERT-style encoder layers (QKV dots, head reshape/transpose, softmax, context dot,
// output dot, residual add, layer norm, gelu feed-forward). Aims at target_nodes.
BuiltGraph MakeNlpGraph(Rng& rng, int target_nodes);

// A fused kernel of 5-60 nodes around one convolution, dot or reduction.
struct TpuKernel {
  BuiltGraph graph;
  int main = -1;            // index of the convolution / dot / reduce
  Shape out;                // output shape of the main op (the tiled iteration space)
  int64_t contract = 1;     // contracting size: dot K, conv Cin, reduce extent
  int64_t window = 1;       // conv kh * kw
  int64_t kh = 1, kw = 1, stride = 1;
  ElemType elem = ElemType::kBF16;
  int tail_ops = 0;         // elementwise ops fused after the main op
};
TpuKernel MakeTpuKernel(Rng& rng, int target_nodes);

}  // namespace tgraph::synth
