// The search's policy: how a request for proposals (how many, how many evaluations, a
// seed) and the model it runs with become SearchOptions (layout_search.h). One function
// for everyone who searches: the server's SearchConfigs and tgraph-bench-search's
// simulated farm call it, so that the farm measures the search the server runs
// (tests/ranker_test.cc runs both on one request), and each default is written here
// once. Clients send 0 for "the server's default" and read what ran from the answer.
//
// Kinds of configuration: layouts are searched by layout_search.h; a tile kernel's few
// hundred configurations are scored whole (tile_search.h), with kDefaultSearchResults.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

#include "model/search/layout_search.h"
#include "model/store/registry.h"

namespace tgraph {

inline constexpr int64_t kDefaultSearchResults = 10;
inline constexpr int64_t kDefaultSearchEvaluations = 2048;
// The search's fixed reference: at most this many rows. Every fold records it once per
// search, so each fold pays for its size; 128 random rows rank as well as the model's
// own reference size on the real files.
inline constexpr int64_t kMaxSearchReference = 128;

// What the model allows a search: its batch, the largest reference a fold may record
// (the activation budget's batch on the server), and its reference's size and groups.
struct SearchBudget {
  int64_t batch_size = 128;
  int64_t max_reference = 256;
  int64_t reference_configs = 256;
  int64_t reference_groups = 1;
};

// A model's budget with no activation limit (the batch and reference its manifest
// says), as the server admits it when the graph fits (server/ranker.cc).
SearchBudget ModelSearchBudget(const Manifest& manifest);

// The options of a search for `results` rows (0: kDefaultSearchResults) within
// `evaluations` fitness evaluations (0: kDefaultSearchEvaluations) and `max_changed_groups`
// of the default and start rows (0: kDefaultSearchRadius; -1: the whole space), seeded:
// population, reference and scoring batches from the budget. The caller adds what a request brings
// (start, exclude and candidate rows, the measured runtimes' correction, cancellation).
SearchOptions SearchPolicy(int64_t results, int64_t evaluations, uint64_t seed, const SearchBudget& budget,
                           int64_t max_changed_groups = 0);

// What the measured rows' runtimes say about the graph (measured_correction.h), for
// SearchOptions::correction: fitted when there are at least
// MeasuredCorrection::kMinMeasurements of them, nullopt with fewer. Errors as Fit's.
absl::StatusOr<std::optional<MeasuredCorrection>> CorrectionFor(const std::vector<int8_t>& measured,
                                                                const std::vector<int64_t>& runtimes_ns,
                                                                int64_t num_config_nodes);

// What a search knows was measured: the rows a request gives (exclude rows, with their
// runtimes or none) and the rows the store holds of its graph (stored_layouts.h, in the
// order first reported, each with its runtime), joined. Every row of either is excluded.
// The runtimes: the stored rows' first (in the order reported), then the given rows' as
// the request gives them (a row measured twice counts twice), so that the stall rule
// reads them in about the order measured; a stored row the request gives with a runtime
// counts there only, so that a request that gives all the store holds runs as without
// it. Given rows without runtimes are excluded only. The fastest kJoinedStartRows
// distinct measured rows are the search's start rows where the request gives none (as a
// client starts from the fastest it measured).
inline constexpr int64_t kJoinedStartRows = 16;
struct JoinedMeasurements {
  std::vector<int8_t> exclude;       // every distinct row
  std::vector<int8_t> measured;      // the rows with a runtime
  std::vector<int64_t> runtimes_ns;  // theirs, in that order
  std::vector<int8_t> fastest;       // the fastest kJoinedStartRows distinct of them, fastest first (ties: the earlier)
  int64_t stored = 0;                // stored rows the request did not give
};
JoinedMeasurements JoinMeasured(const std::vector<int8_t>& given, const std::vector<int64_t>& given_runtimes_ns,
                                const std::vector<int8_t>& stored, const std::vector<int64_t>& stored_runtimes_ns,
                                int64_t num_config_nodes);

// When a loop has stalled, part of each search's results are random variation
// (SearchOptions::variation): a loop stalls when none of its last kStallMeasurements
// measurements beat the best of those before them by kStallImprovement of it, or by
// kStallSpreadShare of the measurements' spread (their median over that best) where that
// is less, so that a program whose configurations all run alike is not always stalled.
// Variation lets a loop stuck in the compiler default's basin escape, and costs a loop
// that is improving nothing (the evidence: docs/notebook/2026-11-28-stall-variation.md).
inline constexpr int64_t kStallMeasurements = 30;
inline constexpr double kStallImprovement = 0.002;
inline constexpr double kStallSpreadShare = 0.05;
// The variation's share of a stalled search's results (rounded up, at most results - 1),
// and its parents: the fastest measured rows, as many as this.
inline constexpr double kStallVariationShare = 0.5;
inline constexpr int64_t kVariationParents = 4;

// The variation a search of `results` rows (resolved, > 0) gets from the measured rows
// (count x nc x 18) and their runtimes in the order measured: its count and its parents
// (kVariationParents rows, the fastest; ties to the earlier). None unless stalled.
struct Variation {
  int64_t rows = 0;
  std::vector<int8_t> parents;
};
Variation VariationFor(int64_t results, const std::vector<int8_t>& measured, const std::vector<int64_t>& runtimes_ns,
                       int64_t num_config_nodes);

}  // namespace tgraph
