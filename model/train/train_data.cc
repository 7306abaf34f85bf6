#include "model/train/train_data.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "model/core/graph.h"
#include "model/core/graph_io.h"
#include "model/core/heap.h"
#include "model/core/rng.h"
#include "model/core/file_util.h"
#include "model/core/sha256.h"
#include "model/tile/tile_space.h"

namespace tgraph {

std::vector<int8_t> GraphData::LayoutRows(const std::vector<int64_t>& rows) const {
  std::vector<int8_t> out(rows.size() * configs.num_config_nodes * kConfigFeatDim);
  if (!spill) {
    configs.DecompressRows(rows, out.data());
    return out;
  }
  if (absl::Status s = spill->ReadRows(spill_offset, configs.num_config_nodes, rows, out.data()); !s.ok())
    throw std::runtime_error(absl::StrCat(name, ": ", s.ToString()));
  return out;
}

namespace {

std::string CodesDigest(const std::vector<uint32_t>& codes) {
  Sha256 h;
  h.Update(codes.data(), codes.size() * sizeof(uint32_t));
  return h.HexDigest();
}

// Moves g's configurations to the spill file when keeping them would take the
// configurations in memory past the budget.
absl::Status KeepOrSpill(GraphData& g, const LoadOptions& o, int64_t* in_memory) {
  const int64_t bytes = static_cast<int64_t>(g.configs.bytes());
  if (o.config_memory_bytes < 0 || *in_memory + bytes <= o.config_memory_bytes) {
    *in_memory += bytes;
    return absl::OkStatus();
  }
  if (!o.spill)
    return absl::ResourceExhaustedError(absl::StrCat(
        g.name, ": the configurations exceed the memory for them, and there is no spill file"));
  absl::StatusOr<int64_t> at = o.spill->Append(g.configs.codes);
  if (!at.ok()) return at.status();
  g.spill = o.spill;
  g.spill_offset = *at;
  std::vector<uint32_t>().swap(g.configs.codes);
  return absl::OkStatus();
}

}  // namespace

GraphData LayoutGraphData(LayoutGraph g, const std::string& name, const std::string& split, const LoadOptions& o) {
  GraphData d;
  d.name = name;
  d.split = split;
  if (o.dedup) DeduplicateConfigs(&g);
  d.original_nodes = g.graph.num_nodes;
  if (o.prune) {
    PrunedGraph p = PruneGraph(g.graph, g.node_config_ids);
    d.graph = std::move(p.graph);
    d.config_nodes = std::move(p.config_node_index);
  } else {
    d.graph = std::move(g.graph);
    d.config_nodes = g.node_config_ids;
  }
  d.configs = CompressedConfigs::Compress(g.config_feat.data(), g.num_configs, g.num_config_nodes());
  d.configs_digest = CodesDigest(d.configs.codes);
  d.target.assign(g.config_runtime.begin(), g.config_runtime.end());
  return d;
}

absl::StatusOr<GraphData> LoadGraphData(const GraphFile& file, const std::string& split, CollectionKind kind,
                                        const LoadOptions& o) {
  if (kind == CollectionKind::kLayout) {
    absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(file.path);
    if (!g.ok()) return g.status();
    return LayoutGraphData(std::move(*g), file.name, split, o);
  }
  absl::StatusOr<TileGraph> g = LoadTileGraph(file.path);
  if (!g.ok()) return g.status();
  GraphData d;
  d.name = file.name;
  d.split = split;
  d.original_nodes = g->graph.num_nodes;
  d.graph = std::move(g->graph);
  d.tile_feat = std::move(g->config_feat);
  d.target = TileTargets(*g);
  return d;
}

absl::StatusOr<std::vector<GraphData>> LoadCollectionData(const std::string& root, const Collection& c,
                                                          const std::vector<std::string>& splits,
                                                          const LoadOptions& o) {
  std::vector<std::pair<std::string, GraphFile>> files;
  for (const std::string& split : splits) {
    absl::StatusOr<std::vector<GraphFile>> f = ListSplit(root, c, split);
    if (!f.ok()) return f.status();
    for (GraphFile& g : *f) files.emplace_back(split, std::move(g));
  }
  if (files.empty())
    return absl::NotFoundError(absl::StrCat("collection ", c.name(), " under ", root, ": no .npz files"));
  std::vector<GraphData> out;
  out.reserve(files.size());
  int64_t in_memory = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    absl::StatusOr<GraphData> d = LoadGraphData(files[i].second, files[i].first, c.kind, o);
    if (!d.ok()) return d.status();
    if (c.kind == CollectionKind::kLayout) {
      if (absl::Status s = KeepOrSpill(*d, o, &in_memory); !s.ok()) return s;
      // The file's arrays, freed: give them back, or the largest file's stay resident.
      ReleaseFreedMemory(static_cast<int64_t>(d->configs.num_configs * d->configs.num_config_nodes * kConfigFeatDim) +
                         (int64_t{64} << 20));
    }
    out.push_back(std::move(*d));
    if (o.progress) o.progress(i + 1, files.size(), files[i].second.name);
  }
  std::sort(out.begin(), out.end(), [](const GraphData& a, const GraphData& b) { return a.name < b.name; });
  return out;
}

