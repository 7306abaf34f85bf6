#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "model/core/layout_space.h"
#include "model/core/preprocess.h"
#include "model/synth/cost_model.h"
#include "model/synth/families.h"
#include "model/synth/generator.h"
#include "model/synth/search.h"
#include "tests/test_util.h"

using namespace tgraph;
using namespace tgraph::synth;

namespace {

std::vector<int8_t> DefaultConfig(size_t nc) { return std::vector<int8_t>(nc * kConfigFeatDim, -1); }

void SetGroup(std::vector<int8_t>& cfg, int node, int group, std::vector<int8_t> layout) {
  layout.resize(kLayoutSlots, -1);
  std::copy(layout.begin(), layout.end(), cfg.begin() + node * kConfigFeatDim + group * kLayoutSlots);
}

// param -> conv1 -> bias add -> relu -> conv2 (root); configurable: conv1, conv2.
LayoutCostModel TwoConvModel() {
  GraphBuilder b;
  const int x = b.Parameter({8, 32, 32, 64}, ElemType::kBF16);
  const int c1 = b.Conv(x, b.Parameter({3, 3, 64, 64}, ElemType::kBF16), 1);
  const int bias = b.Parameter({64}, ElemType::kBF16);
  const int added = b.Binary(op::kAdd, c1, b.Broadcast(bias, {8, 32, 32, 64}, {3}));
  const int relu = b.Binary(op::kMaximum, added, b.Broadcast(b.Constant({}, ElemType::kBF16), {8, 32, 32, 64}, {}));
  const int c2 = b.Conv(relu, b.Parameter({3, 3, 64, 64}, ElemType::kBF16), 1);
  b.MarkRoot(c2);
  return LayoutCostModel(b.nodes(), ConfigurableNodes(b.nodes()));
}

}  // namespace

TEST_CASE("tile padding: most-minor dim to 128, second-minor to 8", "[cost]") {
  CHECK(PaddedElements({8, 56, 128, 3}, DefaultLayout(4)) == 128.0 * 128 * 56 * 8);  // C = 3 minor-most
  CHECK(PaddedElements({8, 56, 128, 3}, {2, 3, 1, 0, -1, -1}) == 128.0 * 8 * 56 * 8);  // W = 128 minor-most
  CHECK(PaddedElements({5}, DefaultLayout(1)) == 128.0);
  CHECK(PaddedElements({}, DefaultLayout(0)) == 1.0);
}

TEST_CASE("a layout that mismatches a neighbour adds a copy and raises the runtime", "[cost]") {
  const LayoutCostModel m = TwoConvModel();
  REQUIRE(m.config_ids().size() == 2);
  const auto base_cfg = DefaultConfig(2);
  const RuntimeBreakdown base = m.Evaluate(base_cfg.data());
  CHECK(base.copies == 0);
  CHECK(base.copy_ns == 0.0);

  // conv2 wants W minor-most, but relu (following conv1) produces C minor-most: a copy.
  auto mismatch = DefaultConfig(2);
  SetGroup(mismatch, 1, 1, {2, 3, 1, 0});
  const RuntimeBreakdown mis = m.Evaluate(mismatch.data());
  CHECK(mis.copies == 1);
  CHECK(mis.copy_ns > 0.0);
  CHECK(mis.total_ns > base.total_ns);

  // The same input layout with conv1 producing it: the layout flows through the bias
  // add and relu, no copy. The neighbours' decisions interact through the edges.
  auto agree = mismatch;
  SetGroup(agree, 0, 0, {2, 3, 1, 0});
  const RuntimeBreakdown ok = m.Evaluate(agree.data());
  CHECK(ok.copies == 0);
  CHECK(ok.copy_ns == 0.0);
}

TEST_CASE("partial layouts are completed with the remaining dims in descending order", "[cost]") {
  const int8_t feature_batch[6] = {3, 0, -1, -1, -1, -1};
  CHECK(CompleteLayout(feature_batch, 4) == Layout{3, 0, 2, 1, -1, -1});
  const int8_t none[6] = {-1, -1, -1, -1, -1, -1};
  CHECK(CompleteLayout(none, 4) == DefaultLayout(4));
  const int8_t full[6] = {1, 0, 2, -1, -1, -1};
  CHECK(CompleteLayout(full, 3) == Layout{1, 0, 2, -1, -1, -1});
}

