#include "model/synth/generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/synth/cost_model.h"
#include "model/synth/families.h"
#include "model/synth/search.h"

namespace tgraph::synth {
namespace {

namespace fs = std::filesystem;

int64_t Draw(Rng& rng, Range r, bool log_uniform) {
  if (r.hi <= r.lo) return r.lo;
  if (!log_uniform) return rng.Int(r.lo, r.hi);
  const double v = std::exp(rng.Uniform(std::log(static_cast<double>(r.lo)), std::log(static_cast<double>(r.hi))));
  return std::clamp<int64_t>(std::llround(v), r.lo, r.hi);
}

uint64_t Salt(std::string_view s) {  // FNV-1a: a stable stream id per family or collection
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

struct Task {
  Collection collection;
  std::string split;
  int index = 0;         // within the family, across splits: graph identity
  size_t summary = 0;    // index into the summary rows
  uint64_t seed = 0;     // the random seed this graph is drawn from
};

// A graph's file name: the generator's name, prefixed by its seed when several seeds
// share one dataset (the same index of two seeds has the same name, and the trainer
// deals folds by name).
std::string FileName(const GenerateOptions& o, uint64_t seed, const std::string& name) {
  return o.seeds.size() > 1 ? absl::StrCat("s", seed, "_", name) : name;
}

struct TaskResult {
  std::string name;
  int64_t nodes = 0, config_nodes = 0, configs = 0, duplicates = 0, bytes = 0;
  double spread = 0;
};

const FamilySpec& Family(const PresetSpec& p, const Collection& c) {
  if (c.kind == CollectionKind::kTile) return p.tile;
  return c.source == "xla" ? p.xla : p.nlp;
}

int64_t CountDuplicateRows(const std::vector<int8_t>& rows, int64_t count) {
  if (count == 0) return 0;
  const size_t row = rows.size() / static_cast<size_t>(count);
  std::unordered_set<std::string_view> seen;
  int64_t dups = 0;
  for (int64_t i = 0; i < count; ++i)
    dups += !seen.emplace(reinterpret_cast<const char*>(rows.data()) + i * row, row).second;
  return dups;
}

}  // namespace

double MedianOverBest(std::vector<int64_t> r) {
  if (r.empty()) return 0.0;
  std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
  const double median = static_cast<double>(r[r.size() / 2]);
  const double best = static_cast<double>(*std::min_element(r.begin(), r.end()));
  return best > 0 ? median / best : 0.0;
}

namespace {

}  // namespace

LayoutInstance MakeLayoutInstance(const PresetSpec& p, uint64_t seed, const Collection& c, int index) {
  // The graph depends on the family and index only: the same graphs appear in the
  // random and the default collection of a source, as in the real dataset.
  Rng graph_rng = Rng(seed ^ Salt(c.source)).Fork(static_cast<uint64_t>(index) + 1);
  const int target = static_cast<int>(Draw(graph_rng, Family(p, c).nodes, p.log_uniform));
  LayoutInstance inst;
  inst.built = c.source == "xla" ? MakeXlaGraph(graph_rng, target) : MakeNlpGraph(graph_rng, target);
  inst.config_ids = ConfigurableNodes(inst.built.nodes);
  inst.name = absl::StrFormat("%s_%s_%04d", c.source, inst.built.kind, index);
  return inst;
}

namespace {

// The rows of graph `index` of a layout collection. Each search has its own random
// stream per graph; the neighbourhood of the best row and the region re-run the
// `default` collection's genetic search on that collection's stream, so their centre is
// the best row of the `default` file of the same graph (and seed).
SearchResult LayoutSearch(const PresetSpec& p, uint64_t seed, const Collection& c, int index,
                          const LayoutCostModel& model, const NodeGraph& graph, const std::vector<int64_t>& ids) {
  const FamilySpec& fam = Family(p, c);
  auto stream = [&](const Collection& of) { return Rng(seed ^ Salt(of.name())).Fork(static_cast<uint64_t>(index) + 1); };
  auto genetic = [&](Rng& rng) {
    return GeneticSearch(model, Draw(rng, fam.configs_default, p.log_uniform), rng);
  };
  Rng rng = stream(c);
  if (c.search == "random") return RandomSearch(model, Draw(rng, fam.configs_random, p.log_uniform), rng);
  if (c.search == "default") return genetic(rng);
  // A neighbourhood holds at most as many rows as the largest genetic search of the preset.
  const LayoutSpace space = LayoutSpaceOf(graph, ids);
  const size_t row = ids.size() * kConfigFeatDim;
  const std::vector<int8_t> all_default(row, -1);
  if (c.search == "near-default") return NeighbourhoodSearch(model, space, all_default.data(), fam.configs_default.hi, rng);
  Collection dflt = c;
  dflt.search = "default";
  Rng genetic_rng = stream(dflt);
  const SearchResult searched = genetic(genetic_rng);
  const int8_t* best = searched.configs.data() + static_cast<size_t>(BestRow(searched)) * row;
  if (c.search == "region")  // as many rows as the genetic search's file
    return RegionSearch(model, space, {all_default.data(), best}, static_cast<int>(kDefaultSearchRadius),
                        Draw(rng, fam.configs_default, p.log_uniform), rng);
  return NeighbourhoodSearch(model, space, best, fam.configs_default.hi, rng);
}

absl::StatusOr<TaskResult> RunLayoutTask(const PresetSpec& p, const GenerateOptions& o, const Task& t,
                                         const std::string& dir) {
  LayoutInstance inst = MakeLayoutInstance(p, t.seed, t.collection, t.index);
  const BuiltGraph& built = inst.built;
  const std::vector<int64_t>& ids = inst.config_ids;

  LayoutCostModel model(built.nodes, ids);
  SearchResult s = LayoutSearch(p, t.seed, t.collection, t.index, model, ToNodeGraph(built.nodes), ids);

  LayoutGraph g;
  g.name = FileName(o, t.seed, inst.name);
  g.graph = ToNodeGraph(built.nodes);
  g.node_config_ids = ids;
  g.num_configs = s.num_configs;
  g.config_feat = std::move(s.configs);
  g.config_runtime = std::move(s.runtimes);
  g.node_splits = {0, g.graph.num_nodes};  // one computation, as real files give it (0 to n)
  TaskResult r;
  r.spread = MedianOverBest(g.config_runtime);
  if (t.split == "test" && o.hide_test_runtimes) std::fill(g.config_runtime.begin(), g.config_runtime.end(), 0);
  const std::string path = absl::StrCat(dir, "/", g.name, ".npz");
  if (absl::Status st = SaveLayoutGraph(path, g); !st.ok()) return st;
  r.name = g.name;
  r.nodes = g.graph.num_nodes;
  r.config_nodes = g.num_config_nodes();
  r.configs = g.num_configs;
  r.duplicates = CountDuplicateRows(g.config_feat, g.num_configs);
  r.bytes = static_cast<int64_t>(fs::file_size(path));
  return r;
}

// Powers of two from extent/8 up, and the full extent: the range an autotuner explores.
std::vector<int64_t> TileOptions(int64_t extent) {
  std::vector<int64_t> v;
  for (int64_t x = 1; x < extent; x *= 2)
    if (x * 8 >= extent) v.push_back(x);
  v.push_back(extent);
  return v;
}

absl::StatusOr<TaskResult> RunTileTask(const PresetSpec& p, const GenerateOptions& o, const Task& t,
                                       const std::string& dir) {
  Rng rng = Rng(t.seed ^ Salt("tile")).Fork(static_cast<uint64_t>(t.index) + 1);
  const TpuKernel kernel = MakeTpuKernel(rng, static_cast<int>(Draw(rng, p.tile.nodes, false)));
  const int64_t wanted = Draw(rng, p.tile.configs_random, p.log_uniform);
  std::vector<std::vector<int64_t>> options;
  double combos = 1;
  for (int64_t d : kernel.out) {
    options.push_back(TileOptions(d));
    combos *= static_cast<double>(options.back().size());
  }
  const std::vector<int64_t> k_options = TileOptions(kernel.contract);
  combos *= static_cast<double>(k_options.size());
  const int64_t count = static_cast<int64_t>(std::min<double>(static_cast<double>(wanted), combos));

  // Distinct tile shapes; the compiler's default first, as an autotuner would start.
  std::vector<TpuTiling> choices = {DefaultTpuTiling(kernel)};
  std::set<std::vector<int64_t>> seen;
  auto key = [](const TpuTiling& c) {
    std::vector<int64_t> k = c.out_tile;
    k.push_back(c.contract_tile);
    return k;
  };
  seen.insert(key(choices[0]));
  while (static_cast<int64_t>(choices.size()) < count) {
    TpuTiling c;
    for (const auto& opt : options) c.out_tile.push_back(rng.Pick(opt));
    c.contract_tile = rng.Pick(k_options);
    if (seen.insert(key(c)).second) choices.push_back(std::move(c));
  }
  rng.Shuffle(choices);

  TileGraph g;
  g.name = FileName(o, t.seed, absl::StrFormat("tile_%s_%05d", kernel.graph.kind, t.index));
  g.graph = ToNodeGraph(kernel.graph.nodes);
  g.num_configs = count;
  const double default_ns = TpuKernelRuntimeNs(kernel, DefaultTpuTiling(kernel));
  for (const TpuTiling& c : choices) {
    const std::vector<float> f = TpuTilingFeatures(kernel, c);
    g.config_feat.insert(g.config_feat.end(), f.begin(), f.end());
    g.config_runtime.push_back(Measure(TpuKernelRuntimeNs(kernel, c), rng));
    g.config_runtime_normalizers.push_back(Measure(default_ns, rng));  // same measurement run
  }
  TaskResult r;
  r.spread = MedianOverBest(g.config_runtime);
  if (t.split == "test" && o.hide_test_runtimes) {
    std::fill(g.config_runtime.begin(), g.config_runtime.end(), 0);
    std::fill(g.config_runtime_normalizers.begin(), g.config_runtime_normalizers.end(), 0);
  }
  const std::string path = absl::StrCat(dir, "/", g.name, ".npz");
  if (absl::Status st = SaveTileGraph(path, g); !st.ok()) return st;
  r.name = g.name;
  r.nodes = g.graph.num_nodes;
  r.configs = g.num_configs;
  r.bytes = static_cast<int64_t>(fs::file_size(path));
  return r;
}

}  // namespace

absl::StatusOr<PresetSpec> GetPreset(const std::string& name) {
  PresetSpec p;
  p.name = name;
  if (name == "tiny") {
    p.xla = p.nlp = {4, 1, 1, {20, 80}, {30, 60}, {30, 60}};
    p.tile = {4, 1, 1, {5, 20}, {30, 60}, {30, 60}};
  } else if (name == "ci") {
    p.xla = p.nlp = {24, 3, 3, {100, 800}, {200, 1000}, {200, 1000}};
    p.tile = {24, 3, 3, {5, 60}, {200, 1000}, {200, 1000}};
  } else if (name == "nlp-scale") {
    // The nlp collections at TpuGraphs' scale within a 75 GB disk: table 1's graph
    // counts and node range (log-uniform, mean about 6,500 nodes against the dataset's
    // 5,659), configurations per graph a quarter of table 1's range (mean about 9,400):
    // about 16 GB of files, and 12 bytes per configuration and configurable node once
    // compressed: more than a 24 GB machine holds in memory. No xla or tile graphs.
    p.xla = p.tile = {0, 0, 0, {1, 1}, {1, 1}, {1, 1}};
    p.nlp = {196, 24, 24, {876, 21919}, {8843 / 4, 100001 / 4}, {9032 / 4, 90985 / 4}};
    p.log_uniform = true;
  } else if (name == "full") {
    // TpuGraphs table 1: graph counts split 80/10/10, node and config ranges.
    p.xla = {62, 8, 8, {372, 43615}, {109, 99783}, {681, 71574}};
    p.nlp = {196, 24, 24, {876, 21919}, {8843, 100001}, {9032, 90985}};
    p.tile = {5590, 699, 699, {5, 60}, {100, 4000}, {100, 4000}};
    p.log_uniform = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown preset '", name, "'; expected tiny, ci, nlp-scale or full"));
  }
  return p;
}

std::string GenerateSummary::Table() const {
  std::string out = absl::StrFormat("%-23s %-6s %6s %17s %9s %8s %6s %10s %7s\n", "collection", "split", "graphs",
                                    "nodes min/avg/max", "cfg nodes", "configs", "dups", "median/best", "MiB");
  for (const SplitSummary& s : splits) {
    if (s.graphs == 0) continue;
    out += absl::StrFormat("%-23s %-6s %6d %5d/%5d/%5d %9.1f %8.1f %5.1f%% %11.3f %7.1f\n", s.collection, s.split,
                           s.graphs, s.nodes_min, s.nodes_total / s.graphs, s.nodes_max,
                           static_cast<double>(s.config_nodes_total) / s.graphs,
                           static_cast<double>(s.configs_total) / s.graphs,
                           100.0 * static_cast<double>(s.duplicate_configs) / std::max<int64_t>(1, s.configs_total),
                           s.spread_sum / s.graphs, static_cast<double>(s.bytes) / (1 << 20));
  }
  return out;
}

namespace {

// One task per graph to generate, in collection, split and index order; each split's
// directory created and its summary entry added.
absl::StatusOr<std::vector<Task>> PlanTasks(const PresetSpec& preset, const GenerateOptions& o,
                                            const std::vector<Collection>& collections, GenerateSummary* summary) {
  std::vector<Task> tasks;
  for (const Collection& c : collections) {
    const FamilySpec& fam = Family(preset, c);
    int index = 0;
    for (const std::string& split : AllSplits()) {
      int n = split == "train" ? fam.train : split == "valid" ? fam.valid : fam.test;
      if (o.max_graphs_per_split >= 0) n = std::min(n, o.max_graphs_per_split);
      const std::string dir = SplitDir(o.out, c, split);
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message()));
      summary->splits.push_back({c.name(), split});
      // Each seed numbers its graphs from the same start: graph `index` of seed S is
      // the one a single-seed run of S writes.
      for (uint64_t seed : o.seeds)
        for (int i = 0; i < n; ++i) tasks.push_back({c, split, index + i, summary->splits.size() - 1, seed});
      index += n;
    }
  }
  return tasks;
}

// Adds each task's figures to its split's summary.
void Summarise(const std::vector<Task>& tasks, const std::vector<TaskResult>& results, GenerateSummary* summary) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    SplitSummary& s = summary->splits[tasks[i].summary];
    const TaskResult& r = results[i];
    s.nodes_min = s.graphs == 0 ? r.nodes : std::min(s.nodes_min, r.nodes);
    s.nodes_max = std::max(s.nodes_max, r.nodes);
    ++s.graphs;
    s.nodes_total += r.nodes;
    s.config_nodes_total += r.config_nodes;
    s.configs_total += r.configs;
    s.duplicate_configs += r.duplicates;
    s.spread_sum += r.spread;
    s.bytes += r.bytes;
  }
}

}  // namespace

