// The ranking service's logic, independent of gRPC: a request goes down through its
// admission (server/admission.h: every check before any compute), the queue of a
// bounded worker pool (WorkerPool), the graph's encodings from a byte-bounded LRU cache
// per (graph, model version), and then ranking through the shared scoring function, or
// a search job (server/search_jobs.h). The registered graphs live in a GraphStore.
// Torch-free header.
//
// Threads: every public method may be called from any number of threads at once (the
// gRPC handlers and the registry poller do); Rank blocks its caller until a worker has
// scored the request, the queue refuses it, or it is cancelled while queued (it leaves
// the queue at once). Ranks, layout searches and tile searches wait in lanes of their
// own, served in turn. The Ranker owns the graph store, the
// tensor cache and the worker pool (joined in its destructor, so no job outlives it);
// it borrows the ModelManager, which must outlive it. Results are the caller's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/store/measurement_store.h"
#include "proto/graph_codec.h"
#include "server/admission.h"
#include "server/graph_store.h"
#include "server/lru_cache.h"
#include "server/rank_request.h"
#include "server/model_manager.h"
#include "server/worker_pool.h"

namespace tgraph {

struct EncodedGraph;  // model/nn/encoded_graph.h

struct RankerOptions {
  int64_t graph_store_bytes = int64_t{2} << 30;  // registered (pruned) graphs
  int64_t cache_bytes = int64_t{4} << 30;        // per-version prepared tensors
  int64_t max_configs = kDefaultMaxConfigs;
  // Rows in one ReportMeasurements request (INVALID_ARGUMENT over it: split the report).
  // A farm reports what it measured since its last report, hundreds of rows; the bound
  // keeps the rows a request turns into (and the shard it writes) within reason.
  int64_t max_report_rows = kDefaultMaxConfigs;
  int workers = 1;
  int queue_size = 16;                           // waiting ranks, and layout searches, before RESOURCE_EXHAUSTED
  // Waiting tile searches. One is milliseconds of work (about 5 ms on one worker of a
  // two-core EPYC, the graph's encoding included), so a worker answers hundreds within
  // tgraph.triton's 2 s deadline: a fleet's start-up burst waits rather than being refused
  // and falling back to measuring every candidate.
  int tile_queue_size = 512;
  // Activation memory one request may use (ActivationBytesPerConfig x batch): batches
  // are made smaller to fit, and a graph whose single configuration does not fit is
  // refused. 0 = unbounded.
  int64_t activation_bytes = 0;
  double cascade_fraction = 0.25;  // ScoreCascade's fraction for requests with cascade
};

struct RegisterResult {
  std::string graph_hash;
  int64_t num_nodes = 0, pruned_nodes = 0, num_config_nodes = 0;
  bool already_registered = false;
  std::shared_ptr<const StoredGraph> graph;  // as stored (its layout space)
};


// Counters for metrics.
struct RankerStats {
  CacheStats graph_store, tensor_cache;
  int64_t queued = 0, running = 0;
  int64_t queued_ranks = 0, queued_searches = 0, queued_tile_searches = 0;           // by lane (worker_pool.h)
  int64_t withdrawn_ranks = 0, withdrawn_searches = 0, withdrawn_tile_searches = 0;  // left the queue cancelled or expired
  int64_t configs_scored = 0, batches_run = 0, rejected_queue_full = 0, cancelled = 0;
};

class Ranker {
 public:
  Ranker(ModelManager* models, RankerOptions options);
  ~Ranker();

  absl::StatusOr<RegisterResult> Register(WireGraph graph);

  // Validates, then runs on the worker pool and waits. `cancelled` is polled while
  // queued and between batches: a cancelled or expired RPC stops consuming compute.
  absl::StatusOr<RankResult> Rank(const RankRequest& request, const std::function<bool()>& cancelled);

  // Validates, then runs the search (server/search_jobs.h) on the worker pool and waits,
  // as Rank does. Once admitted and before it queues, `hold_working_memory` (may be
  // null) is given the memory the search will hold beyond its request
  // (SearchWorkingBytes); an error from it is the answer.
  absl::StatusOr<SearchOutcome> Search(const SearchRequest& request, const std::function<bool()>& cancelled,
                                       const std::function<absl::Status(int64_t)>& hold_working_memory = nullptr);

  // A ReportMeasurements request as a report of its registered graph, checked whole for
  // MeasurementStore::Append: INVALID_ARGUMENT for a collection name that does not
  // parse, a graph without configurable nodes, sizes or values out of range
  // (ValidateMeasurementReport) and rows outside the graph's layout space (naming the
  // row, node and group); the graph hash's errors as RegisteredGraph's. A layout
  // collection need not have a model. A tile collection's report names its kernel and
  // its configurations (tile_names), each of the values of the tile space of the
  // collection's newest loaded model (NOT_FOUND without one; FAILED_PRECONDITION when it
  // has no tile space), on a graph of one matrix product.
  absl::StatusOr<MeasurementReport> MeasurementReportFor(const ReportRequest& request);

  RankerStats Stats() const;

  // A registered graph by hash: INVALID_ARGUMENT for a malformed hash, NOT_FOUND when
  // this server does not hold it (never registered, or evicted).
  absl::StatusOr<std::shared_ptr<const StoredGraph>> RegisteredGraph(const std::string& graph_hash);

  // Drops the prepared tensors of model versions that are no longer loaded (unloaded
  // by keep_versions or retired): they would otherwise hold cache budget until evicted.
  // Returns how many entries were dropped. Called after each registry poll.
  int64_t PurgeUnloaded();

 private:
  struct PreparedKeyHash {
    size_t operator()(const std::pair<std::string, std::pair<std::string, int64_t>>& k) const;
  };
  using PreparedKey = std::pair<std::string, std::pair<std::string, int64_t>>;  // hash, (collection, version)

  // Runs `job` on the worker pool in `lane` while this thread waits: RESOURCE_EXHAUSTED
  // when the lane's queue is full, CANCELLED when cancelled while queued (polled every
  // kQueuePoll: the job leaves the queue then), INTERNAL for an exception. The job may
  // borrow the caller's locals. *queue_ms: the time it waited for a worker.
  static constexpr std::chrono::milliseconds kQueuePoll{10};
  absl::Status RunOnWorker(Lane lane, const std::function<absl::Status()>& job, const std::function<bool()>& cancelled,
                           double* queue_ms);
  // The graph encoded by every fold of the admitted model, from the cache or computed
  // now (and cached); *timing gets the cache hit and the time taken.
  std::shared_ptr<const EncodedGraph> Encoded(const std::string& graph_hash, const Admitted& a, RankTiming* timing);
  absl::StatusOr<RankResult> RankOnWorker(const RankRequest& request, const Admitted& admitted,
                                          const std::function<bool()>& cancelled);
  absl::StatusOr<SearchOutcome> SearchOnWorker(const SearchRequest& request, const Admitted& admitted,
                                               const std::function<bool()>& cancelled);

  ModelManager* models_;
  RankerOptions options_;
  GraphStore graphs_;
  Admission admission_;  // borrows graphs_ and models_
  LruCache<PreparedKey, EncodedGraph, PreparedKeyHash> prepared_;
  std::atomic<int64_t> configs_scored_{0}, batches_run_{0}, rejected_{0}, cancelled_{0};
  std::unique_ptr<WorkerPool> pool_;  // last: destroyed (joined) first
};

}  // namespace tgraph