TEST_CASE("consumers that need the same layout of one producer share one copy", "[cost]") {
  // x [8, 512] feeds two dots; each dot's input group asks for x with dim 0 minor-most.
  GraphBuilder b;
  const int x = b.Parameter({8, 512}, ElemType::kF32);
  const int d1 = b.Dot(x, b.Parameter({512, 256}, ElemType::kF32));
  const int d2 = b.Dot(x, b.Parameter({512, 256}, ElemType::kF32));
  b.MarkRoot(b.Binary(op::kAdd, d1, d2));
  const LayoutCostModel m(b.nodes(), ConfigurableNodes(b.nodes()));
  REQUIRE(m.config_ids().size() == 2);
  // One copy of x from [1, 0] (512 minor: 512 x 8 padded) to [0, 1] (8 minor: 128 x 512),
  // f32, penalty 1 + 0.5 x 1 (the new minor dim sat second): (16384 + 262144) bytes
  // over 900 bytes/ns x 1.5.
  const double one_copy = (8.0 * 512 * 4 + 128.0 * 512 * 4) / 900.0 * 1.5;
  auto both = DefaultConfig(2);
  SetGroup(both, 0, 1, {0, 1});
  SetGroup(both, 1, 1, {0, 1});
  const RuntimeBreakdown shared = m.Evaluate(both.data());
  CHECK(shared.copies == 1);
  CHECK(shared.copy_ns == Approx(one_copy));
  // Only one of them asks: still one copy; both ask for different layouts: one each.
  auto one = DefaultConfig(2);
  SetGroup(one, 0, 1, {0, 1});
  CHECK(m.Evaluate(one.data()).copies == 1);
  auto different = both;
  SetGroup(different, 1, 1, {0});  // [0] completes to [0, 1]: the same layout
  CHECK(m.Evaluate(different.data()).copies == 1);
}

TEST_CASE("the backward pass's convolutions: shapes, flops and dimension numbers as in the real files",
          "[cost]") {
  GraphBuilder b;
  const int x = b.Parameter({2, 16, 16, 8}, ElemType::kBF16);
  const int w = b.Parameter({3, 3, 8, 32}, ElemType::kBF16);
  const int y = b.Conv(x, w, 1);
  const int dz = b.Parameter({2, 16, 16, 32}, ElemType::kBF16);
  const int dx = b.ConvInputGrad(dz, w);
  const int dw = b.ConvWeightGrad(x, dz, 3, 3);
  b.MarkRoot(dw);
  CHECK(b.node(dx).shape == Shape{2, 16, 16, 8});
  CHECK(b.node(dw).shape == Shape{3, 3, 8, 32});
  // All three do the same multiply-adds: 2 x (2 x 16 x 16) x (3 x 3) x 8 x 32.
  const double flops = 2.0 * 2 * 16 * 16 * 9 * 8 * 32;
  CostConstants k;
  k.mxu_flops_per_ns = 1e-3;  // compute-bound for sure: time = flops / (peak x efficiency)
  const LayoutCostModel m(b.nodes(), ConfigurableNodes(b.nodes()), k);
  // Default layouts (dim 3 minor-most). Forward and input gradient: contracting feature
  // minor-most (x1), padding utilisation sqrt(8/128 x 32/128) = 1/8. Weight gradient:
  // its contracting dim (the batch) is major-most (x0.35), the same utilisation.
  const double unit = flops / k.mxu_flops_per_ns;
  CHECK(m.Evaluate(DefaultConfig(3).data()).compute_ns == Approx(unit * (8 + 8 + 8 / 0.35)));
  // Dimension numbers (node_feat[93:109]) follow the real unet_3d file's forward (660),
  // input-gradient (1379) and weight-gradient (1320) convolutions, from 3-D to 2-D.
  const NodeGraph g = ToNodeGraph(b.nodes());
  auto dn = [&](int node) { return std::vector<float>(g.feat(node) + 93, g.feat(node) + 109); };
  CHECK(dn(y) == std::vector<float>{0, 3, 1, 2, 0, 0, 2, 3, 0, 1, 0, 0, 0, 3, 1, 1});
  CHECK(dn(dx) == std::vector<float>{0, 3, 1, 2, 0, 0, 3, 2, 0, 1, 0, 0, 0, 3, 1, 1});
  CHECK(dn(dw) == std::vector<float>{3, 0, 1, 2, 0, 0, 0, 3, 1, 2, 0, 0, 2, 3, 1, 1});
  CHECK(g.feat(dx)[91] == 2.0f);  // the input gradient reverses its window
  CHECK(g.feat(dw)[37] == 16.0f);  // the weight gradient's window is dz's spatial extent
}

