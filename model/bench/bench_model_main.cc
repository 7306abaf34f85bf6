// tgraph-bench-model: times the shared scoring function on a generated graph and
// compares its arithmetic rate with a plain LibTorch matmul of similar shape.
//
//   tgraph-bench-model [--nodes 1000] [--configs 128] [--hidden 256] [--folds 1] [--threads 0] [--fold=false]
//                      [--precision auto|bf16|fp32] [--npz REAL.npz] [--registry REG --collection C]
//                      [--scoring reference|batch] [--tta N] [--cascade K] [--warmup N]
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "model/core/graph_io.h"
#include "model/core/preprocess.h"
#include "model/tools/cli.h"
#include "model/tools/tool.h"
#include "model/nn/encoded_graph.h"
#include "model/nn/features.h"
#include "model/nn/model_io.h"
#include "model/store/registry.h"
#include "model/core/rng.h"
#include "model/nn/scoring.h"
#include "model/nn/tgraph_net.h"
#include "model/nn/chunked_block.h"

ABSL_FLAG(int64_t, nodes, 1000, "Pruned nodes of the generated graph");
ABSL_FLAG(std::string, npz, "",
          "Benchmark a real layout graph instead (pruned as the server prunes it; every configuration of the file, "
          "or the first --configs when that is smaller)");
ABSL_FLAG(int64_t, configs, 128, "Configurations per request (scored in batches of --batch)");
ABSL_FLAG(int64_t, batch, 128, "Configurations per forward pass");
ABSL_FLAG(double, config_fraction, 0.25, "Fraction of nodes that are configurable");
ABSL_FLAG(int64_t, hidden, 256, "Hidden width (the paper's 256)");
ABSL_FLAG(int64_t, blocks, 2, "Graph blocks");
ABSL_FLAG(std::string, architecture, "tgraph", "tgraph or tpugraphs-baseline");
ABSL_FLAG(int, folds, 1, "Folds scored per request");
ABSL_FLAG(std::string, precision, "auto", tgraph::kPrecisionFlagHelp);
ABSL_FLAG(int64_t, activation_bytes, 0,
          "As the server's flag: cut batches so that their activations (ActivationBytesPerConfig) fit this many bytes "
          "(0 = no limit)");
ABSL_FLAG(bool, fold, true, "Fold f1 into f2 at inference, as the server does (false: the layers as specified)");
ABSL_FLAG(int64_t, chunk_rows, tgraph::kDefaultChunkRows,
          "Rows (nodes x configurations) per chunk of TGraph's chunked inference blocks (model/nn/chunked_block.h)");
ABSL_FLAG(int, repeats, 10, "Timed repetitions (after --warmup runs)");
ABSL_FLAG(int, warmup, 2, "Untimed requests first");
ABSL_FLAG(std::string, registry, "",
          "Time a published model (its folds, hidden width and statistics) instead of untrained folds of --hidden");
ABSL_FLAG(std::string, collection, "", "With --registry: the model's collection");
ABSL_FLAG(int64_t, version, 0, "With --registry: the model version (0 = latest)");
ABSL_FLAG(std::string, scoring, "reference",
          "reference: every configuration against one reference (model/nn/scoring.h); batch: each batch its own softmax "
          "with --tta permutations (the earlier scoring)");
ABSL_FLAG(int64_t, reference, 0, "Reference configurations (0 = the model's, 256 untrained)");
ABSL_FLAG(int64_t, reference_groups, 0, "The reference's groups (0 = the model's, 1 untrained)");
ABSL_FLAG(int, tta, 1, "With --scoring batch: permutation passes per fold at most");
ABSL_FLAG(double, tta_agreement, 0, "With --scoring batch: stop a fold's passes once two successive ones agree to this tau (0: all)");
ABSL_FLAG(int64_t, cascade, 0, "K > 0: the top-K cascade (first fold over everything, every fold over the best 25%)");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0 = every core this process may use: affinity mask, cgroup CPU limit)");
ABSL_FLAG(std::string, trace, "", "Write a Chrome trace (chrome://tracing, Perfetto) of one extra request to this file");

