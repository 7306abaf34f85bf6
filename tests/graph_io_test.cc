#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/graph_io.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

// 4 nodes: 0 param, 1 conv(0), 2 add(1, 0), 3 reshape(2); configurable: 1, 3; 3 configs.
LayoutGraph SmallLayoutGraph() {
  LayoutGraph g;
  g.name = "small";
  g.graph.num_nodes = 4;
  g.graph.node_feat.assign(4 * kNodeFeatDim, 0.0f);
  for (int i = 0; i < 4; ++i) g.graph.node_feat[i * kNodeFeatDim + 21] = 8.0f + i;
  g.graph.node_opcode = {op::kParameter, op::kConvolution, op::kAdd, op::kReshape};
  g.graph.edge_index = {1, 0, 2, 1, 2, 0, 3, 2};
  g.node_config_ids = {1, 3};
  g.num_configs = 3;
  g.config_feat.assign(3 * 2 * kConfigFeatDim, -1);
  g.config_feat[0] = 0;
  g.config_feat[kConfigFeatDim * 2 + 1] = 5;
  g.config_runtime = {300, 100, 200};
  return g;
}

TileGraph SmallTileGraph() {
  TileGraph g;
  g.name = "tile";
  g.graph.num_nodes = 2;
  g.graph.node_feat.assign(2 * kNodeFeatDim, 1.0f);
  g.graph.node_opcode = {op::kParameter, op::kDot};
  g.graph.edge_index = {1, 0};
  g.num_configs = 2;
  g.config_feat.assign(2 * kTileConfigDim, 4.0f);
  g.config_runtime = {10, 20};
  g.config_runtime_normalizers = {15, 15};
  return g;
}

