// tgraph-featurize: XLA HLO modules and TpuGraphs tuning data -> TpuGraphs .npz files.
//
//   tgraph-featurize module --in MODULE (HLO text or .hlo.pb) --out GRAPH.npz [--nodes_tsv NODES.tsv]
//   tgraph-featurize layout --in MODULE_TUNING_DATA.pb --out GRAPH.npz [--nodes_tsv NODES.tsv]
//   tgraph-featurize tile   --in TUNING_DATA.pb --out_dir DIR
//   tgraph-featurize apply  --in MODULE.hlo --configs ROWS.npy [--row K] --out MODULE.applied.hlo
//   tgraph-featurize fusions --in MODULE (after XLA's GPU passes) --out_dir DIR [--logs AUTOTUNE_LOGS]
//                            [--sm_count 132] [--graph fusion|dot] [--chosen_from MODULE]
//   tgraph-featurize fusions --in MODULE --logs AUTOTUNE_LOGS --collection tile@NAME --split S --out_root ROOT
//   tgraph-featurize tiles  --csv MEASUREMENTS.csv [--hlo_dir DIR] --out_root ROOT [--name h100-triton]
//                           [--hold_out shape|DTYPE|largest | --test_csv NEW.csv [--test_hlo_dir DIR]]
//                           [--split_seed S]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/hlo/apply_layouts.h"
#include "model/hlo/featurize.h"
#include "model/hlo/gemm_fusions.h"
#include "model/hlo/tile_ingest.h"
#include "model/tools/tool.h"

ABSL_FLAG(std::string, in, "", "Input: an HLO module (module), a ModuleTuningData (layout) or a TuningData (tile)");
ABSL_FLAG(std::string, out, "", "module, layout: the .npz to write; apply: the HLO text to write");
ABSL_FLAG(bool, force, false,
          "module, layout, apply: replace --out and --nodes_tsv when they exist (never a link or a device); "
          "fusions: replace DIR/fusions.tsv and the fusions' files");
ABSL_FLAG(std::string, out_dir, "", "tile: the folder to write one .npz per kernel into; fusions: one per fusion");
ABSL_FLAG(std::string, nodes_tsv, "",
          "module, layout: also write the configurable nodes, in configuration-row order, as a TSV "
          "(row, node, computation, instruction, opcode)");
ABSL_FLAG(int64_t, max_instructions, 200000, "Refuse modules with more instructions than this");
ABSL_FLAG(std::string, configs, "",
          "apply: layout rows, .npy or .npz (node_config_feat), shape (c, nc, 18) or (nc, 18), configurable nodes "
          "in --nodes_tsv order (e.g. tgraph-client search --out)");
ABSL_FLAG(std::string, csv, "", "tiles: the measurements (dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms)");
ABSL_FLAG(std::string, hlo_dir, "",
          "tiles: the folder of each problem's HLO text, gemm_<dtype>_<M>x<N>x<K>.hlo (default: each written as JAX "
          "writes jnp.dot's)");
ABSL_FLAG(std::string, out_root, "", "tiles: the data root to write the collection npz/tile/@NAME into");
ABSL_FLAG(std::string, name, "h100-triton", "tiles: the collection's name (tile@NAME)");
ABSL_FLAG(std::string, gpu, "NVIDIA H100 80GB HBM3",
          "tiles: the GPU the measurements were taken on, as the CUDA runtime names it (torch.cuda.get_device_name()); "
          "a row of the GPU table (model/tile/gpu_table.cc), which gives its SMs and occupancy limits");
ABSL_FLAG(int, tile_features, 2,
          "tiles: the rows' feature set: 2, the GPU's occupancy and waves beside the block sizes (docs/format.md); 1, "
          "without them");
ABSL_FLAG(int64_t, sm_count, 132,
          "fusions: the GPU's streaming multiprocessors (132 on an H100 or H200 SXM), for the grid's waves (tiles take "
          "the GPU's from its table)");
