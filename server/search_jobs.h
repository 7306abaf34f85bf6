// The SearchConfigs jobs a worker runs for an admitted request (server/admission.h): a
// layout graph's model-guided search (model/search/layout_search.h) with the measured
// correction and variation the search policy gives it (model/search/search_policy.h),
// or a tile kernel's search of its whole tile space (model/search/tile_search.h) with
// the prior following the measured rows. Torch-free header.
//
// Threads: each job runs on the worker thread that calls it and borrows the request,
// the admitted model and graph and the encoded graph for the call; `cancelled` is polled
// on that thread between batches. Jobs share nothing, so any number may run at once.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "server/admission.h"
#include "server/rank_request.h"

namespace tgraph {

struct EncodedGraph;  // model/nn/encoded_graph.h

// The memory a search of `q` over `graph` holds beyond its request while it runs: every
// evaluated row kept about four times (seen, evaluated, the population, the finalists)
// and each excluded, start and candidate row about twice (hashed copies), in the graph's
// row size. Its activations are bounded separately (RankerOptions::activation_bytes).
int64_t SearchWorkingBytes(const SearchRequest& q, const StoredGraph& graph);

// The search `q` asks for over `graph` (the admitted graph encoded by every fold of the
// admitted model), its timing and evaluations in the outcome; CANCELLED when cancelled
// or past the deadline, INTERNAL for a non-finite score. `out` carries what the caller
// filled in (the model version, the cache's timing).
absl::StatusOr<SearchOutcome> RunLayoutSearch(const SearchRequest& q, const Admitted& a, const EncodedGraph& graph,
                                              const std::function<bool()>& cancelled, SearchOutcome out);
absl::StatusOr<SearchOutcome> RunTileSearch(const SearchRequest& q, const Admitted& a, const EncodedGraph& graph,
                                            const std::function<bool()>& cancelled, SearchOutcome out);

}  // namespace tgraph
