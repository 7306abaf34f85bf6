// tgraph-synth: writes synthetic TpuGraphs-format collections (docs/synthetic-data.md).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/synth/generator.h"
#include "model/tools/tool.h"

ABSL_FLAG(std::string, out, "", "Output root; files go to <out>/npz/layout/... and <out>/npz/tile/...");
ABSL_FLAG(std::string, preset, "ci", "Size preset: tiny (unit tests), ci (integration), nlp-scale (the nlp collections at TpuGraphs' graph counts and "
          "sizes, a quarter of the configurations: about 16 GB), full (TpuGraphs-sized)");
ABSL_FLAG(std::vector<std::string>, seed, {"0"},
          "Random seed; the same seed gives byte-identical files. Several (e.g. 0,5,6,8): each seed's graphs side "
          "by side in one dataset, as that seed alone writes them, files named s<SEED>_<graph>");
ABSL_FLAG(std::vector<std::string>, collections, {},
          "Comma-separated collections to write (default: the dataset's five), e.g. layout:xla:random,tile:xla; "
          "also layout:SOURCE:near-default and layout:SOURCE:near-best, the one-group neighbourhoods of the "
          "compiler default and of the genetic search's best row");
ABSL_FLAG(int, threads, 0, "Worker threads (0 = every core this process may use); the output does not depend on it");
ABSL_FLAG(bool, hide_test_runtimes, false, "Write zero runtimes in the test split, as the public dataset does");
ABSL_FLAG(bool, progress, false, "Print a line per graph (always on for --preset nlp-scale and full)");
ABSL_FLAG(int, max_graphs_per_split, -1, "Cap the graphs per split (-1 = the preset's counts)");

int main(int argc, char** argv) {
  tgraph::ParseToolFlags(
      argc, argv,
      "Generate synthetic TpuGraphs-format data.\n"
      "  tgraph-synth --out DIR --preset tiny|ci|nlp-scale|full --seed N[,N...] [--collections layout:xla:random,...]");
  tgraph::synth::GenerateOptions o;
  o.out = absl::GetFlag(FLAGS_out);
  o.preset = absl::GetFlag(FLAGS_preset);
  o.seeds.clear();
  for (const std::string& seed : absl::GetFlag(FLAGS_seed)) {
    uint64_t value = 0;
    if (!absl::SimpleAtoi(seed, &value))
      return tgraph::Fail(tgraph::UsageError(
          absl::StrCat("--seed: '", seed, "' is not a seed (a non-negative integer, or several joined by commas)")));
    if (std::find(o.seeds.begin(), o.seeds.end(), value) != o.seeds.end())
      return tgraph::Fail(tgraph::UsageError(absl::StrCat("--seed: seed ", value, " is named twice")));
    o.seeds.push_back(value);
  }
  o.threads = absl::GetFlag(FLAGS_threads);
  o.hide_test_runtimes = absl::GetFlag(FLAGS_hide_test_runtimes);
  o.progress = absl::GetFlag(FLAGS_progress) || o.preset == "full" || o.preset == "nlp-scale";
  o.max_graphs_per_split = absl::GetFlag(FLAGS_max_graphs_per_split);
  for (const std::string& name : absl::GetFlag(FLAGS_collections)) {
    if (name.empty()) continue;
    absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(name);
    if (!c.ok()) return tgraph::Fail(tgraph::UsageError(absl::StrCat("--collections: ", c.status().message())));
    o.collections.push_back(*c);
  }
  if (o.out.empty()) return tgraph::Fail(tgraph::UsageError("--out DIR is required"));
  if (o.preset != "tiny" && o.preset != "ci" && o.preset != "nlp-scale" && o.preset != "full")
    return tgraph::Fail(
        tgraph::UsageError(absl::StrCat("--preset must be tiny, ci, nlp-scale or full, got '", o.preset, "'")));
  absl::StatusOr<tgraph::synth::GenerateSummary> s = tgraph::synth::Generate(o);
  if (!s.ok()) return tgraph::Fail(s.status());
  std::printf("%s", s->Table().c_str());
  std::printf("wrote %s (preset %s, seed %s) in %.1f s\n", o.out.c_str(), o.preset.c_str(),
              absl::StrJoin(o.seeds, ",").c_str(), s->seconds);
  return tgraph::kExitOk;
}