ABSL_FLAG(std::string, hold_out, "shape",
          "tiles: what the test split holds: shape (test_shapes shapes, every dtype), a dtype (e.g. f32: trained "
          "on the others only), or largest (the test_shapes shapes of the most multiply-adds)");
ABSL_FLAG(uint64_t, split_seed, 0, "tiles: shuffles the shapes (M, N, K) before they are split");
ABSL_FLAG(int64_t, test_shapes, 6, "tiles: shapes held out as the test split (every dtype of each); 0: none, every problem in training (a model to serve rather than to judge)");
ABSL_FLAG(std::string, test_csv, "",
          "tiles: problems measured apart (the same kernel's candidates on the same GPU, other shapes) as the test "
          "split, every problem of --csv training; instead of --hold_out");
ABSL_FLAG(std::string, test_hlo_dir, "", "tiles: the HLO of --test_csv's problems (default: --hlo_dir)");
ABSL_FLAG(int64_t, valid_shapes, 6, "tiles: shapes in the valid split");
ABSL_FLAG(std::string, collection, "",
          "fusions: instead of --out_dir, add the module's fusions to this tile collection of one's own (tile@NAME) "
          "under --out_root, in --split, each file named after the module");
ABSL_FLAG(std::string, split, "", "fusions: with --collection, the split every fusion of this program goes to "
          "(train, valid or test): a program's fusions resemble each other, so they never straddle two");
ABSL_FLAG(std::string, logs, "",
          "fusions: XLA's autotuning logs of the same compilation (--xla_gpu_dump_autotune_logs_to; binary, or text "
          "for .txt/.textproto): every Triton candidate that ran becomes a row of its fusion, with its time");
ABSL_FLAG(std::string, graph, "fusion",
          "fusions: each fusion's graph: fusion (its fused computation, prologue and epilogue with the dot) or dot "
          "(the dot alone, its operands as parameters: the same rows, to measure what the fused graph adds)");
ABSL_FLAG(std::string, chosen_from, "",
          "fusions: each fusion's chosen configuration from this module instead (the same program compiled with "
          "--xla_gpu_autotune_level=0: XLA's heuristic's picks), matched by fusion name");
ABSL_FLAG(int64_t, row, 0, "apply: which row of --configs to write into the module (0 = the first)");

