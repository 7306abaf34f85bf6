// tgraph-bench-kernels: times the chunked block's fused loops (model/nn/block_kernels.h) on one
// core against the LibTorch ops they replace, and the memory bandwidth the block's
// full-size passes are bounded by; and what a search's measured correction costs at the
// large real graph's size (model/search/measured_correction.h). Prints figures; not a test.
//
//   tgraph-bench-kernels [--reps 2000]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "model/tools/tool.h"
#include "model/search/measured_correction.h"
#include "model/core/rng.h"
#include "model/nn/block_kernels.h"

ABSL_FLAG(int, reps, 2000, "Repetitions of each in-cache measurement (the best of 5 rounds is printed)");

namespace {

using Clock = std::chrono::steady_clock;

// Microseconds per call of fn: the best of 5 rounds of `reps` calls.
template <typename Fn>
double MicrosPerCall(int reps, const Fn& fn) {
  fn();
  double best = 1e300;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps);
  }
  return best;
}

// The fused combine loop of one chunk at the paper's widths (4 nodes x 128
// configurations, half = 128), with the batch's own softmax and against a recorded
// reference in 1 and 4 groups.
void BenchCombine(int reps) {
  const int64_t nodes = 4, c = 128, half = 128, rows = nodes * c, n = rows * half;
  const torch::Tensor s0 = torch::randn({rows, half}) * 0.1, gate = torch::randn({rows, half});
  torch::Tensor s = s0.clone(), x = torch::zeros({rows, 2 * half});
  std::vector<float> scratch(static_cast<size_t>(c * half));
  const double copy_us = MicrosPerCall(reps, [&] { s.copy_(s0); });
  // The fused combine loop's time per element under a cross-attention mode.
  auto combine_ns = [&](const tgraph::kernels::CrossRowsMode& mode) {
    const double us = MicrosPerCall(reps, [&] {
      s.copy_(s0);
      tgraph::kernels::CombineNodes(x.data_ptr<float>(), s.data_ptr<float>(), gate.data_ptr<float>(), nodes, c, half,
                                    true, true, 1.0f / (64 * half), 1.0f, scratch.data(), mode);
    });
    return (us - copy_us) * 1e3 / static_cast<double>(n);
  };
  std::printf("one core, a chunk of %lld rows x %lld (in cache):\n", static_cast<long long>(rows),
              static_cast<long long>(half));
  tgraph::kernels::CrossRowsMode batch_softmax;
  batch_softmax.members = c;
  std::printf("  fused combine loop (gate, softmax over configurations, 2 GELUs, residuals): %.2f ns per element\n",
              combine_ns(batch_softmax));
  // The same chunk scored against a recorded reference (every row joins it alone), in one
  // group, and in 4 (the default collections' reference of 256 in training batches of 64).
  for (int64_t groups : {1, 4}) {
    const torch::Tensor a = torch::rand({groups, nodes, half}) + 1, b = torch::randn({groups, nodes, half}),
                        lse = torch::randn({groups, nodes, half}) + 5;
    tgraph::kernels::CrossStatsRows stats;
    stats.a = a.data_ptr<float>();
    stats.b = b.data_ptr<float>();
    stats.lse = lse.data_ptr<float>();
    stats.group_stride = nodes * half;
    tgraph::kernels::CrossRowsMode against;
    against.use = &stats;
    against.use_count = 64 * groups;
    against.groups = groups;
    std::printf("  the same against a recorded reference in %lld group(s) (model/nn/chunked_block.h): %.2f ns per element\n",
                static_cast<long long>(groups), combine_ns(against));
  }
}

// GELU, a few LibTorch ops and the squeeze-excitation on a chunk of 512 rows x 128.
void BenchElementwise(int reps) {
  const int64_t rows = 512, half = 128, n = rows * half;
  const torch::Tensor s0 = torch::randn({rows, half}) * 0.1;
  torch::Tensor y = torch::empty_like(s0);
  const double ours = MicrosPerCall(reps, [&] { tgraph::kernels::Gelu(s0.data_ptr<float>(), y.data_ptr<float>(), n); });
  const double theirs = MicrosPerCall(reps, [&] { torch::gelu_out(y, s0); });
  const double exp_theirs = MicrosPerCall(reps, [&] { torch::exp_out(y, s0); });
  const double mul_theirs = MicrosPerCall(reps, [&] { torch::mul_out(y, s0, s0); });
  std::printf("  GELU: ours %.2f ns per element, LibTorch %.2f; LibTorch exp %.2f, multiply %.2f\n",
              ours * 1e3 / static_cast<double>(n), theirs * 1e3 / static_cast<double>(n),
              exp_theirs * 1e3 / static_cast<double>(n), mul_theirs * 1e3 / static_cast<double>(n));
  const torch::Tensor small = torch::randn({16});
  torch::Tensor small_out = torch::empty_like(small);
  std::printf("  a LibTorch op on 16 floats (its fixed cost): %.2f us\n",
              MicrosPerCall(reps, [&] { torch::mul_out(small_out, small, small); }));
  const int64_t q = half / 8;
  const torch::Tensor w1 = torch::randn({q, half}), b1 = torch::randn({q}), w2 = torch::randn({half, q}),
                      b2 = torch::randn({half});
  const torch::Tensor w1t = w1.t().contiguous(), w2t = w2.t().contiguous();
  const double se_ours = MicrosPerCall(reps, [&] {
    tgraph::kernels::SqueezeExcite(s0.data_ptr<float>(), rows, half, q, w1t.data_ptr<float>(), b1.data_ptr<float>(),
                                   w2t.data_ptr<float>(), b2.data_ptr<float>(), y.data_ptr<float>());
  });
  const double se_blas =
      MicrosPerCall(reps, [&] { torch::addmm_out(y, b2, torch::addmm(b1, s0, w1.t()).relu_(), w2.t()); });
  std::printf("  squeeze-excitation %lld -> %lld -> %lld: ours %.1f us per chunk, LibTorch addmm (BLAS) %.1f us\n",
              static_cast<long long>(half), static_cast<long long>(q), static_cast<long long>(half), se_ours, se_blas);
}

