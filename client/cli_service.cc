// tgraph-client replay, bench, health and models: the loop replayed, load, probes, the models served.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "client/bench.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "client/replay.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/tile/tile_space.h"
#include "model/tools/tool.h"

namespace tgraph::cli {
namespace {

// Whether flag `name` holds a value other than its default.
bool FlagChanged(absl::string_view name) {
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
  return f != nullptr && f->CurrentValue() != f->DefaultValue();
}

}  // namespace

int Replay(const tgraph::ClientOptions& co) {
  if (absl::GetFlag(FLAGS_json)) return Fail(UsageError("replay prints a table; --csv FILE writes its curves"));
  tgraph::ReplayOptions ro;
  ro.client = co;
  ro.collection = absl::GetFlag(FLAGS_collection);
  ro.npz = absl::GetFlag(FLAGS_npz);
  ro.rounds = absl::GetFlag(FLAGS_rounds);
  ro.per_round = absl::GetFlag(FLAGS_per_round);
  ro.random_orders = absl::GetFlag(FLAGS_random_orders);
  ro.seed = absl::GetFlag(FLAGS_seed);
  ro.finetune_command = absl::GetFlag(FLAGS_finetune_command);
  ro.search_evaluations = absl::GetFlag(FLAGS_search_evaluations);
  ro.max_changed_groups = absl::GetFlag(FLAGS_max_changed_groups);
  absl::StatusOr<tgraph::ReplayReport> r = tgraph::RunReplay(ro);
  if (!r.ok()) return Fail(r.status());
  std::printf("%s", r->Table().c_str());
  if (!absl::GetFlag(FLAGS_csv).empty())
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_csv), r->Csv()); !s.ok()) return Fail(s);
  return tgraph::kExitOk;
}

int Bench(const tgraph::ClientOptions& co) {
  tgraph::BenchOptions b;
  b.client = co;
  b.collection = absl::GetFlag(FLAGS_collection);
  b.data_root = absl::GetFlag(FLAGS_data);
  b.graphs = absl::GetFlag(FLAGS_graphs);
  b.concurrency = absl::GetFlag(FLAGS_concurrency);
  b.requests = absl::GetFlag(FLAGS_requests);
  b.duration_s = absl::GetFlag(FLAGS_duration_s);
  b.rate = absl::GetFlag(FLAGS_rate);
  b.configs = absl::GetFlag(FLAGS_configs_per_request);
  b.allow_remote = absl::GetFlag(FLAGS_allow_remote);
  b.progress = !absl::GetFlag(FLAGS_json);
  absl::StatusOr<tgraph::BenchReport> r = tgraph::RunBench(b);
  if (!r.ok()) return Fail(r.status());
  std::printf("%s", absl::GetFlag(FLAGS_json) ? (r->Json() + "\n").c_str() : r->Text().c_str());
  return r->errors.empty() ? tgraph::kExitOk : tgraph::kExitFailure;
}

// A probe answers at once: unless --retry_budget_s or --timeout_s are set to other
// values, no retries (nothing listening is UNAVAILABLE now, not after the 30 s budget
// other commands ride restarts with) and a 5 s deadline. The Docker HEALTHCHECK and the
// TLS exec probes use it.
int Health(tgraph::ClientOptions co) {
  if (!FlagChanged("retry_budget_s")) co.retry_budget_s = 0;
  if (!FlagChanged("timeout_s")) co.timeout_s = std::min(co.timeout_s, 5.0);
  tgraph::RankerClient client(co);
  absl::StatusOr<std::string> h = client.Health(absl::GetFlag(FLAGS_service));
  if (!h.ok()) return Fail(h.status());
  if (absl::GetFlag(FLAGS_json)) PrintJson({{"service", absl::GetFlag(FLAGS_service)}, {"status", *h}});
  else std::printf("%s\n", h->c_str());
  return *h == "SERVING" ? tgraph::kExitOk : tgraph::kExitFailure;
}

int Models(tgraph::RankerClient& client) {
  absl::StatusOr<std::vector<tgraph::ModelInfo>> m = client.ListModels();
  if (!m.ok()) return Fail(m.status());
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = nlohmann::json::array();
    for (const tgraph::ModelInfo& info : *m) {
      j.push_back({{"collection", info.collection}, {"version", info.version},
                   {"loaded_versions", info.loaded_versions}, {"architecture", info.architecture},
                   {"hidden", info.hidden}, {"folds", info.folds}, {"mean_valid_score", info.mean_valid_score},
                   {"created", info.created}, {"batch_size", info.batch_size},
                   {"reference_configs", info.reference_configs},
                   {"provenance",
                    {{"data", info.data}, {"dataset", info.dataset}, {"data_fingerprint", info.data_fingerprint},
                     {"graphs", info.graphs}, {"configurations", info.configurations}, {"finetunes", info.finetunes},
                     {"finetune_graphs", info.finetune_graphs}, {"finetune_measurements", info.finetune_measurements},
                     {"synthetic_only", info.synthetic_only}, {"summary", info.provenance}}}});
      if (!info.tile_space.empty()) j.back()["tile_space"] = nlohmann::json::parse(info.tile_space, nullptr, false);
      if (info.tile_prior)
        j.back()["tile_prior"] = {{"weight", info.tile_prior->weight},
                                  {"network_share", info.tile_prior->network_share},
                                  {"problems", info.tile_prior->problems}};
    }
    return PrintJson(j);
  }
  std::printf("%-20s %8s %10s %-20s %7s %6s %12s  %s\n", "collection", "version", "loaded", "architecture", "hidden",
              "folds", "valid score", "created");
  for (const tgraph::ModelInfo& info : *m) {
    std::string loaded;
    for (int64_t v : info.loaded_versions) loaded += (loaded.empty() ? "" : ",") + std::to_string(v);
    std::printf("%-20s %8lld %10s %-20s %7lld %6lld %12.4f  %s\n", info.collection.c_str(),
                static_cast<long long>(info.version), loaded.c_str(), info.architecture.c_str(),
                static_cast<long long>(info.hidden), static_cast<long long>(info.folds), info.mean_valid_score,
                info.created.c_str());
    std::printf("  trained on %s%s\n", info.provenance.c_str(),
                info.synthetic_only ? "\n  WARNING: synthetic data only: rankings follow the generator's cost model, "
                                      "not real hardware"
                                    : "");
    if (!info.tile_space.empty()) {
      absl::StatusOr<tgraph::TileSpace> space = tgraph::TileSpace::FromJson(info.tile_space, "tile_space");
      std::printf("  tile space: %s\n", space.ok() ? space->Summary().c_str() : space.status().ToString().c_str());
    }
    if (info.tile_prior) std::printf("  scores: %s\n", info.tile_prior->Summary().c_str());
  }
  return tgraph::kExitOk;
}

// The connection flags: the server, deadlines, retries and TLS.

}  // namespace tgraph::cli