namespace {

namespace fs = std::filesystem;
using tgraph::hlo::ModuleGraph;

using tgraph::Fail;
using tgraph::UsageError;

absl::Status WriteNodesTsv(const std::string& path, const ModuleGraph& m, const std::vector<int64_t>& ids) {
  std::string text = "row\tnode\tcomputation\tinstruction\topcode\n";
  for (size_t r = 0; r < ids.size(); ++r) {
    const tgraph::hlo::NodeSource& s = m.nodes[static_cast<size_t>(ids[r])];
    absl::StrAppend(&text, r, "\t", ids[r], "\t", s.computation, "\t", s.instruction, "\t", s.opcode, "\n");
  }
  return tgraph::WriteFileAtomic(path, text);
}

void PrintWarnings(const ModuleGraph& m) {
  for (const std::string& w : m.warnings) std::fprintf(stderr, "tgraph-featurize: warning: %s\n", w.c_str());
}

// Parses the whole input file as the message T, naming the file in errors.
template <typename T>
absl::StatusOr<T> ReadProto(const std::string& path, const char* kind) {
  absl::StatusOr<std::string> bytes = tgraph::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  T msg;
  if (bytes->size() > static_cast<size_t>(INT32_MAX) ||
      !msg.ParseFromArray(bytes->data(), static_cast<int>(bytes->size())))
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a serialized ", kind, " (protobuf parsing failed: truncated or another file)"));
  return msg;
}

// A module file (HLO text or a binary proto), its bytes and its graph; errors name the file.
struct ReadModule {
  std::string bytes;
  int computations = 0;
  ModuleGraph graph;
};

absl::StatusOr<ReadModule> ReadModuleFile(const std::string& in, const tgraph::hlo::Limits& limits) {
  ReadModule r;
  absl::StatusOr<std::string> bytes = tgraph::ReadFile(in);
  if (!bytes.ok()) return bytes.status();
  r.bytes = std::move(*bytes);
  absl::StatusOr<tgraph::xla::HloModuleProto> proto = tgraph::hlo::ParseModule(r.bytes, in, limits);
  if (!proto.ok()) return proto.status();
  r.computations = proto->computations_size();
  absl::StatusOr<ModuleGraph> m = tgraph::hlo::FeaturizeModule(*proto, in, limits);
  if (!m.ok()) return m.status();
  r.graph = std::move(*m);
  return r;
}

// --out and --nodes_tsv checked before any work: a tool never replaces what it was
// pointed at unless asked (--force), and never a link, a device or a FIFO.
absl::Status CheckOutputs(const std::string& out) {
  const bool force = absl::GetFlag(FLAGS_force);
  if (absl::Status s = tgraph::CheckOutputFile(out, "--out", force); !s.ok()) return s;
  if (const std::string tsv = absl::GetFlag(FLAGS_nodes_tsv); !tsv.empty()) return tgraph::CheckOutputFile(tsv, "--nodes_tsv", force);
  return absl::OkStatus();
}

int Module(const tgraph::hlo::Limits& limits) {
  const std::string in = absl::GetFlag(FLAGS_in), out = absl::GetFlag(FLAGS_out);
  if (in.empty() || out.empty()) return Fail(UsageError("module needs --in MODULE (HLO text or .hlo.pb) and --out GRAPH.npz"));
  if (absl::Status s = CheckOutputs(out); !s.ok()) return Fail(s);
  absl::StatusOr<ReadModule> read = ReadModuleFile(in, limits);
  if (!read.ok()) return Fail(read.status());
  const ModuleGraph* m = &read->graph;
  PrintWarnings(*m);
  if (m->default_config_nodes.empty())
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        in, ": module ", m->module_name, " has no convolution, dot or reshape instruction: no layout to configure")));
  // A graph-only layout file: the configurable nodes (convolution, dot, reshape) and no
  // configurations; rank configurations for it with tgraph-client rank --configs.
  tgraph::LayoutGraph g;
  g.name = m->module_name;
  g.graph = m->graph;
  g.node_config_ids = m->default_config_nodes;
  g.node_splits = m->node_splits;
  if (absl::Status s = tgraph::SaveLayoutGraph(out, g, /*allow_no_configs=*/true); !s.ok()) return Fail(s);
  if (!absl::GetFlag(FLAGS_nodes_tsv).empty())
    if (absl::Status s = WriteNodesTsv(absl::GetFlag(FLAGS_nodes_tsv), *m, g.node_config_ids); !s.ok()) return Fail(s);
  std::printf("%s: module %s, %lld nodes, %lld edges, %zu computations, %lld configurable nodes -> %s\n", in.c_str(),
              m->module_name.c_str(), static_cast<long long>(g.graph.num_nodes),
              static_cast<long long>(g.graph.num_edges()), static_cast<size_t>(read->computations),
              static_cast<long long>(g.num_config_nodes()), out.c_str());
  return 0;
}

