#include "client/replay.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/dataset.h"
#include "model/graph_io.h"

namespace tgraph {

std::vector<double> BestSoFar(const std::vector<int64_t>& order, const std::vector<int64_t>& runtimes, int rounds,
                              int per_round) {
  std::vector<double> curve;
  if (runtimes.empty()) return curve;
  const double best = static_cast<double>(*std::min_element(runtimes.begin(), runtimes.end()));
  int64_t found = INT64_MAX;
  size_t next = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < per_round && next < order.size(); ++k, ++next) found = std::min(found, runtimes[order[next]]);
    curve.push_back(static_cast<double>(found) / best);
  }
  return curve;
}

std::vector<double> FasterThanBestSoFar(const std::vector<int64_t>& order, const std::vector<int64_t>& runtimes,
                                        int rounds, int per_round) {
  std::vector<int64_t> sorted = runtimes;
  std::sort(sorted.begin(), sorted.end());
  const double best = sorted.empty() ? 1.0 : static_cast<double>(sorted.front());
  std::vector<double> out;
  for (double ratio : BestSoFar(order, runtimes, rounds, per_round)) {
    const int64_t found = std::llround(ratio * best);
    out.push_back(static_cast<double>(std::lower_bound(sorted.begin(), sorted.end(), found) - sorted.begin()));
  }
  return out;
}

absl::StatusOr<ReplayReport> RunReplay(const ReplayOptions& o) {
  absl::StatusOr<Collection> c = ParseCollection(o.collection);
  if (!c.ok()) return c.status();
  if (c->kind != CollectionKind::kLayout)
    return absl::InvalidArgumentError("replay plays layout autotuning: give a layout collection");
  if (o.rounds < 1 || o.per_round < 1 || o.random_orders < 1)
    return absl::InvalidArgumentError("--rounds, --per_round and --random_orders must be at least 1");
  absl::StatusOr<LayoutGraph> g = LoadLayoutGraph(o.npz);
  if (!g.ok()) return g.status();
  for (int64_t i = 0; i < g->num_configs; ++i)
    if (g->config_runtime[i] <= 0)
      return absl::InvalidArgumentError(absl::StrCat(o.npz, ": config_runtime[", i, "] is ", g->config_runtime[i],
                                                     "; replay needs measured runtimes (test files hide them)"));
  ReplayReport r;
  r.npz = o.npz;
  r.configs = g->num_configs;
  r.file_best_ns = *std::min_element(g->config_runtime.begin(), g->config_runtime.end());
  for (int k = 1; k <= o.rounds; ++k)
    r.measured.push_back(std::min<int64_t>(static_cast<int64_t>(k) * o.per_round, g->num_configs));

  // Random search: the mean curve over several seeded orders.
  std::mt19937_64 rng(o.seed);
  r.random_search.assign(static_cast<size_t>(o.rounds), 0.0);
  r.random_search_rank.assign(static_cast<size_t>(o.rounds), 0.0);
  std::vector<int64_t> order(static_cast<size_t>(g->num_configs));
  for (int s = 0; s < o.random_orders; ++s) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<double> curve = BestSoFar(order, g->config_runtime, o.rounds, o.per_round);
    const std::vector<double> rank = FasterThanBestSoFar(order, g->config_runtime, o.rounds, o.per_round);
    for (int k = 0; k < o.rounds; ++k) {
      r.random_search[k] += curve[k] / o.random_orders;
      r.random_search_rank[k] += rank[k] / o.random_orders;
    }
  }

  // The model without updates: rank every configuration once, measure in that order.
  RankerClient client(o.client);
  RankOptions ro;
  ro.collection = c->name();
  absl::StatusOr<Ranking> ranking = client.RankLayout(g->graph, g->node_config_ids, g->config_feat.data(),
                                                      g->num_configs, ro);
  if (!ranking.ok()) return ranking.status();
  r.model_version = ranking->model_version;
  const std::vector<int64_t> model_order(ranking->order.begin(), ranking->order.end());
  r.frozen_model = BestSoFar(model_order, g->config_runtime, o.rounds, o.per_round);
  r.frozen_model_rank = FasterThanBestSoFar(model_order, g->config_runtime, o.rounds, o.per_round);
  return r;
}

std::string ReplayReport::Table() const {
  std::string out = absl::StrFormat("%s: %d configurations, best %d ns; model version %d\n", npz, configs,
                                    file_best_ns, model_version);
  absl::StrAppendFormat(&out, "%6s %9s   %-27s %-27s\n", "", "", "random search", "model (frozen)");
  absl::StrAppendFormat(&out, "%6s %9s   %12s %14s %12s %14s\n", "round", "measured", "best/file", "faster ones",
                        "best/file", "faster ones");
  for (size_t k = 0; k < measured.size(); ++k)
    absl::StrAppendFormat(&out, "%6d %9d   %12.6f %14.1f %12.6f %14.0f\n", k + 1, measured[k], random_search[k],
                          random_search_rank[k], frozen_model[k], frozen_model_rank[k]);
  out += "(best/file: best runtime found so far over the file's best; faster ones: the file's configurations\n"
         " faster than the best found, 0 when the best was found; random search: mean over random orders)\n";
  return out;
}

std::string ReplayReport::Csv() const {
  std::string out = "round,measured,random_search,frozen_model,random_search_rank,frozen_model_rank\n";
  for (size_t k = 0; k < measured.size(); ++k)
    absl::StrAppendFormat(&out, "%d,%d,%.8f,%.8f,%.2f,%.0f\n", k + 1, measured[k], random_search[k], frozen_model[k],
                          random_search_rank[k], frozen_model_rank[k]);
  return out;
}

}  // namespace tgraph