namespace {

using Clock = std::chrono::steady_clock;
using tgraph::Fail;
using tgraph::UsageError;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The graph a request scores and its configuration rows.
struct BenchGraph {
  tgraph::NodeGraph g;
  std::vector<int64_t> config_nodes;
  std::vector<int8_t> rows;  // c x nc x 18
  int64_t n = 0, nc = 0, c = 0;
  std::string source = "generated graph";
};

// A graph shaped like a pruned TpuGraphs graph: a chain with some fan-in, real opcodes,
// random features, every k-th node configurable (dot/convolution/reshape).
BenchGraph GeneratedGraph(int64_t n, int64_t c, double config_fraction) {
  BenchGraph b;
  b.n = n;
  b.c = c;
  b.nc = std::max<int64_t>(1, static_cast<int64_t>(config_fraction * static_cast<double>(n)));
  tgraph::Rng rng(1);
  tgraph::NodeGraph& g = b.g;
  g.num_nodes = n;
  g.node_feat.resize(static_cast<size_t>(n) * tgraph::kNodeFeatDim);
  for (float& v : g.node_feat) v = static_cast<float>(rng.Uniform(0, 64));
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 6; ++k) g.node_feat[i * tgraph::kNodeFeatDim + tgraph::kLayoutFeatBegin + k] = static_cast<float>(k % 4);
    g.node_opcode.push_back(static_cast<int32_t>(rng.Int(1, 120)));
  }
  for (int64_t i = 1; i < n; ++i) {
    g.edge_index.push_back(i);
    g.edge_index.push_back(i - 1);
    if (i >= 8 && rng.Bernoulli(0.2)) {
      g.edge_index.push_back(i);
      g.edge_index.push_back(rng.Int(0, i - 2));
    }
  }
  for (int64_t j = 0; j < b.nc; ++j) b.config_nodes.push_back(j * n / b.nc);
  b.rows.resize(static_cast<size_t>(c * b.nc * tgraph::kConfigFeatDim));
  for (int8_t& v : b.rows) v = static_cast<int8_t>(rng.Int(-1, 5));
  return b;
}

// A real layout graph, pruned as the server prunes it, with its first `c` configurations.
absl::StatusOr<BenchGraph> RealGraph(const std::string& path, int64_t c) {
  absl::StatusOr<tgraph::LayoutGraph> real = tgraph::LoadLayoutGraph(path);
  if (!real.ok()) return real.status();
  tgraph::PrunedGraph p = tgraph::PruneGraph(real->graph, real->node_config_ids);
  BenchGraph b;
  b.g = std::move(p.graph);
  b.config_nodes = std::move(p.config_node_index);
  b.n = b.g.num_nodes;
  b.nc = static_cast<int64_t>(b.config_nodes.size());
  b.c = std::min(c, real->num_configs);
  b.rows.assign(real->config_feat.begin(), real->config_feat.begin() + b.c * b.nc * tgraph::kConfigFeatDim);
  b.source = absl::StrCat(path, " (", real->graph.num_nodes, " nodes before pruning)");
  return b;
}

// The folds a request runs: a published model's (its statistics, spec and reference),
// or untrained ones of the flags' width (the graph's own statistics keep their inputs
// in range).
struct BenchModel {
  tgraph::ModelSpec spec;
  tgraph::FeatureStats stats;
  std::vector<std::shared_ptr<tgraph::RankingNet>> nets;
  int64_t reference = 256, groups = 1;
  std::string name = "untrained";
};

absl::StatusOr<BenchModel> LoadBenchModel(const tgraph::NodeGraph& g) {
  BenchModel m;
  const std::string reg = absl::GetFlag(FLAGS_registry);
  if (reg.empty()) {
    absl::StatusOr<tgraph::Architecture> arch = tgraph::ParseArchitecture(absl::GetFlag(FLAGS_architecture));
    if (!arch.ok()) return UsageError(absl::StrCat("--architecture: ", arch.status().message()));
    m.spec.architecture = *arch;
    m.spec.hidden = absl::GetFlag(FLAGS_hidden);
    m.spec.blocks = absl::GetFlag(FLAGS_blocks);
    if (absl::Status s = m.spec.Validate(); !s.ok()) return UsageError(s.message());
    m.stats = tgraph::FeatureStats::Compute({&g});
    for (int f = 0; f < absl::GetFlag(FLAGS_folds); ++f) m.nets.push_back(tgraph::MakeRankingNet(m.spec));
  } else {
    int64_t version = 0;
    absl::StatusOr<tgraph::LoadedModel> model = tgraph::LoadModelOrLatest(
        tgraph::Registry(reg), absl::GetFlag(FLAGS_collection), absl::GetFlag(FLAGS_version), &version);
    if (!model.ok()) return model.status();
    m.stats = model->manifest.stats;
    m.spec = model->manifest.spec;
    m.nets = model->folds;
    m.reference = model->manifest.reference_configs;
    m.groups = model->manifest.reference_groups;
    m.name = absl::StrCat(absl::GetFlag(FLAGS_collection), " version ", version, " of ", reg);
  }
  if (absl::GetFlag(FLAGS_reference) > 0) m.reference = absl::GetFlag(FLAGS_reference);
  if (absl::GetFlag(FLAGS_reference_groups) > 0) m.groups = absl::GetFlag(FLAGS_reference_groups);
  return m;
}

