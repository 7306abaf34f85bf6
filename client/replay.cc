#include "client/replay.h"

#include <algorithm>
#include <numeric>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <tuple>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"

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

namespace {

struct FinetuneRun {
  int64_t published = 0;  // 0 when it published none
  std::string last_line;
};

// Runs the fine-tuning command: the version it published and what it said last.
absl::StatusOr<FinetuneRun> RunFinetune(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return absl::InternalError(absl::StrCat("cannot run: ", command));
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  if (status != 0)
    return absl::InternalError(absl::StrCat("the fine-tuning command failed (status ", status, "): ", command, "\n", out));
  FinetuneRun run;
  const size_t at = out.find("published as version ");
  if (at != std::string::npos) run.published = std::atoll(out.c_str() + at + 21);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  run.last_line = out.substr(out.find_last_of('\n') == std::string::npos ? 0 : out.find_last_of('\n') + 1);
  return run;
}

// Waits until the server lists `version` (or newer) for the collection.
absl::Status WaitForVersion(RankerClient& client, const std::string& collection, int64_t version, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<std::vector<ModelInfo>> m = client.ListModels();
    if (m.ok())
      for (const ModelInfo& info : *m)
        if (info.collection == collection && info.version >= version) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the server did not load ", collection, " version ", version, " within ", timeout_s, " s"));
}

}  // namespace

absl::Status ReplayWithUpdates(const ReplayOptions& o, const LayoutGraph& g, RankerClient& client,
                               const RankOptions& ro, std::vector<int64_t> order, int64_t version, ReplayReport* r) {
  const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
  std::vector<char> measured(static_cast<size_t>(g.num_configs), 0);
  std::vector<int64_t> measured_order;  // what was measured, in order: the curve's input
  for (int k = 0; k < o.rounds; ++k) {
    // Measure the next configurations of the current ranking not measured yet.
    std::vector<int64_t> picked;
    for (int64_t c : order) {
      if (static_cast<int>(picked.size()) == o.per_round) break;
      if (!measured[static_cast<size_t>(c)]) picked.push_back(c);
    }
    if (picked.empty()) break;
    std::vector<int8_t> rows;
    std::vector<int64_t> runtimes;
    for (int64_t c : picked) {
      measured[static_cast<size_t>(c)] = 1;
      measured_order.push_back(c);
      rows.insert(rows.end(), g.config(c), g.config(c) + row);
      runtimes.push_back(g.config_runtime[c]);
    }
    r->updated_versions.push_back(version);
    absl::StatusOr<MeasurementReceipt> m = client.ReportMeasurements(
        g.graph, g.node_config_ids, ro.collection, rows.data(), runtimes.data(), static_cast<int64_t>(picked.size()),
        "tgraph-client replay");
    if (!m.ok()) return m.status();
    if (k + 1 == o.rounds) break;
    absl::StatusOr<FinetuneRun> run = RunFinetune(o.finetune_command);
    if (!run.ok()) {
      // Early rounds may have too few measurements to validate a fine-tune: keep the
      // model, say why.
      r->warnings.push_back(absl::StrCat("round ", k + 1, ": ", run.status().message()));
      run = FinetuneRun{};
    } else {
      r->finetune_outcomes.push_back(absl::StrCat("round ", k + 1, ": ", run->last_line));
    }
    r->finetune_published.push_back(run->published);
    if (run->published > version) {
      if (absl::Status s = WaitForVersion(client, ro.collection, run->published, o.reload_timeout_s); !s.ok()) return s;
      version = run->published;
    }
    // Rank what is left with the (possibly new) model.
    std::vector<int64_t> left;
    std::vector<int8_t> left_rows;
    for (int64_t c = 0; c < g.num_configs; ++c)
      if (!measured[static_cast<size_t>(c)]) {
        left.push_back(c);
        left_rows.insert(left_rows.end(), g.config(c), g.config(c) + row);
      }
    if (left.empty()) break;
    RankOptions pinned = ro;
    pinned.model_version = version;
    absl::StatusOr<Ranking> again =
        client.RankLayout(g.graph, g.node_config_ids, left_rows.data(), static_cast<int64_t>(left.size()), pinned);
    if (!again.ok()) return again.status();
    order.clear();
    for (int32_t i : again->order) order.push_back(left[static_cast<size_t>(i)]);
  }
  r->updated_model = BestSoFar(measured_order, g.config_runtime, o.rounds, o.per_round);
  r->updated_model_rank = FasterThanBestSoFar(measured_order, g.config_runtime, o.rounds, o.per_round);
  return absl::OkStatus();
}