std::string ErrorOf(const NpzArchive& npz) {
  auto r = LayoutGraphFromNpz(npz, "g.npz");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("layout graph save/load round trip keeps every value", "[graph_io]") {
  TempDir dir;
  const LayoutGraph g = SmallLayoutGraph();
  const std::string path = dir.path() + "/small.npz";
  REQUIRE(SaveLayoutGraph(path, g).ok());
  auto back = LoadLayoutGraph(path);
  REQUIRE(back.ok());
  CHECK(back->name == "small");
  CHECK(back->graph.num_nodes == 4);
  CHECK(back->graph.node_feat == g.graph.node_feat);
  CHECK(back->graph.node_opcode == g.graph.node_opcode);
  CHECK(back->graph.edge_index == g.graph.edge_index);
  CHECK(back->node_config_ids == g.node_config_ids);
  CHECK(back->config_feat == g.config_feat);
  CHECK(back->config_runtime == g.config_runtime);
  // On disk: the dtypes of docs/format.md.
  auto npz = ReadNpz(path);
  REQUIRE(npz.ok());
  CHECK(npz->at("node_opcode").dtype == DType::kUint8);
  CHECK(npz->at("node_config_feat").dtype == DType::kFloat32);
  CHECK(npz->at("node_config_feat").shape == std::vector<int64_t>{3, 2, 18});
  CHECK(npz->at("edge_index").shape == std::vector<int64_t>{4, 2});
  CHECK(npz->at("config_runtime").dtype == DType::kInt64);
}

TEST_CASE("tile graph save/load round trip", "[graph_io]") {
  TempDir dir;
  const TileGraph g = SmallTileGraph();
  REQUIRE(SaveTileGraph(dir.path() + "/t.npz", g).ok());
  auto back = LoadTileGraph(dir.path() + "/t.npz");
  REQUIRE(back.ok());
  CHECK(back->config_feat == g.config_feat);
  CHECK(back->config_runtime_normalizers == g.config_runtime_normalizers);
}

TEST_CASE("loader accepts the dataset's alternative dtypes", "[graph_io]") {
  NpzArchive npz = LayoutGraphToNpz(SmallLayoutGraph());
  npz["node_opcode"] = NpyArray::From<int32_t>({4}, {63, 26, 2, 75});
  npz["edge_index"] = NpyArray::From<int32_t>({4, 2}, {1, 0, 2, 1, 2, 0, 3, 2});
  npz["node_config_ids"] = NpyArray::From<int32_t>({2}, {1, 3});
  npz["config_runtime"] = NpyArray::From<int32_t>({3}, {300, 100, 200});
  npz["node_splits"] = NpyArray::From<int32_t>({3}, {0, 2, 4});  // (k,) int32 instead of (1, k) int64
  auto g = LayoutGraphFromNpz(npz, "alt.npz");
  REQUIRE(g.ok());
  CHECK(g->graph.node_opcode[1] == 26);
  CHECK(g->graph.edge_index[6] == 3);
  CHECK(g->node_splits == std::vector<int64_t>{0, 2, 4});
}

TEST_CASE("node_splits are boundaries from 0 to n, as in real files", "[graph_io]") {
  NpzArchive npz = LayoutGraphToNpz(SmallLayoutGraph());  // 4 nodes
  auto with_splits = [&](std::vector<int64_t> s) {
    npz["node_splits"] = NpyArray::From<int64_t>({1, static_cast<int64_t>(s.size())}, s);
    return LayoutGraphFromNpz(npz, "s.npz");
  };
  // The real format: [[0, ..., n]]; the last entry is n itself (real: [[0, 324, 372]] for 372 nodes).
  REQUIRE(with_splits({0, 4}).ok());
  REQUIRE(with_splits({0, 1, 1, 3, 4}).ok());
  CHECK(with_splits({0, 1, 3, 4})->node_splits == std::vector<int64_t>{0, 1, 3, 4});
  CHECK_THAT(std::string(with_splits({1, 4}).status().message()),
             Catch::Contains("s.npz: key 'node_splits': entry 0 is 1, expected 0"));
  CHECK_THAT(std::string(with_splits({0, 3}).status().message()),
             Catch::Contains("key 'node_splits': the last entry is 3, expected n = 4"));
  CHECK_THAT(std::string(with_splits({0, 3, 2, 4}).status().message()),
             Catch::Contains("key 'node_splits': entry 2 is 2, expected 3..4"));
  CHECK_THAT(std::string(with_splits({0, 5}).status().message()),
             Catch::Contains("key 'node_splits': entry 1 is 5, expected 0..4"));
  // Written as real files are: (1, k) int64.
  LayoutGraph g = SmallLayoutGraph();
  g.node_splits = {0, 2, 4};
  const NpzArchive out = LayoutGraphToNpz(g);
  CHECK(out.at("node_splits").shape == std::vector<int64_t>{1, 3});
  CHECK(out.at("node_splits").dtype == DType::kInt64);
}

TEST_CASE("layout files are written with edge_index in Fortran order, tile files in C order", "[graph_io]") {
  TempDir dir;
  REQUIRE(SaveLayoutGraph(dir.path() + "/l.npz", SmallLayoutGraph()).ok());
  REQUIRE(SaveTileGraph(dir.path() + "/t.npz", SmallTileGraph()).ok());
  auto l = ReadNpz(dir.path() + "/l.npz");
  auto t = ReadNpz(dir.path() + "/t.npz");
  REQUIRE(l.ok());
  REQUIRE(t.ok());
  CHECK(l->at("edge_index").fortran_order);
  CHECK_FALSE(t->at("edge_index").fortran_order);
  // In memory both are C order: row [u, v] = values 2e, 2e + 1.
  const int64_t* e = l->at("edge_index").data<int64_t>();
  CHECK(std::vector<int64_t>(e, e + 8) == SmallLayoutGraph().graph.edge_index);
}

TEST_CASE("graph-only layout files (no configurations) load only where asked for", "[graph_io]") {
  TempDir dir;
  LayoutGraph g = SmallLayoutGraph();
  g.num_configs = 0;
  g.config_feat.clear();
  g.config_runtime.clear();
  const std::string path = dir.path() + "/graph_only.npz";
  CHECK_FALSE(SaveLayoutGraph(path, g).ok());
  REQUIRE(SaveLayoutGraph(path, g, /*allow_no_configs=*/true).ok());
  auto refused = LoadLayoutGraph(path);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("key 'node_config_feat': has no configurations (a graph-only file"));
  auto back = LoadLayoutGraph(path, /*allow_no_configs=*/true);
  REQUIRE(back.ok());
  CHECK(back->num_configs == 0);
  CHECK(back->node_config_ids == g.node_config_ids);
  CHECK(ReadNpz(path)->at("node_config_feat").shape == std::vector<int64_t>{0, 2, 18});
}