// The scoring options of the flags, the batch and reference cut to the activation
// budget as the server cuts them.
absl::StatusOr<tgraph::ScoringOptions> BenchScoring(const BenchModel& m, int64_t n) {
  tgraph::ScoringOptions so;
  so.batch_size = absl::GetFlag(FLAGS_batch);
  const int64_t fits = tgraph::ConfigsWithinBudget(m.spec, n, m.groups, absl::GetFlag(FLAGS_activation_bytes));
  if (fits == 0)
    return UsageError(absl::StrCat("one configuration needs about ",
                                   tgraph::ActivationBytesPerConfig(m.spec, n) >> 20,
                                   " MiB, over --activation_bytes"));
  if (fits > 0) {
    so.batch_size = std::min(so.batch_size, fits);
    so.max_reference = fits;
  }
  const std::string scoring = absl::GetFlag(FLAGS_scoring);
  if (scoring != "reference" && scoring != "batch")
    return UsageError(absl::StrCat("--scoring must be reference or batch, got '", scoring, "'"));
  so.batch_softmax.on = scoring == "batch";
  so.reference_size = m.reference;
  so.reference_groups = m.groups;
  so.batch_softmax.tta = std::max(1, absl::GetFlag(FLAGS_tta));
  so.batch_softmax.tta_agreement = absl::GetFlag(FLAGS_tta_agreement);
  return so;
}

// Timed requests, each followed by a plain matmul of the network's dominant shape,
// [batch*N, H] x [H, H] in the blocks' precision: the two alternate so that both see
// the same machine (a shared VM's speed drifts by 2x over minutes).
struct Timings {
  std::vector<double> ms, mm_ms;
  double mm_flops = 0;
  int64_t mm_rows = 0, batches = 0, passes = 0, rescored = 0, reference_used = 0;
};

Timings TimeRequests(const std::vector<tgraph::FoldModel>& folds, const tgraph::GraphTensors& tensors,
                     const tgraph::ConfigRows& cr, const tgraph::ScoringOptions& so, int64_t nodes, int64_t hidden,
                     tgraph::Precision precision) {
  const auto dtype = precision == tgraph::Precision::kBFloat16 ? torch::kBFloat16 : torch::kFloat32;
  Timings t;
  t.mm_rows = std::min(cr.count, so.batch_size) * nodes;
  const torch::Tensor a = torch::randn({t.mm_rows, hidden}).to(dtype);
  const torch::Tensor b = torch::randn({hidden, hidden}).to(dtype);
  t.mm_flops = 2.0 * static_cast<double>(t.mm_rows) * static_cast<double>(hidden) * static_cast<double>(hidden);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats)), warmup = std::max(0, absl::GetFlag(FLAGS_warmup));
  const int64_t cascade = absl::GetFlag(FLAGS_cascade);
  for (int r = 0; r < repeats + warmup; ++r) {
    auto t0 = Clock::now();
    const tgraph::ScoreResult s = cascade > 0 ? tgraph::ScoreCascade(folds, tensors, cr, so, cascade)
                                              : tgraph::ScoreConfigs(folds, tensors, cr, so);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    t.passes = s.passes;
    t.reference_used = s.reference;
    t.rescored = cascade > 0 ? s.rescored : cr.count;
    t.batches = s.batches;
    torch::NoGradGuard no_grad;
    t0 = Clock::now();
    torch::Tensor out = torch::mm(a, b);
    (void)out.data_ptr();
    const double mm_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r >= warmup) {
      t.ms.push_back(ms);
      t.mm_ms.push_back(mm_ms);
    }
  }
  if (const std::string trace = absl::GetFlag(FLAGS_trace); !trace.empty()) {
    torch::autograd::profiler::RecordProfile profile(trace);
    (void)tgraph::ScoreConfigs(folds, tensors, cr, so);
  }
  return t;
}

