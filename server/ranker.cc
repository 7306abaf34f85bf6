#include "server/ranker.h"

#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <future>
#include <set>

#include "absl/strings/str_cat.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/features.h"
#include "model/nn/model_io.h"
#include "model/nn/scoring.h"
#include "model/search/search_policy.h"
#include "server/search_jobs.h"

namespace tgraph {

size_t Ranker::PreparedKeyHash::operator()(const PreparedKey& k) const {
  return std::hash<std::string>()(k.first) ^ (std::hash<std::string>()(k.second.first) * 31) ^
         std::hash<int64_t>()(k.second.second) * 1000003;
}

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

Ranker::Ranker(ModelManager* models, RankerOptions options)
    : models_(models),
      options_(options),
      graphs_(options.graph_store_bytes),
      admission_(&graphs_, models, {options.max_configs, options.max_report_rows, options.activation_bytes}),
      prepared_(options.cache_bytes),
      pool_(std::make_unique<WorkerPool>(options.workers,
                                         LaneCapacities{options.queue_size, options.queue_size, options.tile_queue_size})) {}

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

absl::StatusOr<std::shared_ptr<const StoredGraph>> Ranker::RegisteredGraph(const std::string& graph_hash) {
  return admission_.RegisteredGraph(graph_hash);
}

absl::StatusOr<MeasurementReport> Ranker::MeasurementReportFor(const ReportRequest& q) { return admission_.Report(q); }

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
    const int capacity = lane == Lane::kTile ? options_.tile_queue_size : options_.queue_size;
    return absl::ResourceExhaustedError(absl::StrCat("the inference queue is full (", capacity, " ", LaneName(lane),
                                                     " requests waiting): retry with backoff"));
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
  return AdmitAndRun<RankResult>([&] { return admission_.Rank(q); },
                                 [&](const Admitted& a) { return RankOnWorker(q, a, cancelled); },
                                 [&](const std::function<absl::Status()>& job, double* queue_ms) {
                                   return RunOnWorker(Lane::kRank, job, cancelled, queue_ms);
                                 });
}

absl::StatusOr<SearchOutcome> Ranker::Search(const SearchRequest& q, const std::function<bool()>& cancelled,
                                             const std::function<absl::Status(int64_t)>& hold_working_memory) {
  Lane lane = Lane::kSearch;  // a tile search's, once admitted: it knows the model
  const auto admit = [&]() -> absl::StatusOr<Admitted> {
    absl::StatusOr<Admitted> a = admission_.Search(q);
    if (a.ok() && a->model.model->manifest.tile_space) lane = Lane::kTile;
    if (a.ok() && hold_working_memory)
      if (absl::Status s = hold_working_memory(SearchWorkingBytes(q, *a->graph)); !s.ok()) return s;
    return a;
  };
  return AdmitAndRun<SearchOutcome>(admit,
                                    [&](const Admitted& a) { return SearchOnWorker(q, a, cancelled); },
                                    [&](const std::function<absl::Status()>& job, double* queue_ms) {
                                      return RunOnWorker(lane, job, cancelled, queue_ms);
                                    });
}

std::shared_ptr<const EncodedGraph> Ranker::Encoded(const std::string& graph_hash, const Admitted& a,
                                                    RankTiming* timing) {
  const PreparedKey key{graph_hash, {a.model.collection, a.model.version}};
  std::shared_ptr<const EncodedGraph> encoded = prepared_.Get(key);
  timing->cache_hit = encoded != nullptr;
  if (encoded) return encoded;
  const auto t0 = Clock::now();
  const StoredGraph& graph = *a.graph;
  const LoadedModel& model = *a.model.model;
  auto e = std::make_shared<EncodedGraph>(EncodeGraph(
      MakeGraphTensors(graph.pruned.graph, graph.pruned.config_node_index, model.manifest.stats), model.folds));
  timing->graph_prepare_ms = Ms(t0, Clock::now());
  prepared_.Put(key, e, e->bytes);
  return e;
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

}  // namespace

absl::StatusOr<RankResult> Ranker::RankOnWorker(const RankRequest& q, const Admitted& a,
                                                const std::function<bool()>& cancelled) {
  RankResult r;
  r.model_version = a.model.version;
  const LoadedModel& model = *a.model.model;
  const std::shared_ptr<const EncodedGraph> encoded = Encoded(q.graph_hash, a, &r.timing);
  const std::vector<FoldModel> folds = encoded->Folds(model.folds, q.folds);
  std::vector<float> tile, reference_tile;
  const ConfigRows rows = RowsOf(q.num_configs, q.layout_configs, q.tile_configs, a.graph->num_config_nodes, &tile);
  const ConfigRows reference = RowsOf(q.num_reference_configs, q.reference_layout_configs, q.reference_tile_configs,
                                      a.graph->num_config_nodes, &reference_tile);
  ScoringOptions so;
  so.batch_size = a.batch_size;
  so.reference_size = model.manifest.reference_configs;
  so.max_reference = a.max_reference;
  so.reference_groups = model.manifest.reference_groups;
  if (q.num_reference_configs > 0) {
    so.reference = &reference;
    so.reference_groups = FixedReferenceGroups(q.num_reference_configs, model.manifest.reference_configs,
                                               model.manifest.reference_groups);
  }
  so.cancelled = cancelled;
  if (rows.tile && model.manifest.tile_prior) {
    const absl::StatusOr<GemmProblem>& problem = a.graph->gemm_problem;
    if (!problem.ok()) return absl::InternalError(problem.status().message());  // admitted: a bug
    UseTilePrior(model.manifest, *problem, &so);
  }
  const auto t0 = Clock::now();
  const ScoreResult s = q.cascade ? ScoreCascade(folds, encoded->tensors, rows, so, q.top_k, options_.cascade_fraction)
                                  : ScoreConfigs(folds, encoded->tensors, rows, so);
  r.timing.inference_ms = Ms(t0, Clock::now());
  r.timing.batches = s.batches;
  r.reference_configs = s.reference;
  r.timing.rescored = q.cascade ? s.rescored : q.num_configs;
  batches_run_ += s.batches;
  if (s.cancelled) return absl::CancelledError("the request was cancelled or its deadline passed; scoring stopped");
  configs_scored_ += q.num_configs;
  if (const int64_t bad = CountNonFinite(s.score); bad > 0)
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
  out.tile = a.model.model->manifest.tile_space.has_value();
  const std::shared_ptr<const EncodedGraph> encoded = Encoded(q.graph_hash, a, &out.timing);
  absl::StatusOr<SearchOutcome> r = out.tile
                                        ? RunTileSearch(q, a, *encoded, cancelled, std::move(out))
                                        : RunLayoutSearch(q, a, *encoded, cancelled, std::move(out));
  if (r.ok()) configs_scored_ += r->evaluations;
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
  s.queued_tile_searches = pool_->queued(Lane::kTile);
  s.withdrawn_ranks = pool_->withdrawn(Lane::kRank);
  s.withdrawn_searches = pool_->withdrawn(Lane::kSearch);
  s.withdrawn_tile_searches = pool_->withdrawn(Lane::kTile);
  s.running = pool_->running();
  s.configs_scored = configs_scored_.load();
  s.batches_run = batches_run_.load();
  s.rejected_queue_full = rejected_.load();
  s.cancelled = cancelled_.load();
  return s;
}

}  // namespace tgraph