TEST_CASE("loader errors name the file, the key and what was wrong", "[graph_io]") {
  const NpzArchive good = LayoutGraphToNpz(SmallLayoutGraph());
  NpzArchive npz = good;

  npz.erase("node_feat");
  CHECK_THAT(ErrorOf(npz), Catch::Contains("g.npz: key 'node_feat': missing"));

  npz = good;
  npz["node_feat"] = NpyArray::From<double>({4, 140}, std::vector<double>(560, 0.0));
  CHECK_THAT(ErrorOf(npz), Catch::Contains("key 'node_feat': has dtype float64, expected float32"));

  npz = good;
  npz["node_feat"] = NpyArray::From<float>({4, 139}, std::vector<float>(4 * 139, 0.f));
  CHECK_THAT(ErrorOf(npz), Catch::Contains("expected (n, 140)"));

  npz = good;
  std::vector<float> feat(560, 0.f);
  feat[2 * 140 + 7] = std::nanf("");
  npz["node_feat"] = NpyArray::From<float>({4, 140}, feat);
  CHECK_THAT(ErrorOf(npz), Catch::Contains("key 'node_feat': value at node 2, feature 7 is not finite"));

  npz = good;
  npz["node_opcode"] = NpyArray::From<uint8_t>({3}, {1, 2, 3});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("key 'node_opcode': has 3 entries, expected 4"));

  npz = good;
  npz["node_opcode"] = NpyArray::From<uint8_t>({4}, {1, 2, 200, 3});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("node 2 has opcode 200"));

  npz = good;
  npz["edge_index"] = NpyArray::From<int64_t>({1, 2}, {0, 4});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("key 'edge_index': edge 0 refers to node 4, expected 0..3"));

  npz = good;
  npz["edge_index"] = NpyArray::From<int64_t>({1, 3}, {0, 1, 2});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("expected (m, 2)"));

  npz = good;
  npz["node_config_ids"] = NpyArray::From<int64_t>({2}, {1, 9});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("key 'node_config_ids': entry 1 is 9, expected 0..3"));

  npz = good;
  npz["node_config_ids"] = NpyArray::From<int64_t>({2}, {3, 3});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("node 3 is listed twice"));

  npz = good;
  std::vector<float> cfg(3 * 2 * 18, -1.f);
  cfg[1 * 36 + 18 + 4] = 6.f;
  npz["node_config_feat"] = NpyArray::From<float>({3, 2, 18}, cfg);
  CHECK_THAT(ErrorOf(npz), Catch::Contains("config 1, configurable node 1, slot 4 is 6, expected an integer in -1..5"));

  npz = good;
  cfg.assign(3 * 2 * 18, 0.5f);
  npz["node_config_feat"] = NpyArray::From<float>({3, 2, 18}, cfg);
  CHECK_THAT(ErrorOf(npz), Catch::Contains("is 0.5"));

  npz = good;
  npz["node_config_feat"] = NpyArray::From<float>({3, 3, 18}, std::vector<float>(3 * 3 * 18, -1.f));
  CHECK_THAT(ErrorOf(npz), Catch::Contains("expected (c, 2, 18) to match node_config_ids"));

  npz = good;
  npz["config_runtime"] = NpyArray::From<int64_t>({3}, {1, -2, 3});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("key 'config_runtime': entry 1 is negative (-2)"));

  npz = good;
  npz["config_runtime"] = NpyArray::From<int64_t>({2}, {1, 2});
  CHECK_THAT(ErrorOf(npz), Catch::Contains("has 2 entries, expected 3"));
}

TEST_CASE("tile loader checks its own keys", "[graph_io]") {
  NpzArchive npz = TileGraphToNpz(SmallTileGraph());
  npz.erase("config_runtime_normalizers");
  auto r = TileGraphFromNpz(npz, "t.npz");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("key 'config_runtime_normalizers': missing"));
  npz = TileGraphToNpz(SmallTileGraph());
  npz["config_feat"] = NpyArray::From<float>({2, 23}, std::vector<float>(46, 0.f));
  r = TileGraphFromNpz(npz, "t.npz");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("expected (c, 24)"));
  // The loader's tile check is the server's (model/core/config_rows.h): finite and >= 0.
  for (float bad : {-2.0f, std::numeric_limits<float>::infinity()}) {
    TileGraph g = SmallTileGraph();
    g.config_feat[kTileConfigDim + 3] = bad;
    r = TileGraphFromNpz(TileGraphToNpz(g), "t.npz");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("t.npz: key 'config_feat': config 1, feature 3 is " + std::string(bad < 0 ? "-2" : "inf") +
                               ", expected a finite non-negative number"));
  }
}