absl::Status ReplaySearch(const ReplayOptions& o, const LayoutGraph& g, RankerClient& client, ReplayReport* r) {
  const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
  std::map<std::string, int64_t> index;  // a row's bytes -> its first configuration in the file
  for (int64_t c = 0; c < g.num_configs; ++c)
    index.emplace(std::string(reinterpret_cast<const char*>(g.config(c)), row), c);
  std::vector<int64_t> measured_order;
  SearchConfigsOptions so;
  so.collection = o.collection;
  so.results = o.per_round;
  so.max_evaluations = o.search_evaluations;
  so.max_changed_groups = o.max_changed_groups;
  so.candidates.assign(g.config_feat.begin(), g.config_feat.end());
  for (int k = 0; k < o.rounds; ++k) {
    so.seed = o.seed + static_cast<uint64_t>(k);
    std::vector<int64_t> fastest = measured_order;  // the start: the 16 fastest measured
    std::sort(fastest.begin(), fastest.end(),
              [&](int64_t a, int64_t b) { return std::tie(g.config_runtime[a], a) < std::tie(g.config_runtime[b], b); });
    fastest.resize(std::min<size_t>(fastest.size(), 16));
    so.start.clear();
    for (int64_t c : fastest) so.start.insert(so.start.end(), g.config(c), g.config(c) + row);
    absl::StatusOr<Proposals> p = client.Search(g.graph, g.node_config_ids, so);
    if (!p.ok()) return p.status();
    if (p->count == 0) break;  // every configuration of the file measured
    r->search_correction.push_back(p->correction_measurements);
    r->search_variation.push_back(p->variation);
    for (int64_t i = 0; i < p->count; ++i) {
      const auto it = index.find(std::string(reinterpret_cast<const char*>(p->rows.data()) + i * row, row));
      if (it == index.end())
        return absl::InternalError("the search proposed a configuration that is not one of its candidates");
      measured_order.push_back(it->second);
      so.exclude.insert(so.exclude.end(), g.config(it->second), g.config(it->second) + row);
      so.exclude_runtimes_ns.push_back(g.config_runtime[it->second]);  // what the farm measured
    }
  }
  r->search = BestSoFar(measured_order, g.config_runtime, o.rounds, o.per_round);
  r->search_rank = FasterThanBestSoFar(measured_order, g.config_runtime, o.rounds, o.per_round);
  return absl::OkStatus();
}

absl::StatusOr<ReplayReport> RunReplay(const ReplayOptions& o) {
  absl::StatusOr<Collection> c = ParseCollection(o.collection);
  if (!c.ok()) return c.status();
  if (c->kind != CollectionKind::kLayout)
    return absl::InvalidArgumentError("replay plays layout autotuning: give a layout collection");
  if (o.rounds < 1 || o.per_round < 1 || o.random_orders < 1)
    return absl::InvalidArgumentError("--rounds, --per_round and --random_orders must be at least 1");
  if (o.search_evaluations < 0) return absl::InvalidArgumentError("--search_evaluations must be at least 0");
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
  if (!o.finetune_command.empty())
    if (absl::Status s = ReplayWithUpdates(o, *g, client, ro, model_order, ranking->model_version, &r); !s.ok()) return s;
  if (o.search_evaluations > 0)
    if (absl::Status s = ReplaySearch(o, *g, client, &r); !s.ok()) return s;
  return r;
}

std::string ReplayReport::Table() const {
  const bool updated = !updated_model.empty(), searched = !search.empty();
  std::string out = absl::StrFormat("%s: %d configurations, best %d ns; model version %d\n", npz, configs,
                                    file_best_ns, model_version);
  absl::StrAppendFormat(&out, "%6s %9s   %-27s %-27s%s%s\n", "", "", "random search", "model (frozen)",
                        updated ? "   model (updated every round)      " : "",
                        searched ? "   search (within the file)" : "");
  absl::StrAppendFormat(&out, "%6s %9s   %12s %14s %12s %14s%s%s\n", "round", "measured", "best/file", "faster ones",
                        "best/file", "faster ones", updated ? "    best/file    faster ones  version" : "",
                        searched ? "    best/file    faster ones" : "");
  for (size_t k = 0; k < measured.size(); ++k) {
    absl::StrAppendFormat(&out, "%6d %9d   %12.6f %14.1f %12.6f %14.0f", k + 1, measured[k], random_search[k],
                          random_search_rank[k], frozen_model[k], frozen_model_rank[k]);
    if (updated && k < updated_model.size())
      absl::StrAppendFormat(&out, "   %12.6f %14.0f %8d", updated_model[k], updated_model_rank[k],
                            k < updated_versions.size() ? updated_versions[k] : updated_versions.back());
    if (searched && k < search.size()) absl::StrAppendFormat(&out, "   %12.6f %14.0f", search[k], search_rank[k]);
    out += "\n";
  }
  out += "(best/file: best runtime found so far over the file's best; faster ones: the file's configurations\n"
         " faster than the best found, 0 when the best was found; random search: mean over random orders)\n";
  std::string varied;
  for (size_t k = 0; k < search_variation.size(); ++k)
    if (search_variation[k] > 0) absl::StrAppendFormat(&varied, "%s%d (%d)", varied.empty() ? "" : ", ", k + 1, search_variation[k]);
  if (!varied.empty())
    out += "search: rounds with random variation of the fastest measured, the measurements having stopped improving "
           "(proposals): " + varied + "\n";
  for (const std::string& f : finetune_outcomes) out += "fine-tuning after " + f + "\n";
  for (const std::string& w : warnings) out += "warning: " + w + "\n";
  return out;
}

std::string ReplayReport::Csv() const {
  const bool updated = !updated_model.empty(), searched = !search.empty();
  std::string out = "round,measured,random_search,frozen_model,random_search_rank,frozen_model_rank";
  out += updated ? ",updated_model,updated_model_rank,updated_version" : "";
  out += searched ? ",search,search_rank\n" : "\n";
  for (size_t k = 0; k < measured.size(); ++k) {
    absl::StrAppendFormat(&out, "%d,%d,%.8f,%.8f,%.2f,%.0f", k + 1, measured[k], random_search[k], frozen_model[k],
                          random_search_rank[k], frozen_model_rank[k]);
    if (updated && k < updated_model.size())
      absl::StrAppendFormat(&out, ",%.8f,%.0f,%d", updated_model[k], updated_model_rank[k],
                            k < updated_versions.size() ? updated_versions[k] : updated_versions.back());
    if (searched && k < search.size()) absl::StrAppendFormat(&out, ",%.8f,%.0f", search[k], search_rank[k]);
    out += "\n";
  }
  return out;
}

}  // namespace tgraph
