// tgraph-client search: what to measure next, for a layout graph or a tile kernel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/npy.h"
#include "model/tile/tile_space.h"
#include "model/tools/tool.h"

namespace tgraph::cli {

namespace {

// search starts from, and their runtimes sent when the file has every one (a test
// split's are hidden: zeros).
void MeasuredRows(const tgraph::LayoutGraph& g, tgraph::SearchConfigsOptions* o) {
  o->exclude = g.config_feat;
  if (g.num_configs > 0 &&
      std::all_of(g.config_runtime.begin(), g.config_runtime.end(), [](int64_t t) { return t > 0; }))
    o->exclude_runtimes_ns = g.config_runtime;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < g.num_configs; ++i)
    if (g.config_runtime[static_cast<size_t>(i)] > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return g.config_runtime[static_cast<size_t>(a)] != g.config_runtime[static_cast<size_t>(b)]
               ? g.config_runtime[static_cast<size_t>(a)] < g.config_runtime[static_cast<size_t>(b)]
               : a < b;
  });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_start_best)))));
  for (int64_t i : order) o->start.insert(o->start.end(), g.config(i), g.config(i) + g.num_config_nodes() * tgraph::kConfigFeatDim);
}

// search --out's reference file: PROPOSED.npy -> PROPOSED.reference.npy.
std::string ReferencePath(const std::string& out) {
  const std::string stem = absl::EndsWith(out, ".npy") ? out.substr(0, out.size() - 4) : out;
  return stem + ".reference.npy";
}

// The --measured rows (and --runtimes) of a module: what MeasuredRows reads of a file.
absl::Status ReadMeasured(tgraph::LayoutGraph* g) {
  const std::string measured = absl::GetFlag(FLAGS_measured), runtimes = absl::GetFlag(FLAGS_runtimes);
  if (measured.empty()) {
    if (!runtimes.empty()) return UsageError("--runtimes needs --measured ROWS: the rows they are the runtimes of");
    return absl::OkStatus();
  }
  absl::StatusOr<tgraph::LayoutConfigRows> rows = tgraph::LoadLayoutConfigRows(measured, g->num_config_nodes());
  if (!rows.ok()) return rows.status();
  g->num_configs = rows->count;
  g->config_feat = std::move(rows->values);
  g->config_runtime.assign(static_cast<size_t>(g->num_configs), 0);
  if (runtimes.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<int64_t>> ns = tgraph::LoadRuntimes(runtimes);
  if (!ns.ok()) return ns.status();
  if (static_cast<int64_t>(ns->size()) != g->num_configs)
    return absl::InvalidArgumentError(absl::StrCat(runtimes, " has ", ns->size(), " runtimes; ", measured, " has ",
                                                   g->num_configs, " rows (one runtime per row, in their order)"));
  g->config_runtime = std::move(*ns);
  return absl::OkStatus();
}

// A layout search's answer as JSON (--json) or text; `o` what was asked.
int PrintProposals(const tgraph::Proposals& found, const tgraph::SearchConfigsOptions& o, const std::string& path,
                   const std::string& collection, int64_t nc) {
  const tgraph::Proposals* p = &found;
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = {{"graph", path}, {"collection", collection}, {"model_version", p->model_version},
                        {"evaluations", p->evaluations}, {"generations", p->generations},
                        {"reference_configs", p->reference_configs}, {"total_ms", p->server_total_ms},
                        {"correction_measurements", p->correction_measurements},
                        {"correction_weight", p->correction_weight},
                        {"max_changed_groups", p->max_changed_groups}, {"num_variation", p->variation},
                        {"config_shape", {nc, tgraph::kConfigFeatDim}},  // each of "configs", flattened
                        {"stored_measurements", p->stored_measurements},
                        {"older_stored_reports", p->older_stored_reports},
                        {"start_configs", p->start_configs},
                        {"scores", p->scores}, {"spread", p->spread}, {"configs", nlohmann::json::array()}};
    const size_t row = static_cast<size_t>(nc) * tgraph::kConfigFeatDim;
    for (int64_t i = 0; i < p->count; ++i)
      j["configs"].push_back(std::vector<int>(p->rows.begin() + i * row, p->rows.begin() + (i + 1) * row));
    return PrintJson(j);
  }
  std::printf("%s: %lld configurations proposed by %s version %lld: %lld evaluated in %lld generations against a "
              "reference of %lld, %.0f ms; %zu measured rows excluded%s, %s started from, %lld runtimes "
              "correcting the scores (weight %.2f); %s\n",
              path.c_str(), static_cast<long long>(p->count), collection.c_str(),
              static_cast<long long>(p->model_version), static_cast<long long>(p->evaluations),
              static_cast<long long>(p->generations), static_cast<long long>(p->reference_configs),
              p->server_total_ms, o.exclude.size() / std::max<size_t>(1, nc * tgraph::kConfigFeatDim),
              o.include_stored ? absl::StrCat(" and ", p->stored_measurements, " more the server's store held").c_str()
                               : "",
              o.start.empty() && p->start_configs > 0
                  ? absl::StrCat("the store's ", p->start_configs, " fastest").c_str()
                  : absl::StrCat(p->start_configs).c_str(),
              static_cast<long long>(p->correction_measurements), p->correction_weight,
              p->max_changed_groups > 0
                  ? absl::StrCat("at most ", p->max_changed_groups, " groups changed from the default or a start row")
                        .c_str()
                  : "anywhere in the space");
  std::printf("%6s %12s %10s\n", "rank", "score", "spread");
  for (int64_t i = 0; i < p->count; ++i)
    std::printf("%6lld %12.4f %10.4f\n", static_cast<long long>(i + 1), p->scores[i], p->spread[i]);
  if (p->older_stored_reports > 0)
    std::printf("the store holds %lld older report%s of this graph than the 64 it joined: rows measured only there "
                "may be proposed again (give them with --measured and --runtimes)\n",
                static_cast<long long>(p->older_stored_reports), p->older_stored_reports == 1 ? "" : "s");
  if (p->variation > 0)
    std::printf("the last %lld are random variation of the fastest measured rows, not the model's picks: the last 30 "
                "measurements did not improve on the best\n",
                static_cast<long long>(p->variation));
  if (!absl::GetFlag(FLAGS_out).empty())
    std::printf("rows written to %s, the reference they were scored against to %s (rank --reference)\n",
                absl::GetFlag(FLAGS_out).c_str(), ReferencePath(absl::GetFlag(FLAGS_out)).c_str());
  return tgraph::kExitOk;
}

}  // namespace

