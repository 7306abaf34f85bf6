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
  return r;
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

absl::StatusOr<RankResult> Ranker::Rank(const RankRequest& q, const std::function<bool()>& cancelled) {
  const auto start = Clock::now();
  // All validation happens here, before any compute.
  absl::StatusOr<Collection> coll = ParseCollection(q.collection);
  if (!coll.ok()) return absl::NotFoundError(absl::StrCat("collection: ", coll.status().message()));
  if (q.model_version < 0) return absl::InvalidArgumentError("model_version must be 0 (latest) or a version number");
  absl::StatusOr<ModelHandle> model = models_->Get(q.collection, q.model_version);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::shared_ptr<const StoredGraph>> stored = RegisteredGraph(q.graph_hash);
  if (!stored.ok()) return stored.status();
  std::shared_ptr<const StoredGraph> graph = std::move(*stored);

  // The batch size: the model's, made smaller when its activations would exceed the
  // per-request budget.
  const LoadedModel& loaded = *model->model;
  int64_t batch_size = loaded.manifest.batch_size;
  // The reference runs as one batch: the model's size, or a request's up to the larger
  // of that and the batch, both within the budget.
  int64_t max_reference = std::max(loaded.manifest.reference_configs, loaded.manifest.batch_size);
  const Precision precision = loaded.folds.empty() ? Precision::kFloat32 : loaded.folds.front()->InferencePrecision();
  const int64_t per_config = ActivationBytesPerConfig(loaded.manifest.spec, graph->pruned.graph.num_nodes, precision);
  const int64_t fits = ConfigsWithinBudget(loaded.manifest.spec, graph->pruned.graph.num_nodes, precision,
                                           loaded.manifest.reference_groups, options_.activation_bytes);
  if (fits >= 0) {
    if (fits < 1)
      return absl::ResourceExhaustedError(absl::StrCat(
          "the graph has ", graph->pruned.graph.num_nodes, " nodes after pruning: one configuration needs about ",
          per_config >> 20, " MiB of activations at hidden ", loaded.manifest.spec.hidden, ", over this server's ",
          options_.activation_bytes >> 20, " MiB per request (--activation_bytes)"));
    batch_size = std::min(batch_size, fits);
    max_reference = std::min(max_reference, fits);
  }
  if (absl::Status v = ValidateRankRequest(q, coll->kind, graph->num_config_nodes,
                                           static_cast<int>(model->model->folds.size()), model->version,
                                           {options_.max_configs, max_reference});
      !v.ok())
    return v;

  // Inference on the worker pool; this thread waits (or gives up on cancellation).
  auto promise = std::make_shared<std::promise<absl::StatusOr<RankResult>>>();
  std::future<absl::StatusOr<RankResult>> done = promise->get_future();
  const auto submitted = Clock::now();
  // The job borrows the request and the cancellation check: this thread waits for it,
  // so they outlive it, and the (possibly large) configurations are not copied.
  const bool accepted = pool_->TrySubmit([this, promise, &q, m = *model, graph, batch_size, max_reference, &cancelled,
                                          submitted] {
    const double queue_ms = Ms(submitted, Clock::now());
    absl::StatusOr<RankResult> r = [&]() -> absl::StatusOr<RankResult> {
      if (cancelled && cancelled()) return absl::CancelledError("the request was cancelled while queued");
      try {
        return RankOnWorker(q, m, graph, batch_size, max_reference, cancelled);
      } catch (const c10::Error& e) {
        return absl::InternalError(absl::StrCat("inference failed: ", e.what_without_backtrace()));
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat("inference failed: ", e.what()));
      }
    }();
    if (r.ok()) r->timing.queue_ms = queue_ms;
    promise->set_value(std::move(r));
  });
  if (!accepted) {
    ++rejected_;
    return absl::ResourceExhaustedError(absl::StrCat("the inference queue is full (", options_.queue_size,
                                                     " requests waiting): retry with backoff"));
  }
  absl::StatusOr<RankResult> r = done.get();
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kCancelled) ++cancelled_;
    return r.status();
  }
  r->timing.total_ms = Ms(start, Clock::now());
  return r;
}

