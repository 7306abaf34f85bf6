// The shortlist XLA's GEMM autotuner measures for a module's Triton GEMM fusions, and the
// model that makes it: never worse than XLA alone (each fusion's own XLA choice is in the
// list, first), and never from a model that does not describe XLA's GPU fusions.
//
// Two kinds of model rank XLA's configurations: a fusion model (tile@NAME trained on
// `tgraph-featurize fusions --logs` collections: XLA's own rows), or, when the server has
// none, the GPU's Triton tile model (a tile@NAME whose space is the Triton matrix
// product's, docs/tile-model.md): the same parameters under other names. Through the
// latter, an XLA configuration is ranked where the two agree (split_k 1, one CTA:
// BLOCK_M/N/K, warps and stages are the Triton kernel's), a batched product as one
// batch element's M x N x K, in the Triton model's own order of its space.
//
// Threads: one call at a time per RankerClient (the CLI's main thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "proto/model_codec.h"
#include "proto/xla_gpu_codec.h"

namespace tgraph {

struct ShortlistModel {
  std::string collection;
  bool triton = false;  // a Triton tile model, ranking XLA's space where the two agree
  std::string label;    // what made the shortlist, as printed beside it
  std::vector<std::string> warnings;
};

// The model among the server's `loaded` ones: `wanted` when loaded and of a fitting kind,
// else, when it is not loaded (or "" given), the only loaded Triton tile model of real
// measurements. A model of another kind (a layout collection, the TPU tile collection
// tile:xla, a tile space of another kernel, a model trained on synthetic data) is
// FAILED_PRECONDITION naming why, or with allow_any a warning; none to use is NOT_FOUND
// naming what is loaded.
absl::StatusOr<ShortlistModel> ChooseShortlistModel(const std::vector<ModelInfo>& loaded, const std::string& wanted,
                                                    bool allow_any);

// One fusion's shortlist: XLA's choice first, then the model's best of XLA's candidates
// (XlaGemmCandidates) not already in it, `top` in all; split_k above 1 only with
// allow_split_k (XLA's newer Triton autotuner refuses it: "no longer supports split-k").
// `notes` gets what a reader should know of this fusion (e.g. a problem the Triton model
// refuses: XLA's choice alone).
absl::StatusOr<std::vector<XlaGemmConfig>> FusionShortlist(RankerClient& client, const ShortlistModel& model,
                                                           const DecodedFusion& fusion, int64_t sm_count, int64_t top,
                                                           int64_t model_version, bool allow_split_k,
                                                           std::vector<std::string>* notes);

}  // namespace tgraph
