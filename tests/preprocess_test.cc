#include <catch2/catch.hpp>

#include <cmath>

#include "model/core/preprocess.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

NodeGraph Chain(int n, const std::vector<int64_t>& edges) {
  NodeGraph g;
  g.num_nodes = n;
  g.node_feat.assign(n * kNodeFeatDim, 0.0f);
  for (int i = 0; i < n; ++i) g.node_feat[i * kNodeFeatDim] = static_cast<float>(i);  // node id in feature 0
  g.node_opcode.assign(n, op::kAdd);
  g.edge_index = edges;
  return g;
}

}  // namespace

TEST_CASE("pruning keeps configurable nodes and their direct neighbours", "[prune]") {
  // 0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 (edges [consumer, producer]), plus 7 consuming 0.
  // Node 3 configurable: keep 2 (producer), 3, 4 (consumer). Node 6 configurable: keep 5, 6.
  NodeGraph g = Chain(8, {1, 0, 2, 1, 3, 2, 4, 3, 5, 4, 6, 5, 7, 0});
  PrunedGraph p = PruneGraph(g, {6, 3});
  CHECK(p.original_ids == std::vector<int64_t>{2, 3, 4, 5, 6});
  CHECK(p.graph.num_nodes == 5);
  // Edges among kept nodes, re-indexed: 3<-2, 4<-3, 5<-4, 6<-5.
  CHECK(p.graph.edge_index == std::vector<int64_t>{1, 0, 2, 1, 3, 2, 4, 3});
  // node_config_ids order is kept: 6 -> new 4, 3 -> new 1.
  CHECK(p.config_node_index == std::vector<int64_t>{4, 1});
  // Features travel with their nodes.
  for (int64_t j = 0; j < p.graph.num_nodes; ++j) CHECK(p.graph.feat(j)[0] == static_cast<float>(p.original_ids[j]));
}

TEST_CASE("pruning can leave disconnected pieces and keeps a fully configurable graph", "[prune]") {
  NodeGraph g = Chain(6, {1, 0, 2, 1, 3, 2, 4, 3, 5, 4});
  PrunedGraph p = PruneGraph(g, {0, 5});
  CHECK(p.original_ids == std::vector<int64_t>{0, 1, 4, 5});
  CHECK(p.graph.edge_index == std::vector<int64_t>{1, 0, 3, 2});
  PrunedGraph all = PruneGraph(g, {0, 1, 2, 3, 4, 5});
  CHECK(all.graph.edge_index == g.edge_index);
  CHECK(all.graph.node_feat == g.node_feat);
}

TEST_CASE("de-duplication merges identical rows and keeps the smallest runtime", "[dedup]") {
  LayoutGraph g;
  g.node_config_ids = {0};
  g.num_configs = 5;
  g.config_feat.assign(5 * kConfigFeatDim, -1);
  auto set = [&](int row, int8_t v) { g.config_feat[row * kConfigFeatDim] = v; };
  set(0, 1); set(1, 2); set(2, 1); set(3, 3); set(4, 2);  // rows: A B A C B
  g.config_runtime = {50, 40, 30, 20, 45};
  CHECK(DeduplicateConfigs(&g) == 2);
  REQUIRE(g.num_configs == 3);
  CHECK(g.config_feat.size() == 3 * kConfigFeatDim);
  CHECK(g.config_feat[0] == 1);
  CHECK(g.config_feat[kConfigFeatDim] == 2);
  CHECK(g.config_feat[2 * kConfigFeatDim] == 3);
  CHECK(g.config_runtime == std::vector<int64_t>{30, 40, 20});
  CHECK(DeduplicateConfigs(&g) == 0);  // idempotent
}

TEST_CASE("base-7 codes of layout groups", "[compress]") {
  const int8_t defaults[6] = {-1, -1, -1, -1, -1, -1};
  const int8_t first[6] = {0, -1, -1, -1, -1, -1};
  const int8_t second[6] = {-1, 0, -1, -1, -1, -1};
  const int8_t perm[6] = {2, 0, 1, -1, -1, -1};
  const int8_t fives[6] = {5, 5, 5, 5, 5, 5};
  CHECK(EncodeLayoutGroup(defaults) == 0u);
  CHECK(EncodeLayoutGroup(first) == 1u);
  CHECK(EncodeLayoutGroup(second) == 7u);
  CHECK(EncodeLayoutGroup(perm) == 3u + 1u * 7u + 2u * 49u);
  CHECK(EncodeLayoutGroup(fives) == kLayoutCodeCount - 1);
  // Every code decodes to the group it came from.
  for (uint32_t code = 0; code < kLayoutCodeCount; code += 97) {
    int8_t six[6];
    DecodeLayoutGroup(code, six);
    for (int8_t v : six) REQUIRE((v >= -1 && v <= 5));
    REQUIRE(EncodeLayoutGroup(six) == code);
  }
}

