// The requests as the service hands them to the Ranker (RankConfigs, SearchConfigs,
// ReportMeasurements) and the results it answers with, and each request's validation:
// every field checked against the graph and the model it names, before any compute
// (server/admission.h runs it). Torch-free. Plain values: any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/core/dataset.h"
#include "model/store/measurement_store.h"
#include "model/store/stored_layouts.h"
#include "model/tile/tile_baselines.h"

namespace tgraph {

struct RankRequest {
  std::string collection;
  int64_t model_version = 0;
  std::string graph_hash;
  int64_t num_configs = 0;
  // Borrowed, not copied (a request may carry hundreds of MB of configurations): they
  // point into the caller's message, which outlives the Rank call.
  absl::string_view layout_configs;  // c x nc x 18 int8
  absl::string_view tile_configs;    // c x 24 float32
  int64_t top_k = 0;
  std::vector<int> folds;
  bool cascade = false;  // ScoreCascade with top_k
  // The reference (model/nn/scoring.h), borrowed like the configurations; 0: chosen from them.
  int64_t num_reference_configs = 0;
  absl::string_view reference_layout_configs;
  absl::string_view reference_tile_configs;
};

// A ReportMeasurements request, its bytes borrowed like a RankRequest's.
struct ReportRequest {
  std::string collection;
  std::string graph_hash;
  int64_t num_configs = 0;
  absl::string_view layout_configs;  // c x nc x 18 int8
  std::vector<int64_t> runtimes_ns;
  std::string source;
  std::vector<std::string> tile_names;  // tile collections: c configurations, "128x128x64 w4 s3"
  TileKernelId kernel;                   // tile collections: the kernel measured
  std::string report_id;                 // the client's id, reused on retry ("" for none)
};

// A SearchConfigs request (model/search/layout_search.h), its rows borrowed likewise.
struct SearchRequest {
  std::string collection;
  int64_t model_version = 0;
  std::string graph_hash;
  int64_t num_results = 0;      // 0: 10
  int64_t max_evaluations = 0;  // 0: kDefaultSearchEvaluations (model/search/search_policy.h)
  int64_t num_exclude = 0;
  absl::string_view exclude_layout_configs;
  int64_t num_start = 0;
  absl::string_view start_layout_configs;
  uint64_t seed = 0;
  int64_t num_candidates = 0;  // 0: the whole space
  absl::string_view candidate_layout_configs;
  std::vector<int64_t> exclude_runtimes_ns;  // empty, or one per exclude row
  absl::string_view exclude_tile_configs;    // tile collections: num_exclude x 24 float32
  int64_t max_changed_groups = 0;            // 0: kDefaultSearchRadius; -1: the whole space
  TileKernelId kernel;  // tile searches: the kernel searched for (empty name: none)
  // Tile searches: the measured problems the store holds of a kernel key
  // (MeasurementStore::KernelProblems), which join the prior's; unset: none. The search
  // asks for the request's kernel on the GPU it names, or on the model's when it names
  // none.
  std::function<std::shared_ptr<const std::vector<KnownTileProblem>>(const std::string& kernel_key)> kernel_problems;
  // Layout searches: join what the store holds of the graph (model/search/search_policy.h
  // JoinMeasured) to the exclude rows and their runtimes; `stored_measurements` reads it,
  // the max_rows first reported most recently (stored_layouts.h LoadGraphMeasurements),
  // unset when the server keeps no store (then nothing joins).
  bool include_stored = false;
  std::function<absl::StatusOr<GraphMeasurements>(const std::string& graph_hash, int64_t max_rows,
                                                  const std::function<bool()>& cancelled)>
      stored_measurements;
};

struct RankTiming {
  double queue_ms = 0, graph_prepare_ms = 0, inference_ms = 0, total_ms = 0;
  bool cache_hit = false;
  int64_t batches = 0;
  int64_t rescored = 0;  // configurations scored by every fold
};

struct RankResult {
  std::vector<float> scores, spread;
  std::vector<int32_t> ranking;
  int64_t model_version = 0;
  int64_t reference_configs = 0;  // the reference the scores were computed against
  RankTiming timing;
};

// SearchConfigs' answer: configurations best first (results x nc x 18), their scores
// by every fold against the search's reference, and what the search ran.
struct SearchOutcome {
  std::vector<int8_t> rows;          // layout rows, best first
  std::vector<int8_t> reference_rows;  // layout: the search's reference (reference_configs x nc x 18)
  std::vector<float> tile_rows;      // or tile rows (num x 24), best first
  std::vector<std::string> tile_names;
  bool tile = false;                 // a tile search (its lane: worker_pool.h)
  std::vector<float> scores, spread;
  int64_t model_version = 0;
  int64_t evaluations = 0, generations = 0, reference_configs = 0;
  int64_t correction_measurements = 0;  // the measurements the scores were corrected with
  double correction_weight = 0;         // the correction's weight beside the model's scores (SearchResult's)
  int64_t max_changed_groups = 0;       // the search's trust region (SearchOptions::radius; 0: none)
  int64_t variation = 0;                // the last rows are random variation, not the model's (SearchResult's)
  int64_t kernel_problems = 0;          // tile: the kernel's stored problems the prior counted
  int64_t stored_measurements = 0;      // layout: the store's rows joined that the request did not give
  int64_t older_stored_reports = 0;     // layout: the graph's reports older than those the join read
  int64_t start_configs = 0;            // layout: the start rows the search ran from
  // Tile: the kernel's stored timings of the searched problem itself (median ns).
  std::vector<std::string> measured_tile_names;
  std::vector<int64_t> measured_runtimes_ns;
  RankTiming timing;
};

// The most configurations one request may carry, unless the server says otherwise.
inline constexpr int64_t kDefaultMaxConfigs = 100000;

struct RankLimits {
  int64_t max_configs = kDefaultMaxConfigs;
  int64_t max_reference = 128;  // the batch the model may run for this graph
};

// The fields of `q` for a graph with `num_config_nodes` configurable nodes and a model
// (`kind`, `version`) of `num_folds` folds: num_configs, the configuration bytes and
// values, top_k, folds, the reference's count, bytes and values. INVALID_ARGUMENT naming
// the field; RESOURCE_EXHAUSTED over max_configs.
absl::Status ValidateRankRequest(const RankRequest& q, CollectionKind kind, int64_t num_config_nodes, int num_folds,
                                 int64_t version, const RankLimits& limits);

// The fields of a search of a layout graph with `num_config_nodes` configurable nodes:
// num_results (0..1000), max_evaluations (0..max_configs), max_changed_groups (-1 or
// more), the exclude, start and
// candidate rows' counts, bytes and values, the exclude rows' runtimes (none, or one > 0
// per row). Of a tile graph's search: num_results, the exclude rows, and nothing of the
// layout fields. INVALID_ARGUMENT naming the field.
absl::Status ValidateSearchRequest(const SearchRequest& q, CollectionKind kind, int64_t num_config_nodes,
                                   const RankLimits& limits);

}  // namespace tgraph