absl::StatusOr<GenerateSummary> Generate(const GenerateOptions& o) {
  absl::StatusOr<PresetSpec> preset = GetPreset(o.preset);
  if (!preset.ok()) return preset.status();
  if (o.out.empty()) return absl::InvalidArgumentError("--out is required");
  const std::vector<Collection> collections = o.collections.empty() ? AllCollections() : o.collections;
  for (const Collection& c : collections) {
    if (IsPicks(c))
      return absl::InvalidArgumentError(absl::StrCat(
          "--collections: ", c.name(), " holds the rows a trained model's search picked; tgraph-bench-search "
          "--write_picks writes it into a dataset tgraph-synth wrote"));
    if (c.named())
      return absl::InvalidArgumentError(absl::StrCat(
          "--collections: ", c.name(), " is a model of your own; tgraph-synth generates the dataset's five "
          "collections and the neighbourhood ones (a named model trains on its farm's own files, or is fine-tuned from another's model)"));
  }
  const auto start = std::chrono::steady_clock::now();

  GenerateSummary summary;
  absl::StatusOr<std::vector<Task>> tasks = PlanTasks(*preset, o, collections, &summary);
  if (!tasks.ok()) return tasks.status();
  if (o.seeds.empty()) return absl::InvalidArgumentError("--seed: at least one seed is required");
  for (size_t i = 0; i < o.seeds.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (o.seeds[i] == o.seeds[j])
        return absl::InvalidArgumentError(absl::StrCat("--seed: seed ", o.seeds[i], " is named twice"));
  const std::string seeds =
      o.seeds.size() == 1 ? absl::StrCat("seed ", o.seeds[0])
                          : absl::StrCat("seeds ", absl::StrJoin(o.seeds, ", "), ", files named s<SEED>_<graph>");
  std::string readme = absl::StrCat(
      "Synthetic TpuGraphs-format data generated by tgraph-synth (preset ", o.preset, ", ", seeds,
      ").\nRuntimes come from an analytical TPU-like cost model, not from hardware:\n"
      "figures measured on this data are not TpuGraphs figures. See docs/synthetic-data.md.\n");
  if (absl::Status st = WriteFileAtomic(absl::StrCat(o.out, "/SYNTHETIC.txt"), readme); !st.ok()) return st;

  // One task per graph; each has its own random stream, so the files do not depend
  // on the number of threads or the order in which tasks finish.
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  absl::Status first_error;
  std::vector<TaskResult> results(tasks->size());
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  auto worker = [&] {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= tasks->size()) return;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok()) return;
      }
      const Task& t = (*tasks)[i];
      const std::string dir = SplitDir(o.out, t.collection, t.split);
      absl::StatusOr<TaskResult> r = t.collection.kind == CollectionKind::kTile ? RunTileTask(*preset, o, t, dir)
                                                                                 : RunLayoutTask(*preset, o, t, dir);
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        if (first_error.ok()) first_error = r.status();
        return;
      }
      results[i] = *r;
      const size_t finished = ++done;
      if (o.progress) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double eta = secs / static_cast<double>(finished) * static_cast<double>(tasks->size() - finished);
        std::fprintf(stderr, "[%zu/%zu] %s %s/%s: %lld nodes, %lld configs (%.0fs elapsed, ETA %.0fs)\n", finished,
                     tasks->size(), t.collection.name().c_str(), t.split.c_str(), r->name.c_str(),
                     static_cast<long long>(r->nodes), static_cast<long long>(r->configs), secs, eta);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (std::thread& th : pool) th.join();
  if (!first_error.ok()) return first_error;

  Summarise(*tasks, results, &summary);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace tgraph::synth