TEST_CASE("a truncated graph file is an error, not a crash", "[graph_io]") {
  TempDir dir;
  const std::string path = dir.path() + "/small.npz";
  REQUIRE(SaveLayoutGraph(path, SmallLayoutGraph()).ok());
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  auto r = LoadLayoutGraph(path);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains(path));
}

TEST_CASE("graph content hash is canonical and fixed across processes", "[hash]") {
  const LayoutGraph g = SmallLayoutGraph();
  const std::string h = GraphContentHash(g.graph, g.node_config_ids);
  // A fixed value: any change to the canonical encoding breaks clients' cache keys.
  CHECK(h == "b1fff72c72f435cdca5fded972723fc803ab07bd9cc671a1ca53d1a855c12c29");
  CHECK(h.size() == 64);
  // Configurations and runtimes are not part of a graph's identity.
  LayoutGraph other = g;
  other.config_runtime = {1, 2, 3};
  other.config_feat.assign(other.config_feat.size(), 2);
  CHECK(GraphContentHash(other.graph, other.node_config_ids) == h);
  // -0.0 and +0.0 hash the same.
  other.graph.node_feat[5] = -0.0f;
  CHECK(GraphContentHash(other.graph, other.node_config_ids) == h);
  // Everything that is part of it changes it.
  LayoutGraph f = g;
  f.graph.node_feat[3] = 1e-7f;
  CHECK(GraphContentHash(f.graph, f.node_config_ids) != h);
  f = g;
  f.graph.node_opcode[0] = op::kConstant;
  CHECK(GraphContentHash(f.graph, f.node_config_ids) != h);
  f = g;
  std::swap(f.graph.edge_index[0], f.graph.edge_index[1]);
  CHECK(GraphContentHash(f.graph, f.node_config_ids) != h);
  CHECK(GraphContentHash(g.graph, {1}) != h);
  CHECK(GraphContentHash(g.graph, {}) != h);
}

TEST_CASE("a model of one's own is a kind and a name, with its data under npz/<kind>/@<name>", "[dataset]") {
  auto v5e = ParseCollection("layout@tpu-v5e");
  REQUIRE(v5e.ok());
  CHECK(v5e->kind == CollectionKind::kLayout);
  CHECK(v5e->named());
  CHECK(v5e->model == "tpu-v5e");
  CHECK(v5e->name() == "layout@tpu-v5e");
  CHECK(DefaultTrainingBatch(*v5e) == 128);  // trains as the random collections do
  CHECK(ParseCollection("tile@gpu.a100_80g")->kind == CollectionKind::kTile);
  CHECK(SplitDir("/d", *v5e, "train") == "/d/npz/layout/@tpu-v5e/train");
  CHECK(SplitDir("/d", *ParseCollection("tile@a100"), "valid") == "/d/npz/tile/@a100/valid");
  CHECK_FALSE(ParseCollection("layout:xla:random")->named());
  // Names are file-name safe: lower case, digits, '.', '_', '-'; at most 64; a kind first.
  for (const char* bad : {"layout@", "layout@TPU", "layout@../x", "layout@a/b", "layout@.hidden", "graph@x",
                          "layout@tpu v5", "layout@a@b"}) {
    auto r = ParseCollection(bad);
    CHECK_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("or a model of your own: layout@NAME or tile@NAME"));
  }
  CHECK_FALSE(ParseCollection("layout@" + std::string(65, 'a')).ok());
  CHECK(ParseCollection("layout@" + std::string(64, 'a')).ok());
}

