// The chunked inference block's pieces: our exp, GELU and bf16 rounding against the
// library functions, and the instance-norm statistics against float64 references.
// (The whole block against the training path: net_test.cc.)
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "model/nn/chunked_block.h"
#include "model/nn/block_kernels.h"

using namespace tgraph;

namespace {

uint16_t Bits(c10::BFloat16 b) {
  uint16_t v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

}  // namespace

CATCH_TEST_CASE("block kernels: exp within 2e-7 relative of std::exp on [-87, 88]", "[chunked]") {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.001) {
    const double want = std::exp(static_cast<double>(static_cast<float>(x)));
    worst = std::max(worst, std::fabs(kernels::Exp(static_cast<float>(x)) - want) / want);
  }
  CATCH_INFO("worst relative error " << worst);
  CATCH_CHECK(worst < 2e-7);
  CATCH_CHECK(kernels::Exp(0.0f) == 1.0f);
  // Clamped outside the range: finite, positive, monotone.
  CATCH_CHECK(kernels::Exp(-1000.0f) > 0.0f);
  CATCH_CHECK(kernels::Exp(-1000.0f) <= kernels::Exp(-87.0f));
  CATCH_CHECK(std::isfinite(kernels::Exp(1000.0f)));
}

CATCH_TEST_CASE("block kernels: GELU within 3e-7 (x max(1, |GELU|)) of the exact (erf) GELU", "[chunked]") {
  // Beyond |GELU| = 1 a float's own rounding (half an ulp) is the larger error.
  double worst = 0;
  for (double x = -12.0; x <= 12.0; x += 0.0007) {
    const float xf = static_cast<float>(x);
    const double want = 0.5 * xf * (1.0 + std::erf(xf / std::sqrt(2.0)));
    worst = std::max(worst, std::fabs(kernels::Gelu(xf) - want) / std::max(1.0, std::fabs(want)));
  }
  CATCH_INFO("worst error " << worst);
  CATCH_CHECK(worst < 3e-7);  // the erf approximation's 1.5e-7, plus float rounding
  CATCH_CHECK(kernels::Gelu(0.0f) == 0.0f);
  // The vectorised form (the clone this CPU runs) against the library's GELU.
  const torch::Tensor x = torch::linspace(-8, 8, 4001);
  CATCH_CHECK(torch::allclose(InferenceGelu(x), torch::gelu(x), 2e-7, 2e-7));
}

CATCH_TEST_CASE("block kernels: bf16 rounding equals LibTorch's (to nearest even)", "[chunked]") {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 3.14159265f, 1e-40f, 65504.0f, 3.0e38f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               FromBits(0x3F808000u),   // exactly halfway, even below: rounds down
                               FromBits(0x3F818000u),   // exactly halfway, odd below: rounds up
                               FromBits(0x3F808001u),   // just over halfway: up
                               FromBits(0x7F7FFFFFu)};  // the largest float: rounds to infinity
  torch::manual_seed(4);
  const torch::Tensor r = torch::randn({2000}) * 100;
  for (int64_t i = 0; i < r.numel(); ++i) values.push_back(r[i].item<float>());
  for (float v : values) {
    CATCH_INFO(v);
    CATCH_CHECK(kernels::ToBf16(v) == Bits(c10::BFloat16(v)));
  }
  const uint16_t nan = kernels::ToBf16(std::numeric_limits<float>::quiet_NaN());
  CATCH_CHECK(std::isnan(FromBits(static_cast<uint32_t>(nan) << 16)));
  CATCH_CHECK(std::isnan(FromBits(static_cast<uint32_t>(kernels::ToBf16(FromBits(0x7F800001u))) << 16)));
}

CATCH_TEST_CASE("chunked block: instance-norm statistics equal float64 ones, chunk by chunk", "[chunked]") {
  torch::manual_seed(5);
  // A mean far from zero against a small spread: where sums of squares in float cancel.
  const torch::Tensor x = torch::randn({37, 5, 8}) * 0.01 + 300;
  const torch::Tensor xd = x.to(torch::kFloat64);
  const torch::Tensor want_mean = xd.mean(0), want_var = xd.var(0, /*unbiased=*/false);
  for (int64_t chunk_rows : {1, 7, 40, 100000}) {
    CATCH_INFO("chunk rows " << chunk_rows);
    const NodeStats s = ComputeNodeStats(x, chunk_rows);
    CATCH_CHECK(torch::allclose(s.mean, want_mean, 1e-12, 1e-9));
    CATCH_CHECK(torch::allclose(s.var, want_var, 1e-5, 1e-12));
  }
  // The first block's input: rows of node_in repeated over configurations, the
  // configurable nodes' own rows, and the same statistics.
  const torch::Tensor node_in = torch::randn({9, 8}) + 2;
  const torch::Tensor config_nodes = torch::tensor({0, 4, 7}, torch::kInt64);
  // Configurable node j's row for configuration r is rows[index[j, r]]: shared rows too.
  ConfigNodeRows config;
  config.rows = torch::randn({6, 8});
  config.index = torch::tensor({0, 1, 0, 0, 2, 3, 3, 3, 3, 3, 4, 5, 4, 5, 4}, torch::kInt64).view({3, 5});
  const torch::Tensor config_rows = config.rows.index_select(0, config.index.view({-1})).view({3, 5, 8});
  const torch::Tensor want =
      node_in.unsqueeze(1).expand({9, 5, 8}).index_copy(0, config_nodes, config_rows).contiguous();
  for (int64_t chunk_rows : {1, 10, 100000}) {
    NodeStats s;
    const torch::Tensor built = BuildBlockInput(node_in, config_nodes, config, &s, chunk_rows);
    CATCH_CHECK(torch::equal(built, want));
    const NodeStats ref = ComputeNodeStats(want, 100000);
    CATCH_CHECK(torch::allclose(s.mean, ref.mean, 1e-12, 1e-12));
    CATCH_CHECK(torch::allclose(s.var, ref.var, 1e-9, 1e-12));
  }
}