// Proposes what to measure next for the --npz graph.
// A tile kernel's search: its graph (--hlo, registered as a kernel: no configurable
// nodes; or a tile --npz, whose rows count as measured), every legal configuration of the
// model's tile space scored, the best named by their parameters.
int SearchTiles(tgraph::RankerClient& client, const tgraph::Collection& c) {
  const std::string hlo = absl::GetFlag(FLAGS_hlo), path = hlo.empty() ? absl::GetFlag(FLAGS_npz) : hlo;
  tgraph::NodeGraph graph;
  tgraph::SearchConfigsOptions o;
  if (!hlo.empty()) {
    absl::StatusOr<tgraph::HloProgram> program = ReadProgram(hlo);
    if (!program.ok()) return Fail(program.status());
    graph = std::move(program->graph);
  } else {
    absl::StatusOr<tgraph::TileGraph> g = tgraph::LoadTileGraph(path);
    if (!g.ok()) return Fail(g.status());
    graph = std::move(g->graph);
    o.exclude_tiles = std::move(g->config_feat);
    // Their runtimes when the file has every one (a test split's are hidden: zeros).
    if (!g->config_runtime.empty() &&
        std::all_of(g->config_runtime.begin(), g->config_runtime.end(), [](auto t) { return t > 0; }))
      o.exclude_runtimes_ns.assign(g->config_runtime.begin(), g->config_runtime.end());
  }
  o.collection = c.name();
  o.model_version = absl::GetFlag(FLAGS_model_version);
  o.results = absl::GetFlag(FLAGS_results);
  absl::StatusOr<tgraph::Proposals> p = client.Search(graph, {}, o);
  if (!p.ok()) return Fail(p.status());
  if (p->count == 0)
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        path, ": no configuration left to propose: every legal one of the kernel's problem is measured (",
        o.exclude_tiles.size() / tgraph::kTileConfigDim, " given)")));
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = {{"graph", path}, {"collection", c.name()}, {"model_version", p->model_version},
                        {"evaluations", p->evaluations}, {"reference_configs", p->reference_configs},
                        {"total_ms", p->server_total_ms}, {"configs", p->tile_names}, {"scores", p->scores},
                        {"correction_measurements", p->correction_measurements},
                        {"spread", p->spread}};
    return PrintJson(j);
  }
  std::printf("%s: %lld of %lld legal configurations proposed by %s version %lld (%zu measured excluded%s), %.1f ms\n",
              path.c_str(), static_cast<long long>(p->count), static_cast<long long>(p->evaluations),
              c.name().c_str(), static_cast<long long>(p->model_version),
              o.exclude_tiles.size() / tgraph::kTileConfigDim,
              p->correction_measurements > 0
                  ? absl::StrCat("; the prior follows ", p->correction_measurements, " measured runtimes").c_str()
                  : "",
              p->server_total_ms);
  std::printf("%6s  %-20s %12s %10s\n", "rank", "BLOCK_MxNxK warps stages", "score", "spread");
  for (int64_t i = 0; i < p->count; ++i)
    std::printf("%6lld  %-20s %12.4f %10.4f\n", static_cast<long long>(i + 1), p->tile_names[i].c_str(), p->scores[i],
                p->spread[i]);
  return tgraph::kExitOk;
}