namespace {

// Share of configurable nodes within two hops of another configurable node in the
// pruned graph (sharing a producer or a consumer, or adjacent): where edges can
// carry one decision to another.
double ConfigNodesNearAnother(const NodeGraph& g, const std::vector<int64_t>& ids) {
  const PrunedGraph p = PruneGraph(g, ids);
  const int64_t n = p.graph.num_nodes;
  std::vector<std::vector<int64_t>> adj(n);
  for (int64_t e = 0; e < p.graph.num_edges(); ++e) {
    adj[p.graph.edge_index[2 * e]].push_back(p.graph.edge_index[2 * e + 1]);
    adj[p.graph.edge_index[2 * e + 1]].push_back(p.graph.edge_index[2 * e]);
  }
  std::vector<char> is_config(n, 0);
  for (int64_t c : p.config_node_index) is_config[c] = 1;
  int near = 0;
  for (int64_t c : p.config_node_index) {
    bool found = false;
    for (int64_t a : adj[c]) {
      found |= is_config[a] != 0;
      for (int64_t b2 : adj[a]) found |= b2 != c && is_config[b2];
    }
    near += found;
  }
  return static_cast<double>(near) / static_cast<double>(ids.size());
}

// Distinct values each used layout group takes over a graph's configurations.
std::vector<int> DistinctPerGroup(const LayoutGraph& g) {
  std::vector<int> out;
  for (int64_t j = 0; j < g.num_config_nodes(); ++j)
    for (int grp = 0; grp < 3; ++grp) {
      std::set<std::vector<int8_t>> seen;
      for (int64_t c = 0; c < g.num_configs; ++c) {
        const int8_t* v = g.config(c) + j * kConfigFeatDim + grp * kLayoutSlots;
        seen.emplace(v, v + kLayoutSlots);
      }
      if (seen.size() > 1 || seen.begin()->front() >= 0) out.push_back(static_cast<int>(seen.size()));
    }
  return out;
}

double Median(std::vector<int> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("synthetic xla graphs and searches have the real files' structure", "[synth][real]") {
  const std::string real = std::string(TGRAPH_REAL_DATA) + "/npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz";
  absl::StatusOr<LayoutGraph> unet = LoadLayoutGraph(real);
  REQUIRE(unet.ok());
  // unet_3d (forward and backward convolutions): 34 of 62 configurable nodes near
  // another; its groups mostly choose between two layouts.
  CHECK(ConfigNodesNearAnother(unet->graph, unet->node_config_ids) == Approx(34.0 / 62));
  CHECK(Median(DistinctPerGroup(*unet)) == 2);

  double near = 0, near_training = 0, near_forward = 0;
  int training = 0;
  std::vector<int> distinct;
  constexpr int kGraphs = 12;
  for (int i = 0; i < kGraphs; ++i) {
    Rng rng(1000 + i);
    const BuiltGraph g = MakeXlaGraph(rng, 300);
    const std::vector<int64_t> ids = ConfigurableNodes(g.nodes);
    const double share = ConfigNodesNearAnother(ToNodeGraph(g.nodes), ids);
    near += share / kGraphs;
    const bool is_training = g.kind.find("_train") != std::string::npos;
    training += is_training;
    (is_training ? near_training : near_forward) += share;
    const LayoutCostModel m(g.nodes, ids);
    Rng search(2000 + i);
    SearchResult s = RandomSearch(m, 200, search);
    LayoutGraph lg;
    lg.node_config_ids = ids;
    lg.num_configs = s.num_configs;
    lg.config_feat = std::move(s.configs);
    for (int d : DistinctPerGroup(lg)) distinct.push_back(d);
  }
  // Training steps make activations, gradients and kernels feed two convolutions each;
  // in forward-only graphs a convolution's neighbours are bias adds and relus.
  REQUIRE(training > 0);
  REQUIRE(training < kGraphs);
  near_training /= training;
  near_forward /= kGraphs - training;
  CAPTURE(near, near_training, near_forward);
  CHECK(near > 0.45);
  CHECK(near_training > 0.85);
  CHECK(near_forward < 0.2);
  CHECK(Median(distinct) == 2);
  CHECK(*std::max_element(distinct.begin(), distinct.end()) <= 7);
}

TEST_CASE("a minor dimension of 3 pads to 128 and costs more than a minor dimension of 128", "[cost]") {
  // conv [8,56,128,16] x [1,1,16,3] -> [8,56,128,3]; its output layout is the config.
  GraphBuilder b;
  const int x = b.Parameter({8, 56, 128, 16}, ElemType::kBF16);
  const int c = b.Conv(x, b.Parameter({1, 1, 16, 3}, ElemType::kBF16), 1);
  b.MarkRoot(b.Unary(op::kTanh, c));
  const LayoutCostModel m(b.nodes(), ConfigurableNodes(b.nodes()));
  auto minor3 = DefaultConfig(1);  // output C (3) minor-most: the default
  auto minor128 = DefaultConfig(1);
  SetGroup(minor128, 0, 0, {2, 3, 1, 0});  // output W (128) minor-most
  const RuntimeBreakdown r3 = m.Evaluate(minor3.data()), r128 = m.Evaluate(minor128.data());
  CHECK(r3.total_ns > 2.0 * r128.total_ns);
  CHECK(r3.memory_ns > r128.memory_ns);  // the tanh reads and writes 16x more padded bytes
}

TEST_CASE("reshape is a bitcast in row-major order and a copy otherwise", "[cost]") {
  GraphBuilder b;
  const int x = b.Parameter({4, 256, 128}, ElemType::kF32);
  b.MarkRoot(b.Reshape(x, {1024, 128}));
  const LayoutCostModel m(b.nodes(), ConfigurableNodes(b.nodes()));
  auto bitcast = DefaultConfig(1);
  auto transposed = DefaultConfig(1);
  SetGroup(transposed, 0, 0, {0, 1});
  const RuntimeBreakdown a = m.Evaluate(bitcast.data()), t = m.Evaluate(transposed.data());
  CHECK(t.memory_ns - a.memory_ns == Approx((4.0 * 256 * 128 * 4 + 1024.0 * 128 * 4) / 900.0));
}

TEST_CASE("searches record valid layouts, re-measure some configs, and default clusters near the best",
          "[search]") {
  double random_spread = 0, default_spread = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    Rng rng(seed);
    BuiltGraph g = seed % 2 ? MakeXlaGraph(rng, 300) : MakeNlpGraph(rng, 300);
    const LayoutCostModel m(g.nodes, ConfigurableNodes(g.nodes));
    Rng r1(100 + seed), r2(200 + seed);
    const SearchResult random = RandomSearch(m, 400, r1);
    const SearchResult ga = GeneticSearch(m, 400, r2);
    REQUIRE(random.num_configs == 400);
    REQUIRE(ga.num_configs == 400);
    const size_t nc = m.config_ids().size();
    for (const SearchResult* s : {&random, &ga}) {
      std::map<std::vector<int8_t>, std::set<int64_t>> seen;
      for (int64_t c = 0; c < s->num_configs; ++c) {
        const int8_t* row = s->configs.data() + c * nc * kConfigFeatDim;
        for (size_t j = 0; j < nc; ++j)
          for (int grp = 0; grp < 3; ++grp) {
            const int8_t* v = row + j * kConfigFeatDim + grp * kLayoutSlots;
            const int rank = m.GroupRank(static_cast<int64_t>(j), grp);
            if (v[0] == -1) {
              REQUIRE(std::all_of(v, v + 6, [](int8_t x) { return x == -1; }));
              continue;
            }
            // One of the node's candidates: distinct dims of its rank, then -1.
            REQUIRE(rank > 0);
            const auto& cands = m.Candidates(static_cast<int64_t>(j), grp);
            REQUIRE(std::any_of(cands.begin(), cands.end(),
                                [&](const Layout& l) { return std::equal(l.begin(), l.end(), v); }));
            const int listed = static_cast<int>(std::find(v, v + 6, int8_t{-1}) - v);
            std::set<int8_t> dims(v, v + listed);
            REQUIRE(static_cast<int>(dims.size()) == listed);
            REQUIRE(*dims.rbegin() < rank);
            for (int k = listed; k < 6; ++k) REQUIRE(v[k] == -1);
          }
        seen[std::vector<int8_t>(row, row + nc * kConfigFeatDim)].insert(s->runtimes[c]);
      }
      // Some configurations were measured twice, with different noise.
      const auto repeated = std::count_if(seen.begin(), seen.end(), [](auto& kv) { return kv.second.size() > 1; });
      CHECK(repeated >= 2);
      CHECK(static_cast<int64_t>(seen.size()) < s->num_configs);
    }
    random_spread += MedianOverBest(random.runtimes);
    default_spread += MedianOverBest(ga.runtimes);
    CHECK(MedianOverBest(ga.runtimes) < MedianOverBest(random.runtimes));
    // The genetic search finds configurations at least as good as random sampling's best.
    CHECK(*std::min_element(ga.runtimes.begin(), ga.runtimes.end()) <=
          1.01 * *std::min_element(random.runtimes.begin(), random.runtimes.end()));
  }
  // Over the four graphs, the genetic search's median is less than half as far above
  // the best as random sampling's (median/best - 1).
  CHECK(default_spread - 4.0 < 0.5 * (random_spread - 4.0));
}

TEST_CASE("graph families use real opcodes and fill node features", "[synth]") {
  Rng rng(3);
  BuiltGraph nlp = MakeNlpGraph(rng, 400);
  BuiltGraph xla = MakeXlaGraph(rng, 400);
  auto opcodes = [](const BuiltGraph& g) {
    std::set<int> s;
    for (const SynthNode& n : g.nodes) s.insert(n.opcode);
    return s;
  };
  const std::set<int> n_ops = opcodes(nlp), x_ops = opcodes(xla);
  for (int o : {op::kDot, op::kReshape, op::kTranspose, op::kExponential, op::kReduce, op::kDivide, op::kRsqrt,
                op::kTanh, op::kAdd, op::kParameter})
    CHECK(n_ops.count(o) == 1);
  for (int o : {op::kConvolution, op::kDot, op::kReshape, op::kMaximum, op::kMultiply, op::kBroadcast})
    CHECK(x_ops.count(o) == 1);

  const NodeGraph g = ToNodeGraph(xla.nodes);
  REQUIRE(ValidateNodeGraph(g, "xla").ok());
  int roots = 0;
  for (int64_t i = 0; i < g.num_nodes; ++i) {
    const float* f = g.feat(i);
    const SynthNode& n = xla.nodes[i];
    roots += f[0] == 1.0f;
    float onehot = 0;
    for (int k = 2; k <= 20; ++k) onehot += f[k];
    CHECK(onehot == 1.0f);
    double product = 1;
    for (int d = 0; d < n.rank(); ++d) {
      CHECK(f[21 + d] == static_cast<float>(n.shape[d]));
      product *= static_cast<double>(n.shape[d]);
    }
    CHECK(f[28] == Approx(product));
    // Default layout, 0-padded like the dataset: descending minor-to-major.
    for (int d = 0; d < n.rank(); ++d) CHECK(f[134 + d] == static_cast<float>(n.rank() - 1 - d));
    if (n.opcode == op::kConvolution) {
      CHECK(f[94] == 3.0f);   // input feature dim (NHWC)
      CHECK(f[37] == static_cast<float>(n.win_size[0]));
      CHECK(f[43] == static_cast<float>(n.win_size[0] + n.win_size[1]));  // window_size_sum
    }
  }
  CHECK(roots == 1);
  // Edges are [consumer, producer] and nodes are in topological order.
  for (int64_t e = 0; e < g.num_edges(); ++e) CHECK(g.edge_index[2 * e] > g.edge_index[2 * e + 1]);
}

TEST_CASE("every broadcast of every family keeps its operand's dims at the places it names", "[synth]") {
  // A bias's broadcast once took its shape from a node reference that adding the bias's
  // parameter had moved: an empty shape, a scalar where a tensor belongs.
  int64_t checked = 0;
  auto check = [&](const std::vector<SynthNode>& nodes) {
    for (const SynthNode& n : nodes) {
      if (n.opcode != op::kBroadcast) continue;
      const SynthNode& x = nodes[static_cast<size_t>(n.operands.at(0))];
      REQUIRE(n.dims.size() == x.shape.size());
      for (size_t d = 0; d < n.dims.size(); ++d) {
        REQUIRE(n.dims[d] < n.rank());
        CHECK(n.shape[static_cast<size_t>(n.dims[d])] == x.shape[d]);
      }
      ++checked;
    }
  };
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Rng rng(seed);
    check(MakeXlaGraph(rng, 300).nodes);
    check(MakeNlpGraph(rng, 300).nodes);
    check(MakeTpuKernel(rng, 40).graph.nodes);
  }
  CHECK(checked > 100);
}

