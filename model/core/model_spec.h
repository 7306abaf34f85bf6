// The architecture and its hyperparameters, as stored in a model manifest. Torch-free
// so that the registry, server and tools can read it without the network's headers.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/dataset.h"

namespace tgraph {

// The scoring's reference groups (model/nn/scoring.h, ScoringOptions::reference_groups):
// a reference of `reference_configs` in groups of about a training batch of
// `training_batch` configurations, the size of the softmax the network was trained with:
// max(1, reference_configs / training_batch). Here, below the registry, because a
// manifest written before groups gets that of its training batch.
int64_t ReferenceGroups(int64_t reference_configs, int64_t training_batch);

// The network: TGraph (the paper's method) or the TpuGraphs paper's GraphSAGE baseline.
// Named "tgraph" / "tpugraphs-baseline" in manifests, flags and ListModels.
enum class Architecture { kTGraph, kTpuGraphsBaseline };
const char* ArchitectureName(Architecture a);
// INVALID_ARGUMENT "architecture 'x' is unknown; expected tgraph or tpugraphs-baseline".
absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name);

// The input of the cross-configuration softmax:
// kPaper: softmax(eta / T) over the configurations, as TGraph's 2.3 writes it;
// kStandardized: eta standardised over the configurations first (per node and channel),
// and the softmax weights scaled by the configuration count C, so that uniform weights
// give back eta at any batch size. Named "paper" / "standardized".
enum class CrossAttentionForm { kPaper, kStandardized };
const char* CrossAttentionFormName(CrossAttentionForm f);
// INVALID_ARGUMENT "cross_attention_form must be paper or standardized, got 'x'".
absl::StatusOr<CrossAttentionForm> ParseCrossAttentionForm(absl::string_view name);

struct ModelSpec {
  Architecture architecture = Architecture::kTGraph;
  CollectionKind kind = CollectionKind::kLayout;
  int64_t hidden = 256;           // f_in width and residual width (the paper's 256)
  int64_t blocks = 2;             // graph blocks (baseline: GraphSAGE layers)
  int64_t layout_embedding = 4;   // channels per layout / config slot
  int64_t opcode_embedding = 16;
  int64_t se_reduction = 8;       // channel self-attention bottleneck
  bool self_attention = true;     // ablation switches (TGraph table 3)
  bool cross_attention = true;
  bool edges = true;
  // Manifests without the key were written by the paper's form.
  CrossAttentionForm cross_attention_form = CrossAttentionForm::kStandardized;
  // Tile: hidden layers of the head that joins the graph embedding with the config
  // features (1..8; manifests without the key have 1). The configurations of one kernel
  // differ only in these features, and their runtime is a product of effects (waves x
  // K steps x per-step cost), which one layer fits poorly.
  int64_t tile_head_layers = 3;

  std::string ToJson() const;  // a JSON object
  static absl::StatusOr<ModelSpec> FromJson(const std::string& json, absl::string_view what);
  absl::Status Validate() const;
};

// The numeric precision of inference (RankingNet::SetInferencePrecision).
enum class Precision { kFloat32, kBFloat16 };

// The precision an inference flag asks for: "fp32", "bf16", or "auto" (bf16 where the
// CPU has native bf16 dot products, avx512_bf16; fp32 otherwise). INVALID_ARGUMENT for
// anything else, and for "bf16" on a CPU without them.
absl::StatusOr<Precision> ResolvePrecision(const std::string& flag);
bool CpuHasBf16();
const char* PrecisionName(Precision p);  // "fp32", "bf16"

// Activation memory of scoring one layout configuration of a graph of `pruned_nodes`
// nodes: the peak a forward pass holds grows as nodes x configurations x hidden, at
// 16 bytes per element in either precision, so precision is not an argument (measured with every node configurable, the
// worst case: 14.7 in bf16, 13.2 in fp32, the slope of tgraph-bench-model's peak RSS
// over N x C = 128k..512k at hidden 256). Tile graphs score
// configurations without per-node activations: 0.
int64_t ActivationBytesPerConfig(const ModelSpec& spec, int64_t pruned_nodes);

// The cross-attention reference's recorded statistics one fold holds while it scores a
// graph of `pruned_nodes` nodes against a reference in `groups` groups
// (model/nn/chunked_block.h, CrossStats): part of a request's activation memory.
int64_t ReferenceStatsBytes(const ModelSpec& spec, int64_t pruned_nodes, int64_t groups);

// The activation budget: the most configurations one forward pass (a batch, or the
// reference) may hold within `budget` bytes beside the reference's statistics; 0 when
// not even one fits; -1 when there is no limit (budget <= 0, or a tile graph, whose
// configurations need no per-node activations). The server and tgraph-bench-model cut
// batches and the reference with it.
int64_t ConfigsWithinBudget(const ModelSpec& spec, int64_t pruned_nodes, int64_t groups, int64_t budget);

// The server's budget per request when none is given (--activation_bytes 0): the
// memory the process may use (`available_bytes`: cgroup limit, else MemTotal) less
// its caches and 1 GiB for the rest of the process, shared by the workers that score
// at once; at least 256 MiB.
int64_t AutoActivationBytes(int64_t available_bytes, int64_t cache_bytes, int64_t graph_store_bytes, int workers);

}  // namespace tgraph