std::string DataFingerprint(const std::vector<GraphData>& graphs) {
  Sha256 h;
  for (const GraphData& g : graphs) {
    h.Update(g.name.data(), g.name.size());
    const std::string content = GraphContentHash(g.graph, g.config_nodes);
    h.Update(content.data(), content.size());
    h.Update(g.configs_digest.data(), g.configs_digest.size());
    h.Update(g.tile_feat.data(), g.tile_feat.size() * sizeof(float));
    h.Update(g.target.data(), g.target.size() * sizeof(double));
  }
  return h.HexDigest();
}

Provenance DataProvenance(const std::string& root, const std::vector<GraphData>& graphs) {
  Provenance p;
  absl::StatusOr<std::string> marker = ReadFile(root + "/SYNTHETIC.txt");
  if (marker.ok()) {
    p.data = "synthetic";
    p.dataset = marker->substr(0, std::min(marker->find('\n'), size_t{300}));
  } else {
    p.data = "real";
    p.dataset = root;
  }
  p.graphs = static_cast<int64_t>(graphs.size());
  for (const GraphData& g : graphs) p.configurations += g.num_configs();
  return p;
}

std::string BaseGraphName(const std::string& name) { return name.substr(0, name.find('@')); }

namespace {

// Graphs dealt to folds by a key: the keys in order, shuffled by the seed, round-robin.
std::vector<int> DealFolds(const std::vector<std::string>& keys, int num_folds, uint64_t seed) {
  std::vector<std::string> bases = keys;
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  std::vector<size_t> order(bases.size());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed ^ 0x5f0f01dULL);
  rng.Shuffle(order);
  std::map<std::string, int> fold_of_base;
  for (size_t i = 0; i < order.size(); ++i) fold_of_base[bases[order[i]]] = static_cast<int>(i % static_cast<size_t>(num_folds));
  std::vector<int> fold;
  for (const std::string& key : keys) fold.push_back(fold_of_base.at(key));
  return fold;
}

}  // namespace

std::vector<int> AssignFolds(const std::vector<GraphData>& graphs, int num_folds, uint64_t seed) {
  std::vector<std::string> keys;
  for (const GraphData& g : graphs) keys.push_back(BaseGraphName(g.name));
  return DealFolds(keys, num_folds, seed);
}

absl::StatusOr<FoldBy> ParseFoldBy(absl::string_view text) {
  for (FoldBy by : {FoldBy::kGraph, FoldBy::kM, FoldBy::kN, FoldBy::kK, FoldBy::kShape})
    if (text == FoldByName(by)) return by;
  return absl::InvalidArgumentError(
      absl::StrCat("--fold_by '", text, "': expected graph, m, n, k (problems of one size) or shape"));
}

std::string FoldByName(FoldBy by) {
  switch (by) {
    case FoldBy::kGraph: return "graph";
    case FoldBy::kM: return "m";
    case FoldBy::kN: return "n";
    case FoldBy::kK: return "k";
    case FoldBy::kShape: return "shape";
  }
  return "graph";
}

absl::StatusOr<std::vector<int>> AssignFolds(const std::vector<GraphData>& graphs, int num_folds, uint64_t seed,
                                             FoldBy by) {
  if (by == FoldBy::kGraph) return AssignFolds(graphs, num_folds, seed);
  std::vector<std::string> keys;
  for (const GraphData& g : graphs) {
    absl::StatusOr<GemmProblem> p = GemmProblemOfGraph(g.graph, g.name);
    if (!p.ok())
      return absl::InvalidArgumentError(absl::StrCat("--fold_by ", FoldByName(by),
                                                     " groups Triton matrix-product problems: ", p.status().message()));
    keys.push_back(by == FoldBy::kM   ? absl::StrCat("M", p->m)
                   : by == FoldBy::kN ? absl::StrCat("N", p->n)
                   : by == FoldBy::kK ? absl::StrCat("K", p->k)
                                      : absl::StrCat(p->m, "x", p->n, "x", p->k));
  }
  return DealFolds(keys, num_folds, seed);
}

void AttachTilePrior(const TilePrior& prior, const GemmProblem& problem, bool leave_shape_out, GraphData* g) {
  const TilePriorValues values = prior.For(problem, leave_shape_out);
  g->prior_offset.resize(static_cast<size_t>(g->num_configs()));
  for (int64_t i = 0; i < g->num_configs(); ++i)
    g->prior_offset[i] = values.weight * values.Of(TritonTileOfRow(g->tile_feat.data() + i * kTileConfigDim));
}

}  // namespace tgraph
