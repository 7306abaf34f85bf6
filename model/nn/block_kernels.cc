// Compiled with -fno-trapping-math (model/CMakeLists.txt): without it GCC does not
// vectorise float-to-int conversions. Nothing here relies on floating-point traps.
#include "model/nn/block_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#define TGRAPH_INLINE inline __attribute__((always_inline))
#define TGRAPH_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace tgraph::kernels {
namespace {

TGRAPH_INLINE float BitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
TGRAPH_INLINE uint32_t FloatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// exp by range reduction: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes' expf
// polynomial, 2^n from the exponent bits.
TGRAPH_INLINE float ExpInline(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  return p * BitsToFloat(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

// GELU(x) = x / 2 (1 + erf(x / sqrt 2)). With z = |x| / sqrt 2, erfc(z) = q(t) exp(-z^2),
// t = 1 / (1 + 0.3275911 z) (Abramowitz and Stegun 7.1.26), and 1 + erf(x / sqrt 2) is
// erfc(z) for negative x (no cancellation in the tail) and 2 - erfc(z) otherwise.
TGRAPH_INLINE float GeluInline(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  const float erfc = q * t * ExpInline(-z * z);
  return 0.5f * x * (x < 0.0f ? erfc : 2.0f - erfc);
}

TGRAPH_INLINE uint16_t ToBf16Inline(float x) {
  const uint32_t b = FloatToBits(x);
  const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;  // to nearest even
  return static_cast<uint16_t>(x != x ? 0x7FC0u : rounded);          // NaN stays a (quiet) NaN
}

TGRAPH_INLINE float FromBf16(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }
TGRAPH_INLINE float Load(const float* p, int64_t k) { return p[k]; }
TGRAPH_INLINE float Load(const uint16_t* p, int64_t k) { return FromBf16(p[k]); }
TGRAPH_INLINE void Store(float* p, int64_t k, float v) { p[k] = v; }
TGRAPH_INLINE void Store(uint16_t* p, int64_t k, float v) { p[k] = ToBf16Inline(v); }

template <typename T>
TGRAPH_INLINE void NormalizeRowsImpl(const float* x, int64_t nodes, int64_t c, int64_t h, const float* scale,
                                     const float* shift, T* y) {
  for (int64_t i = 0; i < nodes; ++i)
    for (int64_t r = 0; r < c; ++r) {
      const int64_t row = (i * c + r) * h;
      const float* a = scale + r * h;
      const float* b = shift + r * h;
      for (int64_t k = 0; k < h; ++k) Store(y + row, k, x[row + k] * a[k] + b[k]);
    }
}

template <typename T>
TGRAPH_INLINE void SageRowsImpl(float* out, const T* p, int64_t ld, int64_t half, bool edges, const float* self_bias,
                                const float* nbr_bias, const int64_t* off, const int64_t* src, int64_t i0, int64_t i1,
                                int64_t c) {
  std::vector<float> bias(static_cast<size_t>(half));
  for (int64_t i = i0; i < i1; ++i) {
    // The node's bias: its own, plus one neighbour bias per incoming message.
    const float deg = edges ? static_cast<float>(off[i + 1] - off[i]) : 0.0f;
    for (int64_t k = 0; k < half; ++k) bias[k] = self_bias[k] + (edges ? deg * nbr_bias[k] : 0.0f);
    float* block = out + (i - i0) * c * half;
    for (int64_t r = 0; r < c; ++r) {
      const T* a = p + (i * c + r) * ld;
      float* o = block + r * half;
      for (int64_t k = 0; k < half; ++k) o[k] = Load(a, k) + bias[k];
    }
    if (edges) {
      for (int64_t e = off[i]; e < off[i + 1]; ++e) {
        const T* from = p + src[e] * c * ld + half;
        for (int64_t r = 0; r < c; ++r) {
          float* o = block + r * half;
          const T* a = from + r * ld;
          for (int64_t k = 0; k < half; ++k) o[k] += Load(a, k);
        }
      }
    }
    for (int64_t r = 0; r < c; ++r) {
      float* o = block + r * half;
      float acc[16] = {};  // partial sums: a reduction the compiler vectorises
      int64_t k = 0;
      for (; k + 16 <= half; k += 16)
        for (int j = 0; j < 16; ++j) acc[j] += o[k + j] * o[k + j];
      for (; k < half; ++k) acc[0] += o[k] * o[k];
      float ss = 0;
      for (float a : acc) ss += a;
      const float scale = 1.0f / std::max(std::sqrt(ss), 1e-12f);  // F::normalize's eps
      for (k = 0; k < half; ++k) o[k] *= scale;
    }
  }
}

template <typename T>
TGRAPH_INLINE void ConfigInputGeluImpl(const float* base, const float* table, const int64_t* layout, int64_t nc,
                                       int64_t slots, int64_t values, int64_t h, const int64_t* node,
                                       const int64_t* config, int64_t count, T* out) {
  std::vector<float> acc(static_cast<size_t>(h));
  for (int64_t u = 0; u < count; ++u) {
    const int64_t j = node[u];
    const int64_t* v = layout + (config[u] * nc + j) * slots;
    std::copy_n(base + j * h, h, acc.data());
    for (int64_t s = 0; s < slots; ++s) {
      const float* row = table + (s * values + v[s]) * h;
      for (int64_t k = 0; k < h; ++k) acc[k] += row[k];
    }
    T* o = out + u * h;
    for (int64_t k = 0; k < h; ++k) Store(o, k, GeluInline(acc[k]));
  }
}

// SqueezeExcite with its sizes fixed at compile time (kHalf, kQ > 0) or not (0).
template <int kHalf, int kQ>
TGRAPH_INLINE void SqueezeExciteImpl(const float* s, int64_t rows, int64_t half_arg, int64_t q_arg, const float* w1t,
                                     const float* b1, const float* w2t, const float* b2, float* logits) {
  const int64_t half = kHalf > 0 ? kHalf : half_arg, q = kQ > 0 ? kQ : q_arg;
  constexpr int64_t kRows = 4;  // rows at a time, sharing each weight load
  std::vector<float> hidden_buffer(static_cast<size_t>(kRows * q));
  float* hidden = hidden_buffer.data();
  int64_t r0 = 0;
  for (; r0 + kRows <= rows; r0 += kRows) {
    for (int64_t r = 0; r < kRows; ++r) std::copy_n(b1, q, hidden + r * q);
    for (int64_t k = 0; k < half; ++k) {
      const float* w = w1t + k * q;
      for (int64_t r = 0; r < kRows; ++r) {
        const float a = s[(r0 + r) * half + k];
        for (int64_t j = 0; j < q; ++j) hidden[r * q + j] += a * w[j];
      }
    }
    for (int64_t r = 0; r < kRows; ++r) std::copy_n(b2, half, logits + (r0 + r) * half);
    for (int64_t j = 0; j < q; ++j) {
      const float* w = w2t + j * half;
      for (int64_t r = 0; r < kRows; ++r) {
        const float a = std::max(hidden[r * q + j], 0.0f);
        float* o = logits + (r0 + r) * half;
        for (int64_t k = 0; k < half; ++k) o[k] += a * w[k];
      }
    }
  }
  for (; r0 < rows; ++r0) {  // the last rows one at a time
    std::copy_n(b1, q, hidden);
    for (int64_t k = 0; k < half; ++k)
      for (int64_t j = 0; j < q; ++j) hidden[j] += s[r0 * half + k] * w1t[k * q + j];
    float* o = logits + r0 * half;
    std::copy_n(b2, half, o);
    for (int64_t j = 0; j < q; ++j) {
      const float a = std::max(hidden[j], 0.0f);
      for (int64_t k = 0; k < half; ++k) o[k] += a * w2t[j * half + k];
    }
  }
}

TGRAPH_CLONES void SqueezeExciteGeneric(const float* s, int64_t rows, int64_t half, int64_t q, const float* w1t,
                                        const float* b1, const float* w2t, const float* b2, float* logits) {
  SqueezeExciteImpl<0, 0>(s, rows, half, q, w1t, b1, w2t, b2, logits);
}

}  // namespace

TGRAPH_CLONES void ConfigInputGelu(const float* base, const float* table, const int64_t* layout, int64_t nc,
                                   int64_t slots, int64_t values, int64_t h, const int64_t* node, const int64_t* config,
                                   int64_t count, float* out) {
  ConfigInputGeluImpl(base, table, layout, nc, slots, values, h, node, config, count, out);
}

TGRAPH_CLONES void NormalizeRows(const float* x, int64_t nodes, int64_t c, int64_t h, const float* scale,
                                 const float* shift, float* y) {
  NormalizeRowsImpl(x, nodes, c, h, scale, shift, y);
}

TGRAPH_CLONES void NormalizeRowsBf16(const float* x, int64_t nodes, int64_t c, int64_t h, const float* scale,
                                     const float* shift, uint16_t* y) {
  NormalizeRowsImpl(x, nodes, c, h, scale, shift, y);
}

TGRAPH_CLONES void SageRows(float* out, const float* p, int64_t ld, int64_t half, bool edges, const float* self_bias,
                            const float* nbr_bias, const int64_t* off, const int64_t* src, int64_t i0, int64_t i1,
                            int64_t c) {
  SageRowsImpl(out, p, ld, half, edges, self_bias, nbr_bias, off, src, i0, i1, c);
}

TGRAPH_CLONES void SageRowsBf16(float* out, const uint16_t* p, int64_t ld, int64_t half, bool edges,
                                const float* self_bias, const float* nbr_bias, const int64_t* off, const int64_t* src,
                                int64_t i0, int64_t i1, int64_t c) {
  SageRowsImpl(out, p, ld, half, edges, self_bias, nbr_bias, off, src, i0, i1, c);
}

namespace {

// A group's softmax over its rows [lo, hi) of sn, per channel: u = v * a + b (a and b
// from the group's mean and variance when standardized, else a as given and b = 0),
// and lse = log sum exp(u). m and sum are scratch of `half`.
TGRAPH_INLINE void GroupSoftmaxStats(const float* sn, int64_t lo, int64_t hi, int64_t half, bool standardized,
                                     float inv_temperature, float eps, float* a, float* b, float* m, float* sum,
                                     float* lse) {
  const int64_t n = hi - lo;
  if (standardized) {  // the group's mean, then variance (two passes: no cancellation)
    std::fill(m, m + half, 0.0f);
    std::fill(sum, sum + half, 0.0f);
    for (int64_t r = lo; r < hi; ++r)
      for (int64_t k = 0; k < half; ++k) m[k] += sn[r * half + k];
    for (int64_t k = 0; k < half; ++k) m[k] /= static_cast<float>(n);
    for (int64_t r = lo; r < hi; ++r)
      for (int64_t k = 0; k < half; ++k) {
        const float d = sn[r * half + k] - m[k];
        sum[k] += d * d;
      }
    for (int64_t k = 0; k < half; ++k) {
      a[k] = inv_temperature / std::sqrt(sum[k] / static_cast<float>(n) + eps);
      b[k] = -m[k] * a[k];
    }
  }
  // The log of the softmax's denominator over the group: max, then exp and sum.
  std::fill(m, m + half, -INFINITY);
  std::fill(sum, sum + half, 0.0f);
  for (int64_t r = lo; r < hi; ++r) {
    const float* v = sn + r * half;
    for (int64_t k = 0; k < half; ++k) m[k] = std::max(m[k], v[k] * a[k] + b[k]);
  }
  for (int64_t r = lo; r < hi; ++r) {
    const float* v = sn + r * half;
    for (int64_t k = 0; k < half; ++k) sum[k] += ExpInline(v[k] * a[k] + b[k] - m[k]);
  }
  for (int64_t k = 0; k < half; ++k) lse[k] = m[k] + std::log(sum[k]);
}

}  // namespace

TGRAPH_CLONES void CombineNodes(float* x, float* s, const float* gate_logits, int64_t nodes, int64_t c, int64_t half,
                                bool cross, bool standardized, float eps, float inv_temperature, float* scratch,
                                const CrossRowsMode& mode) {
  const int64_t h = 2 * half;
  float* w = scratch;  // [c, half]: the rows' softmax weights, summed over the groups
  std::vector<float> m(static_cast<size_t>(half)), sum(static_cast<size_t>(half));
  std::vector<float> a(static_cast<size_t>(half), inv_temperature), b(static_cast<size_t>(half), 0.0f);
  std::vector<float> lse(static_cast<size_t>(half));
  const int64_t members = mode.use ? 0 : std::min(mode.members, c);
  const int64_t ref_count = mode.use ? mode.use_count : members;
  const int64_t groups = std::max<int64_t>(1, std::min(mode.groups, ref_count));
  const float inv_groups = 1.0f / static_cast<float>(groups);
  for (int64_t i = 0; i < nodes; ++i) {
    float* sn = s + i * c * half;
    float* xn = x + i * c * h;
    if (gate_logits) {  // the squeeze-excitation gate: eta = s * sigmoid(logit)
      const float* gn = gate_logits + i * c * half;
      for (int64_t j = 0; j < c * half; ++j) sn[j] /= 1.0f + ExpInline(-gn[j]);
    }
    if (!cross) {
      for (int64_t r = 0; r < c; ++r) {
        const float* v = sn + r * half;
        float* o = xn + r * h;
        for (int64_t k = 0; k < half; ++k) {
          const float g = GeluInline(v[k]);
          o[k] += g;
          o[half + k] += g;
        }
      }
      continue;
    }
    std::fill(w, w + c * half, 0.0f);
    for (int64_t g = 0; g < groups; ++g) {
      // The group's reference rows [lo, hi): near-equal parts of the reference.
      const int64_t lo = g * ref_count / groups, hi = (g + 1) * ref_count / groups, n = hi - lo;
      const int64_t at = g * (mode.use ? mode.use->group_stride : 0) + i * half;
      if (mode.use) {  // the recorded reference: u = eta * a + b and its log-sum-exp
        std::copy_n(mode.use->a + at, half, a.data());
        std::copy_n(mode.use->b + at, half, b.data());
        std::copy_n(mode.use->lse + at, half, lse.data());
      } else {
        GroupSoftmaxStats(sn, lo, hi, half, standardized, inv_temperature, eps, a.data(), b.data(), m.data(),
                          sum.data(), lse.data());
        if (mode.record) {
          const int64_t to = g * mode.record->group_stride + i * half;
          std::copy_n(a.data(), half, mode.record->a + to);
          std::copy_n(b.data(), half, mode.record->b + to);
          std::copy_n(lse.data(), half, mode.record->lse + to);
        }
      }
      const float member_scale = standardized ? static_cast<float>(n) : 1.0f;
      const float other_scale = standardized ? static_cast<float>(n + 1) : 1.0f;
      // The group's members: their softmax weight over it; every other row joins it
      // alone, exp(u) / (exp(lse) + exp(u)) = 1 / (1 + exp(lse - u)).
      for (int64_t r = 0; r < c; ++r) {
        const float* v = sn + r * half;
        float* wr = w + r * half;
        if (r >= lo && r < hi && !mode.use) {
          for (int64_t k = 0; k < half; ++k) wr[k] += member_scale * ExpInline(v[k] * a[k] + b[k] - lse[k]);
        } else {
          for (int64_t k = 0; k < half; ++k)
            wr[k] += other_scale / (1.0f + ExpInline(lse[k] - (v[k] * a[k] + b[k])));
        }
      }
    }
    for (int64_t r = 0; r < c; ++r) {
      const float* v = sn + r * half;
      const float* wr = w + r * half;
      float* o = xn + r * h;
      for (int64_t k = 0; k < half; ++k) {
        o[k] += GeluInline(v[k]);
        o[half + k] += GeluInline(v[k] * wr[k] * inv_groups);
      }
    }
  }
}

// The paper's widths (half 128, q 16) in AVX-512 intrinsics: per group of 4 rows, the
// hidden layer in 4 registers and each output row in 8 (GCC's own vectorisation of the
// loops above keeps them in memory). About 2x LibTorch's addmm on this shape
// (tgraph-bench-kernels).
__attribute__((target("avx512f"))) void SqueezeExcite128x16Avx512(const float* s, int64_t rows, const float* w1t,
                                                                 const float* b1, const float* w2t, const float* b2,
                                                                 float* logits) {
  int64_t r0 = 0;
  for (; r0 + 4 <= rows; r0 += 4) {
    __m512 h[4];
    for (int r = 0; r < 4; ++r) h[r] = _mm512_loadu_ps(b1);
    for (int k = 0; k < 128; ++k) {
      const __m512 w = _mm512_loadu_ps(w1t + k * 16);
      for (int r = 0; r < 4; ++r) h[r] = _mm512_fmadd_ps(_mm512_set1_ps(s[(r0 + r) * 128 + k]), w, h[r]);
    }
    for (int r = 0; r < 4; ++r) {
      alignas(64) float hid[16];
      _mm512_store_ps(hid, _mm512_max_ps(h[r], _mm512_setzero_ps()));
      __m512 o[8];
      for (int i = 0; i < 8; ++i) o[i] = _mm512_loadu_ps(b2 + 16 * i);
      for (int j = 0; j < 16; ++j) {
        const __m512 a = _mm512_set1_ps(hid[j]);
        for (int i = 0; i < 8; ++i) o[i] = _mm512_fmadd_ps(a, _mm512_loadu_ps(w2t + j * 128 + 16 * i), o[i]);
      }
      for (int i = 0; i < 8; ++i) _mm512_storeu_ps(logits + (r0 + r) * 128 + 16 * i, o[i]);
    }
  }
  if (r0 < rows) SqueezeExciteImpl<128, 16>(s + r0 * 128, rows - r0, 128, 16, w1t, b1, w2t, b2, logits + r0 * 128);
}

void SqueezeExcite(const float* s, int64_t rows, int64_t half, int64_t q, const float* w1t, const float* b1,
                   const float* w2t, const float* b2, float* logits) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (half == 128 && q == 16 && avx512) return SqueezeExcite128x16Avx512(s, rows, w1t, b1, w2t, b2, logits);
  SqueezeExciteGeneric(s, rows, half, q, w1t, b1, w2t, b2, logits);
}

TGRAPH_CLONES void AccumulateShifted(const float* x, int64_t rows, int64_t width, const float* shift, float* p1,
                                     float* p2) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = x + i * width;
    for (int64_t k = 0; k < width; ++k) {
      const float d = row[k] - shift[k];
      p1[k] += d;
      p2[k] += d * d;
    }
  }
}

TGRAPH_CLONES void Gelu(const float* x, float* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = GeluInline(x[k]);
}

float Exp(float x) { return ExpInline(x); }
float Gelu(float x) { return GeluInline(x); }
uint16_t ToBf16(float x) { return ToBf16Inline(x); }

}  // namespace tgraph::kernels
