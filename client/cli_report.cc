// tgraph-client report: measured runtimes into the server's measurement store.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "model/tools/tool.h"

namespace tgraph::cli {

namespace {

// The receipt; and, when no model of the collection is loaded (a typo in --collection,
// or a farm collecting before its first model), a warning: the rows are stored for
// training one, and searches of the collection answer NOT_FOUND until then.
int PrintReceipt(tgraph::RankerClient& client, const std::string& collection, const std::string& graph,
                 const tgraph::MeasurementReceipt& r) {
  if (absl::StatusOr<std::vector<tgraph::ModelInfo>> models = client.ListModels(); models.ok()) {
    const bool served = std::any_of(models->begin(), models->end(),
                                    [&](const tgraph::ModelInfo& m) { return m.collection == collection; });
    if (!served)
      std::fprintf(stderr,
                   "tgraph-client: warning: no model of %s is loaded on this server: the measurements are stored to "
                   "train one, and search and rank answer NOT_FOUND for %s until one is (a typo in --collection?)\n",
                   collection.c_str(), collection.c_str());
  }
  if (absl::GetFlag(FLAGS_json))
    return PrintJson({{"graph", graph}, {"stored", r.stored}, {"shard", r.shard}, {"registrations", r.registrations}});
  std::printf("%s: %lld measurements stored as %s\n", graph.c_str(), static_cast<long long>(r.stored), r.shard.c_str());
  return tgraph::kExitOk;
}

// Reports an HLO module's measured rows (--configs) with their runtimes (--runtimes).
int ReportHlo(tgraph::RankerClient& client, const tgraph::Collection& c) {
  const std::string hlo = absl::GetFlag(FLAGS_hlo);
  if (absl::GetFlag(FLAGS_configs).empty() || absl::GetFlag(FLAGS_runtimes).empty())
    return Fail(UsageError("report --hlo needs --configs ROWS.npy (the measured layout rows, (c, nc, 18)) and "
                           "--runtimes FILE (their runtimes in ns, in row order)"));
  absl::StatusOr<tgraph::HloProgram> p = ReadProgram(hlo);
  if (!p.ok()) return Fail(p.status());
  absl::StatusOr<tgraph::LayoutConfigRows> rows = ConfigsFlag(static_cast<int64_t>(p->node_config_ids.size()));
  if (!rows.ok()) return Fail(rows.status());
  absl::StatusOr<std::vector<int64_t>> runtimes = tgraph::LoadRuntimes(absl::GetFlag(FLAGS_runtimes));
  if (!runtimes.ok()) return Fail(runtimes.status());
  if (static_cast<int64_t>(runtimes->size()) != rows->count)
    return Fail(absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_runtimes), " has ", runtimes->size(),
                                                        " runtimes for the ", rows->count, " rows of ",
                                                        absl::GetFlag(FLAGS_configs), ": one per row, in order")));
  absl::StatusOr<tgraph::MeasurementReceipt> r = client.ReportMeasurements(
      *p, c.name(), rows->values.data(), runtimes->data(), rows->count, absl::GetFlag(FLAGS_source));
  if (!r.ok()) return Fail(r.status());
  return PrintReceipt(client, c.name(), hlo, *r);
}

}  // namespace

// Reports the --npz file's configurations (the first --max_configs) with their
// runtimes to the server's measurement store, or an HLO module's measured rows.
int Report(tgraph::RankerClient& client) {
  absl::StatusOr<tgraph::Collection> c = CollectionFlag();
  if (!c.ok()) return Fail(c.status());
  if (c->kind != tgraph::CollectionKind::kLayout)
    return Fail(UsageError("report stores layout measurements: give a layout collection"));
  const std::string path = absl::GetFlag(FLAGS_npz);
  if (path.empty() == absl::GetFlag(FLAGS_hlo).empty())
    return Fail(UsageError("report needs one graph: --npz FILE with measured runtimes, or --hlo MODULE with "
                           "--configs ROWS.npy and --runtimes FILE"));
  if (path.empty()) return ReportHlo(client, *c);
  absl::StatusOr<tgraph::LayoutGraph> g = tgraph::LoadLayoutGraph(path);
  if (!g.ok()) return Fail(g.status());
  const int64_t max = absl::GetFlag(FLAGS_max_configs);
  const int64_t count = max > 0 ? std::min(max, g->num_configs) : g->num_configs;
  for (int64_t i = 0; i < count; ++i)
    if (g->config_runtime[i] <= 0)
      return Fail(absl::InvalidArgumentError(absl::StrCat(path, ": config_runtime[", i, "] is ", g->config_runtime[i],
                                                          "; report needs measured runtimes (test files hide them)")));
  absl::StatusOr<tgraph::MeasurementReceipt> r =
      client.ReportMeasurements(g->graph, g->node_config_ids, c->name(), g->config_feat.data(),
                                g->config_runtime.data(), count, absl::GetFlag(FLAGS_source));
  if (!r.ok()) return Fail(r.status());
  return PrintReceipt(client, c->name(), path, *r);
}

}  // namespace tgraph::cli