TEST_CASE("compressed configs decompress a sampled subset losslessly", "[compress]") {
  const int64_t c = 7, nc = 3;
  std::vector<int8_t> feat(c * nc * kConfigFeatDim);
  for (size_t i = 0; i < feat.size(); ++i) feat[i] = static_cast<int8_t>(static_cast<int>((i * 5 + i / 7) % 7) - 1);
  CompressedConfigs z = CompressedConfigs::Compress(feat.data(), c, nc);
  CHECK(z.codes.size() == static_cast<size_t>(c * nc * 3));
  CHECK(z.bytes() * 6 == feat.size() * 4);  // 3 x uint32 per 18 float32 values of the dataset: 6x smaller
  const std::vector<int64_t> rows = {6, 0, 3, 3};
  std::vector<int8_t> out(rows.size() * nc * kConfigFeatDim);
  z.DecompressRows(rows, out.data());
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t k = 0; k < nc * kConfigFeatDim; ++k)
      REQUIRE(out[r * nc * kConfigFeatDim + k] == feat[rows[r] * nc * kConfigFeatDim + k]);
}

TEST_CASE("node_feat[134:140] is re-padded with -1 past the rank", "[repad]") {
  NodeGraph g = Chain(3, {});
  auto row = [&](int i) { return g.node_feat.data() + i * kNodeFeatDim; };
  // Node 0: rank 2, layout {1, 0}; node 1: rank 0 (scalar); node 2: rank 6.
  row(0)[21] = 4; row(0)[22] = 8; row(0)[134] = 1; row(0)[135] = 0;
  for (int k = 0; k < 6; ++k) { row(2)[21 + k] = 2; row(2)[134 + k] = static_cast<float>(5 - k); }
  CHECK(NodeRank(row(0)) == 2);
  CHECK(NodeRank(row(1)) == 0);
  RepadLayoutFeatures(&g);
  CHECK(std::vector<float>(row(0) + 134, row(0) + 140) == std::vector<float>{1, 0, -1, -1, -1, -1});
  CHECK(std::vector<float>(row(1) + 134, row(1) + 140) == std::vector<float>(6, -1.0f));
  CHECK(std::vector<float>(row(2) + 134, row(2) + 140) == std::vector<float>{5, 4, 3, 2, 1, 0});
}

TEST_CASE("feature statistics: hand values, zero variance, merging, save/load", "[stats]") {
  NodeGraph a = Chain(2, {}), b = Chain(1, {});
  // Feature 1 over all three nodes: 1, 3, 8 -> mean 4, population var ((9 + 1 + 16) / 3).
  a.node_feat[1] = 1; a.node_feat[kNodeFeatDim + 1] = 3; b.node_feat[1] = 8;
  // Feature 5 constant 7 everywhere: zero variance.
  a.node_feat[5] = a.node_feat[kNodeFeatDim + 5] = b.node_feat[5] = 7;
  // Feature 133 included, feature 134 (a layout slot) is not part of the statistics.
  a.node_feat[133] = 2;
  FeatureStats s = FeatureStats::Compute({&a, &b});
  CHECK(s.count == 3);
  CHECK(s.mean[1] == Approx(4.0));
  CHECK(s.std[1] == Approx(std::sqrt(26.0 / 3.0)));
  CHECK(s.mean[5] == Approx(7.0));
  CHECK(s.std[5] == Approx(0.0).margin(1e-12));
  CHECK(s.mean[133] == Approx(2.0 / 3.0));
  CHECK(s.mean.size() == 134u);

  float out[134];
  b.node_feat[5] = 7;
  s.Standardize(b.feat(0), out);
  CHECK(out[1] == Approx((8.0 - 4.0) / std::sqrt(26.0 / 3.0)));
  CHECK(out[5] == 0.0f);  // zero variance -> 0, never a division by zero
  NodeGraph c = Chain(1, {});
  c.node_feat[5] = 1e9f;
  s.Standardize(c.feat(0), out);
  CHECK(out[5] == 0.0f);

  // Merging per-graph statistics equals computing over all nodes at once.
  FeatureStats merged = FeatureStats::Compute({&a});
  merged.Merge(FeatureStats::Compute({&b}));
  for (int k = 0; k < kNumericFeatDim; ++k) {
    CHECK(merged.mean[k] == Approx(s.mean[k]).margin(1e-12));
    CHECK(merged.std[k] == Approx(s.std[k]).margin(1e-12));
  }

  TempDir dir;
  const std::string path = dir.path() + "/stats.json";
  REQUIRE(s.Save(path).ok());
  auto back = FeatureStats::Load(path);
  REQUIRE(back.ok());
  CHECK(back->count == 3);
  CHECK(back->mean == s.mean);  // exact: JSON doubles round-trip
  CHECK(back->std == s.std);

  auto bad = FeatureStats::FromJson(R"({"count": 1, "mean": [1, 2], "std": []})", "s.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("s.json: key 'mean' must be an array of 134"));
  CHECK_FALSE(FeatureStats::FromJson("{not json", "s.json").ok());
  CHECK_FALSE(FeatureStats::Load(dir.path() + "/missing.json").ok());
}
