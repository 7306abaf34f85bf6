#include "server/search_jobs.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/tile/tile_space.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/model_io.h"
#include "model/search/layout_search.h"
#include "model/search/search_policy.h"
#include "model/search/tile_search.h"
#include "model/store/stored_layouts.h"
#include "model/tools/tool.h"

namespace tgraph {
namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

std::vector<int8_t> Rows(absl::string_view bytes) {
  return std::vector<int8_t>(reinterpret_cast<const int8_t*>(bytes.data()),
                             reinterpret_cast<const int8_t*>(bytes.data()) + bytes.size());
}

absl::Status NonFiniteError(const SearchRequest& q, const Admitted& a) {
  return absl::InternalError(absl::StrCat("model ", q.collection, " version ", a.model.version,
                                          " gave a non-finite score; nothing is proposed"));
}

// The request's rows (`given`) joined with the store's of its graph (JoinMeasured), or
// nullopt when the store has none to add (the request then runs as it came). Shards the
// store could not read, and stored rows this graph cannot run (outside its registered
// space: a module registered since with its exact ranks; a runtime out of range), are
// logged and left out. The store's own errors are UNAVAILABLE to the client, their path
// in the log only.
absl::StatusOr<std::optional<JoinedMeasurements>> JoinStored(const SearchRequest& q, const StoredGraph& graph,
                                                             const std::vector<int8_t>& given,
                                                             const std::function<bool()>& cancelled,
                                                             SearchOutcome* out) {
  absl::StatusOr<GraphMeasurements> stored =
      q.stored_measurements(q.graph_hash, JoinedRowLimit(graph.num_config_nodes), cancelled);
  if (!stored.ok()) {
    if (stored.status().code() == absl::StatusCode::kCancelled) return stored.status();
    LogWarning(absl::StrCat("measurement store: reading graph ", q.graph_hash, "'s reports: ", stored.status().message()));
    return absl::UnavailableError("the measurement store could not be read (the server's log says why); search "
                                  "without include_stored_measurements, or retry");
  }
  out->older_stored_reports = stored->older_shards;
  for (const std::string& why : stored->skipped) LogWarning(absl::StrCat("measurement store: left out ", why));
  std::vector<int8_t> rows;
  std::vector<int64_t> runtimes;
  const size_t row = static_cast<size_t>(graph.num_config_nodes) * kConfigFeatDim;
  int64_t unfit = 0;
  if (stored->count > 0 && stored->num_config_nodes != graph.num_config_nodes) {
    LogWarning(absl::StrCat("measurement store: graph ", q.graph_hash, "'s shards have ", stored->num_config_nodes,
                            " configurable nodes, the registered graph ", graph.num_config_nodes, "; none joined"));
  } else {
    for (int64_t i = 0; i < stored->count; ++i) {
      const int8_t* r = stored->rows.data() + static_cast<size_t>(i) * row;
      const int64_t ns = stored->runtime_ns[static_cast<size_t>(i)];
      if (ns <= 0 || ns > kMaxRuntimeNs || !FirstIllegalLayoutRow(graph.space, r, 1).empty()) {
        ++unfit;
        continue;
      }
      rows.insert(rows.end(), r, r + row);
      runtimes.push_back(ns);
    }
  }
  if (unfit > 0)
    LogWarning(absl::StrCat("measurement store: ", unfit, " stored rows of graph ", q.graph_hash,
                            " are outside its registered space or have a runtime out of range; not joined"));
  if (rows.empty()) return std::optional<JoinedMeasurements>();
  JoinedMeasurements j = JoinMeasured(given, q.exclude_runtimes_ns, rows, runtimes, graph.num_config_nodes);
  out->stored_measurements = j.stored;
  if (j.stored == 0) return std::optional<JoinedMeasurements>();
  return std::optional<JoinedMeasurements>(std::move(j));
}

}  // namespace