int Layout(const tgraph::hlo::Limits& limits) {
  const std::string in = absl::GetFlag(FLAGS_in), out = absl::GetFlag(FLAGS_out);
  if (in.empty() || out.empty()) return Fail(UsageError("layout needs --in TUNING.pb and --out GRAPH.npz"));
  if (absl::Status s = CheckOutputs(out); !s.ok()) return Fail(s);
  absl::StatusOr<tgraph::xla::ModuleTuningData> data = ReadProto<tgraph::xla::ModuleTuningData>(in, "tpu_graphs.ModuleTuningData");
  if (!data.ok()) return Fail(data.status());
  absl::StatusOr<tgraph::hlo::LayoutTuning> t = tgraph::hlo::FeaturizeLayoutTuning(*data, in, limits);
  if (!t.ok()) return Fail(t.status());
  PrintWarnings(t->module);
  if (absl::Status s = tgraph::SaveLayoutGraph(out, t->graph); !s.ok()) return Fail(s);
  if (!absl::GetFlag(FLAGS_nodes_tsv).empty())
    if (absl::Status s = WriteNodesTsv(absl::GetFlag(FLAGS_nodes_tsv), t->module, t->graph.node_config_ids); !s.ok())
      return Fail(s);
  const tgraph::hlo::RunStats& r = t->stats;
  std::printf("%s: module %s, %lld nodes, %lld configurable; %lld runs: %lld kept, %lld with errors, %lld without "
              "a layout config, %lld without a profile, %lld with time <= 0 -> %s\n",
              in.c_str(), t->module.module_name.c_str(), static_cast<long long>(t->graph.graph.num_nodes),
              static_cast<long long>(t->graph.num_config_nodes()), static_cast<long long>(r.runs),
              static_cast<long long>(r.kept), static_cast<long long>(r.errors),
              static_cast<long long>(r.without_config), static_cast<long long>(r.without_profile),
              static_cast<long long>(r.nonpositive_time), out.c_str());
  return 0;
}

int Tile(const tgraph::hlo::Limits& limits) {
  const std::string in = absl::GetFlag(FLAGS_in), dir = absl::GetFlag(FLAGS_out_dir);
  if (in.empty() || dir.empty()) return Fail(UsageError("tile needs --in TUNING.pb and --out_dir DIR"));
  absl::StatusOr<tgraph::xla::TuningData> data = ReadProto<tgraph::xla::TuningData>(in, "tpu_graphs.TuningData");
  if (!data.ok()) return Fail(data.status());
  absl::StatusOr<tgraph::hlo::TileTuning> t = tgraph::hlo::FeaturizeTileTuning(*data, in, limits);
  if (!t.ok()) return Fail(t.status());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Fail(absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message())));
  for (size_t k = 0; k < t->graphs.size(); ++k) {
    const tgraph::TileGraph& g = t->graphs[k];
    const std::string path = absl::StrCat(dir, "/", g.name, ".npz");
    if (absl::Status s = tgraph::SaveTileGraph(path, g); !s.ok()) return Fail(s);
    std::fprintf(stderr, "[%zu/%zu] %s: %lld nodes, %lld configs (%lld runs, %lld with errors, %lld with time <= 1)\n",
                 k + 1, t->graphs.size(), path.c_str(), static_cast<long long>(g.graph.num_nodes),
                 static_cast<long long>(g.num_configs), static_cast<long long>(t->stats[k].runs),
                 static_cast<long long>(t->stats[k].errors), static_cast<long long>(t->stats[k].nonpositive_time));
  }
  for (const std::string& s : t->skipped) std::fprintf(stderr, "tgraph-featurize: skipped %s\n", s.c_str());
  std::printf("%s: %d kernels, %zu written to %s, %zu skipped\n", in.c_str(), data->modules_size(), t->graphs.size(),
              dir.c_str(), t->skipped.size());
  return 0;
}

// Where fusions writes: --out_dir, or a collection's split folder (--collection, --split,
// --out_root; true: the files are named after the module). Checked before any work.
absl::StatusOr<std::pair<std::string, bool>> FusionsOutput() {
  const std::string dir = absl::GetFlag(FLAGS_out_dir), coll = absl::GetFlag(FLAGS_collection);
  if (coll.empty()) {
    if (dir.empty()) return UsageError("fusions needs --out_dir DIR, or --collection tile@NAME --split S --out_root R");
    return std::make_pair(dir, false);
  }
  const std::string split = absl::GetFlag(FLAGS_split), root = absl::GetFlag(FLAGS_out_root);
  if (!dir.empty()) return UsageError("fusions: give --out_dir or --collection, not both");
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(coll);
  if (!c.ok() || c->kind != tgraph::CollectionKind::kTile || !absl::StartsWith(coll, "tile@"))
    return UsageError(absl::StrCat("--collection ", coll, ": expected a tile collection of one's own, tile@NAME"));
  const std::vector<std::string>& splits = tgraph::AllSplits();
  if (std::find(splits.begin(), splits.end(), split) == splits.end())
    return UsageError(absl::StrCat("--split '", split, "': expected train, valid or test"));
  if (root.empty()) return UsageError("fusions --collection needs --out_root ROOT");
  return std::make_pair(tgraph::SplitDir(root, *c, split), true);
}