// FLOPs of one pass of every fold over the request, as executed (folded or not) and as
// the architecture specifies them: with a reference, its batch and then the other
// distinct rows' batches.
std::pair<double, double> RequestFlops(const tgraph::ModelSpec& spec, const BenchGraph& bg,
                                       const tgraph::GraphTensors& tensors, const tgraph::ScoringOptions& so,
                                       const tgraph::ConfigRows& cr, int64_t reference_used, bool folded, size_t folds) {
  std::vector<int64_t> batch_sizes;
  int64_t rest = bg.c;
  if (!so.batch_softmax.on) {
    batch_sizes.push_back(reference_used);
    rest = static_cast<int64_t>(tgraph::ChooseReference(cr, bg.c).size()) - reference_used;
  }
  const std::vector<int64_t> bounds = tgraph::BatchBounds(rest, so.batch_size);
  for (size_t bi = 0; bi + 1 < bounds.size(); ++bi) batch_sizes.push_back(bounds[bi + 1] - bounds[bi]);
  double flops = 0, spec_flops = 0;
  for (int64_t cb : batch_sizes) {
    flops += tgraph::ForwardFlops(spec, bg.n, bg.nc, tensors.edge_src.numel(), cb, folded);
    spec_flops += tgraph::ForwardFlops(spec, bg.n, bg.nc, tensors.edge_src.numel(), cb, false);
  }
  return {flops * static_cast<double>(folds), spec_flops * static_cast<double>(folds)};
}

void PrintSetup(const BenchGraph& bg, const BenchModel& m, const tgraph::GraphTensors& tensors,
                const tgraph::ScoringOptions& so, tgraph::Precision precision, const Timings& t, size_t folds) {
  const int64_t cascade = absl::GetFlag(FLAGS_cascade);
  std::printf("graph: %s\n", bg.source.c_str());
  std::printf("       %lld pruned nodes, %lld configurable, %lld directed edges; %lld configs in batches of %lld\n",
              static_cast<long long>(bg.n), static_cast<long long>(bg.nc),
              static_cast<long long>(tensors.edge_src.numel()), static_cast<long long>(bg.c),
              static_cast<long long>(so.batch_size));
  std::printf("model: %s, %s hidden %lld, %lld blocks, %zu fold(s), %s; torch threads %d, OMP_WAIT_POLICY %s\n",
              m.name.c_str(), tgraph::ArchitectureName(m.spec.architecture), static_cast<long long>(m.spec.hidden),
              static_cast<long long>(m.spec.blocks), folds, tgraph::PrecisionName(precision), torch::get_num_threads(),
              tgraph::OpenMpWaitPolicy().c_str());
  std::printf("activations (estimated): %.0f MiB per %lld-config batch\n",
              static_cast<double>(tgraph::ActivationBytesPerConfig(m.spec, bg.n) * so.batch_size) / (1 << 20),
              static_cast<long long>(so.batch_size));
  const std::string how =
      so.batch_softmax.on ? absl::StrCat("batch softmax: permutation passes ", t.passes, " over all folds (tta ", so.batch_softmax.tta,
                                      ", agreement ", so.batch_softmax.tta_agreement, ")")
                       : absl::StrCat("scored against a reference of ", t.reference_used, " configurations, one pass");
  std::printf("%s%s\n", how.c_str(),
              cascade > 0 ? absl::StrCat("; cascade top ", cascade, ": ", t.rescored, " configs by every fold").c_str()
                          : "");
}