TEST_CASE("tiny preset: every file loads and validates, layouts only on conv/dot/reshape, every row legal", "[synth]") {
  TempDir dir;
  GenerateOptions o;
  o.out = dir.path();
  o.preset = "tiny";
  o.seeds = {5};
  auto summary = Generate(o);
  REQUIRE(summary.ok());
  REQUIRE(summary->splits.size() == 15);
  std::map<std::string, std::vector<float>> xla_feats[2];
  for (const Collection& c : AllCollections()) {
    for (const std::string& split : AllSplits()) {
      auto files = ListSplit(dir.path(), c, split);
      REQUIRE(files.ok());
      CHECK(files->size() == (split == "train" ? 4u : 1u));
      for (const GraphFile& f : *files) {
        if (c.kind == CollectionKind::kTile) {
          auto g = LoadTileGraph(f.path);
          REQUIRE(g.ok());
          CHECK(g->graph.num_nodes >= 5);
          CHECK(g->graph.num_nodes <= 30);
          for (int64_t i = 0; i < g->num_configs; ++i) {
            const float* cf = g->config_feat.data() + i * kTileConfigDim;
            double product = 1;
            for (int k = 0; k < 6 && cf[8 + k] > 0; ++k) product *= cf[8 + k];
            CHECK(cf[15] == Approx(product));  // output_bounds_product
            CHECK(g->config_runtime[i] > 0);
            CHECK(g->config_runtime_normalizers[i] > 0);
          }
          continue;
        }
        auto g = LoadLayoutGraph(f.path);
        REQUIRE(g.ok());
        CHECK(g->graph.num_nodes >= 20);
        CHECK(g->graph.num_nodes <= 100);
        CHECK(g->num_configs >= 30);
        CHECK(g->num_configs <= 60);
        for (int64_t i = 0; i < g->graph.num_nodes; ++i) {
          const int opc = g->graph.node_opcode[i];
          const bool listed = std::count(g->node_config_ids.begin(), g->node_config_ids.end(), i) == 1;
          CHECK(listed == (opc == op::kConvolution || opc == op::kDot || opc == op::kReshape));
        }
        // Every generated row is one a compiler could apply (model/core/layout_space.h).
        CHECK(FirstIllegalLayoutRow(LayoutSpaceOf(g->graph, g->node_config_ids), g->config_feat.data(), g->num_configs)
                  == "");
        if (c.source == "xla") xla_feats[c.search == "random"][f.name] = g->graph.node_feat;
      }
    }
  }
  // The random and default collections of a source hold the same graphs.
  CHECK(xla_feats[0].size() == 6);
  CHECK(xla_feats[0] == xla_feats[1]);
}

