// A request's admission: every check the Ranker makes before any compute, in one place.
// The names a request gives (collection, version, graph hash), the activation budget
// for its graph and model, every field against them (rank_request.h's validation), the
// legality of its layout rows (model/core/layout_space.h) and of its tile rows
// (model/tile/tile_space.h). What passes is an Admitted request: the model version and
// the stored graph it runs with, its batch sizes within the budget. Torch-free.
//
// Threads: every method may be called from any number of threads at once; Admission
// holds nothing of its own beyond its limits, and borrows the GraphStore and the
// ModelManager (each guards itself), which must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/store/measurement_store.h"
#include "server/graph_store.h"
#include "server/model_manager.h"
#include "server/rank_request.h"

namespace tgraph {

// A request that passed every check, with what running it needs.
struct Admitted {
  ModelHandle model;
  std::shared_ptr<const StoredGraph> graph;
  int64_t batch_size = 0;     // within the activation budget
  int64_t max_reference = 0;  // likewise
};

struct AdmissionLimits {
  int64_t max_configs = 0;       // RankerOptions::max_configs
  int64_t max_report_rows = 0;   // RankerOptions::max_report_rows
  int64_t activation_bytes = 0;  // RankerOptions::activation_bytes (0: unbounded)
};

class Admission {
 public:
  Admission(GraphStore* graphs, ModelManager* models, AdmissionLimits limits)
      : graphs_(graphs), models_(models), limits_(limits) {}

  // A registered graph by hash: INVALID_ARGUMENT for a malformed hash, NOT_FOUND (reason
  // GRAPH_NOT_REGISTERED) when this server does not hold it (never registered, or evicted).
  absl::StatusOr<std::shared_ptr<const StoredGraph>> RegisteredGraph(const std::string& graph_hash) const;

  // RankConfigs: the names and budget, every field, the rows' legality.
  absl::StatusOr<Admitted> Rank(const RankRequest& q) const;
  // SearchConfigs: the names and budget, the fields, the start, exclude and candidate
  // rows; a tile search's problem against the model's tile space.
  absl::StatusOr<Admitted> Search(const SearchRequest& q) const;
  // ReportMeasurements: see Ranker::MeasurementReportFor.
  absl::StatusOr<MeasurementReport> Report(const ReportRequest& q) const;

 private:
  // The names, in order (collection, version, graph hash, model), then the activation
  // budget for this graph and model; *kind gets the collection's.
  absl::StatusOr<Admitted> Names(const std::string& collection, int64_t version, const std::string& graph_hash,
                                 CollectionKind* kind) const;
  // A tile collection's report: the kernel, the graph's matrix product, each name a
  // configuration of the collection's latest model's tile space, written as its row.
  absl::StatusOr<MeasurementReport> TileReport(const ReportRequest& q, const Collection& coll,
                                               const StoredGraph& graph) const;

  GraphStore* graphs_;
  ModelManager* models_;
  const AdmissionLimits limits_;
};

}  // namespace tgraph
