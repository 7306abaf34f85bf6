// `tgraph-client replay`: an autotuner's loop played on a file of measured
// configurations. Each round "measures" the next `per_round`
// configurations not measured yet, reading their runtimes from the file, and records
// the best runtime found so far relative to the file's best. Strategies: random search
// (the mean over several random orders), the model's ranking without updates (one
// RankConfigs call, then its order), optionally the model with updates (report,
// fine-tune, publish, rank again every round), and optionally model-guided search
// restricted to the file's configurations (SearchConfigs with the file's rows as its
// candidates every round: real runtimes judge the search).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "model/core/graph.h"

namespace tgraph {

struct ReplayOptions {
  ClientOptions client;
  std::string collection;  // a layout collection the server has a model for
  std::string npz;         // a layout file with measured runtimes
  int rounds = 10;
  int per_round = 10;
  int random_orders = 20;  // random search: the curve is the mean over this many orders
  uint64_t seed = 0;
  // The model with updates (when set): every round's measurements are reported
  // (ReportMeasurements, the server needs --measurement_store), this shell command is
  // run (e.g. tgraph-train finetune ...), and when it prints "published as version N"
  // the replay waits for the server to load N, then ranks the unmeasured
  // configurations again.
  std::string finetune_command;
  double reload_timeout_s = 120;
  // Model-guided search (when > 0): every round one SearchConfigs with this many model
  // evaluations, the file's rows as candidates, the measured ones excluded (with their
  // runtimes, so that the search follows them: exclude_runtimes_ns) and their 16
  // fastest the start; its per_round proposals are measured.
  int64_t search_evaluations = 0;
  int64_t max_changed_groups = 0;  // the search's trust region (SearchConfigsOptions')
};

struct ReplayReport {
  std::string npz;
  int64_t configs = 0;
  int64_t file_best_ns = 0;
  int64_t model_version = 0;
  std::vector<int64_t> measured;      // per round: configurations measured so far
  std::vector<double> random_search;  // per round: best found / the file's best (mean over orders)
  std::vector<double> frozen_model;   // the same, measuring in the model's order
  // Per round: how many of the file's configurations are faster than the best found
  // (0 = found the best); the mean over orders for random search. Real runtimes of one
  // program often differ by less than 0.01%, where this says more than the ratio.
  std::vector<double> random_search_rank, frozen_model_rank;
  // With finetune_command: the model with updates, and the version that chose each
  // round's configurations.
  std::vector<double> updated_model, updated_model_rank;
  std::vector<int64_t> updated_versions;
  // With search_evaluations: the search restricted to the file's configurations.
  std::vector<double> search, search_rank;
  // Per round of the search: how many of the measured runtimes the server's correction
  // followed (Proposals::correction_measurements; 0 before there were 4).
  std::vector<int64_t> search_correction;
  // Per round of the search: how many of its proposals were random variation of the
  // fastest measured (Proposals::variation: the measurements had stopped improving).
  std::vector<int64_t> search_variation;
  std::vector<std::string> warnings;  // e.g. a round whose fine-tuning failed (the model was kept)
  // Per round whose fine-tuning ran: the command's last output line (what it decided)
  // and the version it published (0 = none).
  std::vector<std::string> finetune_outcomes;
  std::vector<int64_t> finetune_published;
  std::string Table() const;          // one line per round
  // round,measured,random_search,frozen_model,random_search_rank,frozen_model_rank
  // [,updated_model,updated_model_rank,updated_version][,search,search_rank]
  std::string Csv() const;
};

// Best runtime found after each round when measuring in `order` (indices into
// runtimes), `per_round` at a time, relative to the smallest runtime: the curve a
// replay prints. Rounds past the end of `order` repeat the last value.
std::vector<double> BestSoFar(const std::vector<int64_t>& order, const std::vector<int64_t>& runtimes, int rounds,
                              int per_round);
// The same rounds: how many runtimes are smaller than the best found so far.
std::vector<double> FasterThanBestSoFar(const std::vector<int64_t>& order, const std::vector<int64_t>& runtimes,
                                        int rounds, int per_round);

absl::StatusOr<ReplayReport> RunReplay(const ReplayOptions& options);

// The model-with-updates curve of RunReplay (fills updated_*), from the model's first
// ranking `order` by `version`.
absl::Status ReplayWithUpdates(const ReplayOptions& options, const LayoutGraph& graph, RankerClient& client,
                               const RankOptions& rank, std::vector<int64_t> order, int64_t version,
                               ReplayReport* report);

// The model-guided search curve of RunReplay (fills search, search_rank).
absl::Status ReplaySearch(const ReplayOptions& options, const LayoutGraph& graph, RankerClient& client,
                          ReplayReport* report);

}  // namespace tgraph