// With --chosen_from: each fusion's choice from that module's fusion of the same name; a
// fusion it does not hold keeps its own, with a warning.
absl::Status TakeChoicesFrom(const std::string& path, const tgraph::hlo::Limits& limits,
                             std::vector<tgraph::hlo::GemmFusion>* fusions) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> bytes = tgraph::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<tgraph::xla::HloModuleProto> module = tgraph::hlo::ParseModule(*bytes, path, limits);
  if (!module.ok()) return module.status();
  absl::StatusOr<std::vector<tgraph::hlo::GemmFusion>> other = tgraph::hlo::FindGemmFusions(*module, path);
  if (!other.ok()) return other.status();
  std::map<std::string, tgraph::XlaGemmConfig> chosen;
  for (const tgraph::hlo::GemmFusion& f : *other) chosen.emplace(f.name, f.chosen);
  for (tgraph::hlo::GemmFusion& f : *fusions) {
    const auto it = chosen.find(f.name);
    if (it != chosen.end()) {
      f.chosen = it->second;
    } else {
      std::fprintf(stderr, "tgraph-featurize: warning: --chosen_from %s has no Triton GEMM fusion %s: it keeps its "
                   "own choice\n", path.c_str(), f.name.c_str());
    }
  }
  return absl::OkStatus();
}

int Fusions(const tgraph::hlo::Limits& limits) {
  const std::string in = absl::GetFlag(FLAGS_in);
  if (in.empty()) return Fail(UsageError("fusions needs --in MODULE (after XLA's GPU passes)"));
  absl::StatusOr<std::pair<std::string, bool>> output = FusionsOutput();
  if (!output.ok()) return Fail(output.status());
  const std::string& dir = output->first;
  const int64_t sm_count = absl::GetFlag(FLAGS_sm_count);
  if (sm_count <= 0 || sm_count > 100000) return Fail(UsageError("--sm_count must be in 1..100000"));
  const std::string graph = absl::GetFlag(FLAGS_graph);
  if (graph != "fusion" && graph != "dot")
    return Fail(UsageError(absl::StrCat("--graph '", graph, "': expected fusion or dot")));
  absl::StatusOr<std::string> bytes = tgraph::ReadFile(in);
  if (!bytes.ok()) return Fail(bytes.status());
  absl::StatusOr<tgraph::xla::HloModuleProto> module = tgraph::hlo::ParseModule(*bytes, in, limits);
  if (!module.ok()) return Fail(module.status());
  const std::string prefix = output->second ? tgraph::hlo::FileSafeName(module->name()) + "." : "";
  std::vector<tgraph::hlo::RefusedFusion> refused;
  absl::StatusOr<std::vector<tgraph::hlo::GemmFusion>> fusions = tgraph::hlo::FindGemmFusions(*module, in, &refused);
  if (!fusions.ok()) return Fail(fusions.status());
  if (absl::Status s = TakeChoicesFrom(absl::GetFlag(FLAGS_chosen_from), limits, &*fusions); !s.ok()) return Fail(s);
  if (graph == "dot")
    for (tgraph::hlo::GemmFusion& f : *fusions) {
      absl::StatusOr<tgraph::xla::HloModuleProto> lone = tgraph::hlo::LoneDotModule(f, in);
      if (!lone.ok()) return Fail(lone.status());
      f.module = std::move(*lone);
    }
  if (const std::string logs_path = absl::GetFlag(FLAGS_logs); !logs_path.empty()) {
    absl::StatusOr<std::string> log_bytes = tgraph::ReadFile(logs_path);
    if (!log_bytes.ok()) return Fail(log_bytes.status());
    absl::StatusOr<std::vector<tgraph::hlo::FusionLog>> logs = tgraph::hlo::ReadAutotuningLogs(*log_bytes, logs_path);
    if (!logs.ok()) return Fail(logs.status());
    for (const std::string& name : tgraph::hlo::AttachLogs(*logs, &*fusions))
      std::fprintf(stderr, "tgraph-featurize: warning: %s: a log of fusion %s, which %s does not hold (another "
                   "compilation's log?)\n", logs_path.c_str(), name.c_str(), in.c_str());
  }
  absl::StatusOr<std::vector<std::string>> lines =
      tgraph::hlo::WriteGemmFusions(*fusions, dir, sm_count, absl::GetFlag(FLAGS_force), limits, prefix, refused);
  if (!lines.ok()) return Fail(lines.status());
  for (const std::string& line : *lines) std::fprintf(stderr, "  %s\n", line.c_str());
  for (const tgraph::hlo::RefusedFusion& r : refused)
    std::fprintf(stderr, "tgraph-featurize: refused: %s\n", r.reason.c_str());
  std::printf("%s: module %s, %zu Triton matrix-product fusion%s -> %s/%sfusions.tsv%s\n", in.c_str(),
              module->name().c_str(), fusions->size(), fusions->size() == 1 ? "" : "s", dir.c_str(), prefix.c_str(),
              refused.empty() ? "" : absl::StrCat("; ", refused.size(), " refused (listed there, exit status 3)").c_str());
  return refused.empty() ? tgraph::kExitOk : tgraph::kExitPartial;
}