TEST_CASE("collections parse and splits are listed sorted and lazily", "[dataset]") {
  REQUIRE(ParseCollection("layout:nlp:default").ok());
  CHECK(ParseCollection("layout:nlp:default")->search == "default");
  CHECK(ParseCollection("tile:xla")->kind == CollectionKind::kTile);
  auto bad = ParseCollection("layout:xla");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("layout:xla:random"));
  for (const Collection& c : AllCollections()) CHECK(ParseCollection(c.name())->name() == c.name());
  for (const Collection& c : NeighbourhoodCollections()) {
    CHECK(ParseCollection(c.name())->name() == c.name());
    CHECK(IsNeighbourhood(c));
  }
  CHECK(SplitDir("/d", *ParseCollection("layout:nlp:near-best"), "test") == "/d/npz/layout/nlp/near-best/test");
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("layout:xla|nlp:near-default|near-best|region|picks"));
  CHECK_FALSE(IsNeighbourhood(*ParseCollection("layout:xla:default")));
  for (const Collection& c : PicksCollections()) {
    CHECK(ParseCollection(c.name())->name() == c.name());
    CHECK(IsPicks(c));
    CHECK_FALSE(IsNeighbourhood(c));
  }
  CHECK(SplitDir("/d", *ParseCollection("layout:xla:picks"), "train") == "/d/npz/layout/xla/picks/train");
  CHECK_FALSE(IsPicks(*ParseCollection("layout:xla:near-best")));
  CHECK_FALSE(IsPicks(*ParseCollection("layout@picks")));

  TempDir dir;
  const Collection c = *ParseCollection("layout:xla:random");
  CHECK(SplitDir(dir.path(), c, "train") == dir.path() + "/npz/layout/xla/random/train");
  CHECK(SplitDir(dir.path(), *ParseCollection("tile:xla"), "valid") == dir.path() + "/npz/tile/xla/valid");
  auto missing = ListSplit(dir.path(), c, "train");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("npz/layout/xla/random/train"));

  std::filesystem::create_directories(SplitDir(dir.path(), c, "train"));
  for (const char* name : {"b", "a", "c"}) std::ofstream(SplitDir(dir.path(), c, "train") + "/" + name + ".npz") << "x";
  std::ofstream(SplitDir(dir.path(), c, "train") + "/notes.txt") << "x";
  auto files = ListSplit(dir.path(), c, "train");
  REQUIRE(files.ok());
  REQUIRE(files->size() == 3);  // listing loads nothing: these files are not even valid
  CHECK((*files)[0].name == "a");
  CHECK((*files)[2].path == SplitDir(dir.path(), c, "train") + "/c.npz");
  auto found = FindCollections(dir.path());
  REQUIRE(found.size() == 1);
  CHECK(found[0].name() == "layout:xla:random");
}

TEST_CASE("tile targets are runtime over normalizer, 0 when the normalizer is hidden", "[graph_io]") {
  TileGraph g = SmallTileGraph();  // runtimes {10, 20}, normalizers {15, 15}
  CHECK(TileTargets(g) == std::vector<double>{10.0 / 15.0, 20.0 / 15.0});
  g.config_runtime_normalizers = {0, 4};
  CHECK(TileTargets(g) == std::vector<double>{0.0, 5.0});
}

