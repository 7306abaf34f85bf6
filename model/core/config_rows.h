// Configuration rows, in one place: what a valid layout or tile configuration value is
// (the file loader, the measurement store and the server's request validation all check
// with these), and the +1 shift that turns layout values -1..5 into embedding indices
// 0..6 (the training tensors and the scoring batches both use it). Selecting rows by
// index is SelectRows (a graph's rows, model/train/train_step.h: training, fine-tuning,
// evaluation) and GatherConfigs (rows into a network batch, model/nn/scoring.h: scoring
// and training alike).
//
// Layout: c x nc x 18 int8 values, -1 (the compiler's default) or an axis 0..5
// (docs/format.md). Tile: c x 24 float32 values, each finite and >= 0 (tile sizes;
// every real tile file in tests/data/real holds values 0..2400).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tgraph {

constexpr int kLayoutValueMin = -1, kLayoutValueMax = 5;
constexpr int64_t kLayoutValueIndices = kLayoutValueMax - kLayoutValueMin + 1;  // 7 embedding rows

// The first of n layout config values (laid out c x nc x 18) outside -1..5, described
// as "config C, configurable node N, slot S is V, expected -1..5"; empty when all are
// in range.
std::string FirstBadLayoutConfigValue(const int8_t* values, size_t n, int64_t nc);

// The first of n tile config values (laid out c x 24) that is not finite or is
// negative, described as "config C, feature F is V, expected a finite non-negative
// number"; empty when all are valid.
std::string FirstBadTileConfigValue(const float* values, size_t n);

// A layout value's embedding index: -1..5 -> 0..6.
inline int64_t LayoutValueIndex(int v) { return static_cast<int64_t>(v) - kLayoutValueMin; }

// n layout values to embedding indices.
inline void LayoutValueIndices(const int8_t* values, int64_t n, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = LayoutValueIndex(values[i]);
}

}  // namespace tgraph