// Which of an applied row's choices a stock XLA takes as written (apply_layouts.h), in
// the form jax.jit takes them, and which need a compiler hook.
void PrintHandoff(const tgraph::hlo::AppliedLayouts& a) {
  const size_t all = a.entry_layouts.size() + a.needs_hook.size();
  if (all == 0) return;
  std::printf("stock XLA takes %zu of the row's %zu layout choices as written: the entry computation's parameter "
              "and result layouts (in JAX, jax.jit(f, in_shardings=..., out_shardings=...) with these Formats)\n",
              a.entry_layouts.size(), all);
  for (const tgraph::hlo::EntryLayout& e : a.entry_layouts) {
    const std::string which = e.result ? (e.index < 0 ? std::string("result") : absl::StrCat("result ", e.index))
                                       : absl::StrCat("argument ", e.index, " ", e.name);
    std::printf("  %s %s: %s  (%s)\n", which.c_str(), e.shape.c_str(), e.jax.c_str(), e.asked_by.c_str());
  }
  if (a.needs_hook.empty()) return;
  std::printf("%zu need a compiler that honours per-instruction layouts (docs/api.md, \"Handing a row to XLA\"):\n",
              a.needs_hook.size());
  for (const std::string& h : a.needs_hook) std::printf("  %s\n", h.c_str());
}

