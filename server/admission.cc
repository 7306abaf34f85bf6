#include "server/admission.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/core/echo.h"
#include "model/core/layout_space.h"
#include "model/core/model_spec.h"
#include "model/tile/tile_space.h"
#include "model/nn/model_io.h"
#include "model/search/search_policy.h"
#include "proto/error_reason.h"

namespace tgraph {
namespace {

bool IsHexHash(const std::string& h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Rows no compiler could apply (model/core/layout_space.h), named by their field.
absl::Status CheckLegal(const LayoutSpace& space, absl::string_view field, absl::string_view bytes, int64_t count) {
  if (bytes.empty()) return absl::OkStatus();
  if (std::string bad = FirstIllegalLayoutRow(space, reinterpret_cast<const int8_t*>(bytes.data()), count);
      !bad.empty())
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", bad));
  return absl::OkStatus();
}

// The graph's matrix product against a model's tile space: a graph that is not one
// matrix product (INVALID_ARGUMENT), or of a dtype or variant the space never measured
// (FAILED_PRECONDITION). `what` says what the model does with it.
absl::Status CheckProblem(const TileSpace& space, const StoredGraph& graph, absl::string_view what) {
  if (!graph.gemm_problem.ok())
    return absl::InvalidArgumentError(absl::StrCat(graph.gemm_problem.status().message(), " (this model ", what,
                                                   " the configurations of one matrix product)"));
  return space.CheckProblem(*graph.gemm_problem);
}

// Tile rows outside a model's tile space: the graph's problem as CheckProblem, then a
// configuration that is not a candidate, one the compiler refused for the graph's kernel
// variant, or a row computed for another problem; named by field and row.
absl::Status CheckTileRows(const TileSpace& space, const StoredGraph& graph, absl::string_view field,
                           absl::string_view bytes, int64_t count) {
  if (bytes.empty()) return absl::OkStatus();
  if (absl::Status s = CheckProblem(space, graph, "ranks"); !s.ok()) return s;
  std::vector<float> row(kTileConfigDim);
  for (int64_t r = 0; r < count; ++r) {
    std::memcpy(row.data(), bytes.data() + r * kTileConfigDim * sizeof(float), kTileConfigDim * sizeof(float));
    if (absl::Status s = space.CheckRow(*graph.gemm_problem, row.data(), absl::StrCat(field, " row ", r)); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const StoredGraph>> Admission::RegisteredGraph(const std::string& graph_hash) const {
  if (!IsHexHash(graph_hash))
    return absl::InvalidArgumentError(
        absl::StrCat("graph_hash must be 64 lowercase hex digits (from RegisterGraph), got '", Echo(graph_hash), "'"));
  std::shared_ptr<const StoredGraph> graph = graphs_->Get(graph_hash);
  if (!graph)
    return WithErrorReason(absl::NotFoundError(absl::StrCat(
                               "graph ", graph_hash, " is not registered on this server: call RegisterGraph, then retry")),
                           kGraphNotRegistered);
  return graph;
}

absl::StatusOr<Admitted> Admission::Names(const std::string& collection, int64_t version,
                                          const std::string& graph_hash, CollectionKind* kind) const {
  absl::StatusOr<Collection> coll = ParseCollection(collection);
  if (!coll.ok()) return absl::InvalidArgumentError(absl::StrCat("collection: ", coll.status().message()));
  *kind = coll->kind;
  if (version < 0) return absl::InvalidArgumentError("model_version must be 0 (latest) or a version number");
  absl::StatusOr<std::shared_ptr<const StoredGraph>> graph = RegisteredGraph(graph_hash);
  if (!graph.ok() && graph.status().code() == absl::StatusCode::kInvalidArgument) return graph.status();
  absl::StatusOr<ModelHandle> model = models_->Get(collection, version);
  if (!model.ok()) return model.status();
  if (!graph.ok()) return graph.status();
  Admitted a{*model, std::move(*graph)};

  // The batch: the model's, made smaller when its activations would exceed the
  // per-request budget. The reference runs as one batch: the model's size, or a
  // request's up to the larger of that and the batch, both within the budget.
  const LoadedModel& loaded = *a.model.model;
  const int64_t nodes = a.graph->pruned.graph.num_nodes;
  const SearchBudget unlimited = ModelSearchBudget(loaded.manifest);
  a.batch_size = unlimited.batch_size;
  a.max_reference = unlimited.max_reference;
  const int64_t fits =
      ConfigsWithinBudget(loaded.manifest.spec, nodes, loaded.manifest.reference_groups, limits_.activation_bytes);
  if (fits == 0)
    return absl::ResourceExhaustedError(absl::StrCat(
        "the graph has ", nodes, " nodes after pruning: one configuration needs about ",
        ActivationBytesPerConfig(loaded.manifest.spec, nodes) >> 20, " MiB of activations at hidden ",
        loaded.manifest.spec.hidden, ", over this server's ", limits_.activation_bytes >> 20,
        " MiB per request (--activation_bytes)"));
  if (fits > 0) {
    a.batch_size = std::min(a.batch_size, fits);
    a.max_reference = std::min(a.max_reference, fits);
  }
  return a;
}

absl::StatusOr<Admitted> Admission::Rank(const RankRequest& q) const {
  CollectionKind kind;
  absl::StatusOr<Admitted> a = Names(q.collection, q.model_version, q.graph_hash, &kind);
  if (!a.ok()) return a.status();
  const StoredGraph& graph = *a->graph;
  if (absl::Status v = ValidateRankRequest(q, kind, graph.num_config_nodes,
                                           static_cast<int>(a->model.model->folds.size()), a->model.version,
                                           {limits_.max_configs, a->max_reference});
      !v.ok())
    return v;
  if (absl::Status s = CheckLegal(graph.space, "layout_configs", q.layout_configs, q.num_configs); !s.ok()) return s;
  if (absl::Status s =
          CheckLegal(graph.space, "reference_layout_configs", q.reference_layout_configs, q.num_reference_configs);
      !s.ok())
    return s;
  if (const std::optional<TileSpace>& tiles = a->model.model->manifest.tile_space) {
    if (absl::Status s = CheckTileRows(*tiles, graph, "tile_configs", q.tile_configs, q.num_configs); !s.ok()) return s;
    if (absl::Status s = CheckTileRows(*tiles, graph, "reference_tile_configs", q.reference_tile_configs,
                                       q.num_reference_configs);
        !s.ok())
      return s;
  }
  return a;
}

absl::StatusOr<Admitted> Admission::Search(const SearchRequest& q) const {
  CollectionKind kind;
  absl::StatusOr<Admitted> a = Names(q.collection, q.model_version, q.graph_hash, &kind);
  if (!a.ok()) return a.status();
  const StoredGraph& graph = *a->graph;
  if (absl::Status v = ValidateSearchRequest(q, kind, graph.num_config_nodes, {limits_.max_configs, 0}); !v.ok())
    return v;
  if (kind == CollectionKind::kTile) {
    const std::optional<TileSpace>& tiles = a->model.model->manifest.tile_space;
    if (!tiles)
      return absl::FailedPreconditionError(
          absl::StrCat("collection ", q.collection, ": its model has no tile space (trained on tile data without "
                       "tile_space.json), so there is no space to search; rank rows with RankConfigs"));
    if (absl::Status s = CheckProblem(*tiles, graph, "searches"); !s.ok()) return s;
    if (absl::Status s = CheckTileRows(*tiles, graph, "exclude_tile_configs", q.exclude_tile_configs, q.num_exclude);
        !s.ok())
      return s;
    return a;
  }
  if (absl::Status s = CheckLegal(graph.space, "start_layout_configs", q.start_layout_configs, q.num_start); !s.ok())
    return s;
  if (absl::Status s = CheckLegal(graph.space, "exclude_layout_configs", q.exclude_layout_configs, q.num_exclude);
      !s.ok())
    return s;
  if (absl::Status s =
          CheckLegal(graph.space, "candidate_layout_configs", q.candidate_layout_configs, q.num_candidates);
      !s.ok())
    return s;
  return a;
}

absl::StatusOr<MeasurementReport> Admission::Report(const ReportRequest& q) const {
  absl::StatusOr<Collection> coll = ParseCollection(q.collection);
  if (!coll.ok()) return absl::InvalidArgumentError(absl::StrCat("collection: ", coll.status().message()));
  // Before any row is made from the request: a row count over the bound costs nothing.
  if (q.num_configs > limits_.max_report_rows)
    return absl::InvalidArgumentError(absl::StrCat("num_configs: ", q.num_configs, " rows in one report, over this "
                                                   "server's --max_report_rows (", limits_.max_report_rows,
                                                   "): split it into reports of at most that many"));
  absl::StatusOr<std::shared_ptr<const StoredGraph>> graph = RegisteredGraph(q.graph_hash);
  if (!graph.ok()) return graph.status();
  if (coll->kind == CollectionKind::kTile) return TileReport(q, *coll, **graph);
  if (!q.tile_names.empty() || !q.kernel.name.empty())
    return absl::InvalidArgumentError("tile_names, kernel: for tile collections; this is a layout collection");
  if ((*graph)->num_config_nodes == 0)
    return absl::InvalidArgumentError("graph_hash: this graph has no configurable nodes (a tile graph?); "
                                      "measurements are stored for layout graphs");
  MeasurementReport r;
  r.collection = *coll;
  r.graph_hash = q.graph_hash;
  r.graph = (*graph)->pruned.graph;
  r.node_config_ids = (*graph)->pruned.config_node_index;
  r.num_configs = q.num_configs;
  r.config_feat.assign(reinterpret_cast<const int8_t*>(q.layout_configs.data()),
                       reinterpret_cast<const int8_t*>(q.layout_configs.data()) + q.layout_configs.size());
  r.runtime_ns = q.runtimes_ns;
  r.source = q.source;
  r.report_id = q.report_id;
  // Sizes and values first (their errors name the field), then the rows' legality.
  if (absl::Status s = ValidateMeasurementReport(r); !s.ok()) return s;
  if (std::string bad = FirstIllegalLayoutRow((*graph)->space, r.config_feat.data(), r.num_configs); !bad.empty())
    return absl::InvalidArgumentError(absl::StrCat("layout_configs: ", bad));
  return r;
}

namespace {

// A tile collection holds one GPU's timings, its model's: `kernel` names that GPU (filled
// in when it names none), with the space's compute capability where both say one.
absl::Status OnCollectionsGpu(const TileSpace& space, const std::string& collection, int64_t version,
                              TileKernelId* kernel) {
  if (kernel->gpu.empty()) kernel->gpu = space.gpu;
  if (kernel->gpu != space.gpu)
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel.gpu: these timings ran on '", kernel->gpu, "', and ", collection, " (version ", version,
        ") holds timings of '", space.gpu, "' only: one GPU's timings never join another's searches (report them "
        "to a collection of that GPU, e.g. one trained on its own measurements)"));
  const std::string& cc = space.gpu_spec.compute_capability;
  if (!kernel->compute_capability.empty() && space.feature_set >= 2 && !cc.empty() && kernel->compute_capability != cc)
    return absl::InvalidArgumentError(absl::StrCat("kernel.compute_capability: '", kernel->compute_capability,
                                                   "', and ", collection, "'s GPU '", space.gpu, "' is ", cc));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MeasurementReport> Admission::TileReport(const ReportRequest& q, const Collection& coll,
                                                       const StoredGraph& graph) const {
  if (!q.layout_configs.empty())
    return absl::InvalidArgumentError("layout_configs: a tile collection's measurements are tile_names");
  if (q.kernel.name.empty())
    return absl::InvalidArgumentError("kernel: a tile report names the kernel measured (its name, and a hash of its "
                                      "source), so that two kernels never share measurements");
  if (absl::Status s = ValidateTileKernel(q.kernel, "kernel"); !s.ok()) return s;
  if (!graph.gemm_problem.ok())
    return absl::InvalidArgumentError(absl::StrCat(graph.gemm_problem.status().message(),
                                                   " (tile measurements are of one matrix product: register the kernel "
                                                   "with as_kernel)"));
  // As a search on it would be refused: a tile model reads a kernel graph.
  if (graph.num_config_nodes != 0)
    return absl::InvalidArgumentError(absl::StrCat("graph_hash: ", q.graph_hash, " was registered as a layout graph (",
                                                   graph.num_config_nodes, " configurable nodes); tile measurements "
                                                   "are of a kernel graph: register the module as one (as_kernel; Python: kernel=True)"));
  // The rows are the space's: its candidate values, and the GPU's SM count for the grid.
  absl::StatusOr<ModelHandle> model = models_->Get(coll.name(), 0);
  if (!model.ok()) return model.status();
  if (!model->model->manifest.tile_space)
    return absl::FailedPreconditionError(absl::StrCat(coll.name(), " version ", model->version,
                                                      " has no tile space: its rows cannot be made from names"));
  const TileSpace& space = *model->model->manifest.tile_space;
  TileKernelId kernel = q.kernel;
  if (absl::Status s = OnCollectionsGpu(space, coll.name(), model->version, &kernel); !s.ok()) return s;
  if (static_cast<int64_t>(q.tile_names.size()) != q.num_configs)
    return absl::InvalidArgumentError(absl::StrCat("tile_names: ", q.tile_names.size(), " configurations for num_configs ",
                                                   q.num_configs));
  const auto among = [](const std::vector<int64_t>& values, int64_t v) {
    return std::find(values.begin(), values.end(), v) != values.end();
  };
  MeasurementReport r;
  r.collection = coll;
  r.graph_hash = q.graph_hash;
  r.graph = graph.pruned.graph;
  r.num_configs = q.num_configs;
  r.kernel = kernel;
  r.runtime_ns = q.runtimes_ns;
  r.source = q.source;
  r.report_id = q.report_id;
  for (size_t i = 0; i < q.tile_names.size(); ++i) {
    absl::StatusOr<TritonTile> t = ParseTritonTile(q.tile_names[i]);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("tile_names[", i, "]: ", t.status().message()));
    if (!among(space.block_m, t->block_m) || !among(space.block_n, t->block_n) || !among(space.block_k, t->block_k) ||
        !among(space.num_warps, t->num_warps) || !among(space.num_stages, t->num_stages))
      return absl::InvalidArgumentError(absl::StrCat("tile_names[", i, "]: ", t->Name(), " is outside ", coll.name(),
                                                     "'s tile space (", space.Summary(), ")"));
    const std::array<float, kTileConfigDim> row = TritonTileFeatures(*graph.gemm_problem, *t, space.sm_count);
    r.tile_config_feat.insert(r.tile_config_feat.end(), row.begin(), row.end());
  }
  if (absl::Status s = ValidateMeasurementReport(r); !s.ok()) return s;
  return r;
}

}  // namespace tgraph