TEST_CASE("the generator is deterministic: same seed, byte-identical files, any thread count", "[synth]") {
  TempDir a, b, c;
  GenerateOptions o;
  o.preset = "tiny";
  o.seeds = {11};
  o.out = a.path();
  o.threads = 1;
  REQUIRE(Generate(o).ok());
  o.out = b.path();
  o.threads = 3;
  REQUIRE(Generate(o).ok());
  o.out = c.path();
  o.seeds = {12};
  o.collections = {*ParseCollection("layout:nlp:random")};
  REQUIRE(Generate(o).ok());
  int files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(a.path())) {
    if (!e.is_regular_file()) continue;
    const std::string rel = std::filesystem::relative(e.path(), a.path()).string();
    REQUIRE(*ReadFile(e.path().string()) == *ReadFile(b.path() + "/" + rel));
    ++files;
  }
  CHECK(files == 5 * 6 + 1);  // five collections of six graphs, plus SYNTHETIC.txt
  // Another seed gives other data; --collections writes only what was asked.
  auto other = ListSplit(c.path(), *ParseCollection("layout:nlp:random"), "train");
  REQUIRE(other.ok());
  auto same_name = ListSplit(a.path(), *ParseCollection("layout:nlp:random"), "train");
  CHECK(*ReadFile((*other)[0].path) != *ReadFile((*same_name)[0].path));
  CHECK(FindCollections(c.path()).size() == 1);
}

