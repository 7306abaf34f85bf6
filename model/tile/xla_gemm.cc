#include "model/tile/xla_gemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/tile/tile_space.h"

namespace tgraph {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t BytesOf(absl::string_view dtype) {
  if (dtype == "c128") return 16;
  if (dtype == "f64" || dtype == "s64" || dtype == "u64" || dtype == "c64") return 8;
  if (dtype == "f32" || dtype == "s32" || dtype == "u32") return 4;
  if (dtype == "s8" || dtype == "u8" || dtype == "pred" || absl::StartsWith(dtype, "f8")) return 1;
  // Sub-byte types (s4, u4, s2, u2, s1, u1; f6, f4) count as a byte: a bound, not their packing.
  if (dtype.size() == 2 && (dtype[0] == 's' || dtype[0] == 'u') && dtype[1] >= '1' && dtype[1] <= '4') return 1;
  if (absl::StartsWith(dtype, "f6") || absl::StartsWith(dtype, "f4")) return 1;
  return 2;  // bf16, f16, s16, u16, and what is not known
}

}  // namespace

int64_t XlaGemmProblem::ElementBytes() const { return std::max(BytesOf(lhs_dtype), BytesOf(rhs_dtype)); }

std::string XlaGemmProblem::Name() const {
  std::string out = absl::StrCat(lhs_dtype, " x ", rhs_dtype, " -> ", out_dtype, " ");
  if (batch != 1) absl::StrAppend(&out, batch, "x");
  absl::StrAppend(&out, m, "x", n, "x", k);
  if (lhs_transposed || rhs_transposed)
    absl::StrAppend(&out, " (", lhs_transposed ? "lhs T" : "", lhs_transposed && rhs_transposed ? ", " : "",
                    rhs_transposed ? "rhs T" : "", ")");
  return out;
}

std::string XlaGemmConfig::Name() const {
  return absl::StrCat(block_m, "x", block_n, "x", block_k, " sk", split_k, " s", num_stages, " w", num_warps, " c",
                      num_ctas);
}

absl::StatusOr<XlaGemmConfig> ParseXlaGemmConfig(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ' ', absl::SkipEmpty());
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not an XLA GEMM configuration (BLOCK_MxBLOCK_NxBLOCK_K skS sS wW cC, ",
                     "e.g. 64x32x64 sk1 s1 w4 c1)"));
  };
  if (parts.size() != 5) return bad();
  const std::vector<absl::string_view> tile = absl::StrSplit(parts[0], 'x');
  XlaGemmConfig c;
  if (tile.size() != 3 || !absl::SimpleAtoi(tile[0], &c.block_m) || !absl::SimpleAtoi(tile[1], &c.block_n) ||
      !absl::SimpleAtoi(tile[2], &c.block_k))
    return bad();
  const std::pair<absl::string_view, int64_t*> fields[] = {
      {"sk", &c.split_k}, {"s", &c.num_stages}, {"w", &c.num_warps}, {"c", &c.num_ctas}};
  for (size_t i = 0; i < 4; ++i) {
    const absl::string_view p = parts[i + 1];
    if (!absl::StartsWith(p, fields[i].first) || !absl::SimpleAtoi(p.substr(fields[i].first.size()), fields[i].second))
      return bad();
  }
  for (int64_t v : {c.block_m, c.block_n, c.block_k, c.split_k, c.num_stages, c.num_warps, c.num_ctas})
    if (v <= 0 || v > 65536) return bad();
  return c;
}

std::array<float, kTileConfigDim> XlaGemmFeatures(const XlaGemmProblem& p, const XlaGemmConfig& c, int64_t sm_count) {
  std::array<float, kTileConfigDim> f{};
  const int64_t pm = CeilDiv(p.m, c.block_m), pn = CeilDiv(p.n, c.block_n);
  const int64_t ks = CeilDiv(p.k, c.block_k * c.split_k);
  const int64_t programs = p.batch * pm * pn * c.split_k, waves = CeilDiv(programs, sm_count);
  const double tile_fill = static_cast<double>(p.m) * static_cast<double>(p.n) /
                           (static_cast<double>(pm * c.block_m) * static_cast<double>(pn * c.block_n));
  const double wave_fill = static_cast<double>(programs) / static_cast<double>(waves * sm_count);
  const double smem_kib =
      static_cast<double>(c.num_stages * (c.block_m + c.block_n) * c.block_k * p.ElementBytes()) / 1024.0;
  TileValueGroup({double(c.block_m), double(c.block_n), double(c.block_k), double(c.split_k), 0, 0}, f.data());
  TileValueGroup({double(pm), double(pn), double(ks), double(waves), tile_fill, wave_fill}, f.data() + 8);
  TileValueGroup({double(c.num_warps), double(c.num_stages), smem_kib, double(c.num_ctas), 0, 0}, f.data() + 16);
  return f;
}

std::vector<XlaGemmConfig> XlaGemmCandidates(const XlaGemmProblem& p) {
  const auto cap = [](int64_t dim) {
    int64_t c = 16;
    while (c < dim && c < 256) c *= 2;
    return c;
  };
  const int64_t m = cap(p.m), n = cap(p.n), k = cap(p.k);
  std::vector<XlaGemmConfig> out;
  for (int64_t bm = 16; bm <= m; bm *= 2)
    for (int64_t bn = 16; bn <= n; bn *= 2)
      for (int64_t bk = 16; bk <= k; bk *= 2)
        for (int64_t sk = 1; sk <= 16 && bk * sk <= k; sk *= 2)
          for (int64_t stages = 1; stages <= 4; ++stages)
            for (int64_t warps : {2, 4, 8}) out.push_back({bm, bn, bk, sk, stages, warps, 1});
  std::sort(out.begin(), out.end());
  return out;
}

XlaGemmConfig XlaGemmConfigOfRow(const float* row) {
  const auto v = [&](int i) { return static_cast<int64_t>(std::llround(row[i])); };
  return {v(0), v(1), v(2), v(3), v(17), v(16), v(19)};
}

}  // namespace tgraph
