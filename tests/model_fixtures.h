// Test helpers that need LibTorch: a scratch world with tiny synthetic data and a
// registry of untrained (but fixed) models, and the evaluator's scoring path.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "model/nn/model_io.h"
#include "model/store/registry.h"
#include "model/nn/scoring.h"
#include "model/synth/generator.h"
#include "model/train/train_data.h"
#include "tests/test_util.h"

namespace tgraph {

struct ModelWorld {
  TempDir dir;
  std::string data, registry;
  int64_t batch_size = 16;
  int tta = 3;
  uint64_t next_seed = 1;
  Provenance provenance;  // what Publish's manifests say they were trained on (default: unknown)
  std::optional<TileSpace> tile_space;  // what Publish's manifests carry (default: none)
  std::optional<TilePrior> tile_prior;  // likewise
  std::map<std::string, std::string> training;  // the trainer's flags Publish's manifests record

  ModelWorld(uint64_t seed, const std::vector<std::string>& collections) {
    data = dir.path() + "/data";
    registry = dir.path() + "/registry";
    synth::GenerateOptions o;
    o.out = data;
    o.preset = "tiny";
    o.seeds = {seed};
    for (const std::string& c : collections) o.collections.push_back(*ParseCollection(c));
    if (absl::Status s = synth::Generate(o).status(); !s.ok()) {
      std::fprintf(stderr, "ModelWorld: tgraph-synth into %s: %s\n", data.c_str(), std::string(s.message()).c_str());
      std::abort();
    }
  }

  // Publishes a model of `folds` folds of random weights; the service's behaviour
  // does not depend on how good the model is. Returns the version. `edit` changes each
  // fold's weights before they are saved (e.g. a NaN, as a diverged run saves them).
  // The weights are drawn from `seed`, or from the world's next seed when 0 (each
  // publish a new model): LibTorch seeds its default generator nondeterministically,
  // and a test whose figures depend on unseeded weights is flaky.
  int64_t Publish(const std::string& collection, int folds, int64_t hidden = 16,
                  const std::function<void(RankingNet&)>& edit = nullptr, uint64_t seed = 0) {
    if (seed == 0) seed = next_seed++;
    ModelSpec spec;
    spec.hidden = hidden;
    spec.kind = ParseCollection(collection)->kind;
    Manifest m;
    m.collection = collection;
    m.spec = spec;
    m.batch_size = batch_size;
    m.tta = tta;
    m.provenance = provenance;
    m.tile_space = tile_space;
    m.tile_prior = tile_prior;
    m.training = training;
    for (int f = 0; f < folds; ++f) {
      torch::manual_seed(seed * 1000 + static_cast<uint64_t>(f));
      auto net = MakeRankingNet(spec);
      if (edit) {
        torch::NoGradGuard no_grad;
        edit(*net);
      }
      const std::string w = dir.path() + "/w" + std::to_string(f) + ".npz";
      if (absl::Status s = SaveWeights(*net, w); !s.ok()) {
        std::fprintf(stderr, "ModelWorld::Publish %s: %s\n", w.c_str(), std::string(s.message()).c_str());
        std::abort();
      }
      m.folds.push_back({f, 0.5, w, ""});
    }
    absl::StatusOr<int64_t> v = Registry(registry).Publish(m);
    if (!v.ok()) {
      std::fprintf(stderr, "ModelWorld::Publish %s: %s\n", collection.c_str(), std::string(v.status().message()).c_str());
      std::abort();
    }
    return *v;
  }

  GraphFile File(const std::string& collection, const std::string& split, int index = 0) const {
    return (*ListSplit(data, *ParseCollection(collection), split))[static_cast<size_t>(index)];
  }
};

// What tgraph-eval computes for a layout file: load, prune, build tensors with the
// manifest's statistics, score every config with the manifest's batch size (or
// `batch_size` when positive) and TTA.
inline ScoreResult EvaluatorScores(const LoadedModel& model, const GraphFile& file, int64_t batch_size = 0) {
  LoadOptions lo;
  lo.dedup = false;
  GraphData d = *LoadGraphData(file, "", CollectionKind::kLayout, lo);
  std::vector<int64_t> all(static_cast<size_t>(d.num_configs()));
  std::iota(all.begin(), all.end(), 0);
  const std::vector<int8_t> rows = d.LayoutRows(all);
  ScoringOptions so;
  so.batch_size = batch_size > 0 ? batch_size : model.manifest.batch_size;
  so.reference_size = model.manifest.reference_configs;
  if (batch_size > 0) so.max_reference = batch_size;  // as a server whose budget fits that batch
  so.reference_groups = model.manifest.reference_groups;
  std::vector<FoldModel> folds;
  for (const auto& net : model.folds) folds.push_back({net.get(), nullptr});
  return ScoreConfigs(folds, MakeGraphTensors(d.graph, d.config_nodes, model.manifest.stats),
                      ConfigRows{rows.data(), nullptr, d.num_configs(), d.configs.num_config_nodes}, so);
}

}  // namespace tgraph