TEST_CASE("several seeds make one dataset: each seed's files as that seed alone writes them, named s<SEED>_",
          "[synth]") {
  TempDir three, four, both;
  GenerateOptions o;
  o.preset = "tiny";
  o.collections = {*ParseCollection("layout:xla:random"), *ParseCollection("tile:xla")};
  o.seeds = {3};
  o.out = three.path();
  REQUIRE(Generate(o).ok());
  o.seeds = {4};
  o.out = four.path();
  REQUIRE(Generate(o).ok());
  o.seeds = {3, 4};
  o.out = both.path();
  auto summary = Generate(o);
  REQUIRE(summary.ok());
  for (const SplitSummary& s : summary->splits) CHECK(s.graphs == (s.split == "train" ? 8 : 2));
  int files = 0;
  for (const auto& [dir, prefix] : {std::pair{three.path(), "s3_"}, std::pair{four.path(), "s4_"}}) {
    for (auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".npz") continue;
      const std::filesystem::path rel = std::filesystem::relative(e.path(), dir);
      const std::string twin = both.path() + "/" + rel.parent_path().string() + "/" + prefix + rel.filename().string();
      REQUIRE(std::filesystem::exists(twin));
      CHECK(*ReadFile(e.path().string()) == *ReadFile(twin));
      ++files;
    }
  }
  CHECK(files == 2 * 2 * 6);  // two seeds, two collections of six graphs
  int written = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(both.path())) written += e.path().extension() == ".npz";
  CHECK(written == files);
  CHECK(absl::StrContains(*ReadFile(both.path() + "/SYNTHETIC.txt"), "seeds 3, 4"));

  // A seed named twice would write the same graphs twice under one name.
  o.seeds = {3, 3};
  const absl::StatusOr<GenerateSummary> twice = Generate(o);
  CHECK(twice.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(twice.status().message(), "seed 3 is named twice"));
  o.seeds = {};
  CHECK(Generate(o).status().code() == absl::StatusCode::kInvalidArgument);
}

namespace {

// How many layout groups (6-value slots) two rows differ in.
int GroupsApart(const int8_t* a, const int8_t* b, size_t row) {
  int n = 0;
  for (size_t at = 0; at < row; at += kLayoutSlots) n += !std::equal(a + at, a + at + kLayoutSlots, b + at);
  return n;
}

}  // namespace

