#include "server/ranker.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <set>

#include "absl/strings/str_cat.h"
#include "model/core/echo.h"
#include "model/nn/features.h"
#include "model/nn/model_io.h"
#include "proto/error_reason.h"
#include "model/core/preprocess.h"
#include "model/core/tile_space.h"
#include "model/search/layout_search.h"
#include "model/search/search_policy.h"
#include "model/search/tile_search.h"
#include "model/nn/scoring.h"

namespace tgraph {

struct Ranker::PreparedGraph {
  GraphTensors tensors;
  std::vector<StaticEncoding> encodings;  // one per fold of the model version
  int64_t bytes = 0;
};

size_t Ranker::PreparedKeyHash::operator()(const PreparedKey& k) const {
  return std::hash<std::string>()(k.first) ^ (std::hash<std::string>()(k.second.first) * 31) ^
         std::hash<int64_t>()(k.second.second) * 1000003;
}

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

int64_t TensorBytes(const torch::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

bool IsHexHash(const std::string& h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Ranker::Ranker(ModelManager* models, RankerOptions options)
    : models_(models),
      options_(options),
      graphs_(options.graph_store_bytes),
      prepared_(options.cache_bytes),
      pool_(std::make_unique<WorkerPool>(options.workers, options.queue_size)) {}

Ranker::~Ranker() { pool_.reset(); }

absl::StatusOr<RegisterResult> Ranker::Register(WireGraph g) {
  RegisterResult r;
  r.num_nodes = g.graph.num_nodes;
  r.num_config_nodes = static_cast<int64_t>(g.node_config_ids.size());
  absl::StatusOr<StoredGraphResult> stored = graphs_.Register(std::move(g));
  if (!stored.ok()) return stored.status();
  r.graph_hash = std::move(stored->graph_hash);
  r.pruned_nodes = stored->graph->pruned.graph.num_nodes;
  r.already_registered = stored->already_registered;
  r.graph = stored->graph;
  return r;
}

int64_t Ranker::SearchWorkingBytes(const SearchRequest& q) {
  if (!IsHexHash(q.graph_hash)) return 0;
  const std::shared_ptr<const StoredGraph> graph = graphs_.Get(q.graph_hash);
  if (!graph) return 0;
  constexpr int64_t kHashedRowOverhead = 64;  // a set node and a string header per row
  const int64_t row = graph->num_config_nodes > 0 ? graph->num_config_nodes * kConfigFeatDim
                                                  : kTileConfigDim * static_cast<int64_t>(sizeof(float));
  const int64_t evaluations = q.max_evaluations > 0 ? q.max_evaluations : kDefaultSearchEvaluations;
  const int64_t given = std::max<int64_t>(0, q.num_exclude) + std::max<int64_t>(0, q.num_start) +
                        std::max<int64_t>(0, q.num_candidates);
  return 4 * evaluations * (row + kHashedRowOverhead) + 2 * given * (row + kHashedRowOverhead);
}

absl::StatusOr<std::shared_ptr<const StoredGraph>> Ranker::RegisteredGraph(const std::string& graph_hash) {
  if (!IsHexHash(graph_hash))
    return absl::InvalidArgumentError(
        absl::StrCat("graph_hash must be 64 lowercase hex digits (from RegisterGraph), got '", Echo(graph_hash), "'"));
  std::shared_ptr<const StoredGraph> graph = graphs_.Get(graph_hash);
  if (!graph)
    return WithErrorReason(absl::NotFoundError(absl::StrCat(
                               "graph ", graph_hash, " is not registered on this server: call RegisterGraph, then retry")),
                           kGraphNotRegistered);
  return graph;
}

// The names a request gives, in order (collection, version, graph hash, model), then
// the activation budget for this graph and model.
absl::StatusOr<Ranker::Admitted> Ranker::AdmitNames(const std::string& collection, int64_t version,
                                                    const std::string& graph_hash, CollectionKind* kind) {
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
      ConfigsWithinBudget(loaded.manifest.spec, nodes, loaded.manifest.reference_groups, options_.activation_bytes);
  if (fits == 0)
    return absl::ResourceExhaustedError(absl::StrCat(
        "the graph has ", nodes, " nodes after pruning: one configuration needs about ",
        ActivationBytesPerConfig(loaded.manifest.spec, nodes) >> 20, " MiB of activations at hidden ",
        loaded.manifest.spec.hidden, ", over this server's ", options_.activation_bytes >> 20,
        " MiB per request (--activation_bytes)"));
  if (fits > 0) {
    a.batch_size = std::min(a.batch_size, fits);
    a.max_reference = std::min(a.max_reference, fits);
  }
  return a;
}

namespace {

// Rows no compiler could apply (model/core/layout_space.h), named by their field.
absl::Status CheckLegal(const LayoutSpace& space, absl::string_view field, absl::string_view bytes, int64_t count) {
  if (bytes.empty()) return absl::OkStatus();
  if (std::string bad = FirstIllegalLayoutRow(space, reinterpret_cast<const int8_t*>(bytes.data()), count);
      !bad.empty())
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", bad));
  return absl::OkStatus();
}

// Tile rows outside a model's tile space (model/core/tile_space.h): a graph of a dtype the
// space never measured (FAILED_PRECONDITION), a configuration that is not a candidate, one
// the compiler refused for the graph's kernel variant, or a row computed
// for another problem; named by field and row.
absl::Status CheckTileRows(const TileSpace& space, const StoredGraph& graph, absl::string_view field,
                           absl::string_view bytes, int64_t count) {
  if (bytes.empty()) return absl::OkStatus();
  absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(graph.pruned.graph, "graph_hash");
  if (!problem.ok())
    return absl::InvalidArgumentError(absl::StrCat(problem.status().message(),
                                                   " (this model ranks the configurations of one matrix product)"));
  if (absl::Status s = space.CheckProblem(*problem); !s.ok()) return s;
  std::vector<float> row(kTileConfigDim);
  for (int64_t r = 0; r < count; ++r) {
    std::memcpy(row.data(), bytes.data() + r * kTileConfigDim * sizeof(float), kTileConfigDim * sizeof(float));
    if (absl::Status s = space.CheckRow(*problem, row.data(), absl::StrCat(field, " row ", r)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

// Every check of a RankConfigs request, before any compute: the names and budget
// (AdmitNames), every field against them (ValidateRankRequest), the rows' legality.
absl::StatusOr<Ranker::Admitted> Ranker::Admit(const RankRequest& q) {
  CollectionKind kind;
  absl::StatusOr<Admitted> a = AdmitNames(q.collection, q.model_version, q.graph_hash, &kind);
  if (!a.ok()) return a.status();
  if (absl::Status v = ValidateRankRequest(q, kind, a->graph->num_config_nodes,
                                           static_cast<int>(a->model.model->folds.size()), a->model.version,
                                           {options_.max_configs, a->max_reference});
      !v.ok())
    return v;
  if (absl::Status s = CheckLegal(a->graph->space, "layout_configs", q.layout_configs, q.num_configs); !s.ok())
    return s;
  if (absl::Status s = CheckLegal(a->graph->space, "reference_layout_configs", q.reference_layout_configs,
                                  q.num_reference_configs);
      !s.ok())
    return s;
  if (const std::optional<TileSpace>& tiles = a->model.model->manifest.tile_space) {
    if (absl::Status s = CheckTileRows(*tiles, *a->graph, "tile_configs", q.tile_configs, q.num_configs); !s.ok())
      return s;
    if (absl::Status s = CheckTileRows(*tiles, *a->graph, "reference_tile_configs", q.reference_tile_configs,
                                       q.num_reference_configs);
        !s.ok())
      return s;
  }
  return a;
}

// The same for SearchConfigs: names and budget, the fields, the start, exclude and
// candidate rows.
absl::StatusOr<Ranker::Admitted> Ranker::AdmitSearch(const SearchRequest& q) {
  CollectionKind kind;
  absl::StatusOr<Admitted> a = AdmitNames(q.collection, q.model_version, q.graph_hash, &kind);
  if (!a.ok()) return a.status();
  if (absl::Status v = ValidateSearchRequest(q, kind, a->graph->num_config_nodes, {options_.max_configs, 0});
      !v.ok())
    return v;
  if (kind == CollectionKind::kTile) {
    const std::optional<TileSpace>& tiles = a->model.model->manifest.tile_space;
    if (!tiles)
      return absl::FailedPreconditionError(
          absl::StrCat("collection ", q.collection, ": its model has no tile space (trained on tile data without "
                       "tile_space.json), so there is no space to search; rank rows with RankConfigs"));
    absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(a->graph->pruned.graph, "graph_hash");
    if (!problem.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(problem.status().message(), " (this model searches the configurations of one matrix product)"));
    if (absl::Status s = tiles->CheckProblem(*problem); !s.ok()) return s;
    if (absl::Status s = CheckTileRows(*tiles, *a->graph, "exclude_tile_configs", q.exclude_tile_configs, q.num_exclude);
        !s.ok())
      return s;
    return a;
  }
  if (absl::Status s = CheckLegal(a->graph->space, "start_layout_configs", q.start_layout_configs, q.num_start);
      !s.ok())
    return s;
  if (absl::Status s = CheckLegal(a->graph->space, "exclude_layout_configs", q.exclude_layout_configs, q.num_exclude);
      !s.ok())
    return s;
  if (absl::Status s =
          CheckLegal(a->graph->space, "candidate_layout_configs", q.candidate_layout_configs, q.num_candidates);
      !s.ok())
    return s;
  return a;
}

absl::Status Ranker::RunOnWorker(Lane lane, const std::function<absl::Status()>& job,
                                 const std::function<bool()>& cancelled, double* queue_ms) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> done = promise->get_future();
  const auto submitted = Clock::now();
  // The job borrows the caller's locals and the cancellation check: this thread waits for
  // it (or withdraws it unrun), so they outlive it, and request bytes are not copied.
  const uint64_t ticket = pool_->TrySubmit(lane, [promise, &job, &cancelled, submitted, queue_ms] {
    *queue_ms = Ms(submitted, Clock::now());
    absl::Status s = [&]() -> absl::Status {
      if (cancelled && cancelled()) return absl::CancelledError("the request was cancelled while queued");
      try {
        return job();
      } catch (const c10::Error& e) {
        return absl::InternalError(absl::StrCat("inference failed: ", e.what_without_backtrace()));
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat("inference failed: ", e.what()));
      }
    }();
    promise->set_value(std::move(s));
  });
  if (ticket == 0) {
    ++rejected_;
    return absl::ResourceExhaustedError(absl::StrCat("the inference queue is full (", options_.queue_size, " ",
                                                     LaneName(lane), " requests waiting): retry with backoff"));
  }
  // A request cancelled or past its deadline while it waits leaves the queue now, not
  // when a worker would have reached it.
  while (done.wait_for(kQueuePoll) != std::future_status::ready) {
    if (cancelled && cancelled() && pool_->TryWithdraw(ticket)) {
      ++cancelled_;
      *queue_ms = Ms(submitted, Clock::now());
      return absl::CancelledError("the request was cancelled while queued; it left the queue");
    }
  }
  absl::Status s = done.get();
  if (s.code() == absl::StatusCode::kCancelled) ++cancelled_;
  return s;
}

namespace {

// A request's admission (validation), then its job on a worker while the caller waits:
// the result with its queue and total times.
template <typename Result, typename Admit, typename Job, typename Run>
absl::StatusOr<Result> AdmitAndRun(Admit admit, Job job, Run run_on_worker) {
  const auto start = Clock::now();
  auto admitted = admit();
  if (!admitted.ok()) return admitted.status();
  Result result;
  double queue_ms = 0;
  absl::Status s = run_on_worker(
      [&]() -> absl::Status {
        absl::StatusOr<Result> r = job(*admitted);
        if (!r.ok()) return r.status();
        result = std::move(*r);
        return absl::OkStatus();
      },
      &queue_ms);
  if (!s.ok()) return s;
  result.timing.queue_ms = queue_ms;
  result.timing.total_ms = Ms(start, Clock::now());
  return result;
}

}  // namespace

absl::StatusOr<RankResult> Ranker::Rank(const RankRequest& q, const std::function<bool()>& cancelled) {
  return AdmitAndRun<RankResult>([&] { return Admit(q); },
                                 [&](const Admitted& a) { return RankOnWorker(q, a, cancelled); },
                                 [&](const std::function<absl::Status()>& job, double* queue_ms) {
                                   return RunOnWorker(Lane::kRank, job, cancelled, queue_ms);
                                 });
}

absl::StatusOr<SearchOutcome> Ranker::Search(const SearchRequest& q, const std::function<bool()>& cancelled) {
  return AdmitAndRun<SearchOutcome>([&] { return AdmitSearch(q); },
                                    [&](const Admitted& a) { return SearchOnWorker(q, a, cancelled); },
                                    [&](const std::function<absl::Status()>& job, double* queue_ms) {
                                      return RunOnWorker(Lane::kSearch, job, cancelled, queue_ms);
                                    });
}

// The graph's configuration-independent work for a model version, from the cache or
// computed now (and cached); `r` gets the cache hit and the time taken.
std::shared_ptr<const Ranker::PreparedGraph> Ranker::Prepare(const std::string& graph_hash, const ModelHandle& m,
                                                             const StoredGraph& graph, RankTiming* timing) {
  const PreparedKey key{graph_hash, {m.collection, m.version}};
  std::shared_ptr<const PreparedGraph> prepared = prepared_.Get(key);
  timing->cache_hit = prepared != nullptr;
  if (prepared) return prepared;
  const auto t0 = Clock::now();
  torch::NoGradGuard no_grad;
  auto p = std::make_shared<PreparedGraph>();
  p->tensors = MakeGraphTensors(graph.pruned.graph, graph.pruned.config_node_index, m.model->manifest.stats);
  p->bytes = p->tensors.bytes();
  for (const auto& net : m.model->folds) {
    p->encodings.push_back(net->Precompute(p->tensors));
    const StaticEncoding& e = p->encodings.back();
    p->bytes += TensorBytes(e.node_in) + TensorBytes(e.config_h0) + TensorBytes(e.graph_emb);
  }
  timing->graph_prepare_ms = Ms(t0, Clock::now());
  prepared_.Put(key, p, p->bytes);
  return p;
}

namespace {

// Configuration rows over a request's bytes: layout rows are borrowed; tile rows are
// copied into `tile` (the message's bytes need not be aligned for float).
ConfigRows RowsOf(int64_t count, absl::string_view layout, absl::string_view tile_bytes, int64_t num_config_nodes,
                  std::vector<float>* tile) {
  ConfigRows rows;
  rows.count = count;
  if (!layout.empty()) {
    rows.layout = reinterpret_cast<const int8_t*>(layout.data());
    rows.num_config_nodes = num_config_nodes;
  }
  if (!tile_bytes.empty()) {
    tile->resize(tile_bytes.size() / sizeof(float));
    std::memcpy(tile->data(), tile_bytes.data(), tile_bytes.size());
    rows.tile = tile->data();
  }
  return rows;
}

// The folds a request runs with, over the graph's prepared encodings: `which` (indices
// into the manifest's folds, validated) or, when empty, every fold.
std::vector<FoldModel> FoldsOf(const LoadedModel& model, const std::vector<StaticEncoding>& encodings,
                               const std::vector<int>& which) {
  std::vector<FoldModel> folds;
  if (which.empty()) {
    for (size_t f = 0; f < model.folds.size(); ++f)
      folds.push_back({model.folds[f].get(), &encodings[f], static_cast<int>(f)});
  } else {
    for (int f : which) folds.push_back({model.folds[f].get(), &encodings[f], f});
  }
  return folds;
}

// How many of `scores` are not finite: the model overflowed inside the network for this
// graph (its weights were checked finite at load), which must never be answered as OK.
int64_t NonFinite(const std::vector<double>& scores) {
  return std::count_if(scores.begin(), scores.end(), [](double v) { return !std::isfinite(v); });
}

}  // namespace

absl::StatusOr<RankResult> Ranker::RankOnWorker(const RankRequest& q, const Admitted& a,
                                                const std::function<bool()>& cancelled) {
  RankResult r;
  r.model_version = a.model.version;
  const LoadedModel& model = *a.model.model;
  const std::shared_ptr<const PreparedGraph> prepared = Prepare(q.graph_hash, a.model, *a.graph, &r.timing);
  const std::vector<FoldModel> folds = FoldsOf(model, prepared->encodings, q.folds);
  std::vector<float> tile, reference_tile;
  const ConfigRows rows = RowsOf(q.num_configs, q.layout_configs, q.tile_configs, a.graph->num_config_nodes, &tile);
  const ConfigRows reference = RowsOf(q.num_reference_configs, q.reference_layout_configs, q.reference_tile_configs,
                                      a.graph->num_config_nodes, &reference_tile);
  ScoringOptions so;
  so.batch_size = a.batch_size;
  so.reference_size = model.manifest.reference_configs;
  so.max_reference = a.max_reference;
  so.reference_groups = model.manifest.reference_groups;
  if (q.num_reference_configs > 0) so.reference = &reference;
  so.cancelled = cancelled;
  if (rows.tile && model.manifest.tile_prior) {
    const absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(a.graph->pruned.graph, "graph_hash");
    if (!problem.ok()) return absl::InternalError(problem.status().message());  // admitted: a bug
    UseTilePrior(model.manifest, *problem, &so);
  }
  const auto t0 = Clock::now();
  const ScoreResult s = q.cascade ? ScoreCascade(folds, prepared->tensors, rows, so, q.top_k, options_.cascade_fraction)
                                  : ScoreConfigs(folds, prepared->tensors, rows, so);
  r.timing.inference_ms = Ms(t0, Clock::now());
  r.timing.batches = s.batches;
  r.reference_configs = s.reference;
  r.timing.rescored = q.cascade ? s.rescored : q.num_configs;
  batches_run_ += s.batches;
  if (s.cancelled) return absl::CancelledError("the request was cancelled or its deadline passed; scoring stopped");
  configs_scored_ += q.num_configs;
  if (const int64_t bad = NonFinite(s.score); bad > 0)
    return absl::InternalError(absl::StrCat("model ", q.collection, " version ", a.model.version, " gave ", bad, " of ",
                                            q.num_configs, " configurations a non-finite score; nothing is ranked"));
  r.scores.assign(s.score.begin(), s.score.end());
  r.spread.assign(s.spread.begin(), s.spread.end());
  for (int64_t i : RankByScore(s.score, q.top_k)) r.ranking.push_back(static_cast<int32_t>(i));
  return r;
}

absl::StatusOr<SearchOutcome> Ranker::SearchOnWorker(const SearchRequest& q, const Admitted& a,
                                                     const std::function<bool()>& cancelled) {
  SearchOutcome out;
  out.model_version = a.model.version;
  const LoadedModel& model = *a.model.model;
  const std::shared_ptr<const PreparedGraph> prepared = Prepare(q.graph_hash, a.model, *a.graph, &out.timing);
  const std::vector<FoldModel> folds = FoldsOf(model, prepared->encodings, {});
  if (model.manifest.tile_space) return SearchTilesOnWorker(q, a, *prepared, folds, cancelled, std::move(out));
  const auto rows = [](absl::string_view bytes) {
    return std::vector<int8_t>(reinterpret_cast<const int8_t*>(bytes.data()),
                               reinterpret_cast<const int8_t*>(bytes.data()) + bytes.size());
  };
  const std::vector<int8_t> start = rows(q.start_layout_configs), exclude = rows(q.exclude_layout_configs),
                            candidates = rows(q.candidate_layout_configs);
  // The search's policy (model/search/search_policy.h), within the admitted budget.
  SearchBudget budget = ModelSearchBudget(model.manifest);
  budget.batch_size = a.batch_size;
  budget.max_reference = a.max_reference;
  SearchOptions so = SearchPolicy(q.num_results, q.max_evaluations, q.seed, budget, q.max_changed_groups);
  out.max_changed_groups = so.radius;
  so.start = &start;
  so.exclude = &exclude;
  if (q.num_candidates > 0) so.candidates = &candidates;
  so.scoring.cancelled = cancelled;
  const auto t0 = Clock::now();
  // What the measured runtimes say about this graph (model/search/search_policy.h).
  absl::StatusOr<std::optional<MeasuredCorrection>> correction =
      CorrectionFor(exclude, q.exclude_runtimes_ns, static_cast<int64_t>(a.graph->space.nodes.size()));
  if (!correction.ok())  // the request was validated: a bug
    return absl::InternalError(absl::StrCat("fitting the measured runtimes: ", correction.status().message()));
  if (*correction) {
    so.correction = &**correction;
    out.correction_measurements = (*correction)->measurements();
  }
  // A loop that stopped improving gets variation (model/search/search_policy.h).
  const Variation variation =
      VariationFor(so.results, exclude, q.exclude_runtimes_ns, static_cast<int64_t>(a.graph->space.nodes.size()));
  so.variation = variation.rows;
  so.variation_parents = &variation.parents;
  const SearchResult r = SearchLayouts(folds, prepared->tensors, a.graph->space, so);
  out.timing.inference_ms = Ms(t0, Clock::now());
  if (r.cancelled) return absl::CancelledError("the search was cancelled or its deadline passed; it stopped");
  configs_scored_ += r.evaluations;
  if (NonFinite(r.score) > 0)
    return absl::InternalError(absl::StrCat("model ", q.collection, " version ", a.model.version,
                                            " gave a non-finite score; nothing is proposed"));
  out.rows = r.rows;
  out.scores.assign(r.score.begin(), r.score.end());
  out.spread.assign(r.spread.begin(), r.spread.end());
  out.evaluations = r.evaluations;
  out.generations = r.generations;
  out.reference_configs = r.reference;
  out.correction_weight = so.correction ? r.correction_weight : 0.0;
  out.variation = r.variation;
  out.timing.rescored = static_cast<int64_t>(r.score.size());
  return out;
}

// A tile kernel's search: every legal configuration of its problem not yet measured,
// scored by every fold (model/search/tile_search.h). Admitted by AdmitSearch.
absl::StatusOr<SearchOutcome> Ranker::SearchTilesOnWorker(const SearchRequest& q, const Admitted& a,
                                                          const PreparedGraph& prepared,
                                                          const std::vector<FoldModel>& folds,
                                                          const std::function<bool()>& cancelled, SearchOutcome out) {
  const LoadedModel& model = *a.model.model;
  const TileSpace& space = *model.manifest.tile_space;
  const absl::StatusOr<GemmProblem> problem = GemmProblemOfGraph(a.graph->pruned.graph, "graph_hash");
  if (!problem.ok()) return absl::InternalError(problem.status().message());  // admitted: a bug
  std::vector<TritonTile> exclude;
  std::vector<MeasuredTile> measured;  // what the prior follows: the exclude rows' runtimes, when given
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
  UseTilePrior(model.manifest, *problem, &so.scoring, measured);
  out.correction_measurements = so.scoring.tile_prior ? so.scoring.tile_prior->measurements : 0;
  const auto t0 = Clock::now();
  const TileSearchResult r = SearchTiles(folds, prepared.tensors, space, *problem, so);
  out.timing.inference_ms = Ms(t0, Clock::now());
  if (r.cancelled) return absl::CancelledError("the search was cancelled or its deadline passed; it stopped");
  configs_scored_ += r.evaluations;
  if (NonFinite(r.score) > 0)
    return absl::InternalError(absl::StrCat("model ", q.collection, " version ", a.model.version,
                                            " gave a non-finite score; nothing is proposed"));
  out.tile_rows = r.rows;
  for (const TritonTile& t : r.tiles) out.tile_names.push_back(t.Name());
  out.scores.assign(r.score.begin(), r.score.end());
  out.spread.assign(r.spread.begin(), r.spread.end());
  out.evaluations = r.evaluations;
  out.reference_configs = r.reference;
  out.timing.rescored = static_cast<int64_t>(r.score.size());
  return out;
}

absl::StatusOr<MeasurementReport> Ranker::MeasurementReportFor(const ReportRequest& q) {
  absl::StatusOr<Collection> coll = ParseCollection(q.collection);
  if (!coll.ok()) return absl::InvalidArgumentError(absl::StrCat("collection: ", coll.status().message()));
  absl::StatusOr<std::shared_ptr<const StoredGraph>> graph = RegisteredGraph(q.graph_hash);
  if (!graph.ok()) return graph.status();
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
  // Sizes and values first (their errors name the field), then the rows' legality.
  if (absl::Status s = ValidateMeasurementReport(r); !s.ok()) return s;
  if (std::string bad = FirstIllegalLayoutRow((*graph)->space, r.config_feat.data(), r.num_configs); !bad.empty())
    return absl::InvalidArgumentError(absl::StrCat("layout_configs: ", bad));
  return r;
}

int64_t Ranker::PurgeUnloaded() {
  std::set<std::pair<std::string, int64_t>> loaded;
  for (const auto& [collection, handles] : models_->Loaded())
    for (const ModelHandle& h : handles) loaded.insert({collection, h.version});
  return prepared_.EraseIf([&](const PreparedKey& k) { return loaded.count(k.second) == 0; });
}

RankerStats Ranker::Stats() const {
  RankerStats s;
  s.graph_store = graphs_.Stats();
  s.tensor_cache = prepared_.Stats();
  s.queued = pool_->queued();
  s.queued_ranks = pool_->queued(Lane::kRank);
  s.queued_searches = pool_->queued(Lane::kSearch);
  s.withdrawn_ranks = pool_->withdrawn(Lane::kRank);
  s.withdrawn_searches = pool_->withdrawn(Lane::kSearch);
  s.running = pool_->running();
  s.configs_scored = configs_scored_.load();
  s.batches_run = batches_run_.load();
  s.rejected_queue_full = rejected_.load();
  s.cancelled = cancelled_.load();
  return s;
}

}  // namespace tgraph