int Search(tgraph::RankerClient& client) {
  absl::StatusOr<tgraph::Collection> c = CollectionFlag();
  if (!c.ok()) return Fail(c.status());
  if (c->kind == tgraph::CollectionKind::kTile) {
    if (absl::GetFlag(FLAGS_hlo).empty() == absl::GetFlag(FLAGS_npz).empty())
      return Fail(UsageError("search needs one kernel: --hlo MODULE (one matrix product) or --npz KERNEL.npz (a tile "
                             "file; its rows count as measured)"));
    return SearchTiles(client, *c);
  }
  const std::string hlo = absl::GetFlag(FLAGS_hlo), path = hlo.empty() ? absl::GetFlag(FLAGS_npz) : hlo;
  if (path.empty() || (!hlo.empty() && !absl::GetFlag(FLAGS_npz).empty()))
    return Fail(UsageError("search needs one graph: --npz GRAPH.npz (a layout graph; its rows count as measured) "
                           "or --hlo MODULE (text, .hlo.pb; nothing measured yet)"));
  if (!absl::GetFlag(FLAGS_measured).empty() && hlo.empty())
    return Fail(UsageError("--measured is for --hlo: an --npz file's own rows are its measured ones"));
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty())
    for (const std::string& file : {out, ReferencePath(out)})
      if (absl::Status s = tgraph::CheckOutputFile(file, "--out", absl::GetFlag(FLAGS_force)); !s.ok()) return Fail(s);
  absl::StatusOr<tgraph::HloProgram> program;
  absl::StatusOr<tgraph::LayoutGraph> g = absl::UnknownError("");
  if (!hlo.empty()) {
    program = ReadProgram(hlo);
    if (!program.ok()) return Fail(program.status());
    g = tgraph::LayoutGraph();
    g->graph = program->graph;
    g->node_config_ids = program->node_config_ids;
    if (absl::Status s = ReadMeasured(&*g); !s.ok()) return Fail(s);
  } else {
    g = tgraph::LoadLayoutGraph(path, /*allow_no_configs=*/true);
  }
  if (!g.ok()) return Fail(g.status());
  tgraph::SearchConfigsOptions o;
  o.collection = c->name();
  o.model_version = absl::GetFlag(FLAGS_model_version);
  o.results = absl::GetFlag(FLAGS_results);
  o.max_evaluations = absl::GetFlag(FLAGS_max_evaluations);
  o.max_changed_groups = absl::GetFlag(FLAGS_max_changed_groups);
  o.seed = absl::GetFlag(FLAGS_seed);
  MeasuredRows(*g, &o);
  o.include_stored = absl::GetFlag(FLAGS_stored);
  absl::StatusOr<tgraph::Proposals> p =
      program.ok() ? client.Search(*program, o) : client.Search(g->graph, g->node_config_ids, o);
  if (!p.ok()) return Fail(p.status());
  const int64_t nc = g->num_config_nodes();
  // Nothing to measure next is the loop's end, not a round: a script stops here rather
  // than report an empty file.
  if (p->count == 0)
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        path, ": no configuration left to propose: every one the search reached is measured or excluded (",
        o.exclude.size() / std::max<size_t>(1, nc * tgraph::kConfigFeatDim), " given, ", p->stored_measurements,
        " more stored); nothing written")));
  if (!absl::GetFlag(FLAGS_out).empty()) {
    const tgraph::NpyArray rows = tgraph::NpyArray::From<int8_t>({p->count, nc, tgraph::kConfigFeatDim}, p->rows);
    if (absl::Status s = tgraph::WriteFileAtomic(absl::GetFlag(FLAGS_out), tgraph::SerializeNpy(rows)); !s.ok())
      return Fail(s);
    const tgraph::NpyArray reference =
        tgraph::NpyArray::From<int8_t>({p->reference_configs, nc, tgraph::kConfigFeatDim}, p->reference_rows);
    if (absl::Status s = tgraph::WriteFileAtomic(ReferencePath(absl::GetFlag(FLAGS_out)), tgraph::SerializeNpy(reference));
        !s.ok())
      return Fail(s);
  }
  return PrintProposals(*p, o, path, c->name(), nc);
}

}  // namespace tgraph::cli