TEST_CASE("the neighbourhood collections hold the default's and the genetic search's best row's one-group neighbours",
          "[synth]") {
  TempDir dir;
  GenerateOptions o;
  o.preset = "tiny";
  o.seeds = {3};
  o.out = dir.path();
  o.collections = {*ParseCollection("layout:xla:default"), *ParseCollection("layout:xla:near-default"),
                   *ParseCollection("layout:xla:near-best")};
  REQUIRE(Generate(o).ok());
  const int64_t cap = GetPreset("tiny")->xla.configs_default.hi;
  for (const std::string& split : AllSplits()) {
    auto dflt = ListSplit(dir.path(), o.collections[0], split);
    auto near_default = ListSplit(dir.path(), o.collections[1], split);
    auto near_best = ListSplit(dir.path(), o.collections[2], split);
    REQUIRE(dflt.ok());
    REQUIRE(near_default.ok());
    REQUIRE(near_best.ok());
    REQUIRE(near_default->size() == dflt->size());
    REQUIRE(near_best->size() == dflt->size());
    for (size_t i = 0; i < dflt->size(); ++i) {
      auto searched = LoadLayoutGraph((*dflt)[i].path);
      REQUIRE(searched.ok());
      const size_t row = static_cast<size_t>(searched->num_config_nodes() * kConfigFeatDim);
      // The default collection is the genetic search's trajectory: its first row is the
      // compiler default, then every row in the order measured.
      CHECK(std::all_of(searched->config(0), searched->config(0) + row, [](int8_t v) { return v == -1; }));
      const int64_t best = std::min_element(searched->config_runtime.begin(), searched->config_runtime.end()) -
                           searched->config_runtime.begin();
      const LayoutSpace space = LayoutSpaceOf(searched->graph, searched->node_config_ids);
      for (const std::vector<GraphFile>* files : {&*near_default, &*near_best}) {
        const GraphFile& f = (*files)[i];
        REQUIRE(f.name == (*dflt)[i].name);  // same graphs, so the same folds
        auto g = LoadLayoutGraph(f.path);
        REQUIRE(g.ok());
        REQUIRE(g->node_config_ids == searched->node_config_ids);
        const int8_t* centre = files == &*near_default ? searched->config(0) : searched->config(best);
        REQUIRE(std::equal(centre, centre + row, g->config(0)));
        const std::vector<int8_t> all = OneGroupNeighbours(space, centre);
        const int64_t available = static_cast<int64_t>(all.size() / row);
        REQUIRE(g->num_configs == std::min(available + 1, cap));
        std::set<std::vector<int8_t>> rows, neighbours;
        for (int64_t k = 0; k < available; ++k) neighbours.emplace(all.data() + k * row, all.data() + (k + 1) * row);
        for (int64_t c = 0; c < g->num_configs; ++c) {
          rows.emplace(g->config(c), g->config(c) + row);
          CHECK(g->config_runtime[c] > 0);
          if (c == 0) continue;
          CHECK(GroupsApart(g->config(c), centre, row) == 1);
          CHECK(neighbours.count(std::vector<int8_t>(g->config(c), g->config(c) + row)) == 1);
        }
        CHECK(static_cast<int64_t>(rows.size()) == g->num_configs);  // no row twice
      }
    }
  }
}

namespace {

// A 200-node xla graph of the generator, its cost model and layout space: the searches'
// test graph.
struct SearchGraph {
  BuiltGraph built = [] {
    Rng rng(7);
    return MakeXlaGraph(rng, 200);
  }();
  std::vector<int64_t> ids = ConfigurableNodes(built.nodes);
  LayoutCostModel model{built.nodes, ids};
  LayoutSpace space = LayoutSpaceOf(ToNodeGraph(built.nodes), ids);
  size_t row = ids.size() * kConfigFeatDim;
};

}  // namespace

TEST_CASE("the region collection holds distinct rows 2 to 8 groups from the default or the best row, each a candidate",
          "[search]") {
  const SearchGraph sg;
  const std::vector<int64_t>& ids = sg.ids;
  const LayoutCostModel& m = sg.model;
  const LayoutSpace& space = sg.space;
  const size_t row = sg.row;
  const std::vector<int8_t> dflt(row, -1);
  // The second centre: a row of random candidates (the generator's is the genetic
  // search's best row), far enough from the default that no row is near both.
  Rng centre_rng(3);
  std::vector<int8_t> far(row);
  for (size_t j = 0; j < ids.size(); ++j)
    for (int g = 0; g < kConfigGroups; ++g) {
      const auto& cands = space.nodes[j].groups[g].candidates;
      const auto& l = cands[static_cast<size_t>(centre_rng.Int(0, static_cast<int64_t>(cands.size()) - 1))];
      std::copy(l.begin(), l.end(), far.begin() + j * kConfigFeatDim + static_cast<size_t>(g) * kLayoutSlots);
    }
  const int8_t* best = far.data();
  REQUIRE(GroupsApart(best, dflt.data(), row) > 2 * kDefaultSearchRadius);
  Rng rng(5);
  const SearchResult r = RegionSearch(m, space, {dflt.data(), best}, static_cast<int>(kDefaultSearchRadius), 300, rng);
  REQUIRE(r.num_configs == 300);
  std::set<std::vector<int8_t>> rows;
  int near_default = 0, near_best = 0;
  std::set<int> distances;
  for (int64_t c = 0; c < r.num_configs; ++c) {
    const int8_t* x = r.configs.data() + c * row;
    rows.emplace(x, x + row);
    const int from_default = GroupsApart(x, dflt.data(), row), from_best = GroupsApart(x, best, row);
    const bool by_default = from_default >= 2 && from_default <= kDefaultSearchRadius;
    const bool by_best = from_best >= 2 && from_best <= kDefaultSearchRadius;
    REQUIRE(by_default != by_best);  // the centres are too far apart for both
    near_default += by_default;
    near_best += by_best;
    distances.insert(by_default ? from_default : from_best);
    // Every group is its centre's or one of the space's candidates.
    const int8_t* centre = by_default ? dflt.data() : best;
    for (size_t j = 0; j < ids.size(); ++j)
      for (int g = 0; g < kConfigGroups; ++g) {
        const int8_t* at = x + j * kConfigFeatDim + static_cast<size_t>(g) * kLayoutSlots;
        if (std::equal(at, at + kLayoutSlots, centre + (at - x))) continue;
        const auto& cands = space.nodes[j].groups[g].candidates;
        CHECK(std::any_of(cands.begin(), cands.end(),
                          [&](const GroupLayout& l) { return std::equal(l.begin(), l.end(), at); }));
      }
    // Measured once, with the cost model's small noise.
    CHECK(std::abs(static_cast<double>(r.runtimes[c]) / m.Evaluate(x).total_ns - 1) < 0.05);
  }
  CHECK(rows.size() == 300);  // no row twice
  CHECK(near_default == 150);  // the centres in turn
  CHECK(near_best == 150);
  CHECK(distances == std::set<int>{2, 3, 4, 5, 6, 7, 8});

  // tgraph-synth writes it beside the others, the same graphs under the same names.
  TempDir dir;
  GenerateOptions o;
  o.preset = "tiny";
  o.seeds = {3};
  o.out = dir.path();
  o.collections = {*ParseCollection("layout:xla:default"), *ParseCollection("layout:xla:region")};
  REQUIRE(Generate(o).ok());
  for (const std::string& split : AllSplits()) {
    auto d = ListSplit(dir.path(), o.collections[0], split);
    auto g = ListSplit(dir.path(), o.collections[1], split);
    REQUIRE(d.ok());
    REQUIRE(g.ok());
    REQUIRE(g->size() == d->size());
    for (size_t i = 0; i < d->size(); ++i) CHECK((*g)[i].name == (*d)[i].name);
  }
}