// Real tile measurements (a CSV and each problem's HLO) -> a tile collection of one's own.
int Tiles() {
  tgraph::hlo::TileIngestOptions o;
  o.csv = absl::GetFlag(FLAGS_csv);
  o.hlo_dir = absl::GetFlag(FLAGS_hlo_dir);
  o.out_root = absl::GetFlag(FLAGS_out_root);
  if (o.csv.empty() || o.out_root.empty())
    return Fail(UsageError("tiles needs --csv MEASUREMENTS.csv and --out_root ROOT (and --hlo_dir DIR of the problems' "
                           "HLO, or none: each problem's is written as JAX writes jnp.dot's)"));
  o.name = absl::GetFlag(FLAGS_name);
  o.gpu = absl::GetFlag(FLAGS_gpu);
  o.feature_set = absl::GetFlag(FLAGS_tile_features);
  o.hold_out = absl::GetFlag(FLAGS_hold_out);
  o.split_seed = absl::GetFlag(FLAGS_split_seed);
  o.test_shapes = absl::GetFlag(FLAGS_test_shapes);
  o.valid_shapes = absl::GetFlag(FLAGS_valid_shapes);
  o.test_csv = absl::GetFlag(FLAGS_test_csv);
  o.test_hlo_dir = absl::GetFlag(FLAGS_test_hlo_dir);
  if (o.test_csv.empty() && !o.test_hlo_dir.empty()) return Fail(UsageError("--test_hlo_dir needs --test_csv"));
  absl::StatusOr<tgraph::hlo::TileIngestSummary> s = tgraph::hlo::IngestTileMeasurements(o);
  if (!s.ok()) return Fail(s.status());
  for (const std::string& line : s->lines) std::printf("  %s\n", line.c_str());
  for (const auto& [dtype, n] : s->refused)
    std::printf("%s: %lld candidate configurations refused by the compiler (illegal, not training rows)\n",
                dtype.c_str(), static_cast<long long>(n));
  for (const std::string& split : tgraph::AllSplits())
    std::printf("%s: %lld problems, %lld configurations\n", split.c_str(),
                static_cast<long long>(s->problems[split]), static_cast<long long>(s->configs[split]));
  std::printf("-> %s (collection tile@%s, test split: %s, seed %llu)\n", s->collection_dir.c_str(), o.name.c_str(),
              !o.test_csv.empty()       ? ("the problems of " + o.test_csv).c_str()
              : o.hold_out == "shape"   ? "held-out shapes"
              : o.hold_out == "largest" ? "the largest shapes"
                                        : ("every " + o.hold_out + " problem").c_str(),
              static_cast<unsigned long long>(o.split_seed));
  return 0;
}