void PrintRates(const Timings& t, double flops, double spec_flops, bool folded, int64_t hidden,
                tgraph::Precision precision) {
  std::vector<double> ratios;  // per repetition: (model FLOP/s) / (matmul FLOP/s)
  for (size_t r = 0; r < t.ms.size(); ++r) ratios.push_back((flops / t.ms[r]) / (t.mm_flops / t.mm_ms[r]));
  std::printf("model arithmetic (executed):       %.2f GFLOP per request, %.1f GFLOP/s%s\n", flops / 1e9,
              flops / (Median(t.ms) * 1e6), folded ? " (f1 folded into f2)" : "");
  if (folded)
    std::printf("  as specified (unfolded):         %.2f GFLOP per request; --fold=false runs it\n", spec_flops / 1e9);
  std::printf("plain %s matmul [%lld x %lld] x [%lld x %lld]: %.1f GFLOP/s\n", tgraph::PrecisionName(precision),
              static_cast<long long>(t.mm_rows), static_cast<long long>(hidden), static_cast<long long>(hidden),
              static_cast<long long>(hidden), t.mm_flops / (Median(t.mm_ms) * 1e6));
  std::printf("model / matmul (executed FLOPs):   %.0f%% (median of the per-repetition ratios)\n",
              100.0 * Median(ratios));
  if (folded)
    std::printf("  effective (unfolded FLOPs / time): %.0f%%: the specified network's FLOPs over the time taken\n",
                100.0 * Median(ratios) * spec_flops / flops);
}

int RunBench() {
  absl::StatusOr<tgraph::Precision> precision = tgraph::ResolvePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) return Fail(UsageError(absl::StrCat("--precision: ", precision.status().message())));
  torch::set_num_threads(tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads)));
  torch::manual_seed(0);
  absl::StatusOr<BenchGraph> bg =
      absl::GetFlag(FLAGS_npz).empty()
          ? GeneratedGraph(absl::GetFlag(FLAGS_nodes), absl::GetFlag(FLAGS_configs), absl::GetFlag(FLAGS_config_fraction))
          : RealGraph(absl::GetFlag(FLAGS_npz), absl::GetFlag(FLAGS_configs));
  if (!bg.ok()) return Fail(bg.status());
  absl::StatusOr<BenchModel> m = LoadBenchModel(bg->g);
  if (!m.ok()) return Fail(m.status());
  const tgraph::GraphTensors tensors = tgraph::MakeGraphTensors(bg->g, bg->config_nodes, m->stats);
  for (const auto& net : m->nets) {
    net->eval();
    net->SetInferenceFolding(absl::GetFlag(FLAGS_fold));
    net->SetInferencePrecision(*precision);
    net->SetInferenceChunkRows(absl::GetFlag(FLAGS_chunk_rows));
  }
  const tgraph::EncodedGraph encoded = tgraph::EncodeGraph(tensors, m->nets);
  const std::vector<tgraph::FoldModel> folds = encoded.Folds(m->nets);
  absl::StatusOr<tgraph::ScoringOptions> so = BenchScoring(*m, bg->n);
  if (!so.ok()) return Fail(so.status());
  const tgraph::ConfigRows cr{bg->rows.data(), nullptr, bg->c, bg->nc};

  const Timings t = TimeRequests(folds, tensors, cr, *so, bg->n, m->spec.hidden, *precision);
  const double request_ms = Median(t.ms);
  PrintSetup(*bg, *m, tensors, *so, *precision, t, folds.size());
  std::printf("request (all folds, median of %zu): %.1f ms\n", t.ms.size(), request_ms);
  std::printf("per %lld-config batch per fold:      %.1f ms\n", static_cast<long long>(so->batch_size),
              request_ms / static_cast<double>(t.batches));
  std::printf("throughput:                        %.0f configs/s\n", static_cast<double>(bg->c) / (request_ms / 1000.0));
  if (t.passes != static_cast<int64_t>(folds.size()) || absl::GetFlag(FLAGS_cascade) > 0) {
    // The FLOP counts are those of one pass of every fold over every configuration.
    std::printf("(more or less than one pass of every fold over every configuration: no FLOP rates)\n");
    return tgraph::kExitOk;
  }
  const bool folded = absl::GetFlag(FLAGS_fold) && m->spec.architecture == tgraph::Architecture::kTGraph;
  const auto [flops, spec_flops] = RequestFlops(m->spec, *bg, tensors, *so, cr, t.reference_used, folded, folds.size());
  PrintRates(t, flops, spec_flops, folded, m->spec.hidden, *precision);
  return tgraph::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return tgraph::RunTorchTool(
      argc, argv, "Benchmark the TGraph scoring function.\n  tgraph-bench-model [--nodes N] [--configs C] [--npz GRAPH.npz]",
      RunBench);
}
