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
#include "model/nn/features.h"
#include "model/nn/model_io.h"
#include "model/store/registry.h"
#include "model/core/rng.h"
#include "model/nn/scoring.h"
#include "model/nn/tgraph_net.h"
#include "model/nn/tiled_block.h"

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
ABSL_FLAG(int64_t, tile_rows, tgraph::kDefaultTileRows,
          "Rows (nodes x configurations) per tile of TGraph's tiled inference blocks (model/nn/tiled_block.h)");
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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  tgraph::ReexecWithPassiveOpenMpWait(argv);  // see model/tools/cli.h
  const std::vector<char*> args = tgraph::ParseToolCommandLine(
      argc, argv, "Benchmark the TGraph scoring function.\n  tgraph-bench-model [--nodes N] [--configs C] [--npz GRAPH.npz]");
  if (args.size() > 1) return tgraph::Fail(tgraph::UsageError(absl::StrCat("unexpected argument '", args[1], "'")));
  absl::StatusOr<tgraph::Precision> resolved = tgraph::ResolvePrecision(absl::GetFlag(FLAGS_precision));
  if (!resolved.ok()) return tgraph::Fail(tgraph::UsageError(absl::StrCat("--precision: ", resolved.status().message())));
  const tgraph::Precision precision = *resolved;
  const int threads = tgraph::ThreadsOrCores(absl::GetFlag(FLAGS_threads));
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  int64_t n = absl::GetFlag(FLAGS_nodes), c = absl::GetFlag(FLAGS_configs);
  int64_t nc = std::max<int64_t>(1, static_cast<int64_t>(absl::GetFlag(FLAGS_config_fraction) * static_cast<double>(n)));

  // A graph shaped like a pruned TpuGraphs graph: a chain with some fan-in, real opcodes,
  // random features, every k-th node configurable (dot/convolution/reshape).
  tgraph::Rng rng(1);
  tgraph::NodeGraph g;
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
  std::vector<int64_t> config_nodes;
  for (int64_t j = 0; j < nc; ++j) config_nodes.push_back(j * n / nc);
  std::vector<int8_t> rows(static_cast<size_t>(c * nc * tgraph::kConfigFeatDim));
  for (int8_t& v : rows) v = static_cast<int8_t>(rng.Int(-1, 5));
  std::string source = "generated graph";
  if (const std::string path = absl::GetFlag(FLAGS_npz); !path.empty()) {
    absl::StatusOr<tgraph::LayoutGraph> real = tgraph::LoadLayoutGraph(path);
    if (!real.ok()) return tgraph::Fail(real.status());
    tgraph::PrunedGraph p = tgraph::PruneGraph(real->graph, real->node_config_ids);
    g = std::move(p.graph);
    config_nodes = std::move(p.config_node_index);
    n = g.num_nodes;
    nc = static_cast<int64_t>(config_nodes.size());
    c = std::min(c, real->num_configs);
    rows.assign(real->config_feat.begin(), real->config_feat.begin() + c * nc * tgraph::kConfigFeatDim);
    source = absl::StrCat(path, " (", real->graph.num_nodes, " nodes before pruning)");
  }
  // Untrained weights: the graph's own feature statistics keep their inputs in range. A
  // published model: its own statistics, spec and folds.
  tgraph::FeatureStats stats = tgraph::FeatureStats::Compute({&g});
  tgraph::ModelSpec spec;
  spec.architecture = absl::GetFlag(FLAGS_architecture);
  spec.hidden = absl::GetFlag(FLAGS_hidden);
  spec.blocks = absl::GetFlag(FLAGS_blocks);
  std::vector<std::shared_ptr<tgraph::RankingNet>> nets;
  int64_t reference = absl::GetFlag(FLAGS_reference);
  int64_t groups = 1;
  std::string model_name = "untrained";
  if (const std::string reg = absl::GetFlag(FLAGS_registry); !reg.empty()) {
    const tgraph::Registry registry(reg);
    int64_t version = absl::GetFlag(FLAGS_version);
    if (version <= 0) {
      absl::StatusOr<int64_t> latest = registry.LatestVersion(absl::GetFlag(FLAGS_collection));
      if (!latest.ok()) return tgraph::Fail(latest.status());
      version = *latest;
    }
    absl::StatusOr<tgraph::LoadedModel> model = tgraph::LoadModel(registry, absl::GetFlag(FLAGS_collection), version);
    if (!model.ok()) return tgraph::Fail(model.status());
    stats = model->manifest.stats;
    spec = model->manifest.spec;
    nets = model->folds;
    if (reference <= 0) reference = model->manifest.reference_configs;
    groups = model->manifest.reference_groups;
    model_name = absl::StrCat(absl::GetFlag(FLAGS_collection), " version ", version, " of ", reg);
  } else {
    if (absl::Status s = spec.Validate(); !s.ok()) return tgraph::Fail(tgraph::UsageError(s.message()));
    for (int f = 0; f < absl::GetFlag(FLAGS_folds); ++f) nets.push_back(tgraph::MakeRankingNet(spec));
    if (reference <= 0) reference = 256;
  }
  const tgraph::GraphTensors tensors = tgraph::MakeGraphTensors(g, config_nodes, stats);
  std::vector<tgraph::StaticEncoding> caches;
  std::vector<tgraph::FoldModel> folds;
  {
    torch::NoGradGuard no_grad;
    for (const auto& net : nets) {
      net->eval();
      net->SetInferenceFolding(absl::GetFlag(FLAGS_fold));
      net->SetInferencePrecision(precision);
      net->SetInferenceTileRows(absl::GetFlag(FLAGS_tile_rows));
      caches.push_back(net->Precompute(tensors));
    }
  }
  for (size_t f = 0; f < nets.size(); ++f) folds.push_back({nets[f].get(), &caches[f]});
  tgraph::ScoringOptions so;
  so.batch_size = absl::GetFlag(FLAGS_batch);
  if (absl::GetFlag(FLAGS_reference_groups) > 0) groups = absl::GetFlag(FLAGS_reference_groups);
  const int64_t per_config = tgraph::ActivationBytesPerConfig(spec, n, precision);
  const int64_t fits = tgraph::ConfigsWithinBudget(spec, n, precision, groups, absl::GetFlag(FLAGS_activation_bytes));
  if (fits == 0)
    return tgraph::Fail(tgraph::UsageError(
        absl::StrCat("one configuration needs about ", per_config >> 20, " MiB, over --activation_bytes")));
  if (fits > 0) {
    so.batch_size = std::min(so.batch_size, fits);
    so.max_reference = fits;
  }
  const std::string scoring = absl::GetFlag(FLAGS_scoring);
  if (scoring != "reference" && scoring != "batch")
    return tgraph::Fail(tgraph::UsageError(absl::StrCat("--scoring must be reference or batch, got '", scoring, "'")));
  so.batch_softmax = scoring == "batch";
  so.reference_size = reference;
  so.reference_groups = groups;
  so.tta = std::max(1, absl::GetFlag(FLAGS_tta));
  so.tta_agreement = absl::GetFlag(FLAGS_tta_agreement);
  const int64_t cascade = absl::GetFlag(FLAGS_cascade);
  const tgraph::ConfigRows cr{rows.data(), nullptr, c, nc};

  // The reference: a plain matmul of the network's dominant shape, [batch*N, H] x [H, H],
  // in the precision the graph blocks' matmuls run in.
  const auto dtype = precision == tgraph::Precision::kBFloat16 ? torch::kBFloat16 : torch::kFloat32;
  const torch::Tensor a = torch::randn({std::min(c, so.batch_size) * n, spec.hidden}).to(dtype);
  const torch::Tensor b = torch::randn({spec.hidden, spec.hidden}).to(dtype);

  // Model and matmul alternate within each repetition so that both see the same machine
  // (a shared VM's speed drifts by 2x over minutes); the figures are medians.
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<double> ms, mm_ms;
  int64_t batches = 0;
  const int warmup = std::max(0, absl::GetFlag(FLAGS_warmup));
  int64_t passes = 0, rescored = 0, reference_used = 0;
  for (int r = 0; r < repeats + warmup; ++r) {
    auto t0 = Clock::now();
    const tgraph::ScoreResult s = cascade > 0 ? tgraph::ScoreCascade(folds, tensors, cr, so, cascade)
                                              : tgraph::ScoreConfigs(folds, tensors, cr, so);
    passes = s.passes;
    reference_used = s.reference;
    rescored = cascade > 0 ? s.rescored : c;
    const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    batches = s.batches;
    torch::NoGradGuard no_grad;
    t0 = Clock::now();
    torch::Tensor out = torch::mm(a, b);
    (void)out.data_ptr();
    const double t_mm = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r >= warmup) {
      ms.push_back(t);
      mm_ms.push_back(t_mm);
    }
  }
  if (const std::string trace = absl::GetFlag(FLAGS_trace); !trace.empty()) {
    torch::autograd::profiler::RecordProfile profile(trace);
    (void)tgraph::ScoreConfigs(folds, tensors, cr, so);
  }
  const double request_ms = Median(ms);
  const double per_batch_ms = request_ms / static_cast<double>(batches);
  // FLOPs as executed (folded or not), and as the architecture specifies them: with a
  // reference, its batch and then the other distinct rows' batches.
  double flops = 0, spec_flops = 0;
  const bool folded = absl::GetFlag(FLAGS_fold) && spec.architecture == "tgraph";
  std::vector<int64_t> batch_sizes;
  if (so.batch_softmax) {
    const std::vector<int64_t> bounds = tgraph::BatchBounds(c, so.batch_size);
    for (size_t bi = 0; bi + 1 < bounds.size(); ++bi) batch_sizes.push_back(bounds[bi + 1] - bounds[bi]);
  } else {
    const int64_t distinct = static_cast<int64_t>(tgraph::ChooseReference(cr, c).size());
    batch_sizes.push_back(reference_used);
    const std::vector<int64_t> bounds = tgraph::BatchBounds(distinct - reference_used, so.batch_size);
    for (size_t bi = 0; bi + 1 < bounds.size(); ++bi) batch_sizes.push_back(bounds[bi + 1] - bounds[bi]);
  }
  for (int64_t cb : batch_sizes) {
    flops += tgraph::ForwardFlops(spec, n, nc, tensors.edge_src.numel(), cb, folded);
    spec_flops += tgraph::ForwardFlops(spec, n, nc, tensors.edge_src.numel(), cb, false);
  }
  flops *= static_cast<double>(folds.size());
  spec_flops *= static_cast<double>(folds.size());
  const double model_gflops = flops / (request_ms * 1e6);
  const double mm_flops = 2.0 * static_cast<double>(a.size(0)) * static_cast<double>(spec.hidden) *
                          static_cast<double>(spec.hidden);
  const double mm_gflops = mm_flops / (Median(mm_ms) * 1e6);
  std::vector<double> ratios;  // per repetition: (model FLOP/s) / (matmul FLOP/s)
  for (size_t r = 0; r < ms.size(); ++r) ratios.push_back((flops / ms[r]) / (mm_flops / mm_ms[r]));

  std::printf("graph: %s\n", source.c_str());
  std::printf("       %lld pruned nodes, %lld configurable, %lld directed edges; %lld configs in batches of %lld\n",
              static_cast<long long>(n), static_cast<long long>(nc), static_cast<long long>(tensors.edge_src.numel()),
              static_cast<long long>(c), static_cast<long long>(so.batch_size));
  std::printf("model: %s, %s hidden %lld, %lld blocks, %zu fold(s), %s; torch threads %d, OMP_WAIT_POLICY %s\n",
              model_name.c_str(), spec.architecture.c_str(), static_cast<long long>(spec.hidden),
              static_cast<long long>(spec.blocks), folds.size(), tgraph::PrecisionName(precision),
              torch::get_num_threads(), tgraph::OpenMpWaitPolicy().c_str());
  std::printf("activations (estimated): %.0f MiB per %lld-config batch\n",
              static_cast<double>(per_config * so.batch_size) / (1 << 20), static_cast<long long>(so.batch_size));
  const std::string how =
      so.batch_softmax
          ? absl::StrCat("batch softmax: permutation passes ", passes, " over all folds (tta ", so.tta, ", agreement ",
                         so.tta_agreement, ")")
          : absl::StrCat("scored against a reference of ", reference_used, " configurations, one pass");
  std::printf("%s%s\n", how.c_str(),
              cascade > 0 ? absl::StrCat("; cascade top ", cascade, ": ", rescored, " configs by every fold").c_str() : "");
  std::printf("request (all folds, median of %d): %.1f ms\n", repeats, request_ms);
  std::printf("per %lld-config batch per fold:      %.1f ms\n", static_cast<long long>(so.batch_size), per_batch_ms);
  std::printf("throughput:                        %.0f configs/s\n", static_cast<double>(c) / (request_ms / 1000.0));
  if (passes != static_cast<int64_t>(folds.size()) || cascade > 0) {
    // The FLOP counts below are those of one pass of every fold over every configuration.
    std::printf("(more or less than one pass of every fold over every configuration: no FLOP rates)\n");
    return 0;
  }
  std::printf("model arithmetic (executed):       %.2f GFLOP per request, %.1f GFLOP/s%s\n", flops / 1e9,
              model_gflops, folded ? " (f1 folded into f2)" : "");
  if (folded)
    std::printf("  as specified (unfolded):         %.2f GFLOP per request; --fold=false runs it\n", spec_flops / 1e9);
  std::printf("plain %s matmul [%lld x %lld] x [%lld x %lld]: %.1f GFLOP/s\n", tgraph::PrecisionName(precision),
              static_cast<long long>(a.size(0)),
              static_cast<long long>(spec.hidden), static_cast<long long>(spec.hidden),
              static_cast<long long>(spec.hidden), mm_gflops);
  std::printf("model / matmul (executed FLOPs):   %.0f%% (median of the per-repetition ratios)\n",
              100.0 * Median(ratios));
  if (folded)
    std::printf("  effective (unfolded FLOPs / time): %.0f%%: the specified network's FLOPs over the time taken\n",
                100.0 * Median(ratios) * spec_flops / flops);
  return 0;
}