CATCH_TEST_CASE("the configurable nodes' inputs are computed once per distinct layout of a node", "[chunked]") {
  torch::manual_seed(8);
  const int64_t c = 6, nc = 3, slots = 4, values = 3, h = 16;
  const torch::Tensor base = torch::randn({nc, h}), table = torch::randn({slots, values, h});
  const torch::Tensor w = torch::randn({h, h}) * 0.3, b = torch::randn({h});
  // Node 0: every configuration alike. Node 1: two layouts (configurations 0, 2, 4 and
  // 1, 3, 5). Node 2: all six distinct. So 1 + 2 + 6 rows.
  torch::Tensor layout = torch::zeros({c, nc, slots}, torch::kInt64);
  for (int64_t r = 0; r < c; ++r) {
    layout[r][1][3] = r % 2 == 0 ? 2 : 1;
    layout[r][2][0] = r % 3;
    layout[r][2][1] = r / 3;
  }
  const ConfigNodeRows got = ConfigNodeInput(base, table, layout, w, b);
  CATCH_CHECK(got.rows.size(0) == 9);
  CATCH_CHECK(got.index.size(0) == nc);
  CATCH_CHECK(got.index.size(1) == c);
  // Each (node, configuration) against the formula written out: GELU(in2(GELU(base +
  // the slots' table rows))).
  for (int64_t j = 0; j < nc; ++j)
    for (int64_t r = 0; r < c; ++r) {
      CATCH_INFO("node " << j << ", configuration " << r);
      torch::Tensor pre = base[j].clone();
      for (int64_t s = 0; s < slots; ++s) pre += table[s][layout[r][j][s].item<int64_t>()];
      const torch::Tensor want = torch::gelu(torch::gelu(pre).matmul(w.t()) + b);
      const int64_t row = got.index[j][r].item<int64_t>();
      CATCH_CHECK(torch::allclose(got.rows[row], want, 1e-5, 1e-5));
    }
  // Configurations with the same layout of a node share its row; others do not.
  CATCH_CHECK(got.index[1][0].item<int64_t>() == got.index[1][4].item<int64_t>());
  CATCH_CHECK(got.index[1][0].item<int64_t>() != got.index[1][1].item<int64_t>());
  CATCH_CHECK(std::get<0>(at::_unique(got.index[2])).numel() == 6);
  // An index outside the table is an error, not a read out of bounds.
  layout[5][2][3] = values;
  CATCH_CHECK_THROWS_WITH(ConfigNodeInput(base, table, layout, w, b),
                          Catch::Contains("layout configuration index outside [0, 3)"));
}

CATCH_TEST_CASE("block kernels: the squeeze-excitation equals two linear layers with a ReLU", "[chunked]") {
  torch::manual_seed(6);
  // The paper's widths (half 128, q 16: the AVX-512 kernel where the CPU has it) and
  // others (the generic loops); row counts that leave a remainder of the 4-row groups.
  for (auto [half, q, rows] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{128, 16, 13}, {128, 16, 4}, {40, 5, 7}}) {
    CATCH_INFO("half " << half << ", q " << q << ", rows " << rows);
    const torch::Tensor s = torch::randn({rows, half}), w1 = torch::randn({q, half}), b1 = torch::randn({q});
    const torch::Tensor w2 = torch::randn({half, q}), b2 = torch::randn({half});
    const torch::Tensor w1t = w1.t().contiguous(), w2t = w2.t().contiguous();
    torch::Tensor ours = torch::empty({rows, half});
    kernels::SqueezeExcite(s.data_ptr<float>(), rows, half, q, w1t.data_ptr<float>(), b1.data_ptr<float>(),
                           w2t.data_ptr<float>(), b2.data_ptr<float>(), ours.data_ptr<float>());
    const torch::Tensor want =
        torch::addmm(b2.to(torch::kFloat64), torch::addmm(b1.to(torch::kFloat64), s.to(torch::kFloat64),
                                                          w1.t().to(torch::kFloat64)).relu_(),
                     w2.t().to(torch::kFloat64));
    CATCH_CHECK(torch::allclose(ours.to(torch::kFloat64), want, 1e-5, 1e-4));
  }
}