TEST_CASE("configuration rows from .npy and .npz files, with precise errors", "[graph_io]") {
  TempDir dir;
  const std::string d = dir.path();
  auto write_npy = [&](const std::string& name, const NpyArray& a) {
    REQUIRE(WriteFileAtomic(d + "/" + name, SerializeNpy(a)).ok());
    return d + "/" + name;
  };
  // Two rows of 2 nodes: row 0 all default, row 1 with node 1's output layout [1, 0].
  std::vector<float> rows(2 * 2 * 18, -1.0f);
  rows[36 + 18] = 1;
  rows[36 + 19] = 0;
  auto r = LoadLayoutConfigRows(write_npy("rows.npy", NpyArray::From<float>({2, 2, 18}, rows)), 2);
  REQUIRE(r.ok());
  CHECK(r->count == 2);
  std::vector<int8_t> want(rows.begin(), rows.end());
  CHECK(r->values == want);
  // One row as (nc, 18), int8; and an .npz by key or by its only array.
  std::vector<int8_t> one(want.begin() + 36, want.end());
  r = LoadLayoutConfigRows(write_npy("one.npy", NpyArray::From<int8_t>({2, 18}, one)), 2);
  REQUIRE(r.ok());
  CHECK(r->count == 1);
  CHECK(r->values == one);
  NpzArchive npz;
  npz["node_config_feat"] = NpyArray::From<int64_t>({1, 2, 18}, std::vector<int64_t>(one.begin(), one.end()));
  npz["config_runtime"] = NpyArray::From<int64_t>({1}, {5});
  REQUIRE(WriteNpz(d + "/rows.npz", npz).ok());
  CHECK(LoadLayoutConfigRows(d + "/rows.npz", 2)->values == one);
  NpzArchive other;
  other["arr_0"] = NpyArray::From<float>({2, 2, 18}, rows);
  REQUIRE(WriteNpz(d + "/other.npz", other).ok());
  CHECK(LoadLayoutConfigRows(d + "/other.npz", 2)->count == 2);

  auto err = [&](const std::string& path, int64_t nc) {
    auto bad = LoadLayoutConfigRows(path, nc);
    REQUIRE_FALSE(bad.ok());
    return std::string(bad.status().message());
  };
  CHECK_THAT(err(d + "/rows.npy", 3), Catch::Contains("rows.npy: key '(array)': has shape (2, 2, 18), expected (c, 3, 18)"));
  rows[5] = 6;
  CHECK_THAT(err(write_npy("six.npy", NpyArray::From<float>({2, 2, 18}, rows)), 2),
             Catch::Contains("config 0, configurable node 0, slot 5 is 6, expected an integer in -1..5"));
  rows[5] = 0.5f;
  CHECK_THAT(err(write_npy("half.npy", NpyArray::From<float>({2, 2, 18}, rows)), 2), Catch::Contains("is 0.5"));
  CHECK_THAT(err(write_npy("u8.npy", NpyArray::From<uint8_t>({2, 18}, std::vector<uint8_t>(36, 0))), 2),
             Catch::Contains("has dtype uint8, expected a signed or float type"));
  other["more"] = NpyArray::From<float>({1}, {0});
  REQUIRE(WriteNpz(d + "/two.npz", other).ok());
  CHECK_THAT(err(d + "/two.npz", 2), Catch::Contains("two.npz: key 'node_config_feat': missing"));
  CHECK(LoadLayoutConfigRows(d + "/none.npy", 2).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a large node_config_feat is read as int8 piece by piece: the same values, errors at their place",
          "[graph_io]") {
  // 5,000 configs x 50 nodes x 18 = 4.5 M values: more than one 4 M-value piece.
  LayoutGraph g = SmallLayoutGraph();
  g.graph.num_nodes = 60;
  g.graph.node_feat.assign(60 * kNodeFeatDim, 0.0f);
  g.graph.node_opcode.assign(60, op::kAdd);
  g.graph.edge_index.clear();
  for (int64_t i = 1; i < 60; ++i) g.graph.edge_index.insert(g.graph.edge_index.end(), {i, i - 1});
  g.node_config_ids.clear();
  for (int64_t i = 0; i < 50; ++i) g.node_config_ids.push_back(i + 5);
  g.num_configs = 5000;
  g.config_feat.resize(static_cast<size_t>(g.num_configs) * 50 * kConfigFeatDim);
  for (size_t i = 0; i < g.config_feat.size(); ++i) g.config_feat[i] = static_cast<int8_t>(static_cast<int>(i * 7 % 11) % 7 - 1);
  g.config_runtime.assign(5000, 1);
  TempDir dir;
  const std::string path = dir.path() + "/big.npz";
  REQUIRE(SaveLayoutGraph(path, g).ok());
  auto back = LoadLayoutGraph(path);
  REQUIRE(back.ok());
  CHECK(back->config_feat == g.config_feat);
  // A bad value in the second piece is reported at its config, node and slot.
  NpzArchive npz = *ReadNpz(path);
  std::vector<float> values(g.config_feat.begin(), g.config_feat.end());
  const size_t bad = (size_t{4} << 20) + 1000;  // config 4660, node 2, slot 16
  values[bad] = 9.0f;
  npz["node_config_feat"] = NpyArray::From<float>({5000, 50, 18}, values);
  REQUIRE(WriteNpz(path, npz).ok());
  auto refused = LoadLayoutGraph(path);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains(path + ": key 'node_config_feat': config " + std::to_string(bad / 900) +
                             ", configurable node " + std::to_string(bad / 18 % 50) + ", slot " +
                             std::to_string(bad % 18) + " is 9, expected an integer in -1..5"));
}