// A chosen row's layouts written into the module's text (apply_layouts.h).
int Apply(const tgraph::hlo::Limits& limits) {
  const std::string in = absl::GetFlag(FLAGS_in), out = absl::GetFlag(FLAGS_out), configs = absl::GetFlag(FLAGS_configs);
  if (in.empty() || out.empty() || configs.empty())
    return Fail(UsageError("apply needs --in MODULE.hlo, --configs ROWS.npy and --out MODULE.applied.hlo"));
  if (absl::Status s = CheckOutputs(out); !s.ok()) return Fail(s);
  absl::StatusOr<ReadModule> read = ReadModuleFile(in, limits);
  if (!read.ok()) return Fail(read.status());
  const int64_t nc = static_cast<int64_t>(read->graph.default_config_nodes.size());
  const int64_t k = absl::GetFlag(FLAGS_row);
  if (k < 0) return Fail(UsageError(absl::StrCat("--row ", k, ": expected a row number >= 0")));
  // Only row k is read and checked: a bad row elsewhere in the file is not this call's.
  absl::StatusOr<tgraph::LayoutConfigRows> rows = tgraph::LoadLayoutConfigRows(configs, nc, k);
  if (!rows.ok()) return Fail(rows.status());
  if (k >= rows->count)
    return Fail(UsageError(absl::StrCat("--row ", k, ": ", configs, " has ", rows->count, " rows (0..", rows->count - 1, ")")));
  const std::vector<int8_t>& row = rows->values;
  absl::StatusOr<tgraph::hlo::AppliedLayouts> applied =
      tgraph::hlo::ApplyLayoutRow(read->bytes, row, absl::StrCat(in, " with row ", k, " of ", configs));
  if (!applied.ok()) return Fail(applied.status());
  if (absl::Status s = tgraph::WriteFileAtomic(out, applied->text); !s.ok()) return Fail(s);
  for (const std::string& c : applied->changes) std::fprintf(stderr, "  %s\n", c.c_str());
  std::printf("%s: row %lld of %s: %lld layouts written, %lld copies inserted -> %s\n", in.c_str(),
              static_cast<long long>(k), configs.c_str(), static_cast<long long>(applied->layouts_written),
              static_cast<long long>(applied->copies), out.c_str());
  PrintHandoff(*applied);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = tgraph::ParseToolCommandLine(argc, argv,
      "XLA HLO modules and TpuGraphs tuning data -> TpuGraphs .npz files (docs/api.md, \"Ranking your own "
      "XLA program\").\n"
      "  tgraph-featurize module --in MODULE --out GRAPH.npz [--nodes_tsv NODES.tsv]\n"
      "      HLO text (XLA_FLAGS=--xla_dump_to=DIR), an xla.HloProto (--xla_dump_hlo_as_proto) or HloModuleProto -> a\n"
      "      graph-only layout file: convolution, dot and reshape nodes configurable, no configurations\n"
      "  tgraph-featurize layout --in MODULE_TUNING_DATA.pb --out GRAPH.npz [--nodes_tsv NODES.tsv]\n"
      "      a tpu_graphs.ModuleTuningData -> a layout file with its valid runs and their runtimes\n"
      "  tgraph-featurize tile --in TUNING_DATA.pb --out_dir DIR\n"
      "      a tpu_graphs.TuningData -> one tile file per kernel, with runtimes and normalizers\n"
      "  tgraph-featurize apply --in MODULE.hlo --configs ROWS.npy [--row K] --out MODULE.applied.hlo\n"
      "      a chosen layout row written into the module's HLO text (layouts, and copies where an operand's\n"
      "      layout must change), every other byte kept\n"
      "  tgraph-featurize fusions --in MODULE --out_dir DIR [--logs AUTOTUNE_LOGS] [--sm_count 132] [--graph dot]\n"
      "  tgraph-featurize fusions --in MODULE --logs AUTOTUNE_LOGS --collection tile@NAME --split S --out_root ROOT\n"
      "      a module after XLA's GPU passes -> one tile file per Triton matrix-product fusion (its fused\n"
      "      computation as a graph; as rows the configuration XLA chose, or with --logs every candidate XLA's\n"
      "      autotuner timed) and DIR/fusions.tsv\n"
      "  tgraph-featurize tiles --csv MEASUREMENTS.csv [--hlo_dir DIR] --out_root ROOT [--name h100-triton]\n"
      "      [--gpu 'NVIDIA H100 80GB HBM3'] [--tile_features 2]\n"
      "      real tile measurements (every candidate of a Triton matrix product timed on a GPU) and each problem's\n"
      "      HLO -> the collection tile@NAME: one tile file per problem, split by shape, and its tile_space.json;\n"
      "      with --test_csv NEW.csv [--test_hlo_dir DIR], the test split is the problems measured there");
  const std::set<std::string> commands = {"module", "layout", "tile", "tiles", "fusions", "apply"};
  if (args.size() > 2 && commands.count(args[1]) > 0)  // `--in dump/*.txt`: the shell gave --in one, the rest here
    return Fail(UsageError(absl::StrCat("one file per command: --in took the first of ", args.size() - 1,
                                        " files and the rest came as arguments (", args[2],
                                        "...: a pattern the shell expanded?); run ", args[1], " once per file")));
  if (args.size() != 2) return Fail(UsageError("give one command: module, layout, tile, tiles, fusions or apply"));
  tgraph::hlo::Limits limits;
  limits.max_instructions = absl::GetFlag(FLAGS_max_instructions);
  const std::string cmd = args[1];
  if (cmd == "module") return Module(limits);
  if (cmd == "layout") return Layout(limits);
  if (cmd == "tile") return Tile(limits);
  if (cmd == "apply") return Apply(limits);
  if (cmd == "tiles") return Tiles();
  if (cmd == "fusions") return Fusions(limits);
  return Fail(UsageError(
      absl::StrCat("unknown command '", cmd, "'; expected module, layout, tile, tiles, fusions or apply")));
}