// The full-size passes: a 128 MiB copy, out of cache.
void BenchBandwidth() {
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    const torch::Tensor a = torch::randn({32 << 20});
    torch::Tensor b = torch::empty_like(a);
    const double us = MicrosPerCall(3, [&] { b.copy_(a); });
    std::printf("copy of 128 MiB, %d thread(s): %.1f GB/s (read + write)\n", threads,
                2.0 * 128.0 * (1 << 20) / (us * 1e3));
  }
}

// SearchConfigs' correction at its bound (512 measured rows) on a graph of the large real
// graph's size (848 configurable nodes), each group one of 4 layouts: the fit, once per
// search, and a prediction with its uncertainty, once per row the search evaluates.
void BenchCorrection() {
  constexpr int64_t nc = 848, n = tgraph::MeasuredCorrection::kMaxMeasurements;
  tgraph::Rng rng(1);
  std::vector<int8_t> rows(static_cast<size_t>(n * nc * tgraph::kConfigFeatDim), -1);
  std::vector<int64_t> runtimes;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < nc * tgraph::kConfigGroups; ++g)
      rows[static_cast<size_t>(i * nc * tgraph::kConfigFeatDim + g * tgraph::kLayoutSlots)] =
          static_cast<int8_t>(rng.Int(-1, 2));
    runtimes.push_back(1'000'000 + rng.Int(0, 100'000));
  }
  absl::StatusOr<tgraph::MeasuredCorrection> c = tgraph::MeasuredCorrection::Fit(rows, runtimes, nc);
  const double fit_us = MicrosPerCall(1, [&] { c = tgraph::MeasuredCorrection::Fit(rows, runtimes, nc); });
  double sink = 0;
  const int8_t* row = rows.data();
  const double predict_us = MicrosPerCall(200, [&] { sink += c->Predict(row); });
  const double uncertainty_us = MicrosPerCall(200, [&] { sink += c->Uncertainty(row); });
  // A search's spread proposals (SearchOptions::spread_proposals), as Finish runs them:
  // 32 finalists' states, then 10 picks, each refreshing the states of those left.
  const auto row_at = [&](int i) { return rows.data() + static_cast<size_t>(i) * nc * tgraph::kConfigFeatDim; };
  const double spread_us = MicrosPerCall(1, [&] {
    tgraph::MeasuredCorrection pending = *c;
    std::vector<tgraph::MeasuredCorrection::RowState> state;
    for (int i = 0; i < 32; ++i) state.push_back(pending.State(row_at(i)));
    for (int k = 0; k < 10; ++k) {
      for (int i = k; i < 32; ++i) {
        pending.Refresh(row_at(i), &state[static_cast<size_t>(i)]);
        sink += pending.Uncertainty(state[static_cast<size_t>(i)]);
      }
      pending.AddPending(row_at(k));
    }
  });
  // The blend's leave-one-out predictions (SearchOptions::adapt_correction), once per search.
  const double loo_us = MicrosPerCall(1, [&] { sink += c->LeaveOneOut()[0]; });
  std::printf("measured correction, %lld rows of %lld configurable nodes: fit %.1f ms; per row: prediction %.1f us, "
              "uncertainty %.1f us; 10 proposals spread among 32 finalists %.1f ms; leave-one-out predictions %.1f ms "
              "(%.3g)\n",
              static_cast<long long>(n), static_cast<long long>(nc), fit_us / 1e3, predict_us, uncertainty_us,
              spread_us / 1e3, loo_us / 1e3, sink);
}

void RunKernelBench(int reps) {
  torch::NoGradGuard no_grad;
  torch::set_num_threads(1);
  torch::manual_seed(0);
  BenchCombine(reps);
  BenchElementwise(reps);
  BenchBandwidth();
  BenchCorrection();
}

}  // namespace

int main(int argc, char** argv) {
  tgraph::ParseToolFlags(
      argc, argv, "Benchmark the chunked block's fused loops.\n  tgraph-bench-kernels [--reps N]");
  RunKernelBench(std::max(1, absl::GetFlag(FLAGS_reps)));
  return 0;
}