absl::StatusOr<RankResult> Ranker::RankOnWorker(const RankRequest& q, const ModelHandle& m,
                                                std::shared_ptr<const StoredGraph> graph, int64_t batch_size,
                                                int64_t max_reference, const std::function<bool()>& cancelled) {
  RankResult r;
  r.model_version = m.version;
  const LoadedModel& model = *m.model;
  // The graph's configuration-independent work, once per (graph, model version).
  const PreparedKey key{q.graph_hash, {m.collection, m.version}};
  std::shared_ptr<const PreparedGraph> prepared = prepared_.Get(key);
  r.timing.cache_hit = prepared != nullptr;
  if (!prepared) {
    const auto t0 = Clock::now();
    torch::NoGradGuard no_grad;
    auto p = std::make_shared<PreparedGraph>();
    p->tensors = MakeGraphTensors(graph->pruned.graph, graph->pruned.config_node_index, model.manifest.stats);
    p->bytes = p->tensors.bytes();
    for (const auto& net : model.folds) {
      p->encodings.push_back(net->Precompute(p->tensors));
      const StaticEncoding& e = p->encodings.back();
      p->bytes += TensorBytes(e.node_in) + TensorBytes(e.config_h0) + TensorBytes(e.graph_emb);
    }
    r.timing.graph_prepare_ms = Ms(t0, Clock::now());
    prepared_.Put(key, p, p->bytes);
    prepared = std::move(p);
  }
  std::vector<FoldModel> folds;
  if (q.folds.empty()) {
    for (size_t f = 0; f < model.folds.size(); ++f)
      folds.push_back({model.folds[f].get(), &prepared->encodings[f], static_cast<int>(f)});
  } else {
    for (int f : q.folds) folds.push_back({model.folds[f].get(), &prepared->encodings[f], f});
  }
  ConfigRows rows;
  rows.count = q.num_configs;
  if (!q.layout_configs.empty()) {
    rows.layout = reinterpret_cast<const int8_t*>(q.layout_configs.data());
    rows.num_config_nodes = graph->num_config_nodes;
  }
  std::vector<float> tile;
  if (!q.tile_configs.empty()) {
    tile.resize(q.tile_configs.size() / sizeof(float));
    std::memcpy(tile.data(), q.tile_configs.data(), q.tile_configs.size());
    rows.tile = tile.data();
  }
  ConfigRows reference = rows;
  reference.count = q.num_reference_configs;
  std::vector<float> reference_tile;
  if (!q.reference_layout_configs.empty()) reference.layout = reinterpret_cast<const int8_t*>(q.reference_layout_configs.data());
  if (!q.reference_tile_configs.empty()) {
    reference_tile.resize(q.reference_tile_configs.size() / sizeof(float));
    std::memcpy(reference_tile.data(), q.reference_tile_configs.data(), q.reference_tile_configs.size());
    reference.tile = reference_tile.data();
  }
  ScoringOptions so;
  so.batch_size = batch_size;
  so.reference_size = model.manifest.reference_configs;
  so.max_reference = max_reference;
  so.reference_groups = model.manifest.reference_groups;
  if (q.num_reference_configs > 0) so.reference = &reference;
  so.cancelled = cancelled;
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
  // A score that is not finite has no rank: never answered OK (weights are checked at
  // load, so this means an overflow inside the network for this graph).
  if (const int64_t bad = std::count_if(s.score.begin(), s.score.end(), [](double v) { return !std::isfinite(v); });
      bad > 0)
    return absl::InternalError(absl::StrCat("model ", q.collection, " version ", m.version, " gave ", bad, " of ",
                                            q.num_configs, " configurations a non-finite score; nothing is ranked"));
  r.scores.assign(s.score.begin(), s.score.end());
  r.spread.assign(s.spread.begin(), s.spread.end());
  for (int64_t i : RankByScore(s.score, q.top_k)) r.ranking.push_back(static_cast<int32_t>(i));
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
  s.running = pool_->running();
  s.configs_scored = configs_scored_.load();
  s.batches_run = batches_run_.load();
  s.rejected_queue_full = rejected_.load();
  s.cancelled = cancelled_.load();
  return s;
}

}  // namespace tgraph