int64_t SearchWorkingBytes(const SearchRequest& q, const StoredGraph& graph) {
  constexpr int64_t kHashedRowOverhead = 64;  // a set node and a string header per row
  const int64_t row = graph.num_config_nodes > 0 ? graph.num_config_nodes * kConfigFeatDim
                                                 : kTileConfigDim * static_cast<int64_t>(sizeof(float));
  const int64_t evaluations = q.max_evaluations > 0 ? q.max_evaluations : kDefaultSearchEvaluations;
  const int64_t excluded = std::max<int64_t>(0, q.num_exclude);
  const int64_t given = excluded + std::max<int64_t>(0, q.num_start) + std::max<int64_t>(0, q.num_candidates);
  int64_t bytes = 4 * evaluations * (row + kHashedRowOverhead) + 2 * given * (row + kHashedRowOverhead);
  // The store's reports read (a shard at a time: its graph and at most kMaxJoinedRowBytes
  // of rows, beside the newest shard's graph, kept to compare) and joined: the joined rows
  // held while reading, then twice more (the exclude and measured copies, hashed keys).
  if (q.include_stored && q.stored_measurements && graph.num_config_nodes > 0)
    bytes += 2 * graph.bytes() + kMaxJoinedRowBytes +
             5 * (excluded + JoinedRowLimit(graph.num_config_nodes)) * (row + kHashedRowOverhead);
  return bytes;
}

absl::StatusOr<SearchOutcome> RunLayoutSearch(const SearchRequest& q, const Admitted& a, const EncodedGraph& graph,
                                              const std::function<bool()>& cancelled, SearchOutcome out) {
  const LoadedModel& model = *a.model.model;
  const std::vector<FoldModel> folds = graph.Folds(model.folds);
  std::vector<int8_t> start = Rows(q.start_layout_configs);
  const std::vector<int8_t> candidates = Rows(q.candidate_layout_configs);
  const int64_t groups = static_cast<int64_t>(a.graph->space.nodes.size());
  // The measured rows: the request's, and the store's when it asks (then joined copies).
  std::vector<int8_t> exclude = Rows(q.exclude_layout_configs);
  JoinedMeasurements joined;
  const std::vector<int8_t>* measured = &exclude;
  const std::vector<int64_t>* runtimes = &q.exclude_runtimes_ns;
  if (q.include_stored && q.stored_measurements) {
    absl::StatusOr<std::optional<JoinedMeasurements>> j = JoinStored(q, *a.graph, exclude, cancelled, &out);
    if (!j.ok()) return j.status();
    if (*j) {
      joined = std::move(**j);
      exclude.swap(joined.exclude);
      measured = &joined.measured;
      runtimes = &joined.runtimes_ns;
      if (q.num_start == 0) start.swap(joined.fastest);
    }
  }
  // The search's policy (model/search/search_policy.h), within the admitted budget.
  SearchBudget budget = ModelSearchBudget(model.manifest);
  budget.batch_size = a.batch_size;
  budget.max_reference = a.max_reference;
  SearchOptions so = SearchPolicy(q.num_results, q.max_evaluations, q.seed, budget, q.max_changed_groups);
  out.max_changed_groups = so.radius;
  so.start = &start;
  out.start_configs = static_cast<int64_t>(start.size() / std::max<size_t>(1, static_cast<size_t>(groups) * kConfigFeatDim));
  so.exclude = &exclude;
  if (q.num_candidates > 0) so.candidates = &candidates;
  so.scoring.cancelled = cancelled;
  const auto t0 = Clock::now();
  // What the measured runtimes say about this graph, and variation for a loop that
  // stopped improving (model/search/search_policy.h).
  absl::StatusOr<std::optional<MeasuredCorrection>> correction = CorrectionFor(*measured, *runtimes, groups);
  if (!correction.ok())  // the request was validated: a bug
    return absl::InternalError(absl::StrCat("fitting the measured runtimes: ", correction.status().message()));
  if (*correction) {
    so.correction = &**correction;
    out.correction_measurements = (*correction)->measurements();
  }
  const Variation variation = VariationFor(so.results, *measured, *runtimes, groups);
  so.variation = variation.rows;
  so.variation_parents = &variation.parents;
  const SearchResult r = SearchLayouts(folds, graph.tensors, a.graph->space, so);
  out.timing.inference_ms = Ms(t0, Clock::now());
  if (r.cancelled) return absl::CancelledError("the search was cancelled or its deadline passed; it stopped");
  out.evaluations = r.evaluations;
  if (CountNonFinite(r.score) > 0) return NonFiniteError(q, a);
  out.rows = r.rows;
  out.scores.assign(r.score.begin(), r.score.end());
  out.spread.assign(r.spread.begin(), r.spread.end());
  out.generations = r.generations;
  out.reference_configs = r.reference;
  out.reference_rows = r.reference_rows;
  out.correction_weight = so.correction ? r.correction_weight : 0.0;
  out.variation = r.variation;
  out.timing.rescored = static_cast<int64_t>(r.score.size());
  return out;
}