TEST_CASE("a neighbourhood larger than its cap is sampled: distinct neighbours, the centre first", "[search]") {
  const SearchGraph g;
  const size_t row = g.row;
  const std::vector<int8_t> centre(row, -1);
  const size_t available = OneGroupNeighbours(g.space, centre.data()).size() / row;
  REQUIRE(available > 20);
  Rng rng(1);
  const SearchResult few = NeighbourhoodSearch(g.model, g.space, centre.data(), 11, rng);
  REQUIRE(few.num_configs == 11);
  CHECK(std::equal(centre.begin(), centre.end(), few.configs.begin()));
  std::set<std::vector<int8_t>> distinct;
  for (int64_t c = 1; c < few.num_configs; ++c) {
    const int8_t* r = few.configs.data() + c * row;
    distinct.emplace(r, r + row);
    CHECK(GroupsApart(r, centre.data(), row) == 1);
  }
  CHECK(distinct.size() == 10);
  // Uncapped, every neighbour once, in OneGroupNeighbours' order.
  const SearchResult all = NeighbourhoodSearch(g.model, g.space, centre.data(), 1 << 20, rng);
  CHECK(all.num_configs == static_cast<int64_t>(available) + 1);
  CHECK(std::equal(all.configs.begin() + static_cast<std::ptrdiff_t>(row), all.configs.end(),
                   OneGroupNeighbours(g.space, centre.data()).begin()));
}

TEST_CASE("hidden test runtimes are zeros, as in the public dataset", "[synth]") {
  TempDir dir;
  GenerateOptions o;
  o.preset = "tiny";
  o.out = dir.path();
  o.hide_test_runtimes = true;
  o.collections = {*ParseCollection("layout:xla:default"), *ParseCollection("tile:xla")};
  REQUIRE(Generate(o).ok());
  auto test = ListSplit(dir.path(), o.collections[0], "test");
  auto g = LoadLayoutGraph((*test)[0].path);
  REQUIRE(g.ok());
  CHECK(std::all_of(g->config_runtime.begin(), g->config_runtime.end(), [](int64_t r) { return r == 0; }));
  auto valid = LoadLayoutGraph((*ListSplit(dir.path(), o.collections[0], "valid"))[0].path);
  CHECK(std::all_of(valid->config_runtime.begin(), valid->config_runtime.end(), [](int64_t r) { return r > 0; }));
}

TEST_CASE("unknown presets are refused with the valid names", "[synth]") {
  auto p = GetPreset("huge");
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(std::string(p.status().message()), Catch::Contains("tiny, ci, nlp-scale or full"));
}

TEST_CASE("the picks and named collections are refused: the generator has no model to pick with", "[synth]") {
  TempDir dir;
  GenerateOptions o;
  o.preset = "tiny";
  o.out = dir.path();
  o.collections = {*ParseCollection("layout:xla:random"), *ParseCollection("layout:xla:picks")};
  const absl::StatusOr<GenerateSummary> picks = Generate(o);
  CHECK(picks.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(picks.status().message()), Catch::Contains("layout:xla:picks"));
  CHECK_THAT(std::string(picks.status().message()), Catch::Contains("--write_picks"));
  o.collections = {*ParseCollection("layout@tpu-v5e")};
  CHECK(Generate(o).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/npz"));  // refused before anything is written
}