// Every legal configuration of the kernel's problem not yet measured, scored by every
// fold; the prior follows the exclude rows' runtimes when given.
absl::StatusOr<SearchOutcome> RunTileSearch(const SearchRequest& q, const Admitted& a, const EncodedGraph& graph,
                                            const std::function<bool()>& cancelled, SearchOutcome out) {
  const LoadedModel& model = *a.model.model;
  const TileSpace& space = *model.manifest.tile_space;
  if (!a.graph->gemm_problem.ok()) return absl::InternalError(a.graph->gemm_problem.status().message());  // admitted
  const GemmProblem& problem = *a.graph->gemm_problem;
  std::vector<TritonTile> exclude;
  std::vector<MeasuredTile> measured;
  for (int64_t r = 0; r < q.num_exclude; ++r) {
    float row[kTileConfigDim];
    std::memcpy(row, q.exclude_tile_configs.data() + r * sizeof(row), sizeof(row));
    exclude.push_back(TritonTileOfRow(row));
    if (!q.exclude_runtimes_ns.empty())
      measured.push_back({exclude.back(), static_cast<double>(q.exclude_runtimes_ns[static_cast<size_t>(r)])});
  }
  TileSearchOptions so;
  so.num_results = q.num_results > 0 ? q.num_results : kDefaultSearchResults;
  so.exclude = &exclude;
  so.scoring.batch_size = a.batch_size;
  so.scoring.reference_size = model.manifest.reference_configs;
  so.scoring.max_reference = a.max_reference;
  so.scoring.reference_groups = model.manifest.reference_groups;
  so.scoring.cancelled = cancelled;
  // A kernel's measurements count on the GPU they ran on only: the one the request
  // names, or the model's.
  TileKernelId kernel = q.kernel;
  if (!kernel.name.empty() && kernel.gpu.empty()) kernel.gpu = space.gpu;
  const std::shared_ptr<const std::vector<KnownTileProblem>> stored =
      !kernel.name.empty() && q.kernel_problems ? q.kernel_problems(kernel.Key()) : nullptr;
  out.kernel_problems = UseTilePrior(model.manifest, problem, &so.scoring, measured, stored.get(),
                                     kernel.name.empty() ? "" : kernel.Key());
  out.correction_measurements = so.scoring.tile_prior ? so.scoring.tile_prior->measurements : 0;
  if (stored) {
    // The store names a kernel's problems by their graph's hash: this graph's are this
    // problem's own timings.
    for (const KnownTileProblem& known : *stored) {
      if (known.name != q.graph_hash) continue;
      for (size_t i = 0; i < known.tiles.size(); ++i) {
        out.measured_tile_names.push_back(known.tiles[i].Name());
        out.measured_runtimes_ns.push_back(static_cast<int64_t>(known.runtime[i]));
      }
      break;
    }
  }
  const auto t0 = Clock::now();
  const TileSearchResult r = SearchTiles(graph.Folds(model.folds), graph.tensors, space, problem, so);
  out.timing.inference_ms = Ms(t0, Clock::now());
  if (r.cancelled) return absl::CancelledError("the search was cancelled or its deadline passed; it stopped");
  out.evaluations = r.evaluations;
  if (CountNonFinite(r.score) > 0) return NonFiniteError(q, a);
  out.tile_rows = r.rows;
  for (const TritonTile& t : r.tiles) out.tile_names.push_back(t.Name());
  out.scores.assign(r.score.begin(), r.score.end());
  out.spread.assign(r.spread.begin(), r.spread.end());
  out.reference_configs = r.reference;
  out.timing.rescored = static_cast<int64_t>(r.score.size());
  return out;
}

}  // namespace tgraph
